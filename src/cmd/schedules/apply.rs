//! `sentin8-cron schedules apply -f FILE`: `enroll` through the API. The same declaration
//! document, the same plan (created, updated, unchanged, pruned, undeclared; computed by
//! [`crate::core::enroll::plan`] over the schedules the server lists) and the same report.
//!
//! Unlike `enroll`, which writes in one database transaction, apply makes one API call per
//! change, in plan order, and stops at the first refused one: what was applied before it is
//! reported, and applying again finishes the job (unchanged schedules are not touched).

mod calendars;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::ArgGroup;
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::super::checks::{CheckFormat, Problem, annotate};
use super::super::enroll::{self as cli_enroll, Summary, source::read_input, write_report};
use super::super::output;
use super::super::remote::{ServerArgs, env_query};
use super::super::schedule_args::EXIT_INVALID;
use crate::client::ApiClient;
use crate::client::records::ScheduleRecord;
use crate::core::decl::{FieldError, ScheduleSpec, check_declarations, declared_calendars};
use crate::core::enroll::{self, Action, Change, EnrollError, EnrollReport, Step};
use crate::core::model::{EnvId, Schedule, ScheduleId};
use crate::core::ops::validate_domain;
use crate::core::policies::format_duration;
use crate::core::target::{BASE_URL_FIELD, Target};

/// Make a domain's schedules match a declaration document, through the API.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("base").required(true).args(["base_url", "platform_domain"])))]
#[command(after_help = "Examples:
  sentin8-cron schedules apply -f schedules.yaml --env $ENV --domain billing \\
      --base-url https://billing.internal --dry-run
  my-service --print-registration --section=schedules |
    sentin8-cron schedules apply -f - --env $ENV --domain billing \\
      --platform-domain svc.example.com --prune")]
pub struct Args {
    /// The declaration document (YAML or JSON, as `enroll` reads it); - reads standard input.
    #[arg(short = 'f', long, value_name = "PATH")]
    pub file: PathBuf,
    /// The environment the schedules belong to.
    #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
    pub env: EnvId,
    /// The owning service's domain; its schedules are the ones applied (and pruned).
    #[arg(long)]
    pub domain: String,
    /// The service's base URL, called back when a schedule is due (target_config.baseUrl).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Derive the base URL as https://{domain}.{HOST} instead.
    #[arg(long, value_name = "HOST")]
    pub platform_domain: Option<String>,
    /// Also delete this domain's schedules that are no longer declared.
    #[arg(long)]
    pub prune: bool,
    /// Show the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Output format (github adds an `::error file=F,line=L,col=C::message` line per problem,
    /// for CI annotations).
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value_t,
        value_name = "FORMAT",
        help_heading = "Output"
    )]
    pub output: CheckFormat,
    /// Accepted for symmetry with the other schedules commands (the plan has no header to
    /// leave out).
    #[arg(long, hide = true)]
    pub no_headers: bool,
}

/// The report of a run, with where it stopped when a step was refused.
#[derive(serde::Serialize)]
struct Applied<'a> {
    #[serde(flatten)]
    summary: Summary<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<Stopped>,
}

/// Why a run stopped before its last change (the changes listed were applied).
#[derive(serde::Serialize)]
struct Stopped {
    error: String,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let now = Utc::now();
    let format = args.output.format();
    let github = args.output.is_github();
    let file = Some(args.file.as_path());
    // The request and the document first: nothing is asked of the server for invalid input.
    let mut problems: Vec<FieldError> = validate_domain(&args.domain).err().into_iter().collect();
    let target = enroll::target_config(
        &args.domain,
        args.base_url.as_deref(),
        args.platform_domain.as_deref(),
    )
    .map_err(|mut errors| problems.append(&mut errors))
    .ok();
    let mut annotations: Vec<Problem> = problems.iter().map(Problem::field).collect();
    let document = read_input(&args.file)?;
    // The schedules and the calendars beside them: a problem of a calendar is the document's.
    let checked = check_declarations(&document.text, document.format, now).and_then(|checked| {
        declared_calendars(&document.text, document.format).map(|calendars| (checked, calendars))
    });
    let ((specs, errors), calendars) = match checked {
        Ok(checked) => checked,
        Err(err) => {
            let problem = Problem::document(&err);
            let reason = problem.located(&document.origin);
            eprintln!("error: {reason}");
            let code = cli_enroll::invalid(out, format, Some(reason), &problems, &[])?;
            if github {
                annotations.push(problem);
                annotate(out, file, &annotations)?;
            }
            return Ok(code);
        }
    };
    let declared = specs.len() + errors.len();
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    for entry in &errors {
        let problem = Problem::entry(entry);
        eprintln!("error: {}", problem.located(&document.origin));
        annotations.push(problem);
    }
    let (Some(target), true, true) = (target, problems.is_empty(), errors.is_empty()) else {
        if !errors.is_empty() {
            eprintln!(
                "{} of {declared} schedules in {} are invalid; nothing was applied",
                errors.len(),
                document.origin
            );
        }
        let code = cli_enroll::invalid(out, format, None, &problems, &errors)?;
        if github {
            annotate(out, file, &annotations)?;
        }
        return Ok(code);
    };

