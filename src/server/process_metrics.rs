//! What every Prometheus exporter is expected to say about itself: the build
//! (`sentin8_cron_build_info`) and the process (`process_*`, the names of the Prometheus client
//! libraries' process collector), read from `/proc/self` at each scrape. Where there is no
//! `/proc` (not Linux), the process metrics are left out rather than reported as zero.

use std::fmt::Write as _;

/// The build: version and commit as labels, value 1.
pub fn render_build_info(out: &mut String) {
    let _ = write!(
        out,
        "# HELP sentin8_cron_build_info The build of this process: its version and commit.\n\
         # TYPE sentin8_cron_build_info gauge\n\
         sentin8_cron_build_info{{version=\"{}\",commit=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION"),
        env!("BUILD_GIT_COMMIT"),
    );
}

/// The process: CPU time, memory, file descriptors and start time.
pub fn render_process(out: &mut String) {
    let Some(process) = Process::read() else {
        return;
    };
    let mut metric = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        );
    };
    metric(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        process.cpu_seconds,
    );
    metric(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        process.resident_bytes,
    );
    metric(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        process.virtual_bytes,
    );
    metric(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        process.open_fds,
    );
    if let Some(max) = process.max_fds {
        metric(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    if let Some(start) = process.start_time_seconds {
        metric(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            start,
        );
    }
}

/// One reading of `/proc/self`.
struct Process {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    open_fds: f64,
    max_fds: Option<f64>,
    start_time_seconds: Option<f64>,
}

/// Linux reports CPU times and the start time in clock ticks, `USER_HZ`, which is 100 on every
/// architecture it runs this binary on (`getconf CLK_TCK`). Memory is read in kB from
/// `/proc/self/status`, so no page size is assumed.
const TICKS_PER_SECOND: f64 = 100.0;

impl Process {
    fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let fields = stat_fields(&stat)?;
        // After the command's closing parenthesis: field 3 (state) is index 0, so field N is
        // index N - 3. utime 14, stime 15, starttime 22.
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
        let cpu_seconds = (field(14)? + field(15)?) / TICKS_PER_SECOND;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let resident_bytes = status_kb(&status, "VmRSS:")? * 1024.0;
        let virtual_bytes = status_kb(&status, "VmSize:")? * 1024.0;
        let start_time_seconds = field(22).and_then(|ticks| {
            let boot = boot_time_seconds()?;
            Some(boot + ticks / TICKS_PER_SECOND)
        });
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
        Some(Process {
            cpu_seconds,
            resident_bytes,
            virtual_bytes,
            open_fds,
            max_fds: max_open_files(),
            start_time_seconds,
        })
    }
}

/// The fields of `/proc/self/stat` after the command name (which may hold spaces and
/// parentheses, so the last `)` ends it).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().collect())
}

/// A `Name:   N kB` line of `/proc/self/status`, in kB.
fn status_kb(status: &str, name: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The system's boot time (`btime` of `/proc/stat`), in seconds since the epoch.
fn boot_time_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// The soft limit of open files (`Max open files` of `/proc/self/limits`).
fn max_open_files() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_name_may_hold_spaces_and_parentheses() {
        let stat = "4242 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[0], "S", "field 3, the state");
        assert_eq!(fields[14 - 3], "11", "field 14, utime");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_on_linux() {
        let mut out = String::new();
        render_process(&mut out);
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(out.contains(&format!("\n{name} ")), "{name} in {out}");
        }
        let resident: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            resident > 1_000_000.0,
            "a test process holds more than 1 MB: {resident}"
        );
    }
}
