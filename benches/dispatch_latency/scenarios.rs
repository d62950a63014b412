//! The scenarios, by name. Sizes are multiplied by `BENCH_SCALE`; the measured minutes can be
//! overridden with `BENCH_MINUTES`.

use std::time::Duration;

use crate::fault::Fault;
use crate::target::Kind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// When the seeded schedules fall due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// `* * * * *`: every schedule at every minute boundary.
    EveryMinute,
    /// One-shots (`run_at`) spread evenly over the first measured minute.
    SpreadOverMinute,
    /// `every: 1s`: every schedule at every second.
    EverySecond,
}

impl Due {
    /// How many occurrences each schedule has in a measured minute.
    pub fn per_minute(self) -> i64 {
        match self {
            Due::EverySecond => 60,
            Due::EveryMinute | Due::SpreadOverMinute => 1,
        }
    }
}

/// How the failover drill's standby is fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names = '*'`, `synchronous_commit = on`: a commit returns once
    /// the standby has it.
    Synchronous,
    /// Streaming without waiting for the standby: a commit returns once the primary has it.
    Asynchronous,
}

/// Schedules of a kind spread over their own environments.
#[derive(Debug, Clone)]
pub struct Group {
    pub name: &'static str,
    pub envs: usize,
    pub schedules: usize,
    pub target: Kind,
    /// Daily and twice-daily schedules whose times keep out of the bench's hour (see
    /// `scale.rs`): held, never called while it runs.
    pub quiet: bool,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub backend: Backend,
    pub instances: usize,
    pub groups: Vec<Group>,
    pub due: Due,
    pub minutes: u32,
    /// Flags added to `serve` (besides the database, listener and log format).
    pub serve_args: Vec<&'static str>,
    /// Part of the default set (which is kept under about 15 minutes).
    pub default: bool,
    /// The group whose lateness the summary reports.
    pub headline: &'static str,
    /// Kill -9 the first instance this many milliseconds after the first measured instant, and
    /// report what became of the calls it had made (see `kill.rs`).
    pub kill_first_after_ms: Option<u64>,
    /// Kill or freeze the first instance at a moment around the first measured instant, and
    /// report what became of that burst's occurrences (see `fault.rs`).
    pub fault: Option<Fault>,
    /// The failover drill (see `failover.rs`): its own primary and standby, the primary
    /// killed in the first measured burst and the standby promoted.
    pub failover: Option<Replication>,
    /// Every schedule is declared with this `max_jitter`: its calls are due at their own
    /// jittered instants, and the report adds how the burst spread (see `spread.rs`).
    pub max_jitter: Option<Duration>,
    /// Every schedule is declared with this `overlap` (the default, `skip`, when `None`).
    pub overlap: Option<&'static str>,
}

fn group(name: &'static str, envs: usize, schedules: usize, target: Kind) -> Group {
    Group {
        name,
        envs,
        schedules,
        target,
        quiet: false,
    }
}

fn quiet(envs: usize, schedules: usize) -> Group {
    Group {
        quiet: true,
        ..group("quiet", envs, schedules, Kind::Fast)
    }
}

fn scenario(
    name: &'static str,
    about: &'static str,
    backend: Backend,
    instances: usize,
    groups: Vec<Group>,
) -> Scenario {
    Scenario {
        name,
        about,
        backend,
        instances,
        groups,
        due: Due::EveryMinute,
        minutes: 1,
        serve_args: Vec::new(),
        default: true,
        headline: "all",
        kill_first_after_ms: None,
        fault: None,
        failover: None,
        max_jitter: None,
        overlap: None,
    }
}

