//! A deployment under test: a fresh database (PostgreSQL on the shared cluster, or an embedded
//! SQLite file), `serve` processes started the way an operator starts them, and schedules
//! enrolled the way a platform's tooling enrolls them (`sentin8-cron enroll`, one environment
//! at a time).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use sqlx::{Connection, Executor, PgConnection};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::scenarios::{Backend, Due, Scenario};
use crate::target::Target;

/// The variable that gives a development-mode serve its admin token.
const DEV_TOKEN: &str = "SENTIN8_CRON_DEV_TOKEN";

/// One schedule group's environments, in enrollment order.
pub struct SeededGroup {
    pub envs: Vec<String>,
}

pub struct Deployment {
    pub bin: PathBuf,
    pub backend: Backend,
    pub dir: tempfile::TempDir,
    /// The PostgreSQL database's name (none on SQLite).
    pub db_name: Option<String>,
    /// The URL serve and enroll use (the service role on PostgreSQL).
    pub url: String,
    /// The URL the bench reads the records with (the schema owner on PostgreSQL).
    pub owner_url: String,
    admin_url: String,
    /// Settings passed to serve and enroll as environment variables (name, value, shown).
    pub env: Vec<(String, String, String)>,
    pub serve_args: Vec<String>,
    pub instances: Vec<Child>,
    /// Where each instance listens (`http://host:port`), in start order.
    pub urls: Vec<String>,
}

