//! The command line: one module per subcommand, each with its own clap `Args` and `run`.
//!
//! Commands write their results through the writer they are given (never straight to stdout),
//! so tests capture exactly what a user would see. Errors travel as `anyhow::Error` here, at the
//! edge of the program; the library layers below use their own `thiserror` enums.

mod args;
pub mod audit;
pub mod calendars;
pub mod checks;
pub mod completions;
pub mod dlq;
pub mod echo_target;
pub mod enroll;
pub mod jobs;
pub mod lifecycle_args;
pub mod migrate;
pub mod next_fires;
pub mod output;
pub mod proxy_back;
pub mod relay;
pub mod remote;
pub mod schedule_args;
pub mod schedules;
pub mod serve;
pub mod tick;
pub mod token;
pub mod validate_expr;
pub mod whoami;

pub use args::{
    AuthArgs, BusArgs, CallbackArgs, DatabaseArgs, DatabaseUrlArg, EngineArgs, ListenerArgs,
    LoggingArgs,
};

mod errors;
pub use errors::{EXIT_RUNTIME, EXIT_USAGE, InvalidInput, UsageError, exit_code, message};

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::core::clock::Clock as _;
use crate::core::ops::Actor;
use crate::core::store::Store;
use crate::store::{Backend, ConnectOptions};
use crate::util::process::{init_logging, init_nested_json_logging};

/// sentin8-cron: a multi-tenant scheduler that calls your services back on time.
#[derive(Debug, Parser)]
#[command(
    name = "sentin8-cron",
    version,
    about,
    disable_version_flag = true,
    arg_required_else_help = true,
    after_help = "Exit status: 0 ok, 1 runtime error, 2 usage error, 3 invalid input or failed \
jobs. Logs go to standard error, filtered by -v or RUST_LOG (e.g. RUST_LOG=sentin8_cron=debug).

Examples:
  sentin8-cron serve
  sentin8-cron schedules list --env $ENV --server http://127.0.0.1:8080 --token $TOKEN
  sentin8-cron next-fires '30 2 * * *' --tz Europe/London -n 5
  sentin8-cron completions bash > /etc/bash_completion.d/sentin8-cron"
)]
pub struct Cli {
    /// Print sentin8-cron's own registration as JSON: routes with their scopes, events,
    /// configuration variables and its own schedules.
    #[arg(long)]
    pub print_registration: bool,
    /// Print only this section; `schedules` prints a declaration document for `enroll`.
    #[arg(
        long,
        value_name = "NAME",
        requires = "print_registration",
        value_parser = clap::builder::PossibleValuesParser::new(crate::registration::SECTIONS)
    )]
    pub section: Option<String>,
    /// Print the version and the time-zone database in use.
    #[arg(short = 'V', long)]
    pub version: bool,
    /// Time-zone rules: bundled (built in), system (/usr/share/zoneinfo) or a directory of TZif
    /// files, read once at start-up
    #[arg(
        long,
        global = true,
        env = "SENTIN8_CRON_TZDIR",
        value_name = "DIR",
        default_value = crate::core::cron::tzdb::BUNDLED_SOURCE
    )]
    pub tzdir: String,
    #[command(flatten)]
    pub logging: LoggingArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API and the admin pages, and run the ticker.
    Serve(Box<serve::Args>),
    /// Apply pending schema migrations, or show applied and pending versions.
    Migrate(migrate::Args),
    /// Run one tick of the engine: fire what is due, drain due retries, print a summary.
    Tick(Box<tick::Args>),
    /// Inspect, republish and discard dead-letter entries.
    Dlq(dlq::Args),
    /// Inspect jobs (execution records).
    Jobs(jobs::Args),
    /// Read the audit journal.
    Audit(audit::Args),
    /// Manage calendars: named lists of exclusions (holidays) that schedules name.
    Calendars(calendars::Args),
    /// Create, update and (with --prune) delete one domain's schedules to match a declaration
    /// document, in one transaction.
    Enroll(enroll::Args),
    /// Check a cron expression or a schedule declaration file.
    ValidateExpr(validate_expr::Args),
    /// List the next fires of a cron expression, with DST adjustments marked.
    NextFires(next_fires::Args),
    /// Deliver outbox events to the bus (NATS JetStream, a webhook or the log).
    Relay(relay::Args),
    /// Manage schedules through a running service's API.
    Schedules(Box<schedules::Args>),
    /// Print a shell completion script.
    Completions(completions::Args),
    /// Print the manual page (roff), or write a page per command with --dir.
    Man(completions::ManArgs),
    /// Run a local target that prints every call it receives (for trying sentin8-cron out).
    EchoTarget(echo_target::Args),
    /// Issue an API token signed with the HS256 secret `serve` checks.
    Token(token::Args),
    /// Show what a running service reads from your token: subject, scopes, environments, expiry.
    Whoami(whoami::Args),
}

