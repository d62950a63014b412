//! The bodies of the admin pages: the forms and empty tables each page's script fills from
//! the JSON endpoints. Static markup, rendered once; every value that is not a literal goes
//! through [`escape`].

use std::fmt::Write as _;

use super::UI_PREFIX;
use super::pages::{count_list, escape, table};

pub(super) fn overview_body() -> String {
    format!(
        r#"<div class="live" role="group" aria-label="Updates">
<div class="field inline"><label for="ov-window">Window</label>
<select id="ov-window"><option value="24">Last 24 hours</option><option value="168">Last 7 days</option></select></div>
<button type="button" id="ov-pause" class="secondary" aria-pressed="false">Pause updates</button>
<span class="muted" id="ov-updated" aria-live="off"></span>
</div>
<section aria-labelledby="glance-title">
<h2 id="glance-title">At a glance</h2>
<div class="cards">
<article class="card"><h3>Schedules</h3>{schedules}<p><a href="{prefix}/schedules">All schedules</a></p></article>
<article class="card"><h3>Jobs now</h3>{jobs}<p><a href="{prefix}/jobs?status=failed">Failed jobs</a></p></article>
<article class="card"><h3 id="win-title">Last 24 hours</h3>{window}</article>
<article class="card"><h3>Dead-letter queue</h3><p class="big" id="c-dlq">–</p><p><a href="{prefix}/dlq">Open the queue</a></p></article>
<article class="card"><h3>Ticker</h3><p class="big" id="ticker-status">–</p><p id="ticker-detail"></p></article>
</div>
</section>
<section aria-labelledby="runs-title">
<h2 id="runs-title">Runs per hour</h2>
<div id="ov-chart" class="chart-slot"></div>
</section>
<section aria-labelledby="next-title">
<h2 id="next-title">Next fires</h2>
{next}
</section>
<section aria-labelledby="failures-title">
<h2 id="failures-title">Recent failures</h2>
{failures}
</section>"#,
        prefix = UI_PREFIX,
        schedules = count_list(
            "schedules",
            &[
                ("active", "Active"),
                ("paused", "Paused"),
                ("completed", "Completed")
            ]
        ),
        jobs = count_list(
            "jobs",
            &[
                ("scheduled", "Scheduled"),
                ("pending", "Pending"),
                ("running", "Running"),
                ("buffered", "Buffered")
            ]
        ),
        window = count_list(
            "win",
            &[
                ("fires", "Fires"),
                ("failures", "Failures"),
                ("skips", "Skips"),
                ("p50", "Late, median"),
                ("p99", "Late, 99th pct."),
            ]
        ),
        next = table(
            "next-table",
            "The active schedules that fire soonest",
            &["Schedule", "Fires at (its time zone)", "In"]
        ),
        failures = table(
            "failures-table",
            "The latest failed jobs",
            &["Schedule", "Scheduled for", "Attempts", "Error", "Actions"]
        ),
    )
}

fn status_options(values: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (value, label) in values {
        let _ = write!(
            out,
            "<option value=\"{}\">{}</option>",
            escape(value),
            escape(label)
        );
    }
    out
}

pub(super) fn schedules_body() -> String {
    format!(
        r#"<p class="toolbar"><a class="button" href="{prefix}/schedules/new">New schedule</a></p>
<form id="filters" class="filters" aria-label="Filter schedules">
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status">{status}</select></div>
<div class="field"><label for="f-domain">Domain</label><input id="f-domain" name="domain" autocomplete="off" spellcheck="false"></div>
<div class="field"><label for="f-search">Type contains</label><input id="f-search" name="search" type="search" autocomplete="off" spellcheck="false"></div>
<div class="field"><label for="f-labels">Labels</label><input id="f-labels" name="labels" placeholder="team=billing,tier in (gold)" autocomplete="off" spellcheck="false"></div>
<button type="submit">Apply</button>
</form>
{table}
<p><button type="button" id="more" class="secondary" hidden>Load more</button></p>"#,
        prefix = UI_PREFIX,
        status = status_options(&[
            ("", "Any (not deleted)"),
            ("active", "Active"),
            ("paused", "Paused"),
            ("completed", "Completed"),
        ]),
        table = table(
            "schedules-table",
            "Schedules, with their next fires in their own time zone",
            &["Schedule", "Timing", "Status", "Next fires", "Actions"]
        ),
    )
}

