//! `schedules bulk ACTION -l SELECTOR`: one action on every schedule a label selector matches,
//! through `POST /v1/schedules/bulk`. It asks the server first (a dry run) how many match, and
//! acts on more than 10 only after a yes: `--yes`, or an answer at a terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use reqwest::Method;
use serde_json::{Value, json};

use super::super::UsageError;
use super::super::output::{self, OutputArgs};
use super::super::remote::{env_query, text};
use crate::core::ops::BULK_CONFIRM_ABOVE;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Action {
    Pause,
    Resume,
    Trigger,
    Delete,
}

impl Action {
    fn word(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Trigger => "trigger",
            Action::Delete => "delete",
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron schedules bulk pause -l team=billing --env $ENV --dry-run
  sentin8-cron schedules bulk pause -l 'team=billing,tier in (gold)' --env $ENV \\
      --note 'billing freeze until the 3rd'
  sentin8-cron schedules bulk resume -l team=billing --env $ENV --yes")]
pub struct Args {
    /// What to do to each selected schedule.
    #[arg(value_enum)]
    pub action: Action,
    /// Which schedules: `team=billing`, `tier in (gold,silver)`, `tier notin (bronze)`,
    /// `team!=ops`, `canary`, `!canary`, joined by commas.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: String,
    /// Show what would be done, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Act on more than 10 schedules without asking.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Why (recorded with each pause).
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    #[command(flatten)]
    pub target: super::Target,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let client = args.target.server.require()?;
    let call = |dry_run: bool, confirm: Option<u64>| {
        let mut body = json!({
            "action": args.action.word(),
            "label_selector": args.selector,
            "dry_run": dry_run,
        });
        if let Some(confirm) = confirm {
            body["confirm"] = json!(confirm);
        }
        if let Some(note) = &args.note {
            body["note"] = json!(note);
        }
        let client = &client;
        let query = env_query(args.target.env);
        async move {
            client
                .call(Method::POST, "/v1/schedules/bulk", &query, Some(&body))
                .await
        }
    };
    let plan = call(true, None).await?;
    let report = if args.dry_run {
        plan
    } else {
        let matched = plan["matched"].as_u64().unwrap_or(0);
        let confirm = if matched as usize > BULK_CONFIRM_ABOVE {
            if !args.yes && !asked_yes(args.action, matched, &args.selector)? {
                return Err(UsageError(format!(
                    "{matched} schedules match {:?}; nothing was changed: pass --yes to {} \
                     them (--dry-run lists them)",
                    args.selector,
                    args.action.word()
                ))
                .into());
            }
            Some(matched)
        } else {
            None
        };
        call(false, confirm).await?
    };
    print(out, &args.target.output, &report)?;
    Ok(ExitCode::SUCCESS)
}

/// Asks at a terminal whether to go on; `false` when nobody can answer.
fn asked_yes(action: Action, matched: u64, selector: &str) -> anyhow::Result<bool> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok(false);
    }
    eprint!(
        "{} {matched} schedules matching {selector:?}? [y/N] ",
        action.word()
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES"))
}

fn print(
    out: &mut (dyn Write + Send),
    output_args: &OutputArgs,
    report: &Value,
) -> anyhow::Result<()> {
    if output_args.format.is_structured() {
        return output::write_structured(out, output_args.format, report);
    }
    let columns = [
        "schedule_id",
        "domain",
        "schedule_type",
        "status",
        "outcome",
        "detail",
    ];
    let mut table = output::table(columns);
    if output_args.no_headers {
        table.without_headers();
    }
    let items = report["items"].as_array().cloned().unwrap_or_default();
    for item in &items {
        table.add_row(columns.iter().map(|c| match text(item, c) {
            t if t.is_empty() => "-".to_owned(),
            t => t,
        }));
    }
    if !items.is_empty() {
        output::write_table(out, &table)?;
    }
    let dry = if report["dry_run"].as_bool() == Some(true) {
        " (dry run: nothing changed)"
    } else {
        ""
    };
    writeln!(
        out,
        "{}: {} of {} schedule(s) matching {} changed{dry}",
        text(report, "action"),
        report["changed"].as_u64().unwrap_or(0),
        report["matched"].as_u64().unwrap_or(0),
        text(report, "label_selector"),
    )?;
    Ok(())
}
