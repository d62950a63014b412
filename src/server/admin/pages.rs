//! The HTML shells of the admin pages, their script and their style sheet.
//!
//! The markup is written here with `format!` and [`escape`] for every interpolated value; the
//! shells carry no tenant data, only forms and empty tables that the script fills from the JSON
//! endpoints (with `textContent`, never as markup). Every response carries a strict
//! Content-Security-Policy: scripts and styles only from this origin, no inline code, no
//! framing, and network requests to this origin only, so the pages work offline.

use std::fmt::Write as _;
use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::UI_PREFIX;

/// The policy of every page and asset.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const KIT: &str = include_str!("assets/admin-kit.js");
const CHART: &str = include_str!("assets/admin-chart.js");
const VIEWS: &str = include_str!("assets/admin-views.js");
const SCRIPT: &str = include_str!("assets/admin.js");
const STYLE: &str = include_str!("assets/admin.css");

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// One admin page.
struct Page {
    /// The path under [`UI_PREFIX`].
    slug: &'static str,
    title: &'static str,
    /// The navigation entry this page belongs to.
    nav: &'static str,
    body: fn() -> String,
}

const NAV: &[(&str, &str)] = &[
    ("overview", "Overview"),
    ("schedules", "Schedules"),
    ("jobs", "Jobs"),
    ("dlq", "Dead letters"),
];

const PAGES: &[Page] = &[
    Page {
        slug: "overview",
        title: "Overview",
        nav: "overview",
        body: overview_body,
    },
    Page {
        slug: "schedules",
        title: "Schedules",
        nav: "schedules",
        body: schedules_body,
    },
    Page {
        slug: "schedules/new",
        title: "New schedule",
        nav: "schedules",
        body: new_schedule_body,
    },
    Page {
        slug: "schedules/view",
        title: "Schedule",
        nav: "schedules",
        body: super::detail::schedule_body,
    },
    Page {
        slug: "jobs",
        title: "Jobs",
        nav: "jobs",
        body: jobs_body,
    },
    Page {
        slug: "jobs/view",
        title: "Job",
        nav: "jobs",
        body: super::detail::job_body,
    },
    Page {
        slug: "dlq",
        title: "Dead-letter queue",
        nav: "dlq",
        body: dlq_body,
    },
];

fn layout(page: &Page) -> String {
    let mut nav = String::new();
    for (slug, label) in NAV {
        let current = if *slug == page.nav {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(
            nav,
            "<li><a href=\"{prefix}/{slug}\"{current}>{label}</a></li>",
            prefix = UI_PREFIX,
            slug = escape(slug),
            label = escape(label),
        );
    }
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title} · sentin8-cron admin</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{prefix}/assets/admin.css">
<script src="{prefix}/assets/admin-kit.js" defer></script>
<script src="{prefix}/assets/admin-chart.js" defer></script>
<script src="{prefix}/assets/admin-views.js" defer></script>
<script src="{prefix}/assets/admin.js" defer></script>
</head>
<body data-page="{page}">
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<p class="brand"><a href="{prefix}/overview">sentin8-cron <span>admin</span></a></p>
<nav aria-label="Admin pages"><ul>{nav}</ul></nav>
<div class="session" id="session" hidden>
<form id="env-form" class="env-form">
<label for="env-select" id="env-select-label">Environment</label>
<select id="env-select"></select>
<label for="env-input" id="env-input-label" hidden>Environment id</label>
<input id="env-input" name="env" autocomplete="off" spellcheck="false" placeholder="environment UUID" hidden>
<button type="submit" id="env-use" hidden>Use</button>
</form>
<span class="who" id="who"></span>
<button type="button" id="sign-out" class="secondary">Sign out</button>
</div>
</header>
<main id="main" tabindex="-1">
<h1>{title}</h1>
<div id="status" class="status" role="status" aria-live="polite"></div>
<section id="sign-in" class="panel" aria-labelledby="sign-in-title" hidden>
<h2 id="sign-in-title">Sign in</h2>
<p>Paste a bearer token with the <code>sentin8:cron:read</code>, <code>write</code> or <code>admin</code> scope. In development mode, paste the admin token that <code>sentin8-cron serve</code> printed at start-up. The token is kept in this tab only (session storage) and sent with each request.</p>
<form id="sign-in-form">
<div class="field"><label for="token">Bearer token</label>
<input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required></div>
<button type="submit">Sign in</button>
</form>
</section>
<section id="pick-env" class="panel" aria-labelledby="pick-env-title" hidden>
<h2 id="pick-env-title">Choose an environment</h2>
<p id="pick-env-text">Choose the environment to work in above.</p>
</section>
<div id="content" hidden>
{body}
</div>
<noscript><p class="panel">These pages need JavaScript: they read their data from the authenticated API.</p></noscript>
</main>
</body>
</html>
"##,
        title = escape(page.title),
        prefix = UI_PREFIX,
        page = escape(page.slug),
        nav = nav,
        body = (page.body)(),
    )
}

