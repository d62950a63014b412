//! The on-call gaps of the admin pages, in headless Chromium: the DLQ page discards a dead
//! letter (with the same second-click confirmation as Delete) and links each entry to its job
//! and its schedule; a job's page says when it was dead-lettered and links the entry; a
//! trigger of a paused schedule shows the refusal; a job held by a pause says so; and the run
//! charts' axis labels never overlap, on a wide screen and a phone. Skips without chromium and
//! chromedriver unless `SENTIN8_CRON_REQUIRE_BROWSER=1`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::admin_browser::artifacts;
use crate::api::Api;
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::sqlite_store;
use crate::webdriver::Browser;

const OVERALL: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_discard_links_paused_triggers_held_jobs_and_chart_labels() {
    Browser::run_bounded(OVERALL, async |browser| scenario(browser).await).await;
}

async fn call(api: &Api, method: Method, path: &str) -> (StatusCode, Value) {
    let (status, body, _) = api.call(method, path, Some(&api.writer()), None).await;
    (status, body)
}

async fn click(browser: &Browser, css: &str) {
    let element = browser.wait_visible(css).await;
    browser.click(&element).await.unwrap();
}

/// The displayed tick labels of a chart that overlap another's box (none expected).
async fn overlapping_ticks(browser: &Browser, chart: &str) -> Value {
    browser
        .script(
            "const boxes = [...document.querySelectorAll(arguments[0] + ' .tick')] \
               .map((t) => ({ text: t.textContent, r: t.getBoundingClientRect() })) \
               .filter((b) => b.r.width > 0); \
             const hits = []; \
             boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => { \
               if (a.r.left < b.r.right && b.r.left < a.r.right && a.r.top < b.r.bottom && b.r.top < a.r.bottom) \
                 hits.push(a.text + ' / ' + b.text); })); \
             return { count: boxes.length, hits };",
            json!([chart]),
        )
        .await
        .unwrap()
}

