//! `sentin8-cron schedules describe ID`: one schedule at a glance, from
//! `GET /v1/schedules/{id}/describe`. JSON and YAML print the API's document as it is; the
//! table shows the facts, the counts, the next calls and the recent jobs.

use std::io::Write;

use serde_json::Value;

use super::super::output::{self, OutputArgs};
use super::super::remote::{self, Kind, text, time};

/// Prints a description (the API's document).
pub fn print(
    out: &mut (dyn Write + Send),
    output: &OutputArgs,
    described: &Value,
) -> anyhow::Result<()> {
    if output.format.is_structured() {
        return output::write_structured(out, output.format, described);
    }
    let schedule = &described["schedule"];
    let mut facts = output::table(["", ""]);
    facts.without_headers();
    facts.add_row([
        "Schedule".to_owned(),
        format!(
            "{}/{} ({})",
            text(schedule, "domain"),
            text(schedule, "schedule_type"),
            text(schedule, "id")
        ),
    ]);
    facts.add_row(["Status".to_owned(), status(schedule)]);
    facts.add_row(["Timing".to_owned(), timing(schedule)]);
    facts.add_row(["Next call".to_owned(), time(schedule, "next_run_at")]);
    facts.add_row(["Last call".to_owned(), time(schedule, "last_run_at")]);
    facts.add_row(["Open job".to_owned(), open_job(&described["open_job"])]);
    let counts = &described["counts"];
    let n = |field: &str| counts[field].as_i64().unwrap_or(0);
    facts.add_row([
        format!("Since {}", time(counts, "since")),
        format!(
            "{} succeeded, {} failed, {} skipped, {} missed ({} of them backfilled)",
            n("succeeded"),
            n("failed"),
            n("skipped"),
            n("missed"),
            n("backfilled")
        ),
    ]);
    facts.add_row([
        "Open now".to_owned(),
        format!(
            "{} scheduled, {} pending, {} running, {} buffered",
            n("scheduled"),
            n("pending"),
            n("running"),
            n("buffered")
        ),
    ]);
    output::write_table(out, &facts)?;

    let upcoming = described["upcoming"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writeln!(out, "\nNext calls")?;
    if upcoming.is_empty() {
        writeln!(
            out,
            "  none (the schedule is not active, or has nothing left to call)"
        )?;
    } else {
        let mut calls = output::table(["occurrence", "called at"]);
        for call in &upcoming {
            calls.add_row([time(call, "occurrence"), time(call, "at")]);
        }
        output::write_table(out, &calls)?;
    }
    let recent = described["recent_jobs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writeln!(out, "\nRecent jobs")?;
    if recent.is_empty() {
        writeln!(out, "  none yet")?;
        return Ok(());
    }
    let list = OutputArgs {
        no_headers: false,
        ..*output
    };
    remote::print_table(out, &list, Kind::Job, &recent)
}

fn status(schedule: &Value) -> String {
    let status = text(schedule, "status");
    let paused = &schedule["paused"];
    if !paused.is_object() {
        return status;
    }
    let mut line = format!(
        "{status} by {} at {}",
        text(paused, "by"),
        time(paused, "at")
    );
    let reason = text(paused, "reason");
    if !reason.is_empty() {
        line.push_str(&format!(": {reason}"));
    }
    line
}

fn timing(schedule: &Value) -> String {
    let mut line = match text(schedule, "cron") {
        cron if !cron.is_empty() => format!("{cron} ({})", text(schedule, "timezone")),
        _ => format!("once at {}", time(schedule, "run_at")),
    };
    line.push_str(&format!("; overlap {}", text(schedule, "overlap")));
    let jitter = text(schedule, "max_jitter");
    if !jitter.is_empty() && jitter != "0s" {
        line.push_str(&format!("; jitter up to {jitter}"));
    }
    let runs = text(schedule, "remaining_runs");
    if !runs.is_empty() {
        line.push_str(&format!("; {runs} runs left"));
    }
    line
}

fn open_job(job: &Value) -> String {
    if !job.is_object() {
        return "none".to_owned();
    }
    format!(
        "{} {}, attempt {}, for {}",
        text(job, "id"),
        text(job, "status"),
        text(job, "attempt"),
        time(job, "scheduled_for")
    )
}