/// A table with a caption, column headers and an empty body the script fills.
pub(super) fn table(id: &str, caption: &str, columns: &[&str]) -> String {
    let mut head = String::new();
    for column in columns {
        let _ = write!(head, "<th scope=\"col\">{}</th>", escape(column));
    }
    format!(
        "<div class=\"table-wrap\"><table id=\"{id}\" class=\"grid\">\
         <caption class=\"sr-only\">{caption}</caption>\
         <thead><tr>{head}</tr></thead><tbody></tbody></table></div>\
         <p id=\"{id}-empty\" class=\"empty\" hidden>Nothing to show.</p>",
        id = escape(id),
        caption = escape(caption),
    )
}

pub(super) fn count_list(prefix: &str, items: &[(&str, &str)]) -> String {
    let mut out = String::from("<dl class=\"counts\">");
    for (key, label) in items {
        let _ = write!(
            out,
            "<div><dt>{label}</dt><dd id=\"c-{prefix}-{key}\">–</dd></div>",
            label = escape(label),
            prefix = escape(prefix),
            key = escape(key),
        );
    }
    out.push_str("</dl>");
    out
}

fn overview_body() -> String {
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
                ("running", "Running")
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

fn schedules_body() -> String {
    format!(
        r#"<p class="toolbar"><a class="button" href="{prefix}/schedules/new">New schedule</a></p>
<form id="filters" class="filters" aria-label="Filter schedules">
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status">{status}</select></div>
<div class="field"><label for="f-domain">Domain</label><input id="f-domain" name="domain" autocomplete="off" spellcheck="false"></div>
<div class="field"><label for="f-search">Type contains</label><input id="f-search" name="search" type="search" autocomplete="off" spellcheck="false"></div>
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

fn new_schedule_body() -> String {
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
<p class="hint" id="cron-hint">Five fields: minute hour day-of-month month day-of-week, e.g. <code>*/15 * * * *</code>, <code>30 6 * * MON-FRI</code>, <code>0 0 L * *</code>, or <code>@daily</code>.</p><p class="error" id="cron-error" hidden></p></div>
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
<select id="overlap" name="overlap" aria-describedby="overlap-error"><option value="skip">Skip it, on the record</option><option value="buffer_one">Keep one to run when the job ends</option><option value="allow_all">Run it beside the open job</option></select><p class="error" id="overlap-error" hidden></p></div>
<div class="field"><label><input type="checkbox" id="pause_on_failure" name="pause_on_failure" aria-describedby="pause_on_failure-error"> Pause the schedule when a job lands in the dead-letter queue</label><p class="error" id="pause_on_failure-error" hidden></p></div>
</div>
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

fn jobs_body() -> String {
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

fn dlq_body() -> String {
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

static RENDERED: LazyLock<Vec<(&'static str, String)>> =
    LazyLock::new(|| PAGES.iter().map(|p| (p.slug, layout(p))).collect());

fn security_headers(response: &mut Response, content_type: &'static str) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

fn html(slug: &'static str) -> Response {
    let body = RENDERED
        .iter()
        .find(|(s, _)| *s == slug)
        .map(|(_, html)| html.clone())
        .unwrap_or_default();
    let mut response = body.into_response();
    security_headers(&mut response, "text/html; charset=utf-8");
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    security_headers(&mut response, content_type);
    response
}

/// The page and asset routes. They need no state: the shells are static.
pub fn pages() -> Router {
    let mut router = Router::new()
        .route(
            UI_PREFIX,
            get(|| async { Redirect::to(&format!("{UI_PREFIX}/overview")) }),
        )
        .route(
            &format!("{UI_PREFIX}/"),
            get(|| async { Redirect::to(&format!("{UI_PREFIX}/overview")) }),
        )
        .route(
            &format!("{UI_PREFIX}/assets/admin-kit.js"),
            get(|| async { asset(KIT, "text/javascript; charset=utf-8") }),
        )
        .route(
            &format!("{UI_PREFIX}/assets/admin-chart.js"),
            get(|| async { asset(CHART, "text/javascript; charset=utf-8") }),
        )
        .route(
            &format!("{UI_PREFIX}/assets/admin-views.js"),
            get(|| async { asset(VIEWS, "text/javascript; charset=utf-8") }),
        )
        .route(
            &format!("{UI_PREFIX}/assets/admin.js"),
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            &format!("{UI_PREFIX}/assets/admin.css"),
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        );
    for page in PAGES {
        let slug = page.slug;
        router = router.route(
            &format!("{UI_PREFIX}/{slug}"),
            get(move || async move { html(slug) }),
        );
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an attribute like `onclick=` appears.
    fn has_inline_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(position, _)| {
            let rest = &html[position + 3..];
            let name_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
            name_len > 0 && rest[name_len..].starts_with('=')
        })
    }

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x" title='y'>&</a>"#),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
        assert_eq!(escape("Europe/London"), "Europe/London");
    }

    #[test]
    fn every_page_renders_a_complete_accessible_shell() {
        for page in PAGES {
            let html = layout(page);
            assert!(html.starts_with("<!doctype html>"), "{}", page.slug);
            assert!(html.contains(&format!("data-page=\"{}\"", page.slug)));
            assert!(html.contains("aria-current=\"page\""), "{}", page.slug);
            assert!(html.contains("aria-live=\"polite\""));
            assert!(html.contains("<label for=\"token\">"));
            // No inline script or style: the policy would refuse them.
            assert!(!html.contains("<script>"), "{}", page.slug);
            assert!(!html.contains("<style"), "{}", page.slug);
            assert!(!html.contains(" style="), "{}", page.slug);
            assert!(
                !has_inline_handler(&html),
                "no inline handlers in {}",
                page.slug
            );
            // Every labelled control exists.
            for (position, _) in html.match_indices("<label for=\"") {
                let rest = &html[position + 12..];
                let id = &rest[..rest.find('"').unwrap()];
                assert!(
                    html.contains(&format!("id=\"{id}\"")),
                    "{}: label for missing #{id}",
                    page.slug
                );
            }
        }
    }

    /// The create form posts the API's own field names: each policy has its control, a place
    /// for the API's error about it, and a place in the script's list of form fields.
    #[test]
    fn the_new_schedule_form_offers_every_policy() {
        use crate::core::policies::Overlap;
        let html = new_schedule_body();
        for field in crate::core::policies::FIELDS {
            assert!(html.contains(&format!("id=\"{field}\"")), "{field}");
            assert!(html.contains(&format!("id=\"{field}-error\"")), "{field}");
            assert!(
                SCRIPT.contains(&format!("'{field}'")),
                "{field} in admin.js"
            );
        }
        for overlap in Overlap::ALL {
            assert!(
                html.contains(&format!("<option value=\"{overlap}\">")),
                "{overlap}"
            );
        }
    }

    #[test]
    fn the_zone_list_is_offered() {
        let html = new_schedule_body();
        assert!(html.contains("<option value=\"Europe/London\">"));
        assert!(html.contains("<option value=\"America/New_York\">"));
    }
}