async fn scenario(browser: &Browser) {
    let shots = artifacts();
    let api = Api::start(sqlite_store().await).await;
    let env = api.env_a.to_string();
    let ui = format!("{}/v1/admin/ui", api.base);
    let token = api.writer();

    let nightly = api.create(api.env_a, "nightly").await;
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let (doomed, _) = crate::lifecycle::triggered_as(&api, "doomed", &failing, 0).await;
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1, "{summary:?}");
    let (_, dlq) = call(&api, Method::GET, &format!("/v1/dlq?target_env_id={env}")).await;
    let entry = dlq["items"][0].clone();
    let job = entry["job_id"].as_str().unwrap().to_owned();

    // Sign in and pick the environment.
    browser.goto(&format!("{ui}/overview")).await.unwrap();
    let field = browser.wait_visible("#token").await;
    browser.type_text(&field, &token).await.unwrap();
    click(browser, "#sign-in-form button[type=submit]").await;
    click(browser, &format!("#env-select option[value=\"{env}\"]")).await;
    click(browser, "#env-use").await;
    browser.wait_visible("#content").await;

    // The failed job's page says when it was dead-lettered and links the entry.
    browser
        .goto(&format!("{ui}/jobs/view?id={job}"))
        .await
        .unwrap();
    browser
        .wait_text("#j-dead-letter", "dead-letter entry")
        .await;
    browser
        .screenshot(&shots.join("job-dead-lettered.png"))
        .await
        .unwrap();
    click(browser, "#j-dead-letter a").await;

    // The DLQ page, scoped to that job: its row links the job and the schedule.
    browser
        .wait_text("#dlq-scope", "Only the dead letters of job")
        .await;
    browser.wait_text("#dlq-table tbody tr", "doomed").await;
    let job_link = browser.find("#dlq-table .dlq-job").await.unwrap();
    assert_eq!(
        browser.attribute(&job_link, "href").await.unwrap(),
        Some(format!("/v1/admin/ui/jobs/view?id={job}"))
    );
    let schedule_link = browser.find("#dlq-table .dlq-schedule").await.unwrap();
    assert_eq!(
        browser.attribute(&schedule_link, "href").await.unwrap(),
        Some(format!("/v1/admin/ui/schedules/view?id={doomed}"))
    );
    browser
        .screenshot(&shots.join("dlq-links.png"))
        .await
        .unwrap();

    // Discard asks for a second click, then drops the entry: the occurrence will not run.
    click(
        browser,
        "button[aria-label=\"Discard the dead letter of billing/doomed\"]",
    )
    .await;
    browser.wait_text("#status", "Press “Confirm”").await;
    let (_, still) = call(&api, Method::GET, &format!("/v1/dlq?target_env_id={env}")).await;
    assert_eq!(
        still["items"].as_array().unwrap().len(),
        1,
        "not before Confirm"
    );
    click(
        browser,
        "button[aria-label=\"Confirm: Discard the dead letter of billing/doomed\"]",
    )
    .await;
    browser
        .wait_text("#status", "Discarded the dead letter of billing/doomed")
        .await;
    browser.wait_visible("#dlq-table-empty").await;
    let (_, gone) = call(&api, Method::GET, &format!("/v1/dlq?target_env_id={env}")).await;
    assert_eq!(gone["items"], json!([]));
    let (_, discarded) = call(
        &api,
        Method::GET,
        &format!("/v1/jobs/{job}?target_env_id={env}"),
    )
    .await;
    assert_eq!(discarded["status"], "superseded");
    let (_, audit) = call(
        &api,
        Method::GET,
        &format!("/v1/audit?target_env_id={env}&schedule_id={doomed}"),
    )
    .await;
    assert_eq!(audit["items"][0]["action"], "dlq.discard");

    // A paused schedule's Trigger is refused with the way out.
    let (status, _) = call(
        &api,
        Method::POST,
        &format!("/v1/schedules/{nightly}/pause?target_env_id={env}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    browser
        .goto(&format!("{ui}/schedules/view?id={nightly}"))
        .await
        .unwrap();
    click(
        browser,
        "button[aria-label=\"Trigger billing/nightly now\"]",
    )
    .await;
    browser.wait_text("#status", "is paused").await;
    browser.wait_text("#status", "resume it first").await;
    browser.wait_text("#s-audit-list", "schedule.pause").await;

    // Resumed and triggered, then paused: its pending job is held by the pause.
    for action in ["resume", "trigger", "pause"] {
        let (status, body) = call(
            &api,
            Method::POST,
            &format!("/v1/schedules/{nightly}/{action}?target_env_id={env}"),
        )
        .await;
        assert!(status.is_success(), "{action}: {body}");
    }
    browser
        .goto(&format!("{ui}/jobs?schedule_id={nightly}"))
        .await
        .unwrap();
    browser
        .wait_text("#jobs-table tbody tr .badge.held", "held by pause")
        .await;
    browser
        .screenshot(&shots.join("jobs-held.png"))
        .await
        .unwrap();
    click(browser, "#jobs-table tbody tr a[href*=\"jobs/view\"]").await;
    browser.wait_text("#j-held", "schedule is paused").await;
    browser
        .wait_text("#j-title .badge.held", "held by pause")
        .await;

    // The run charts' axis labels do not overlap, wide and on a phone.
    for (width, height, name) in [(1280, 900, "wide"), (390, 844, "phone")] {
        browser.resize(width, height).await.unwrap();
        browser
            .goto(&format!("{ui}/schedules/view?id={nightly}"))
            .await
            .unwrap();
        browser.wait_visible("#s-runs-week").await;
        for chart in ["#s-runs-week", "#s-runs-day"] {
            let result = overlapping_ticks(browser, chart).await;
            assert!(
                result["count"].as_u64().unwrap() >= 3,
                "{chart} {name}: {result}"
            );
            assert_eq!(result["hits"], json!([]), "{chart} {name}: {result}");
        }
        browser
            .screenshot(&shots.join(format!("schedule-charts-{name}.png")))
            .await
            .unwrap();
    }
    browser.resize(1280, 900).await.unwrap();
}