/// How a command uses the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreUse {
    /// `serve`: migrates the embedded store, and announces its changes to other instances
    /// after they commit, coalesced.
    Serve,
    /// A one-shot command; its changes are announced to running `serve` processes.
    Command {
        /// Migrate the embedded SQLite store when it needs it.
        migrate_embedded: bool,
    },
}

impl StoreUse {
    /// A command that reads, or writes only into an existing schema: it never creates or
    /// migrates a database.
    pub fn read_only() -> Self {
        StoreUse::Command {
            migrate_embedded: false,
        }
    }
}

/// Opens the store and checks its schema: the one way every subcommand but `migrate` opens it,
/// so each honours `--db-pool-size`. The embedded SQLite store migrates itself when asked
/// to (it has no operator to do it); PostgreSQL never does (run `sentin8-cron migrate`).
pub async fn open_store(
    database: &DatabaseArgs,
    usage: StoreUse,
) -> anyhow::Result<Arc<dyn Store>> {
    let migrate_embedded = match usage {
        StoreUse::Serve => true,
        StoreUse::Command { migrate_embedded } => migrate_embedded,
    };
    let url = database.url();
    let backend = Backend::from_url(url)?;
    // The database is named as a person can find it: a file by its absolute path.
    let named = match crate::store::sqlite_file(url) {
        Some(path) => path.display().to_string(),
        None => crate::store::redact(url),
    };
    if backend.embedded() && !migrate_embedded {
        crate::store::require_existing_sqlite(url)?;
    }
    // A refused connection is reported at once, not after the pool's acquire timeout.
    crate::store::probe_postgres(url).await?;
    if backend.embedded() && migrate_embedded {
        let outcome = crate::store::migrate(url, false)
            .await
            .with_context(|| format!("cannot open the database {named}"))?;
        for applied in outcome.migrations.iter().filter(|m| m.applied) {
            tracing::info!(version = applied.version, name = %applied.name, "migrated the embedded database");
        }
    }
    let options = ConnectOptions {
        max_connections: database.db_pool_size,
        announce_changes: true,
        // A serving process announces after commit, coalesced: its API's write throughput
        // does not pay for a NOTIFY in every transaction.
        announce_after_commit: usage == StoreUse::Serve,
        ..ConnectOptions::default()
    };
    let store = crate::store::connect(url, &options)
        .await
        .with_context(|| format!("cannot open the database {named}"))?;
    store.schema_status().await?.ensure_current()?;
    Ok(store)
}

/// Recomputes the future next fires of active schedules under the time-zone rules in use
/// (`serve` and `tick --once` do this before their first tick), logging the database. It
/// cannot fail the command: see below.
pub async fn recompute_under_zone_rules(store: &dyn Store, clock: &dyn crate::core::clock::Clock) {
    let zones = crate::core::cron::tzdb::database();
    tracing::info!(
        version = zones.version(),
        source = zones.source(),
        "time-zone database"
    );
    // Not fatal: a failure (a lock conflict with another instance's claim, say) leaves the
    // stored fires as they are, which is what a process without this step would use.
    if let Err(err) = crate::core::rezone::recompute_next_fires(store, clock).await {
        tracing::error!(
            error = %err,
            "could not recompute next fires under the time-zone rules in use; stored fires kept"
        );
    }
}

/// The actor recorded for changes made from the command line.
pub fn cli_actor() -> Actor {
    let user = std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned());
    Actor {
        name: format!("cli:{user}"),
        correlation_id: None,
        now: crate::core::clock::SystemClock.now(),
    }
}

impl Cli {
    /// Parses the process's arguments (exiting with clap's usage error, as [`Parser::parse`]
    /// does) with what the environment sets taken into account: see [`Cli::try_parse_env`].
    pub fn parse_env() -> Cli {
        Cli::try_parse_env(std::env::args_os()).unwrap_or_else(|err| err.exit())
    }

    /// Parses `args`. An argument whose variable is set in this process's environment
    /// (`--env` from `SENTIN8_CRON_ENV`, `--server`, `--token`, ...) is not required, and no
    /// usage line lists it: not the help's, and not an error's (clap's own lists the arguments
    /// it found, those a variable set included, as if they had to be typed).
    pub fn try_parse_env<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString>,
    {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let mut command = env_relaxed(Cli::command(), &|var| std::env::var_os(var).is_some());
        match command.try_get_matches_from_mut(&args) {
            Ok(matches) => Cli::from_arg_matches(&matches).map_err(|err| err.format(&mut command)),
            Err(mut err) => {
                use clap::error::{ContextKind, ContextValue};
                // clap repeats the value it refused: a URL's secrets are hidden from it.
                if let Some(ContextValue::String(value)) = err.get(ContextKind::InvalidValue) {
                    let shown = crate::util::url::redact(value);
                    err.insert(ContextKind::InvalidValue, ContextValue::String(shown));
                }
                if err.get(ContextKind::Usage).is_some() {
                    let usage = usage_of(&mut command, &args);
                    err.insert(ContextKind::Usage, ContextValue::StyledStr(usage));
                }
                Err(err)
            }
        }
    }
}