    let client = args.server.require()?;
    // The server's own egress policy judges the target before anything is planned or written,
    // so a dry run agrees with the real run and a real run does not stop half-way on it.
    if let Some(problem) = server_refusal(&client, args.env, &target).await? {
        eprintln!("error: {problem}");
        eprintln!(
            "{} refuses the target (its egress policy); nothing was applied",
            client.server()
        );
        let problems = [problem];
        let code = cli_enroll::invalid(out, format, None, &problems, &[])?;
        if github {
            annotate(out, file, &[Problem::field(&problems[0])])?;
        }
        return Ok(code);
    }
    let current = domain_schedules(&client, args.env, &args.domain).await?;
    let steps = match enroll::plan(&current, &specs, &target, args.prune, now) {
        Ok(steps) => steps,
        Err(EnrollError::Invalid(problems)) => {
            for problem in &problems {
                eprintln!("error: {problem}");
            }
            let code = cli_enroll::invalid(out, format, None, &problems, &[])?;
            if github {
                let problems: Vec<Problem> = problems.iter().map(Problem::field).collect();
                annotate(out, file, &problems)?;
            }
            return Ok(code);
        }
        Err(err) => return Err(err.into()),
    };
    // Declared calendars first: the schedules may name them.
    let calendars = calendars::apply_calendars(&client, args.env, &calendars, args.dry_run).await?;
    let mut report = EnrollReport {
        calendars,
        env_id: args.env,
        domain: args.domain.clone(),
        dry_run: args.dry_run,
        changes: Vec::with_capacity(steps.len()),
    };
    let mut failure = None;
    for step in &steps {
        if args.dry_run {
            report.changes.push(planned(step));
            continue;
        }
        match apply_step(&client, args.env, &args.domain, &target, step).await {
            Ok(change) => report.changes.push(change),
            Err(err) => {
                failure = Some(err);
                break;
            }
        }
    }
    if format.is_structured() {
        // A partial run says where it stopped, so a script does not read it as complete.
        let stopped = failure.as_ref().map(|err| Stopped {
            error: err.to_string(),
        });
        output::write_structured(
            out,
            format,
            &Applied {
                summary: Summary::of(&report, declared),
                stopped,
            },
        )?;
    } else {
        write_report(out, &report, args.prune, declared, failure.is_some())?;
    }
    match failure {
        None => Ok(ExitCode::SUCCESS),
        Some(err) => {
            let applied = report
                .changes
                .iter()
                .filter(|c| matches!(c.action, Action::Created | Action::Updated | Action::Pruned))
                .count();
            let invalid = err.is_invalid_input();
            eprintln!("error: {err}");
            eprintln!(
                "stopped after {applied} change(s); the rest were not applied (apply again to \
                 finish)"
            );
            if github {
                let problem = Problem {
                    position: None,
                    message: err.to_string(),
                };
                annotate(out, file, &[problem])?;
            }
            Ok(ExitCode::from(if invalid { EXIT_INVALID } else { 1 }))
        }
    }
}

