//! `sentin8-cron completions SHELL` and `sentin8-cron man`: shell completions and the manual
//! page, generated from the command line's own definition so they never drift from it.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

/// Print a shell completion script.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron completions bash > /etc/bash_completion.d/sentin8-cron
  sentin8-cron completions zsh > \"${fpath[1]}/_sentin8-cron\"
  sentin8-cron completions fish > ~/.config/fish/completions/sentin8-cron.fish")]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    let mut buffer = Vec::new();
    clap_complete::generate(args.shell, &mut command, "sentin8-cron", &mut buffer);
    out.write_all(&buffer)?;
    Ok(ExitCode::SUCCESS)
}

/// Print the manual page (roff).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron man > /usr/local/share/man/man1/sentin8-cron.1
  sentin8-cron man | man -l -")]
pub struct ManArgs {}

pub fn run_man(_args: ManArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let mut buffer = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut buffer)?;
    out.write_all(&buffer)?;
    Ok(ExitCode::SUCCESS)
}