pub(super) fn new_schedule_body() -> String {
    let mut zones = String::new();
    for name in crate::core::cron::tzdb::database().names() {
        let _ = write!(zones, "<option value=\"{}\">", escape(name));
    }
    format!(
        r#"<form id="new-schedule" class="stack" novalidate>
<fieldset>
<legend>Owner</legend>
<div class="field"><label for="domain">Domain</label>
<input id="domain" name="domain" required autocomplete="off" spellcheck="false" aria-describedby="domain-hint domain-error">
<p class="hint" id="domain-hint">The owning service's domain, e.g. <code>billing</code>.</p><p class="error" id="domain-error" hidden></p></div>
<div class="field"><label for="schedule_type">Schedule type</label>
<input id="schedule_type" name="schedule_type" required autocomplete="off" spellcheck="false" aria-describedby="schedule_type-hint schedule_type-error">
<p class="hint" id="schedule_type-hint">Unique within the domain, e.g. <code>invoice.nightly</code>.</p><p class="error" id="schedule_type-error" hidden></p></div>
<div class="field"><label for="base_url">Callback base URL</label>
<input id="base_url" name="base_url" type="url" required autocomplete="off" spellcheck="false" aria-describedby="base_url-hint base_url-error">
<p class="hint" id="base_url-hint">The owning service, called back at fire time. No credentials: sentin8-cron authenticates with its own token.</p><p class="error" id="base_url-error" hidden></p></div>
</fieldset>
<fieldset>
<legend>Timing</legend>
<div class="choice" role="radiogroup" aria-label="Kind of schedule">
<label><input type="radio" name="kind" value="cron" id="kind-cron" checked> Repeats (cron)</label>
<label><input type="radio" name="kind" value="once" id="kind-once"> Runs once</label>
</div>
<div id="cron-fields">
<div class="field"><label for="cron">Cron expression</label>
<input id="cron" name="cron" value="0 2 * * *" autocomplete="off" spellcheck="false" class="mono" aria-describedby="cron-hint cron-error">
<p class="hint" id="cron-hint">Five fields: minute hour day-of-month month day-of-week, e.g. <code>*/15 * * * *</code>, <code>30 6 * * MON-FRI</code>, <code>0 0 L * *</code>, or <code>@daily</code>; or an interval of whole seconds from the Unix epoch, <code>@every 90s</code> or <code>@every 1h phase 15m</code>.</p><p class="error" id="cron-error" hidden></p></div>
<div class="field"><label for="timezone">Time zone</label>
<input id="timezone" name="timezone" value="UTC" list="zones" autocomplete="off" spellcheck="false" aria-describedby="timezone-error">
<datalist id="zones">{zones}</datalist><p class="error" id="timezone-error" hidden></p></div>
<div class="row">
<div class="field"><label for="on_dst_gap">When the time is skipped (spring forward)</label>
<select id="on_dst_gap" name="on_dst_gap" aria-describedby="on_dst_gap-error"><option value="shift">Run right after the gap</option><option value="skip">Skip that day</option></select><p class="error" id="on_dst_gap-error" hidden></p></div>
<div class="field"><label for="on_dst_repeat">When the time occurs twice (fall back)</label>
<select id="on_dst_repeat" name="on_dst_repeat" aria-describedby="on_dst_repeat-error"><option value="once">Run once</option><option value="twice">Run twice</option></select><p class="error" id="on_dst_repeat-error" hidden></p></div>
</div>
<div class="row">
<div class="field"><label for="start_at">Start (optional)</label>
<input id="start_at" name="start_at" autocomplete="off" spellcheck="false" class="mono" placeholder="2030-06-01T00:00:00Z" aria-describedby="start_at-hint start_at-error">
<p class="hint" id="start_at-hint">RFC 3339: no fire before it.</p><p class="error" id="start_at-error" hidden></p></div>
<div class="field"><label for="end_at">End (optional)</label>
<input id="end_at" name="end_at" autocomplete="off" spellcheck="false" class="mono" placeholder="2031-06-01T00:00:00Z" aria-describedby="end_at-hint end_at-error">
<p class="hint" id="end_at-hint">RFC 3339: no fire after it; the schedule is then completed.</p><p class="error" id="end_at-error" hidden></p></div>
</div>
<div class="field"><label for="remaining_runs">Runs (optional)</label>
<input id="remaining_runs" name="remaining_runs" type="number" min="1" max="1000000" aria-describedby="remaining_runs-hint remaining_runs-error">
<p class="hint" id="remaining_runs-hint">Completed after this many fires; empty for no limit.</p><p class="error" id="remaining_runs-error" hidden></p></div>
</div>
<div id="once-fields" hidden>
<div class="field"><label for="run_at">Run at</label>
<input id="run_at" name="run_at" autocomplete="off" spellcheck="false" class="mono" placeholder="2030-06-01T12:00:00Z" aria-describedby="run_at-hint run_at-error">
<p class="hint" id="run_at-hint">An RFC 3339 instant with its offset, in the future.</p><p class="error" id="run_at-error" hidden></p></div>
</div>
<div class="field"><label for="max_jitter">Jitter (optional)</label>
<input id="max_jitter" name="max_jitter" autocomplete="off" spellcheck="false" class="mono" placeholder="30s" aria-describedby="max_jitter-hint max_jitter-error">
<p class="hint" id="max_jitter-hint">Spreads each call up to this long after its time (<code>30s</code>, <code>5m</code>), at an offset fixed by the schedule's id; at most the time between fires.</p><p class="error" id="max_jitter-error" hidden></p></div>
<div class="field"><label for="exclude">Except (optional)</label>
<input id="exclude" name="exclude" autocomplete="off" spellcheck="false" class="mono" placeholder="holidays; 2031-12-24..2031-12-26; * * * * SAT,SUN" aria-describedby="exclude-hint exclude-error">
<p class="hint" id="exclude-hint">Days and times it does not run, separated by <code>;</code>: dates, <code>first..last</code> ranges, cron-like specs (every minute they name) and names of this environment's calendars. An excluded fire is recorded as skipped.</p><p class="error" id="exclude-error" hidden></p></div>
<section class="preview" aria-labelledby="preview-title">
<h2 id="preview-title">Next fires</h2>
<div id="preview" aria-live="polite"><p class="muted">Type an expression to see when it fires.</p></div>
</section>
</fieldset>
<fieldset>
<legend>When things go wrong</legend>
<div class="field"><label for="catchup_window">Catch-up window</label>
<input id="catchup_window" name="catchup_window" autocomplete="off" spellcheck="false" class="mono" placeholder="1h" aria-describedby="catchup_window-hint catchup_window-error">
<p class="hint" id="catchup_window-hint">After an outage the latest missed fire still runs if it is at most this late (<code>1h</code> when empty, <code>1s</code> to <code>366d</code>); older ones are recorded as skipped.</p><p class="error" id="catchup_window-error" hidden></p></div>
<div id="cron-policy-fields">
<div class="field"><label for="overlap">When a fire is due while a job is still open</label>
<select id="overlap" name="overlap" aria-describedby="overlap-error"><option value="skip">Skip it, on the record</option><option value="buffer_one">Keep one to run when the job ends</option><option value="allow_all">Run it beside the open job</option><option value="buffer_all">Keep every one, to run one after another</option><option value="cancel_other">Cancel the open job and run it</option></select><p class="error" id="overlap-error" hidden></p></div>
<div class="field"><label><input type="checkbox" id="pause_on_failure" name="pause_on_failure" aria-describedby="pause_on_failure-error"> Pause the schedule when a job lands in the dead-letter queue</label><p class="error" id="pause_on_failure-error" hidden></p></div>
</div>
<div class="field"><label><input type="checkbox" id="after_completion" name="after_completion" aria-describedby="after_completion-hint after_completion-error"> Delete the schedule once it has completed</label>
<p class="hint" id="after_completion-hint">When its last job has ended; a one-shot, or a schedule with an end or a number of runs.</p><p class="error" id="after_completion-error" hidden></p></div>
</fieldset>
<fieldset>
<legend>Call</legend>
<div class="field"><label for="payload">Payload (JSON object)</label>
<textarea id="payload" name="payload" rows="4" class="mono" spellcheck="false" aria-describedby="payload-error">{{}}</textarea><p class="error" id="payload-error" hidden></p></div>
<div class="field"><label for="max_retries">Retries before the dead-letter queue</label>
<input id="max_retries" name="max_retries" type="number" min="0" max="100" value="3" aria-describedby="max_retries-error"><p class="error" id="max_retries-error" hidden></p></div>
</fieldset>
<p class="toolbar"><button type="submit" id="create">Create schedule</button> <a href="{prefix}/schedules">Cancel</a></p>
</form>"#,
        prefix = UI_PREFIX,
        zones = zones,
    )
}