/// Asks the server whether its egress policy accepts the target (`GET /v1/admin/preview`
/// checks a base URL exactly as creating a schedule does): the refusal as a field problem, or
/// `None`. A server without that endpoint is said to be unchecked, and the run goes on.
async fn server_refusal(
    client: &ApiClient,
    env: EnvId,
    target: &Target,
) -> anyhow::Result<Option<FieldError>> {
    let Some(base_url) = target.config().get("baseUrl").and_then(Value::as_str) else {
        return Ok(None);
    };
    let mut query = env_query(env);
    query.push(("cron", "@daily".to_owned()));
    query.push(("count", "1".to_owned()));
    query.push(("base_url", base_url.to_owned()));
    match client.get_checked("/v1/admin/preview", &query).await {
        Ok(Ok(_)) => Ok(None),
        Ok(Err(fields)) => Ok(fields
            .into_iter()
            .find(|(field, _)| field == BASE_URL_FIELD)
            .map(|(field, message)| {
                FieldError::new(
                    field,
                    format!("{message} (the egress policy of {})", client.server()),
                )
            })),
        Err(err) if err.status() == Some(404) => {
            eprintln!(
                "note: {} cannot check a target before it is written (no /v1/admin/preview); \
                 its egress policy is applied at the first write",
                client.server()
            );
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

/// Every live schedule of the domain (all pages).
async fn domain_schedules(
    client: &ApiClient,
    env: EnvId,
    domain: &str,
) -> anyhow::Result<Vec<Schedule>> {
    let mut query = env_query(env);
    query.push(("domain", domain.to_owned()));
    let items = client
        .list("/v1/schedules", &query, usize::MAX, None)
        .await?
        .items;
    items
        .into_iter()
        .map(|item| {
            let record: ScheduleRecord = serde_json::from_value(item).map_err(|err| {
                anyhow::anyhow!(
                    "{} listed a schedule this build cannot read: {err}",
                    client.server()
                )
            })?;
            let id = record.id;
            record
                .into_schedule()
                .map_err(|err| anyhow::anyhow!("schedule {id} cannot be read back: {err}"))
        })
        .collect()
}

/// The change a step would make, as a dry run reports it.
fn planned(step: &Step) -> Change {
    let (schedule_type, action, changed_fields, schedule_id, next_run_at) = match step {
        Step::Create { spec, next_run_at } => (
            spec.schedule_type.clone(),
            Action::Created,
            Vec::new(),
            None,
            *next_run_at,
        ),
        Step::Update {
            updated,
            changed_fields,
            ..
        } => (
            updated.schedule_type.clone(),
            Action::Updated,
            changed_fields.clone(),
            Some(updated.id),
            updated.next_run_at,
        ),
        Step::Keep(s) => (
            s.schedule_type.clone(),
            Action::Unchanged,
            Vec::new(),
            Some(s.id),
            s.next_run_at,
        ),
        Step::Prune(s) => (
            s.schedule_type.clone(),
            Action::Pruned,
            Vec::new(),
            Some(s.id),
            None,
        ),
        Step::Leave(s) => (
            s.schedule_type.clone(),
            Action::Undeclared,
            Vec::new(),
            Some(s.id),
            s.next_run_at,
        ),
    };
    Change {
        schedule_type,
        action,
        changed_fields,
        schedule_id,
        next_run_at,
    }
}

/// Makes one step's change through the API; the change as the server made it.
async fn apply_step(
    client: &ApiClient,
    env: EnvId,
    domain: &str,
    target: &Target,
    step: &Step,
) -> Result<Change, crate::client::ClientError> {
    let mut change = planned(step);
    let answer = match step {
        Step::Create { spec, .. } => {
            let mut body = spec_fields(spec, enroll::FIELDS);
            if let Some(runs) = spec.remaining_runs {
                body.insert("remaining_runs".into(), runs.into());
            }
            body.insert("target_env_id".into(), env.to_string().into());
            body.insert("domain".into(), domain.into());
            body.insert("schedule_type".into(), spec.schedule_type.clone().into());
            body.insert("target_config".into(), target.config().clone());
            client
                .call(
                    Method::POST,
                    "/v1/schedules",
                    &[],
                    Some(&Value::Object(body)),
                )
                .await?
        }
        Step::Update {
            current,
            updated,
            changed_fields,
        } => {
            let spec = spec_of(updated);
            let mut body = spec_fields(&spec, changed_fields);
            if changed_fields.contains(&"target_config") {
                body.insert("target_config".into(), target.config().clone());
            }
            if changed_fields.contains(&"labels") {
                // A patch merges labels: the ones no longer declared are sent as null.
                let mut labels = Map::new();
                for (key, _) in current.labels.iter() {
                    labels.insert(key.to_owned(), Value::Null);
                }
                for (key, value) in spec.labels.iter() {
                    labels.insert(key.to_owned(), value.into());
                }
                body.insert("labels".into(), Value::Object(labels));
            }
            if changed_fields.contains(&"exclude") {
                body.insert("exclude".into(), spec.exclude.texts().into());
            }
            client
                .call(
                    Method::PATCH,
                    &format!("/v1/schedules/{}", current.id),
                    &env_query(env),
                    Some(&Value::Object(body)),
                )
                .await?
        }
        Step::Prune(s) => {
            client
                .call(
                    Method::DELETE,
                    &format!("/v1/schedules/{}", s.id),
                    &env_query(env),
                    None,
                )
                .await?;
            return Ok(change);
        }
        Step::Keep(_) | Step::Leave(_) => return Ok(change),
    };
    change.schedule_id = answer
        .get("id")
        .and_then(Value::as_str)
        .and_then(|id| id.parse().ok())
        .map(ScheduleId);
    change.next_run_at = answer
        .get("next_run_at")
        .and_then(Value::as_str)
        .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
        .map(|at| at.with_timezone(&Utc));
    Ok(change)
}

/// The declaration part of an updated schedule, to send its changed fields.
fn spec_of(schedule: &Schedule) -> ScheduleSpec {
    ScheduleSpec {
        schedule_type: schedule.schedule_type.clone(),
        timing: schedule.timing.clone(),
        payload: schedule.payload.as_object().cloned().unwrap_or_default(),
        max_retries: u32::try_from(schedule.max_retries).unwrap_or(0),
        policies: schedule.policies,
        remaining_runs: schedule.remaining_runs.and_then(|n| u32::try_from(n).ok()),
        labels: schedule.labels.clone(),
        exclude: schedule.exclude.clone(),
    }
}

/// The request fields of `spec` among `fields` (a timing change sends the whole timing: the
/// server validates its fields together).
fn spec_fields(spec: &ScheduleSpec, fields: &[&str]) -> Map<String, Value> {
    let timing = fields.iter().any(|f| {
        matches!(
            *f,
            "cron" | "run_at" | "timezone" | "on_dst_gap" | "on_dst_repeat"
        )
    });
    let mut body = Map::new();
    if timing {
        match spec.run_at() {
            Some(run_at) => {
                body.insert(
                    "run_at".into(),
                    run_at.to_rfc3339_opts(SecondsFormat::AutoSi, true).into(),
                );
            }
            None => {
                body.insert("cron".into(), json!(spec.cron_expression()));
                body.insert("timezone".into(), json!(spec.timezone()));
                body.insert("on_dst_gap".into(), json!(spec.on_dst_gap()));
                body.insert("on_dst_repeat".into(), json!(spec.on_dst_repeat()));
            }
        }
    }
    if fields.contains(&"payload") {
        body.insert("payload".into(), Value::Object(spec.payload.clone()));
    }
    if fields.contains(&"max_retries") {
        body.insert("max_retries".into(), spec.max_retries.into());
    }
    // Left out when empty, so a server without labels still takes the rest.
    if fields.contains(&"labels") && !spec.labels.is_empty() {
        body.insert("labels".into(), spec.labels.to_json());
    }
    if fields.contains(&"exclude") && !spec.exclude.is_empty() {
        body.insert("exclude".into(), spec.exclude.texts().into());
    }
    let policies = &spec.policies;
    let policy_fields = [
        ("overlap", json!(policies.overlap)),
        (
            "catchup_window",
            json!(format_duration(policies.catchup_window)),
        ),
        ("max_jitter", json!(format_duration(policies.max_jitter))),
        ("start_at", json!(policies.start_at)),
        ("end_at", json!(policies.end_at)),
        ("pause_on_failure", json!(policies.pause_on_failure)),
        ("after_completion", json!(policies.after_completion)),
    ];
    for (field, value) in policy_fields {
        // A bound the declaration no longer has is sent as null, which clears it.
        if fields.contains(&field) {
            body.insert(field.into(), value);
        }
    }
    body
}
