//! `sentin8-cron completions SHELL` and `sentin8-cron man`: shell completions and the manual
//! page, generated from the command line's own definition so they never drift from it.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
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

/// Print the manual page (roff), or write a page per command into a directory.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron man > /usr/local/share/man/man1/sentin8-cron.1
  sentin8-cron man --dir /usr/local/share/man/man1   # sentin8-cron.1 and sentin8-cron-*.1
  sentin8-cron man | man -l -")]
pub struct ManArgs {
    /// Write the main page and one page per command (`sentin8-cron-schedules-list.1`, ...)
    /// into this directory (created when missing), instead of printing the main page; the
    /// written files are listed.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

pub fn run_man(args: ManArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let command = Cli::command().disable_help_subcommand(true);
    if let Some(dir) = args.dir {
        let mut written = Vec::new();
        std::fs::create_dir_all(&dir)
            .and_then(|()| write_pages(command, &dir, &mut written))
            .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
        for path in written {
            writeln!(out, "{}", path.display())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut buffer = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut buffer)?;
    let page = standalone(&String::from_utf8_lossy(&buffer), &command);
    out.write_all(page.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `command` and of each of its (visible) subcommands, the subcommands'
/// first, as `clap_mangen::generate_to` does, noting each file written.
fn write_pages(
    mut command: clap::Command,
    dir: &std::path::Path,
    written: &mut Vec<std::path::PathBuf>,
) -> std::io::Result<()> {
    command.build();
    fn each(
        command: clap::Command,
        dir: &std::path::Path,
        written: &mut Vec<std::path::PathBuf>,
    ) -> std::io::Result<()> {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            each(sub.clone(), dir, written)?;
        }
        written.push(clap_mangen::Man::new(command).generate_to(dir)?);
        Ok(())
    }
    each(command, dir, written)
}

/// The main page printed alone: its list of commands names them as commands
/// (`sentin8-cron schedules`) instead of referring to pages (`sentin8-cron-schedules(1)`) that
/// only `man --dir` writes, and says where each command's options are.
fn standalone(page: &str, command: &clap::Command) -> String {
    let mut page = page.to_owned();
    for sub in command.get_subcommands() {
        let name = sub.get_name().replace('-', "\\-");
        page = page.replace(
            &format!("sentin8\\-cron\\-{name}(1)"),
            &format!("\\fBsentin8\\-cron {name}\\fR"),
        );
    }
    let note = ".PP\nEach command's options: \\fBsentin8\\-cron\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR, \
                or a page per command from \\fBsentin8\\-cron man \\-\\-dir\\fR \\fIDIR\\fR.\n";
    match page.find(".SH SUBCOMMANDS\n") {
        Some(start) => {
            let body = start + ".SH SUBCOMMANDS\n".len();
            let end = page[body..]
                .find("\n.SH ")
                .map_or(page.len(), |at| body + at + 1);
            page.insert_str(end, note);
        }
        None => page.push_str(note),
    }
    page
}
