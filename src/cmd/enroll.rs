//! `sentin8-cron enroll`: make one domain's schedules in one environment match a declaration
//! document (a file, or the output of a command such as the service's own
//! `--print-registration --section=schedules`), in one transaction.
//!
//! Every entry is validated before anything is opened for writing; one bad entry aborts the
//! whole enrollment. The plan and the writes are [`crate::core::enroll`]'s.

pub mod source;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::ArgGroup;
use serde::Serialize;

use super::checks::{CheckFormat, Problem, annotate, describe};
use super::output::{self, OutputFormat, time_text};
use super::schedule_args::EXIT_INVALID;
use super::{AuthArgs, DatabaseArgs, StoreUse, open_store, proxy_back};
use crate::callback::TargetAllowArgs;
use crate::callback::config::{ENV_PLATFORM_DOMAIN, egress_policy};
use crate::core::clock::{Clock as _, SystemClock};
use crate::core::decl::{EntryError, FieldError, check_declarations, declared_calendars};
use crate::core::enroll::{self, Action, EnrollError, EnrollReport, EnrollRequest};
use crate::core::model::EnvId;
use crate::core::ops::{Actor, CalendarWrite, OpsError, validate_domain};
use crate::server::auth::AuthConfig;
use crate::util::duration::positive_duration;
use source::Source;

/// How long `--from-command` may run when `--command-timeout` is not given.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Create, update and (with --prune) delete one domain's schedules to match a declaration
/// document, in one transaction. Schedules are matched on their schedule_type; identical ones
/// are not touched, so enrolling twice changes nothing the second time. Paused schedules stay
/// paused.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("document").required(true).args(["file", "from_command"])))]
#[command(group(ArgGroup::new("target").required(true).args(["base_url", "platform_domain"])))]
#[command(after_help = "Examples:
  sentin8-cron enroll --env $ENV --domain billing --file schedules.yaml \\
    --base-url https://billing.internal --dry-run
  billing-service --print-registration --section=schedules |
    sentin8-cron enroll --env $ENV --domain billing --file - --platform-domain svc.example.com")]
pub struct Args {
    /// The environment the schedules belong to.
    #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
    pub env: EnvId,
    /// The owning service's domain; its schedules are the ones enrolled (and pruned).
    #[arg(long)]
    pub domain: String,
    /// A declaration file, YAML or JSON (by extension, else by content); - reads standard input.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Run this command and read its standard output as the declaration document, e.g.
    /// "my-service --print-registration --section=schedules". It is split into words like a
    /// simple shell command (quotes and backslashes work) but runs without a shell: use
    /// sh -c '...' for pipes or variables.
    #[arg(long, value_name = "CMD")]
    pub from_command: Option<String>,
    /// How long --from-command may run before it is stopped [default: 30s].
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = positive_duration,
        conflicts_with = "file"
    )]
    pub command_timeout: Option<Duration>,
    /// Pass this variable of enroll's environment to --from-command (repeatable). The command
    /// otherwise gets only PATH, HOME and LANG: no credential reaches it unless named here.
    #[arg(
        long,
        value_name = "NAME",
        value_parser = source::env_name,
        conflicts_with = "file"
    )]
    pub pass_env: Vec<String>,
    /// The service's base URL, called back when a schedule is due (target_config.baseUrl).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Derive the base URL as https://{domain}.{HOST} instead.
    #[arg(long, value_name = "HOST")]
    pub platform_domain: Option<String>,
    /// Also delete (soft) this domain's schedules that are no longer declared.
    #[arg(long)]
    pub prune: bool,
    /// Show what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who is recorded in the audit journal and on events [default: enroll:$USER].
    #[arg(long, value_name = "NAME")]
    pub actor: Option<String>,
    #[command(flatten)]
    pub egress: TargetAllowArgs,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Read as `serve` reads them: with authentication configured, the embedded store is not
    /// development mode, so loopback targets are refused as `serve` refuses them.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Output format (github adds an `::error file=F,line=L,col=C::message` line per problem,
    /// for CI annotations).
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
    pub output: CheckFormat,
}

/// A report as `-o json|yaml` print it: the changes, with the counts a script checks against
/// the document (`declared` is the document's entries).
#[derive(Serialize)]
pub(crate) struct Summary<'a> {
    #[serde(flatten)]
    pub report: &'a EnrollReport,
    pub declared: usize,
    pub counts: Counts,
}

/// How many changes of each action a report holds.
#[derive(Serialize)]
pub(crate) struct Counts {
    pub created: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub pruned: usize,
    pub undeclared: usize,
}

impl<'a> Summary<'a> {
    pub(crate) fn of(report: &'a EnrollReport, declared: usize) -> Self {
        Summary {
            report,
            declared,
            counts: Counts {
                created: report.count(Action::Created),
                updated: report.count(Action::Updated),
                unchanged: report.count(Action::Unchanged),
                pruned: report.count(Action::Pruned),
                undeclared: report.count(Action::Undeclared),
            },
        }
    }
}