/// `command` and its subcommands with every argument whose variable `is_set` made optional.
fn env_relaxed(command: clap::Command, is_set: &dyn Fn(&std::ffi::OsStr) -> bool) -> clap::Command {
    let command = command.mut_args(|arg| {
        if arg.get_env().is_some_and(is_set) {
            arg.required(false)
        } else {
            arg
        }
    });
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    names.iter().fold(command, |command, name| {
        command.mut_subcommand(name, |sub| env_relaxed(sub, is_set))
    })
}

/// The usage line of the (sub)command `args` name: the deepest one their words lead to.
fn usage_of(command: &mut clap::Command, args: &[std::ffi::OsString]) -> clap::builder::StyledStr {
    let mut path = Vec::new();
    let mut at: &clap::Command = command;
    for word in args.iter().skip(1).filter_map(|arg| arg.to_str()) {
        if let Some(sub) = at.find_subcommand(word).filter(|_| !word.starts_with('-')) {
            path.push(sub.get_name().to_owned());
            at = sub;
        }
    }
    usage_at(command, &path)
}

fn usage_at(command: &mut clap::Command, path: &[String]) -> clap::builder::StyledStr {
    if let Some((first, rest)) = path.split_first()
        && let Some(sub) = command.find_subcommand_mut(first)
    {
        return usage_at(sub, rest);
    }
    command.render_usage()
}

/// Runs the parsed command line, writing its output to `out`.
pub async fn run(cli: Cli, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    // Checked here rather than by clap: clap's own way (args_conflicts_with_subcommands) would
    // also refuse the global flags (-v, --log-format, --tzdir) before the subcommand.
    if cli.command.is_some() && (cli.version || cli.print_registration) {
        return Err(UsageError(
            "--version and --print-registration take no subcommand; give them alone".into(),
        )
        .into());
    }
    // Zone rules are fixed for the life of the process, before anything evaluates a schedule.
    let zones = crate::tzdir::install(&cli.tzdir)?;
    if cli.version {
        writeln!(
            out,
            "sentin8-cron {} (commit {})\ntz database {} ({})",
            env!("CARGO_PKG_VERSION"),
            env!("BUILD_GIT_COMMIT"),
            zones.version(),
            zones.source()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(command) = cli.command else {
        if cli.print_registration {
            match cli.section.as_deref() {
                None => output::write_json(out, &crate::registration::registration())?,
                Some(name) => output::write_json(out, &crate::registration::section(name)?)?,
            }
            return Ok(ExitCode::SUCCESS);
        }
        // clap prints the help for an empty command line before we get here.
        anyhow::bail!("no subcommand given; see sentin8-cron --help");
    };
    // Logs go to standard error (standard output is kept for results): `serve` and `relay`
    // report at info, one-shot commands only warnings, each -v one level more.
    let long_running = matches!(command, Command::Serve(_) | Command::Relay(_));
    let filter = cli.logging.filter(if long_running { 2 } else { 1 });
    match command {
        // The log bus writes its event records in one JSON shape, whatever --log-format says.
        Command::Relay(_) => init_nested_json_logging(filter),
        _ => init_logging(cli.logging.log_format, filter),
    }
    match command {
        Command::Serve(args) => serve::run(*args, out).await,
        Command::Migrate(args) => migrate::run(args, out).await,
        Command::Tick(args) => tick::run(*args, out).await,
        Command::Dlq(args) => dlq::run(args, out).await,
        Command::Jobs(args) => jobs::run(args, out).await,
        Command::Audit(args) => audit::run(args, out).await,
        Command::Calendars(args) => calendars::run(args, out).await,
        Command::Enroll(args) => enroll::run(args, out).await,
        Command::ValidateExpr(args) => validate_expr::run(args, out),
        Command::NextFires(args) => next_fires::run(args, out),
        Command::Relay(args) => relay::run(args, out).await,
        Command::Schedules(args) => schedules::run(*args, out).await,
        Command::Completions(args) => completions::run(args, out),
        Command::Man(args) => completions::run_man(args, out),
        Command::EchoTarget(args) => echo_target::run(args, out).await,
        Command::Token(args) => token::run(args, out),
        Command::Whoami(args) => whoami::run(args, out).await,
    }
}