pub fn all() -> Vec<Scenario> {
    use Backend::*;
    use Kind::*;
    vec![
        scenario(
            "pg-5k",
            "5,000 `* * * * *` over 10 environments, one serve on PostgreSQL",
            Postgres,
            1,
            vec![group("all", 10, 5_000, Fast)],
        ),
        Scenario {
            default: false,
            max_jitter: Some(Duration::from_secs(30)),
            ..scenario(
                "pg-5k-jitter",
                "5,000 `* * * * *` with `max_jitter: 30s` over 10 environments, one serve on \
                 PostgreSQL: the burst spread over 30 s",
                Postgres,
                1,
                vec![group("all", 10, 5_000, Fast)],
            )
        },
        Scenario {
            default: false,
            ..scenario(
                "pg-20k",
                "20,000 `* * * * *` over 10 environments, one serve on PostgreSQL",
                Postgres,
                1,
                vec![group("all", 10, 20_000, Fast)],
            )
        },
        Scenario {
            default: false,
            ..scenario(
                "pg-50k",
                "50,000 `* * * * *` over 10 environments, one serve on PostgreSQL",
                Postgres,
                1,
                vec![group("all", 10, 50_000, Fast)],
            )
        },
        Scenario {
            default: false,
            minutes: 4,
            ..scenario(
                "pg-1m",
                "1,000,000 schedules over 200 environments, one serve on PostgreSQL: 10,000 \
                 `* * * * *` over 100 environments and 990,000 daily and twice-daily ones over \
                 100 more, spread over the day outside the bench's hour",
                Postgres,
                1,
                vec![group("all", 100, 10_000, Fast), quiet(100, 990_000)],
            )
        },
        Scenario {
            default: false,
            minutes: 4,
            ..scenario(
                "pg-100k",
                "`pg-1m`'s due rate with 100,000 schedules in all: 10,000 `* * * * *` over 100 \
                 environments and 90,000 daily and twice-daily ones over 100 more, one serve on \
                 PostgreSQL",
                Postgres,
                1,
                vec![group("all", 100, 10_000, Fast), quiet(100, 90_000)],
            )
        },
        Scenario {
            default: false,
            minutes: 4,
            ..scenario(
                "pg-1m-base",
                "`pg-1m`'s due rate with 20,000 schedules in all: 10,000 `* * * * *` over 100 \
                 environments and 10,000 daily and twice-daily ones over 100 more, one serve on \
                 PostgreSQL",
                Postgres,
                1,
                vec![group("all", 100, 10_000, Fast), quiet(100, 10_000)],
            )
        },
        Scenario {
            default: false,
            minutes: 4,
            ..scenario(
                "sqlite-100k",
                "100,000 schedules on the embedded SQLite, one serve: 5,000 `* * * * *` over 10 \
                 environments and 95,000 daily and twice-daily ones over 10 more",
                Sqlite,
                1,
                vec![group("all", 10, 5_000, Fast), quiet(10, 95_000)],
            )
        },
        Scenario {
            default: false,
            minutes: 4,
            ..scenario(
                "sqlite-100k-base",
                "`sqlite-100k`'s due rate with 10,000 schedules in all: 5,000 `* * * * *` and \
                 5,000 daily and twice-daily ones, one serve on the embedded SQLite",
                Sqlite,
                1,
                vec![group("all", 10, 5_000, Fast), quiet(10, 5_000)],
            )
        },
        scenario(
            "sqlite-5k",
            "5,000 `* * * * *` over 10 environments, one serve on the embedded SQLite",
            Sqlite,
            1,
            vec![group("all", 10, 5_000, Fast)],
        ),
        scenario(
            "pg-5k-x2",
            "5,000 `* * * * *` over 10 environments, two serve on one PostgreSQL",
            Postgres,
            2,
            vec![group("all", 10, 5_000, Fast)],
        ),
        scenario(
            "slow-500-x3",
            "500 `* * * * *` over 100 environments, target answering in 1 s, three serve",
            Postgres,
            3,
            vec![group("all", 100, 500, Slow)],
        ),
        Scenario {
            minutes: 3,
            default: false,
            ..scenario(
                "pg-10k-x3",
                "10,000 `* * * * *` over 10 environments, three serve, 3 minutes \
                 (duplicates, missing records, every instance working)",
                Postgres,
                3,
                vec![group("all", 10, 10_000, Fast)],
            )
        },
        Scenario {
            minutes: 2,
            serve_args: vec!["--job-timeout", "5s"],
            headline: "B",
            ..scenario(
                "noisy",
                "noisy neighbour: environment A, 300 `* * * * *` at a never-answering target; \
                 environment B, 5 at the fast target; job timeout 5 s, one serve on PostgreSQL",
                Postgres,
                1,
                vec![group("A", 1, 300, Hang), group("B", 1, 5, Fast)],
            )
        },
        Scenario {
            default: false,
            kill_first_after_ms: Some(
                std::env::var("BENCH_KILL_MS")
                    .ok()
                    .and_then(|ms| ms.parse().ok())
                    .unwrap_or(500),
            ),
            ..scenario(
                "kill-3k-x2",
                "3,000 `* * * * *` over 10 environments, two serve on PostgreSQL; the first \
                 is killed (SIGKILL) into the burst (500 ms after its instant, or BENCH_KILL_MS)",
                Postgres,
                2,
                vec![group("all", 10, 3_000, Fast)],
            )
        },
        Scenario {
            default: false,
            minutes: 2,
            fault: Some(Fault::Stop {
                at_ms: env_ms("BENCH_FAULT_MS", -400),
                for_ms: 60_000,
            }),
            ..scenario(
                "stop-1k-x2",
                "1,000 `* * * * *` over 10 environments, two serve on PostgreSQL; the first is \
                 frozen (SIGSTOP) 0.4 s before the instant (after its hand-off, or \
                 BENCH_FAULT_MS) for 60 s, then continued",
                Postgres,
                2,
                vec![group("all", 10, 1_000, Fast)],
            )
        },
        Scenario {
            default: false,
            minutes: 2,
            fault: Some(Fault::Kill {
                at_ms: env_ms("BENCH_FAULT_MS", -400),
            }),
            ..scenario(
                "kill-1k-x2",
                "1,000 `* * * * *` over 10 environments, two serve on PostgreSQL; the first is \
                 killed (SIGKILL) 0.4 s before the instant (after its hand-off, or \
                 BENCH_FAULT_MS)",
                Postgres,
                2,
                vec![group("all", 10, 1_000, Fast)],
            )
        },
        Scenario {
            default: false,
            minutes: 2,
            failover: Some(Replication::Synchronous),
            ..scenario(
                "failover-sync",
                "failover drill: 1,000 `* * * * *` over 10 environments, two serve on a primary \
                 and a synchronous standby of their own; the primary is killed (SIGKILL) 0.4 s \
                 into the burst and the standby promoted",
                Postgres,
                2,
                vec![group("all", 10, 1_000, Fast)],
            )
        },
        Scenario {
            default: false,
            minutes: 2,
            failover: Some(Replication::Asynchronous),
            ..scenario(
                "failover-async",
                "failover drill: 1,000 `* * * * *` over 10 environments, two serve on a primary \
                 and an asynchronous standby of their own; the primary is killed (SIGKILL) 0.4 s \
                 into the burst and the standby promoted",
                Postgres,
                2,
                vec![group("all", 10, 1_000, Fast)],
            )
        },
        Scenario {
            due: Due::SpreadOverMinute,
            default: false,
            ..scenario(
                "steady-500",
                "steady 500 fires/s: 30,000 one-shots (`run_at`) spread evenly over one minute, \
                 10 environments, one serve on PostgreSQL",
                Postgres,
                1,
                vec![group("all", 10, 30_000, Fast)],
            )
        },
        Scenario {
            due: Due::EverySecond,
            default: false,
            minutes: 3,
            ..scenario(
                "pg-1k-every-1s",
                "1,000 schedules `every: 1s` over 10 environments (1,000 calls a second), one \
                 serve on PostgreSQL",
                Postgres,
                1,
                vec![group("all", 10, 1_000, Fast)],
            )
        },
        Scenario {
            due: Due::EverySecond,
            default: false,
            minutes: 3,
            overlap: Some("allow_all"),
            ..scenario(
                "pg-1k-every-1s-allow-all",
                "1,000 schedules `every: 1s` with `overlap: allow_all` over 10 environments \
                 (1,000 calls a second), one serve on PostgreSQL",
                Postgres,
                1,
                vec![group("all", 10, 1_000, Fast)],
            )
        },
        Scenario {
            due: Due::EverySecond,
            default: false,
            minutes: 3,
            ..scenario(
                "pg-5k-every-1s",
                "5,000 schedules `every: 1s` over 10 environments (5,000 calls a second), one \
                 serve on PostgreSQL",
                Postgres,
                1,
                vec![group("all", 10, 5_000, Fast)],
            )
        },
    ]
}

/// Applies `BENCH_SCALE` to the schedule counts (never below one, and never fewer schedules
/// than environments) and `BENCH_MINUTES` to the measured minutes.
pub fn scaled(mut s: Scenario, scale: f64, minutes: Option<u32>) -> Scenario {
    for g in &mut s.groups {
        g.schedules = ((g.schedules as f64 * scale).round() as usize).max(1);
        g.envs = g.envs.min(g.schedules);
    }
    if let Some(m) = minutes {
        s.minutes = m.max(1);
    }
    if s.due == Due::SpreadOverMinute {
        s.minutes = 1;
    }
    s
}

/// A signed millisecond setting, with its default.
fn env_ms(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(default)
}