#[derive(Serialize)]
struct InvalidReport<'a> {
    valid: bool,
    /// Why the document as a whole could not be read as declarations.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    problems: &'a [FieldError],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    errors: &'a [EntryError],
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let format = args.output.format();
    let json = format.is_structured();
    let now = SystemClock.now();
    // `-o github`: every problem also as an annotation on the file (none for a command's
    // output or standard input).
    let annotated_file = args.file.as_deref();
    let github = args.output.is_github();

    // The request itself first: nothing is read or run for an unusable one.
    let mut problems = Vec::new();
    if let Err(problem) = validate_domain(&args.domain) {
        problems.push(problem);
    }
    // The targets written are checked against the egress policy `serve` applies: the allow
    // list, or by default https://*.{platform domain} (a malformed platform domain is
    // reported as a field problem first).
    let auth_configured = AuthConfig::from_args(&args.auth)?.is_some();
    let dev_mode = proxy_back::dev_mode(args.database.url(), auth_configured)?;
    let checked = match enroll::target_config(
        &args.domain,
        args.base_url.as_deref(),
        args.platform_domain.as_deref(),
    ) {
        Ok(target) => {
            // `serve`'s platform domain is SENTIN8_CRON_PLATFORM_DOMAIN; --platform-domain (which
            // also derives the base URL) stands in for it when given.
            let policy_domain = args.platform_domain.clone().or_else(|| {
                std::env::var(ENV_PLATFORM_DOMAIN)
                    .ok()
                    .filter(|domain| !domain.trim().is_empty())
            });
            let policy = Arc::new(egress_policy(
                &args.egress,
                policy_domain.as_deref(),
                dev_mode,
            )?);
            if args.dry_run && !json {
                let note = describe(&args.egress, policy_domain.as_deref(), dev_mode);
                eprintln!("note: the target is checked against {note}");
            }
            target.check(policy.as_ref()).map(|()| (target, policy))
        }
        Err(errors) => Err(errors),
    };
    let target = match checked {
        Ok(checked) => Some(checked),
        Err(mut errors) => {
            problems.append(&mut errors);
            None
        }
    };
    let actor_name = match &args.actor {
        Some(name) if name.trim().is_empty() || name.len() > 200 => {
            problems.push(FieldError::new("actor", "must be 1-200 characters"));
            String::new()
        }
        Some(name) => name.clone(),
        None => format!(
            "enroll:{}",
            std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned())
        ),
    };
    let (Some((target, policy)), true) = (target, problems.is_empty()) else {
        for problem in &problems {
            eprintln!("error: {problem}");
        }
        let code = invalid(out, format, None, &problems, &[])?;
        if github {
            let problems: Vec<Problem> = problems.iter().map(Problem::field).collect();
            annotate(out, annotated_file, &problems)?;
        }
        return Ok(code);
    };

    // Then the document, every entry of it, before the database is opened.
    let source = match (&args.file, &args.from_command) {
        (Some(path), _) => Source::File(path.clone()),
        (None, Some(line)) => Source::Command {
            line: line.clone(),
            timeout: args.command_timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT),
            pass_env: args.pass_env.clone(),
        },
        // clap requires one of the two.
        (None, None) => anyhow::bail!("give --file or --from-command"),
    };
    let document = source.read().await?;
    // The schedules and the calendars beside them: a problem of a calendar is the document's.
    let checked = check_declarations(&document.text, document.format, now).and_then(|checked| {
        declared_calendars(&document.text, document.format).map(|calendars| (checked, calendars))
    });
    let ((specs, errors), calendars) = match checked {
        Ok(checked) => checked,
        Err(err) => {
            // Invalid input, like an invalid entry: its own exit status.
            let problem = Problem::document(&err);
            let reason = problem.located(&document.origin);
            eprintln!("error: {reason}");
            let code = invalid(out, format, Some(reason), &[], &[])?;
            if github {
                annotate(out, annotated_file, &[problem])?;
            }
            return Ok(code);
        }
    };
    let declared = specs.len() + errors.len();
    if !errors.is_empty() {
        let located: Vec<Problem> = errors.iter().map(Problem::entry).collect();
        for problem in &located {
            eprintln!("error: {}", problem.located(&document.origin));
        }
        eprintln!(
            "{} of {declared} schedules in {} are invalid; nothing was enrolled",
            errors.len(),
            document.origin
        );
        let code = invalid(out, format, None, &[], &errors)?;
        if github {
            annotate(out, annotated_file, &located)?;
        }
        return Ok(code);
    }

    // A dry run writes nothing, not even the embedded database's schema. Of an embedded
    // database that does not exist yet, it plans against an empty one (held in memory): what
    // the first enrolment would create, as a CI check of a declaration can ask for.
    let missing = crate::store::sqlite_file(args.database.url()).filter(|path| !path.exists());
    let store = match missing {
        Some(path) if args.dry_run => {
            eprintln!(
                "note: no database at {} yet: the plan is against an empty one",
                path.display()
            );
            let store = crate::store::sqlite::SqliteStore::connect(
                "sqlite::memory:",
                &crate::store::ConnectOptions::default(),
            )
            .await?;
            store.migrate_in_place(false).await?;
            Arc::new(store) as Arc<dyn crate::core::store::Store>
        }
        _ => {
            open_store(
                &args.database,
                StoreUse::Command {
                    migrate_embedded: !args.dry_run,
                },
            )
            .await?
        }
    };
    let request = EnrollRequest {
        env: args.env,
        domain: args.domain.clone(),
        specs,
        target,
        policy,
        prune: args.prune,
        dry_run: args.dry_run,
        calendars,
    };
    let actor = Actor {
        name: actor_name,
        correlation_id: None,
        now,
    };
    let report = match enroll::enroll(store.as_ref(), &request, &actor).await {
        Ok(report) => report,
        // A refusal of the writes themselves (a calendar a schedule names is missing) is
        // invalid input too.
        Err(EnrollError::Invalid(problems) | EnrollError::Ops(OpsError::Invalid(problems))) => {
            for problem in &problems {
                eprintln!("error: {problem}");
            }
            let code = invalid(out, format, None, &problems, &[])?;
            if github {
                let problems: Vec<Problem> = problems.iter().map(Problem::field).collect();
                annotate(out, annotated_file, &problems)?;
            }
            return Ok(code);
        }
        Err(err) => {
            return Err(anyhow::Error::new(err).context("enrollment failed; nothing was written"));
        }
    };
    if !args.dry_run {
        // `serve` often starts right after a bulk enroll: its first burst is planned on the
        // statistics of the tables as loaded, not as they were before.
        crate::core::statistics::refresh(store.as_ref()).await;
    }
    if json {
        output::write_structured(out, format, &Summary::of(&report, declared))?;
    } else {
        write_report(out, &report, args.prune, declared, false)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the invalid report in JSON or YAML mode (nothing for tables: the reasons are on
/// standard error); the exit code of invalid input.
pub(crate) fn invalid(
    out: &mut (dyn Write + Send),
    format: OutputFormat,
    error: Option<String>,
    problems: &[FieldError],
    errors: &[EntryError],
) -> anyhow::Result<ExitCode> {
    if format.is_structured() {
        output::write_structured(
            out,
            format,
            &InvalidReport {
                valid: false,
                error,
                problems,
                errors,
            },
        )?;
    }
    Ok(ExitCode::from(EXIT_INVALID))
}

pub(crate) fn write_report(
    out: &mut (dyn Write + Send),
    report: &EnrollReport,
    prune: bool,
    declared: usize,
    stopped: bool,
) -> anyhow::Result<()> {
    let counts = [
        Action::Created,
        Action::Updated,
        Action::Unchanged,
        Action::Pruned,
    ]
    .map(|action| format!("{} {}", report.count(action), action.as_str()))
    .join(", ");
    let prefix = if report.dry_run { "dry run: " } else { "" };
    let verb = if report.dry_run { "would be " } else { "" };
    let suffix = if stopped { " before it stopped" } else { "" };
    writeln!(
        out,
        "{prefix}domain {} in environment {}: {declared} declared; {verb}{counts}{suffix}",
        report.domain, report.env_id
    )?;
    if report.changes.is_empty() && declared == 0 {
        writeln!(
            out,
            "nothing is declared in the document or enrolled in this domain"
        )?;
    } else if !report.changes.is_empty() {
        let mut table = output::table(["action", "schedule_type", "changed", "next_run_at"]);
        for change in &report.changes {
            table.add_row([
                change.action.as_str().to_owned(),
                change.schedule_type.clone(),
                if change.changed_fields.is_empty() {
                    "-".to_owned()
                } else {
                    change.changed_fields.join(",")
                },
                change.next_run_at.map_or_else(|| "-".to_owned(), time_text),
            ]);
        }
        writeln!(out, "{table}")?;
    }
    for calendar in &report.calendars {
        let action = match calendar.action {
            CalendarWrite::Created => format!("{verb}created"),
            CalendarWrite::Updated => format!("{verb}updated"),
            CalendarWrite::Unchanged => "unchanged".to_owned(),
        };
        writeln!(out, "calendar {}: {action}", calendar.name)?;
    }
    let undeclared = report.count(Action::Undeclared);
    if !prune && undeclared > 0 {
        writeln!(out, "would be pruned: {undeclared} (run with --prune)")?;
    }
    if report.dry_run {
        writeln!(out, "dry run: nothing was written")?;
    }
    Ok(())
}
