//! The command line: one module per subcommand, each with its own clap `Args` and `run`.
//!
//! Commands write their results through the writer they are given (never straight to stdout),
//! so tests capture exactly what a user would see. Errors travel as `anyhow::Error` here, at the
//! edge of the program; the library layers below use their own `thiserror` enums.

pub mod migrate;
pub mod next_fires;
pub mod output;
pub mod relay;
pub mod schedule_args;
pub mod validate_expr;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// sentin8-cron: a multi-tenant scheduler that calls your services back on time.
#[derive(Debug, Parser)]
#[command(name = "sentin8-cron", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply pending schema migrations, or show applied and pending versions.
    Migrate(migrate::Args),
    /// Check a cron expression or a schedule declaration file.
    ValidateExpr(validate_expr::Args),
    /// List the next fires of a cron expression, with DST adjustments marked.
    NextFires(next_fires::Args),
    /// Deliver outbox events to the bus (NATS JetStream, a webhook or the log).
    Relay(relay::Args),
}

/// Where the data lives; shared by every subcommand that touches the database.
#[derive(Debug, Clone, clap::Args)]
pub struct DatabaseArgs {
    /// postgres://user@host/db (production) or sqlite://path (embedded).
    #[arg(
        long,
        env = "SENTIN8_CRON_DATABASE_URL",
        default_value = crate::store::DEFAULT_DATABASE_URL,
        hide_env_values = true
    )]
    pub database_url: String,
}

/// Runs the parsed command line, writing its output to `out`.
pub async fn run(cli: Cli, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Migrate(args) => migrate::run(args, out).await,
        Command::ValidateExpr(args) => validate_expr::run(args, out),
        Command::NextFires(args) => next_fires::run(args, out),
        Command::Relay(args) => relay::run(args, out).await,
    }
}
