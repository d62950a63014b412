//! CPU accounting from /proc: a thread samples utime + stime of every watched process twice a
//! second and keeps a cumulative total per label (`serve#0`, `db`, `target`, ...), so the CPU
//! a label used over any window is the difference of two samples. Processes that exit (pool
//! connections, pg_cron's per-job backends) keep the last value seen, so a window misses at most
//! the last half second of a process that ended inside it.
//!
//! PostgreSQL is split by database: the backends whose title names the bench's database are
//! `db`, the postmaster and the cluster's background processes (checkpointer, WAL writer, ...;
//! shared with whatever else uses the cluster) are `db-aux`, backends of other databases are
//! not counted. The private pg_cron cluster is `pgcron`: its postmaster, the children it
//! reaped (pg_cron's per-job backends end between samples) and the live ones.
//!
//! It also maps the local ports of serve's sockets to the instance, so a call that reached the
//! target can be attributed to the instance that made it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::now_micros;

const PERIOD: Duration = Duration::from_millis(500);

#[derive(Default)]
struct Watch {
    serve: Vec<u32>,
    target: Option<u32>,
    /// Postmaster of the shared cluster and the bench's database on it.
    postgres: Option<(u32, String)>,
    pgcron: Option<u32>,
}

/// Cumulative CPU ticks per label at one instant, and the machine's busy ticks.
#[derive(Clone)]
struct Sample {
    at_us: i64,
    ticks: BTreeMap<String, u64>,
    machine_busy: u64,
}

#[derive(Default)]
struct State {
    watch: Watch,
    /// Last value seen per (pid, start time): its label and ticks.
    seen: HashMap<(u32, u64), (String, u64)>,
    samples: Vec<Sample>,
    /// Local port of a serve socket → instance index.
    ports: HashMap<u16, usize>,
}

#[derive(Clone)]
pub struct Sampler {
    state: Arc<Mutex<State>>,
    tick_hz: f64,
}

/// CPU seconds per label over a window, and the machine's total busy CPU seconds.
#[derive(Debug, Clone, Default)]
pub struct CpuWindow {
    pub by_label: BTreeMap<String, f64>,
    pub machine: f64,
}

impl CpuWindow {
    pub fn get(&self, label: &str) -> f64 {
        self.by_label.get(label).copied().unwrap_or(0.0)
    }

    /// The sum over labels starting with `prefix`.
    pub fn sum(&self, prefix: &str) -> f64 {
        self.by_label
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v)
            .sum()
    }
}

impl Sampler {
    pub fn start() -> Sampler {
        let tick_hz = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0);
        let sampler = Sampler {
            state: Arc::default(),
            tick_hz,
        };
        let state = sampler.state.clone();
        std::thread::spawn(move || {
            loop {
                sample(&state);
                std::thread::sleep(PERIOD);
            }
        });
        sampler
    }

    pub fn watch_target(&self, pid: u32) {
        self.state.lock().unwrap().watch.target = Some(pid);
    }

    /// Watches these serve processes (instance i is `serve#i`) and this database's backends.
    pub fn watch_serve(&self, pids: &[u32], postgres: Option<(u32, String)>) {
        let mut state = self.state.lock().unwrap();
        state.watch.serve = pids.to_vec();
        state.watch.postgres = postgres;
        state.ports.clear();
    }

    pub fn watch_pgcron(&self, postmaster: Option<u32>) {
        self.state.lock().unwrap().watch.pgcron = postmaster;
    }

    /// Takes one sample now (at a window's edge, so it is exact there).
    pub fn sample_now(&self) {
        sample(&self.state);
    }

    /// Which instance had this local port, if any of serve's sockets was seen with it.
    pub fn instance_of_port(&self, port: u16) -> Option<usize> {
        self.state.lock().unwrap().ports.get(&port).copied()
    }

    /// CPU used in [from, to) (microseconds since the epoch), from the samples nearest before
    /// each edge.
    pub fn window(&self, from_us: i64, to_us: i64) -> CpuWindow {
        let state = self.state.lock().unwrap();
        let at = |t: i64| {
            state
                .samples
                .iter()
                .rev()
                .find(|s| s.at_us <= t)
                .cloned()
                .or_else(|| state.samples.first().cloned())
        };
        let (Some(a), Some(b)) = (at(from_us), at(to_us)) else {
            return CpuWindow::default();
        };
        let mut by_label = BTreeMap::new();
        for (label, end) in &b.ticks {
            let start = a.ticks.get(label).copied().unwrap_or(0);
            by_label.insert(
                label.clone(),
                end.saturating_sub(start) as f64 / self.tick_hz,
            );
        }
        CpuWindow {
            by_label,
            machine: b.machine_busy.saturating_sub(a.machine_busy) as f64 / self.tick_hz,
        }
    }
}

