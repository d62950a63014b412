//! The shells of the pages about one record: a schedule (`schedules/view?id=`) and a job
//! (`jobs/view?id=`). Like every shell they carry no data; the script fills them.

use super::UI_PREFIX;
use super::pages::table;

pub(super) fn schedule_body() -> String {
    format!(
        r#"<p class="toolbar"><a href="{prefix}/schedules">All schedules</a></p>
<section aria-labelledby="s-title">
<h2 id="s-title">–</h2>
<div class="actions" id="s-actions"></div>
<dl class="facts" id="s-facts"></dl>
</section>
<form id="s-edit" class="stack panel" hidden novalidate aria-labelledby="s-edit-title">
<h2 id="s-edit-title">Edit</h2>
<div class="field"><label for="e-cron">Cron expression</label><input id="e-cron" class="mono" autocomplete="off" spellcheck="false" aria-describedby="e-cron-error"><p class="error" id="e-cron-error" hidden></p></div>
<div class="field"><label for="e-timezone">Time zone</label><input id="e-timezone" autocomplete="off" spellcheck="false" aria-describedby="e-timezone-error"><p class="error" id="e-timezone-error" hidden></p></div>
<div class="field"><label for="e-base_url">Callback base URL</label><input id="e-base_url" type="url" autocomplete="off" spellcheck="false" aria-describedby="e-base_url-error"><p class="error" id="e-base_url-error" hidden></p></div>
<div class="field"><label for="e-payload">Payload (JSON object)</label><textarea id="e-payload" rows="4" class="mono" spellcheck="false" aria-describedby="e-payload-error"></textarea><p class="error" id="e-payload-error" hidden></p></div>
<div class="field"><label for="e-max_retries">Retries before the dead-letter queue</label><input id="e-max_retries" type="number" min="0" max="100" aria-describedby="e-max_retries-error"><p class="error" id="e-max_retries-error" hidden></p></div>
<p class="toolbar"><button type="submit" id="e-save">Save</button> <button type="button" id="e-cancel" class="secondary">Cancel</button></p>
</form>
<form id="s-backfill" class="stack panel" hidden novalidate aria-labelledby="s-backfill-title">
<h2 id="s-backfill-title">Backfill</h2>
<p class="muted">Runs the schedule's occurrences in a past range again (at most 1,000), each as a job of its own recorded as a backfill: by default one at a time (up to 5 at once beside its other jobs for an allow_all schedule).</p>
<div class="field"><label for="b-from">From (RFC 3339, UTC)</label><input id="b-from" class="mono" autocomplete="off" spellcheck="false" placeholder="2030-01-01T00:00:00Z" aria-describedby="b-from-error"><p class="error" id="b-from-error" hidden></p></div>
<div class="field"><label for="b-to">To (RFC 3339, UTC, not after now)</label><input id="b-to" class="mono" autocomplete="off" spellcheck="false" placeholder="2030-01-01T06:00:00Z" aria-describedby="b-to-error"><p class="error" id="b-to-error" hidden></p></div>
<div class="field"><label for="b-overlap">Overlap</label><select id="b-overlap" aria-describedby="b-overlap-error"><option value="">The schedule's default</option><option value="buffer_all">One after another, every one</option><option value="allow_all">Up to 5 at once, beside other jobs</option><option value="skip">The oldest only, the rest skipped</option><option value="buffer_one">The oldest and one more, the rest skipped</option></select><p class="error" id="b-overlap-error" hidden></p></div>
<p class="toolbar"><button type="submit" id="b-run">Backfill</button> <button type="button" id="b-cancel" class="secondary">Cancel</button></p>
</form>
<section aria-labelledby="s-next-title">
<h2 id="s-next-title">Next fires</h2>
<div id="s-next"><p class="muted">–</p></div>
</section>
<section aria-labelledby="s-runs-title">
<h2 id="s-runs-title">Runs</h2>
<div class="chart-pair"><div id="s-chart-day" class="chart-slot"></div><div id="s-chart-week" class="chart-slot"></div></div>
</section>
<section aria-labelledby="s-jobs-title">
<h2 id="s-jobs-title">Recent jobs</h2>
{jobs}
</section>
<section aria-labelledby="s-audit-title">
<h2 id="s-audit-title">Audit trail</h2>
<div id="s-audit"><p class="muted">–</p></div>
</section>"#,
        prefix = UI_PREFIX,
        jobs = table(
            "s-jobs-table",
            "This schedule's latest jobs",
            &[
                "Job",
                "Status",
                "Scheduled for",
                "Attempts",
                "Finished",
                "Error"
            ]
        ),
    )
}

pub(super) fn job_body() -> String {
    format!(
        r#"<p class="toolbar"><a href="{prefix}/jobs">All jobs</a></p>
<section aria-labelledby="j-title">
<h2 id="j-title">–</h2>
<div class="actions" id="j-actions"></div>
<dl class="facts" id="j-facts"></dl>
</section>
<section aria-labelledby="j-attempts-title">
<h2 id="j-attempts-title">Attempts</h2>
{attempts}
<p class="muted" id="j-attempts-note" hidden></p>
</section>
<section aria-labelledby="j-related-title">
<h2 id="j-related-title">Related jobs</h2>
<ul id="j-related" class="plain"></ul>
</section>"#,
        prefix = UI_PREFIX,
        attempts = table(
            "j-attempts-table",
            "Every attempt of this job",
            &[
                "Attempt",
                "Started",
                "Duration",
                "Status code",
                "Error class",
                "Response"
            ]
        ),
    )
}