pub(super) fn jobs_body() -> String {
    format!(
        r#"<form id="filters" class="filters" aria-label="Filter jobs">
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status">{status}</select></div>
<div class="field"><label for="f-schedule">Schedule</label><select id="f-schedule" name="schedule_id"><option value="">Any</option></select></div>
<button type="submit">Apply</button>
</form>
{table}
<p><button type="button" id="more" class="secondary" hidden>Load more</button></p>"#,
        status = status_options(&[
            ("", "Any"),
            ("scheduled", "Scheduled"),
            ("pending", "Pending"),
            ("running", "Running"),
            ("succeeded", "Succeeded"),
            ("failed", "Failed"),
            ("skipped", "Skipped"),
            ("superseded", "Superseded"),
            ("buffered", "Buffered"),
            ("cancelled", "Cancelled"),
        ]),
        table = table(
            "jobs-table",
            "Jobs, newest first",
            &[
                "Schedule",
                "Status",
                "Scheduled for",
                "Attempts",
                "Finished",
                "Error",
                "Actions"
            ]
        ),
    )
}

pub(super) fn dlq_body() -> String {
    format!(
        r#"<form id="filters" class="filters" aria-label="Filter dead letters">
<div class="field"><label for="f-domain">Domain</label><input id="f-domain" name="domain" autocomplete="off" spellcheck="false"></div>
<button type="submit">Apply</button>
</form>
<p id="dlq-scope" class="muted" hidden></p>
{table}
<p><button type="button" id="more" class="secondary" hidden>Load more</button></p>"#,
        table = table(
            "dlq-table",
            "Dead-letter entries, newest first",
            &[
                "Schedule",
                "Scheduled for",
                "Landed",
                "Attempts",
                "Last error",
                "Actions"
            ]
        ),
    )
}
