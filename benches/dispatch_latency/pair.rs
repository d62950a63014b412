//! The failover drill's database: a primary and a streaming standby of the bench's own, each a
//! throwaway cluster (`initdb`, then `pg_basebackup -R` for the standby) in one temporary
//! directory, on free loopback ports, run as the `postgres` user (PostgreSQL refuses root).
//! Synchronous replication is switched on for the primary alone, once the standby streams
//! (`ALTER SYSTEM`, after the copy): before that every commit, the schema's included, would wait
//! for a standby that is not there yet, and a setting the standby copied would make it, once
//! promoted with no standby of its own, wait for ever on every commit. Both clusters are
//! stopped when the pair drops, and the directory goes with them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sqlx::{Connection, Executor, PgConnection};

use crate::pgcron::run;

/// Where the server programs are (Debian's PostgreSQL 15 unless `pg_config` says otherwise).
fn bindir() -> PathBuf {
    Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One cluster of the pair.
pub struct Node {
    pub name: &'static str,
    pub port: u16,
    data: PathBuf,
    running: bool,
}

impl Node {
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The postmaster's pid, from its pid file.
    pub fn postmaster(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }
}

pub struct Pair {
    pub primary: Node,
    pub standby: Node,
    pub synchronous: bool,
    pub db: String,
    bin: PathBuf,
    // Dropped after the clusters are stopped (see `Drop`).
    dir: tempfile::TempDir,
}

impl Pair {
    fn as_postgres(&self, program: &str) -> Command {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(program))
            .current_dir(self.dir.path());
        command
    }

    fn pg_ctl(&self, node: &Node) -> Command {
        let mut command = self.as_postgres("pg_ctl");
        command.args(["-w", "-t", "30", "-D"]).arg(&node.data);
        command
    }

    fn start_node(&mut self, standby: bool) -> anyhow::Result<()> {
        let node = if standby {
            &self.standby
        } else {
            &self.primary
        };
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=100 \
             -c cluster_name={}",
            node.port,
            self.dir.path().display(),
            node.name
        );
        let log = self.dir.path().join(format!("{}.log", node.name));
        run(self
            .pg_ctl(node)
            .arg("-l")
            .arg(log)
            .args(["-o", &options, "start"]))?;
        if standby {
            self.standby.running = true;
        } else {
            self.primary.running = true;
        }
        Ok(())
    }

    /// The primary, initialised, started and holding an empty database `db`; the standby is
    /// made later by [`Pair::start_standby`], once the schema is in place.
    pub async fn start_primary(synchronous: bool, db: &str) -> anyhow::Result<Pair> {
        let dir = tempfile::Builder::new()
            .prefix("s8cbench-pair-")
            .tempdir()?;
        run(Command::new("chown")
            .arg("postgres:postgres")
            .arg(dir.path()))
        .context("the clusters run as the postgres user (run the bench as root)")?;
        let node = |name, data: &Path| -> anyhow::Result<Node> {
            Ok(Node {
                name,
                port: free_port()?,
                data: data.join(name),
                running: false,
            })
        };
        let mut pair = Pair {
            primary: node("primary", dir.path())?,
            standby: node("standby", dir.path())?,
            synchronous,
            db: db.to_owned(),
            bin: bindir(),
            dir,
        };
        let data = pair.primary.data.clone();
        run(pair
            .as_postgres("initdb")
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale"])
            .arg("-D")
            .arg(data))?;
        pair.start_node(false)?;
        let mut admin = PgConnection::connect(&pair.primary.url("postgres")).await?;
        admin
            .execute(format!("CREATE DATABASE {db}").as_str())
            .await?;
        Ok(pair)
    }

    /// Copies the primary into a standby (`pg_basebackup -R`, streaming), starts it and waits
    /// until the primary sees it streaming (and, in synchronous mode, as its synchronous
    /// standby).
    pub async fn start_standby(&mut self) -> anyhow::Result<()> {
        let port = self.primary.port.to_string();
        let data = self.standby.data.clone();
        run(self
            .as_postgres("pg_basebackup")
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-D"])
            .arg(data)
            .args(["-R", "-X", "stream", "-c", "fast"]))?;
        self.start_node(true)?;
        let mut conn = PgConnection::connect(&self.primary.url("postgres")).await?;
        if self.synchronous {
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                .await?;
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")
                .await?;
            conn.execute("SELECT pg_reload_conf()").await?;
        }
        let want = if self.synchronous { "sync" } else { "async" };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let state: Option<(String, String)> = sqlx::query_as(
                "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'standby'",
            )
            .fetch_optional(&mut conn)
            .await?;
            if let Some((state, sync)) = &state
                && state == "streaming"
                && sync == want
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby is not streaming ({want}) after 30 s: {state:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the primary as a crashed host would lose it: SIGKILL to the postmaster and to
    /// every process it started, at once. The postmaster is stopped (SIGSTOP) first so that
    /// it forks nothing while its children are listed; killing the postmaster alone would
    /// leave its backends serving the connections they hold until they notice. Returns how
    /// many processes were killed.
    pub fn crash_primary(&mut self) -> anyhow::Result<usize> {
        use rustix::process::{Pid, Signal, kill_process};
        let postmaster = self
            .primary
            .postmaster()
            .context("the primary has no postmaster.pid")?;
        let pid = |p: u32| Pid::from_raw(p as i32).context("a pid");
        kill_process(pid(postmaster)?, Signal::STOP)?;
        let mut victims = crate::procstat::children(postmaster);
        victims.push(postmaster);
        for p in &victims {
            let _ = kill_process(pid(*p)?, Signal::KILL);
        }
        self.primary.running = false;
        Ok(victims.len())
    }

    /// Holds the primary's WAL sender (SIGSTOP), as a slow or congested link to the standby
    /// would: from now on the standby receives nothing more, while the primary goes on
    /// committing (asynchronous) or waits for it (synchronous). Returns whether a sender was
    /// found.
    pub fn stall_replication(&self) -> anyhow::Result<bool> {
        use rustix::process::{Pid, Signal, kill_process};
        let postmaster = self
            .primary
            .postmaster()
            .context("the primary has no postmaster.pid")?;
        let senders: Vec<u32> = crate::procstat::children(postmaster)
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("walsender"))
            })
            .collect();
        for p in &senders {
            kill_process(Pid::from_raw(*p as i32).context("a pid")?, Signal::STOP)?;
        }
        Ok(!senders.is_empty())
    }

    /// Promotes the standby (`pg_ctl promote`, waiting until it accepts writes).
    pub fn promote(&self) -> anyhow::Result<()> {
        run(self.pg_ctl(&self.standby).arg("promote"))?;
        Ok(())
    }

    /// A file of the standby's `pg_wal` (the timeline history a promotion writes).
    pub fn standby_wal_file(&self, name: &str) -> PathBuf {
        self.standby.data.join("pg_wal").join(name)
    }

    /// Transactions the old primary committed past `from_lsn` (what the standby had received
    /// when it was promoted), read from the dead primary's WAL with `pg_waldump`: commits a
    /// client may have been told of that the new primary never saw. Also the WAL bytes
    /// between `from_lsn` and the last record found.
    pub fn commits_past(&self, from_lsn: &str) -> anyhow::Result<(usize, u64)> {
        let out = self
            .as_postgres("pg_waldump")
            .arg("-p")
            .arg(self.primary.data.join("pg_wal"))
            .args(["-s", from_lsn, "-r", "Transaction"])
            .output()
            .context("cannot run pg_waldump")?;
        // pg_waldump ends with an error at the end of valid WAL, which is expected here.
        let text = String::from_utf8_lossy(&out.stdout);
        let commits = text.lines().filter(|l| l.contains("desc: COMMIT")).count();
        let last = text
            .lines()
            .filter_map(|l| l.split("lsn: ").nth(1)?.split(',').next())
            .filter_map(parse_lsn)
            .max();
        let bytes = match (last, parse_lsn(from_lsn)) {
            (Some(last), Some(from)) => last.saturating_sub(from),
            _ => 0,
        };
        Ok((commits, bytes))
    }
}

/// `16/B374D848` as a byte position.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.trim().split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

impl Drop for Pair {
    fn drop(&mut self) {
        for node in [&self.primary, &self.standby] {
            if node.running {
                let _ = self.pg_ctl(node).args(["-m", "immediate", "stop"]).output();
            }
        }
    }
}
