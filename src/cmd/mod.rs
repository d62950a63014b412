//! The command line: one module per subcommand, each with its own clap `Args` and `run`.
//!
//! Commands write their results through the writer they are given (never straight to stdout),
//! so tests capture exactly what a user would see. Errors travel as `anyhow::Error` here, at the
//! edge of the program; the library layers below use their own `thiserror` enums.

pub mod next_fires;
pub mod output;
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
    /// Check a cron expression or a schedule declaration file.
    ValidateExpr(validate_expr::Args),
    /// List the next fires of a cron expression, with DST adjustments marked.
    NextFires(next_fires::Args),
}

/// Runs the parsed command line, writing its output to `out`.
pub async fn run(cli: Cli, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::ValidateExpr(args) => validate_expr::run(args, out),
        Command::NextFires(args) => next_fires::run(args, out),
    }
}