struct ProcStat {
    ppid: u32,
    start: u64,
    /// utime + stime.
    ticks: u64,
    /// cutime + cstime: the CPU of the children it has reaped.
    reaped: u64,
}

fn stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // f[0] is field 3 (state): ppid is field 4, utime..cstime 14-17, starttime 22.
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    Some(ProcStat {
        ppid: u32::try_from(num(1)?).ok()?,
        start: num(19)?,
        ticks: num(11)? + num(12)?,
        reaped: num(13)? + num(14)?,
    })
}

/// The parent of a process.
pub fn parent(pid: u32) -> Option<u32> {
    stat(pid).map(|s| s.ppid)
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The label of a child of the shared cluster's postmaster, or None when it is not ours.
fn postgres_label(title: &str, database: &str) -> Option<&'static str> {
    const BACKGROUND: [&str; 7] = [
        "checkpointer",
        "background writer",
        "walwriter",
        "autovacuum launcher",
        "logical replication launcher",
        "archiver",
        "stats collector",
    ];
    if title.contains(&format!(" {database} ")) {
        Some("db")
    } else if BACKGROUND.iter().any(|b| title.contains(b)) {
        Some("db-aux")
    } else {
        None
    }
}

fn machine_busy() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum()
}

fn sample(state: &Mutex<State>) {
    let (serve, target, postgres, pgcron) = {
        let s = state.lock().unwrap();
        (
            s.watch.serve.clone(),
            s.watch.target,
            s.watch.postgres.clone(),
            s.watch.pgcron,
        )
    };
    let mut found: Vec<((u32, u64), String, u64)> = Vec::new();
    let mut own = |pid: u32, label: String| {
        if let Some(st) = stat(pid) {
            found.push(((pid, st.start), label, st.ticks));
        }
    };
    for (i, pid) in serve.iter().enumerate() {
        own(*pid, format!("serve#{i}"));
    }
    if let Some(pid) = target {
        own(pid, "target".into());
    }
    if let Some((pid, _)) = &postgres {
        own(*pid, "db-aux".into());
    }
    // pg_cron's per-job backends live for milliseconds, between samples: its cluster is the
    // postmaster's own CPU, what it reaped from children that ended, and the live children.
    let mut pgcron_ticks = pgcron.and_then(stat).map(|pm| pm.ticks + pm.reaped);
    if postgres.is_some() || pgcron.is_some() {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(st) = stat(pid) else {
                continue;
            };
            if let (Some(total), Some(pm)) = (pgcron_ticks.as_mut(), pgcron)
                && st.ppid == pm
            {
                *total += st.ticks;
            }
            if let Some((pm, db)) = &postgres
                && st.ppid == *pm
                && let Some(label) = postgres_label(&cmdline(pid), db)
            {
                found.push(((pid, st.start), label.to_owned(), st.ticks));
            }
        }
    }
    let ports = serve_ports(&serve);
    let at_us = now_micros();
    let busy = machine_busy();
    let mut s = state.lock().unwrap();
    for (key, label, ticks) in found {
        s.seen.insert(key, (label, ticks));
    }
    let mut totals = BTreeMap::new();
    for (label, ticks) in s.seen.values() {
        *totals.entry(label.clone()).or_insert(0) += ticks;
    }
    if let Some(ticks) = pgcron_ticks {
        totals.insert("pgcron".to_owned(), ticks);
    }
    s.samples.push(Sample {
        at_us,
        ticks: totals,
        machine_busy: busy,
    });
    s.ports.extend(ports);
}

/// Local ports of the TCP sockets each serve process holds.
fn serve_ports(serve: &[u32]) -> Vec<(u16, usize)> {
    if serve.is_empty() {
        return Vec::new();
    }
    let mut inode_port = HashMap::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(inode)) = (f.get(1), f.get(9)) else {
                continue;
            };
            let port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if let (Some(port), Ok(inode)) = (port, inode.parse::<u64>()) {
                inode_port.insert(inode, port);
            }
        }
    }
    let mut out = Vec::new();
    for (i, pid) in serve.iter().enumerate() {
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let link = link.to_string_lossy();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
                && let Some(port) = inode_port.get(&inode)
            {
                out.push((*port, i));
            }
        }
    }
    out
}

/// The load average over the last minute.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The processes whose parent is `pid` (read from `/proc`).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| stat(*p).is_some_and(|s| s.ppid == pid))
        .collect()
}
