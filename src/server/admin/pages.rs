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
use super::bodies::{dlq_body, jobs_body, new_schedule_body, overview_body, schedules_body};

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