fn host_of(admin_url: &str) -> String {
    let rest = admin_url.split_once("://").map_or(admin_url, |(_, r)| r);
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    host.split('/')
        .next()
        .unwrap_or("127.0.0.1:5432")
        .to_owned()
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the system's random source");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl Deployment {
    /// Creates the database, migrates it and prepares the settings; starts nothing yet.
    pub async fn prepare(
        bin: &Path,
        admin_url: &str,
        scenario: &Scenario,
        target: &Target,
        extra_serve_args: &[String],
    ) -> anyhow::Result<Deployment> {
        let (db_name, url, owner_url) = match scenario.backend {
            Backend::Postgres => {
                let name = format!(
                    "s8cbench_{}_{}",
                    scenario.name.replace('-', "_"),
                    &random_hex(4)
                );
                let mut admin = PgConnection::connect(admin_url)
                    .await
                    .context("PostgreSQL is not reachable")?;
                admin
                    .execute(format!("CREATE DATABASE {name}").as_str())
                    .await?;
                let host = host_of(admin_url);
                let db_params = std::env::var("BENCH_DB_PARAMS").unwrap_or_default();
                (
                    Some(name.clone()),
                    format!("postgres://sentin8_cron_service@{host}/{name}{db_params}"),
                    format!("postgres://postgres@{host}/{name}"),
                )
            }
            Backend::Sqlite => (None, String::new(), String::new()),
        };
        Self::configure(
            bin,
            admin_url,
            scenario,
            target,
            extra_serve_args,
            db_name,
            url,
            owner_url,
        )
        .await
    }

    /// A deployment on a database that exists already (PostgreSQL), or a fresh SQLite file
    /// when `url` is empty: migrates it and prepares the settings; starts nothing yet.
    #[allow(clippy::too_many_arguments)]
    pub async fn configure(
        bin: &Path,
        admin_url: &str,
        scenario: &Scenario,
        target: &Target,
        extra_serve_args: &[String],
        db_name: Option<String>,
        url: String,
        owner_url: String,
    ) -> anyhow::Result<Deployment> {
        // BENCH_KEEP_LOGS=1 keeps the directory (the serves' logs) for a look afterwards.
        let keep = std::env::var_os("BENCH_KEEP_LOGS").is_some();
        let dir = tempfile::Builder::new()
            .prefix("s8cbench-")
            .disable_cleanup(keep)
            .tempdir()?;
        if keep {
            println!("- the serves' logs are kept in {}", dir.path().display());
        }
        let (url, owner_url) = if url.is_empty() {
            let url = format!("sqlite://{}", dir.path().join("sentin8-cron.db").display());
            (url.clone(), url)
        } else {
            (url, owner_url)
        };
        let mut deployment = Deployment {
            bin: bin.to_owned(),
            backend: scenario.backend,
            dir,
            db_name,
            url,
            owner_url,
            admin_url: admin_url.to_owned(),
            env: Vec::new(),
            serve_args: scenario.serve_args.iter().map(|s| s.to_string()).collect(),
            instances: Vec::new(),
            urls: Vec::new(),
        };
        deployment
            .serve_args
            .extend(extra_serve_args.iter().cloned());
        let migrate = Command::new(bin)
            .args(["migrate", "--database-url", &deployment.owner_url])
            .stdout(Stdio::null())
            .output()
            .await?;
        if !migrate.status.success() {
            bail!(
                "migrate failed: {}",
                String::from_utf8_lossy(&migrate.stderr)
            );
        }
        if scenario.backend == Backend::Postgres {
            // Outside development mode: API authentication, a signing key, and the target's
            // origins on the egress allow list, as the README's production setup has them.
            let key = deployment.dir.path().join("signing-key.pem");
            let made = Command::new("openssl")
                .args(["genpkey", "-algorithm", "ed25519", "-out"])
                .arg(&key)
                .output()
                .await?;
            if !made.status.success() {
                bail!("openssl genpkey failed");
            }
            // serve refuses a private key that other users can read.
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
            }
            let secret = random_hex(32);
            let key = key.display().to_string();
            deployment.env = vec![
                (
                    "SENTIN8_CRON_JWT_HS256_SECRET".into(),
                    secret,
                    "<64 random hex digits>".into(),
                ),
                (
                    "SENTIN8_CRON_SIGNING_KEY_FILE".into(),
                    key,
                    "<an Ed25519 key from openssl genpkey>".into(),
                ),
                (
                    "SENTIN8_CRON_TARGET_ALLOW".into(),
                    target.allow_list(),
                    target.allow_list(),
                ),
            ];
        }
        // On SQLite without authentication serve runs in development mode: loopback targets
        // are allowed and calls are signed with a key generated beside the database. Its API
        // takes the development token named here (the scale scenarios read through it).
        if scenario.backend == Backend::Sqlite {
            deployment.env = vec![(
                DEV_TOKEN.into(),
                format!("s8c_dev_{}", random_hex(24)),
                "<a development token>".into(),
            )];
        }
        Ok(deployment)
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        for (name, value, _) in &self.env {
            command.env(name, value);
        }
        command
    }

    /// The serve command line as a user would type it (secrets replaced by what they are).
    pub fn serve_command_shown(&self) -> String {
        let mut parts: Vec<String> = self
            .env
            .iter()
            .map(|(name, _, shown)| format!("{name}={shown}"))
            .collect();
        parts.push("sentin8-cron".into());
        parts.extend(self.serve_argv());
        parts.join(" ")
    }

    fn serve_argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &self.url,
            "--log-format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(self.serve_args.iter().cloned());
        argv
    }

    /// Starts one more serve and waits until it listens.
    pub async fn start_instance(&mut self) -> anyhow::Result<u32> {
        let index = self.instances.len();
        let log = std::fs::File::create(self.dir.path().join(format!("serve-{index}.log")))?;
        let mut child = self
            .command()
            .args(self.serve_argv())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("cannot start serve")?;
        let pid = child.id().context("serve exited at once")?;
        let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let ready = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return Ok(Some(url.trim().to_owned()));
                }
            }
            Ok::<Option<String>, std::io::Error>(None)
        })
        .await;
        let Ok(Ok(Some(url))) = ready else {
            bail!(
                "serve #{index} did not start; its log: {}",
                self.log_tail(index)
            );
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.instances.push(child);
        self.urls.push(url);
        Ok(pid)
    }

    pub fn log_tail(&self, index: usize) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(format!("serve-{index}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    /// Enrolls every group's schedules, one `enroll` per environment; returns the environments
    /// and the seconds it took. One-shots are spread evenly over the minute from `first_due_us`.
    pub async fn seed(
        &self,
        scenario: &Scenario,
        target: &Target,
        first_due_us: i64,
    ) -> anyhow::Result<(Vec<SeededGroup>, f64)> {
        let started = Instant::now();
        let total: usize = scenario.groups.iter().map(|g| g.schedules).sum();
        let mut index = 0usize;
        let now_minute = crate::scale::minute_of_day_now();
        let mut seeded = Vec::new();
        for group in &scenario.groups {
            let mut envs = Vec::new();
            for e in 0..group.envs {
                let env = uuid::Uuid::new_v4().to_string();
                let entries: Vec<serde_json::Value> = (e..group.schedules)
                    .step_by(group.envs)
                    .map(|i| {
                        let mut entry = serde_json::json!({
                            "schedule_type": format!("{}-{i:06}", group.name.to_lowercase()),
                            "payload": {"i": i},
                        });
                        if let Some(overlap) = scenario.overlap {
                            entry["overlap"] = overlap.into();
                        }
                        if let Some(jitter) = scenario.max_jitter {
                            entry["max_jitter"] = format!("{}s", jitter.as_secs()).into();
                        }
                        match scenario.due {
                            _ if group.quiet => {
                                entry["cron"] = crate::scale::quiet_cron(i, now_minute).into();
                            }
                            Due::EveryMinute => entry["cron"] = "* * * * *".into(),
                            Due::EverySecond => entry["every"] = "1s".into(),
                            Due::SpreadOverMinute => {
                                let at = first_due_us + (index as i64 * 60_000_000) / total as i64;
                                index += 1;
                                let at = chrono::DateTime::from_timestamp_micros(at)
                                    .expect("instant in range");
                                entry["run_at"] = at
                                    .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                                    .into();
                            }
                        }
                        entry
                    })
                    .collect();
                let file = format!("{}-{e}", group.name);
                self.enroll(&env, &file, entries, &target.base_url(group.target))
                    .await
                    .with_context(|| format!("group {} environment {e}", group.name))?;
                envs.push(env);
            }
            seeded.push(SeededGroup { envs });
        }
        Ok((seeded, started.elapsed().as_secs_f64()))
    }

    /// Enrolls these declarations into one environment with `sentin8-cron enroll` (the file
    /// is kept in the deployment's directory as `<file>.json`).
    pub async fn enroll(
        &self,
        env: &str,
        file: &str,
        entries: Vec<serde_json::Value>,
        base_url: &str,
    ) -> anyhow::Result<()> {
        let file = self.dir.path().join(format!("{file}.json"));
        std::fs::write(&file, serde_json::json!({"schedules": entries}).to_string())?;
        let out = self
            .command()
            .args(["enroll", "--env", env, "--domain", "bench", "--file"])
            .arg(&file)
            .args(["--base-url", base_url])
            .args(["--output", "json", "--database-url", &self.url])
            .stdout(Stdio::null())
            .output()
            .await?;
        if !out.status.success() {
            bail!("enroll failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// Kills the first instance at once (SIGKILL): no drain, no record of what it held.
    pub fn kill_first(&mut self) {
        if let Some(pid) = self
            .instances
            .first()
            .and_then(Child::id)
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    /// Each instance's process id, while it runs.
    pub fn pids(&self) -> Vec<u32> {
        self.instances.iter().filter_map(Child::id).collect()
    }

    /// A read token for these environments (on SQLite, the development mode's admin token).
    pub async fn read_token(&self, envs: &[&str]) -> anyhow::Result<Option<String>> {
        if let Some((_, token, _)) = self.env.iter().find(|(name, _, _)| name == DEV_TOKEN) {
            return Ok(Some(token.clone()));
        }
        let mut command = self.command();
        command.args([
            "token", "issue", "--sub", "bench", "--scope", "read", "--ttl", "1h",
        ]);
        for env in envs {
            command.args(["--env", env]);
        }
        let out = command.output().await?;
        if !out.status.success() {
            bail!(
                "token issue failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(Some(String::from_utf8(out.stdout)?.trim().to_owned()))
    }

    /// The first instance's process id, while it runs.
    pub fn first_pid(&self) -> Option<rustix::process::Pid> {
        self.instances
            .first()
            .and_then(Child::id)
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    }

    /// Sends `signal` to the first instance (SIGSTOP freezes it as a VM pause would).
    pub fn signal_first(&self, signal: rustix::process::Signal) {
        if let Some(pid) = self.first_pid() {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    /// SIGTERM to every instance, as an orchestrator stops them; SIGKILL after 40 s.
    pub async fn stop(&mut self) {
        for child in &self.instances {
            if let Some(pid) = child
                .id()
                .and_then(|p| rustix::process::Pid::from_raw(p as i32))
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        for child in &mut self.instances {
            if tokio::time::timeout(Duration::from_secs(40), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
    }

    /// Drops the PostgreSQL database (the temporary directory goes with `self`).
    pub async fn remove(mut self) {
        self.stop().await;
        if let Some(name) = &self.db_name
            && let Ok(mut admin) = PgConnection::connect(&self.admin_url).await
        {
            let _ = admin
                .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                .await;
        }
    }
}
