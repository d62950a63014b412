//! The admin pages end to end in headless Chromium: the real `Service` on port 0 over SQLite,
//! a real target for the callbacks, and the engine ticked by hand. Signs in with a pasted
//! token, picks an environment, creates a schedule through the form (with the live preview and
//! its policies), pauses, resumes and triggers it, sees its job succeed, republishes a dead
//! letter, retries a failed job and deletes a schedule. Screenshots of every page land in
//! `test-artifacts/admin/`. Skips without chromium and chromedriver unless
//! `SENTIN8_CRON_REQUIRE_BROWSER=1`.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::api::{ADMIN, Api};
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::sqlite_store;
use crate::webdriver::Browser;

/// The whole scenario's bound: a stuck browser fails the test instead of hanging the suite.
const OVERALL: Duration = Duration::from_secs(240);

pub fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test-artifacts/admin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_pages_work_in_a_real_browser() {
    Browser::run_bounded(OVERALL, async |browser| scenario(browser).await).await;
}

async fn scenario(browser: &Browser) {
    let shots = artifacts();
    let api = Api::start(sqlite_store().await).await;
    let env = api.env_a.to_string();
    let ui = format!("{}/v1/admin/ui", api.base);
    let token = api.writer();

    // Signed out, a page offers only the sign-in form.
    browser.goto(&format!("{ui}/overview")).await.unwrap();
    let field = browser.wait_visible("#token").await;
    assert!(
        browser
            .find_all("#content:not([hidden])")
            .await
            .unwrap()
            .is_empty()
    );
    browser
        .screenshot(&shots.join("sign-in.png"))
        .await
        .unwrap();
    browser.type_text(&field, &token).await.unwrap();
    let submit = browser
        .find("#sign-in-form button[type=submit]")
        .await
        .unwrap();
    browser.click(&submit).await.unwrap();
    browser
        .wait_text("#status", "Signed in as svc-billing")
        .await;

    // Two environments granted: choose one.
    let option = browser
        .wait_visible(&format!("#env-select option[value=\"{env}\"]"))
        .await;
    browser.click(&option).await.unwrap();
    browser
        .click(&browser.find("#env-use").await.unwrap())
        .await
        .unwrap();
    browser.wait_visible("#content").await;
    browser.wait_text("#c-schedules-active", "0").await;
    browser.wait_text("#ticker-status", "Ticking").await;

    // The form: a wrong expression names its field, a good one previews the next fires.
    browser.goto(&format!("{ui}/schedules/new")).await.unwrap();
    browser.wait_visible("#new-schedule").await;
    let fill = |id: &'static str, text: String| async move {
        let input = browser.find(&format!("#{id}")).await.unwrap();
        browser.clear(&input).await.unwrap();
        browser.type_text(&input, &text).await.unwrap();
    };
    fill("domain", "billing".into()).await;
    fill("schedule_type", "nightly-report".into()).await;
    fill("base_url", format!("{}/billing", api.target.url())).await;
    fill("cron", "61 * * * *".into()).await;
    browser
        .wait_text("#cron-error", "minute: 61 is out of range 0-59")
        .await;
    let cron = browser.find("#cron").await.unwrap();
    assert_eq!(
        browser
            .attribute(&cron, "aria-invalid")
            .await
            .unwrap()
            .as_deref(),
        Some("true")
    );
    fill("timezone", "Mars/Olympus".into()).await;
    fill("cron", "30 2 * * *".into()).await;
    browser
        .wait_text("#timezone-error", "unknown time zone")
        .await;
    fill("timezone", "Europe/London".into()).await;
    browser
        .wait_text("#preview-fires li", "Tue 2030-01-01 02:30 GMT")
        .await;
    browser
        .wait_text("#preview-fires li:nth-child(5)", "Sat 2030-01-05 02:30 GMT")
        .await;
    assert!(
        !browser
            .displayed(&browser.find("#cron-error").await.unwrap())
            .await
            .unwrap()
    );
    // Without a jitter there is nothing after the fires: no stray "null".
    let preview = browser.find("#preview").await.unwrap();
    let shown = browser.text(&preview).await.unwrap();
    assert!(!shown.contains("null"), "{shown}");
    // The policies: a jitter longer than the interval is named under its field; the runs
    // left bound the preview; the window of a jitter is said (the calls need the id).
    fill("max_jitter", "25h".into()).await;
    browser
        .wait_text("#max_jitter-error", "longer than the schedule's interval")
        .await;
    fill("max_jitter", "30s".into()).await;
    browser.wait_text("#preview-jitter", "up to 30s").await;
    let fires_shown = |expected: usize| async move {
        browser
            .wait(&format!("{expected} previewed fires"), || async {
                Ok((browser.find_all("#preview-fires li").await?.len() == expected).then_some(()))
            })
            .await;
    };
    fill("remaining_runs", "2".into()).await;
    fires_shown(2).await;
    fill("remaining_runs", "1000".into()).await;
    fires_shown(5).await;
    fill("catchup_window", "2h".into()).await;
    fill("payload", "{\"report\": \"nightly\"}".into()).await;
    browser
        .screenshot(&shots.join("new-schedule.png"))
        .await
        .unwrap();
    let create = browser.find("#create").await.unwrap();
    browser.click(&create).await.unwrap();

    // Created: back on the list, with its next fires on the London clock.
    browser
        .wait_text("#status", "Created billing/nightly-report")
        .await;
    assert!(
        browser
            .current_url()
            .await
            .unwrap()
            .ends_with("/v1/admin/ui/schedules")
    );
    let row = "tr[data-type=\"nightly-report\"]";
    browser
        .wait_text(&format!("{row} ol.fires li"), "Tue 2030-01-01 02:30 GMT")
        .await;
    browser.wait_text(&format!("{row} .badge"), "active").await;
    let (_, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(list["items"][0]["payload"], json!({"report": "nightly"}));
    assert_eq!(list["items"][0]["max_jitter"], "30s");
    assert_eq!(list["items"][0]["catchup_window"], "2h");
    assert_eq!(list["items"][0]["remaining_runs"], 1000);
    assert_eq!(list["items"][0]["overlap"], "skip");
    assert_eq!(list["items"][0]["pause_on_failure"], false);
    assert_eq!(list["items"][0]["created_by"], "svc-billing");
    let schedule_id = list["items"][0]["id"].as_str().unwrap().to_owned();

    // A second schedule, made through the API, whose callbacks fail into the DLQ.
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let mut doomed = api.new_schedule(api.env_a, "doomed");
    doomed["max_retries"] = json!(0);
    doomed["target_config"] = json!({"baseUrl": failing.url()});
    let (status, doomed, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(doomed))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{doomed}");
    let doomed_id = doomed["id"].as_str().unwrap().to_owned();

    // Pause and resume from the row.
    let click_row_button = |label: String| async move {
        let button = browser
            .wait_visible(&format!("button[aria-label=\"{label}\"]"))
            .await;
        browser.click(&button).await.unwrap();
    };
    click_row_button("Pause billing/nightly-report".into()).await;
    browser
        .wait_text("#status", "Paused billing/nightly-report.")
        .await;
    browser.wait_text(&format!("{row} .badge"), "paused").await;
    browser
        .wait_text(
            &format!("{row} td[data-label=\"Next fires\"]"),
            "if resumed now",
        )
        .await;
    let (_, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{schedule_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(fetched["status"], "paused");
    browser
        .screenshot(&shots.join("schedules-paused.png"))
        .await
        .unwrap();
    click_row_button("Resume billing/nightly-report".into()).await;
    browser
        .wait_text("#status", "Resumed billing/nightly-report.")
        .await;
    browser.wait_text(&format!("{row} .badge"), "active").await;

    // Trigger it; the engine runs the job against the real target.
    click_row_button("Trigger billing/nightly-report now".into()).await;
    browser
        .wait_text("#status", "Triggered billing/nightly-report: job")
        .await;
    browser
        .screenshot(&shots.join("schedules.png"))
        .await
        .unwrap();
    let (_, failing_job, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{doomed_id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(failing_job["status"], "pending");
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1, "{summary:?}");
    let calls = api.target.requests();
    assert_eq!(calls.len(), 1, "the trigger called the target once");
    assert!(calls[0].path.starts_with("/billing"), "{}", calls[0].path);

    // The jobs page shows the succeeded job, with the schedule's name.
    browser.goto(&format!("{ui}/jobs")).await.unwrap();
    browser
        .wait_text("#jobs-table tbody tr", "nightly-report")
        .await;
    browser.wait_text("#jobs-table tbody tr", "succeeded").await;
    browser.wait_text("#jobs-table tbody tr", "failed").await;
    browser.screenshot(&shots.join("jobs.png")).await.unwrap();

    // The DLQ page republishes the failed call: a fresh pending job, the entry gone.
    browser.goto(&format!("{ui}/dlq")).await.unwrap();
    browser.wait_text("#dlq-table tbody tr", "doomed").await;
    browser
        .wait_text("#dlq-table tbody tr", "proxy-back status 500")
        .await;
    browser.screenshot(&shots.join("dlq.png")).await.unwrap();
    click_row_button("Republish the dead letter of billing/doomed".into()).await;
    browser
        .wait_text("#status", "Republished billing/doomed: job")
        .await;
    browser.wait_visible("#dlq-table-empty").await;
    let (_, dlq, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(dlq["items"], json!([]));
    let (_, pending, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={env}&schedule_id={doomed_id}&status=pending"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(pending["items"].as_array().unwrap().len(), 1);

    // It fails again; retry the failed job from the jobs page, filtered to failures.
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1, "{summary:?}");
    browser
        .goto(&format!("{ui}/jobs?status=failed&schedule_id={doomed_id}"))
        .await
        .unwrap();
    let retry = browser
        .wait_visible("#jobs-table button[aria-label^=\"Retry job\"]")
        .await;
    browser.click(&retry).await.unwrap();
    browser.wait_text("#status", "will be retried now").await;
    let (_, pending, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={env}&schedule_id={doomed_id}&status=pending"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(pending["items"].as_array().unwrap().len(), 1);
    assert_eq!(failing.requests().len(), 2);

    // The overview adds it all up.
    browser.goto(&format!("{ui}/overview")).await.unwrap();
    browser.wait_text("#c-schedules-active", "2").await;
    browser.wait_text("#c-jobs-pending", "1").await;
    // The window's failures are the failed jobs (all of them fall in this hour).
    let (_, failed, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={env}&status=failed"),
            Some(&token),
            None,
        )
        .await;
    // The first failure was superseded by its republished job and the second retried, so
    // none may be left; the overview must agree with the API either way.
    let failed = failed["items"].as_array().unwrap().len();
    browser
        .wait_text("#c-win-failures", &failed.to_string())
        .await;
    browser.wait_text("#c-dlq", "0").await;
    browser
        .wait_text("#next-table tbody tr", "Tue 2030-01-01 02:00 GMT")
        .await;
    // Both failures are resolved (one superseded by its republished job, one retried), so
    // the overview offers no retry that would deliver an occurrence twice.
    browser.wait_visible("#failures-table-empty").await;
    browser
        .screenshot(&shots.join("overview.png"))
        .await
        .unwrap();

    // Delete asks for a second click.
    browser.goto(&format!("{ui}/schedules")).await.unwrap();
    click_row_button("Delete billing/doomed".into()).await;
    browser.wait_text("#status", "Press “Confirm”").await;
    click_row_button("Confirm: Delete billing/doomed".into()).await;
    browser
        .wait_text("#status", "Deleted billing/doomed.")
        .await;
    browser.wait_gone("tr[data-type=\"doomed\"]").await;

    // Phone width: the same page, stacked.
    browser.resize(390, 844).await.unwrap();
    browser.goto(&format!("{ui}/schedules")).await.unwrap();
    browser
        .wait_text(&format!("{row} ol.fires li"), "02:30 GMT")
        .await;
    browser
        .screenshot(&shots.join("schedules-phone.png"))
        .await
        .unwrap();
    browser
        .script(
            "document.getElementById('schedules-table').scrollIntoView(); return true;",
            json!([]),
        )
        .await
        .unwrap();
    browser
        .screenshot(&shots.join("schedules-phone-table.png"))
        .await
        .unwrap();
    browser.resize(1280, 900).await.unwrap();

    // Sign out; an admin token names its environment by id.
    let sign_out = browser.wait_visible("#sign-out").await;
    browser.click(&sign_out).await.unwrap();
    let field = browser.wait_visible("#token").await;
    let admin = Api::sign(&api.claims(ADMIN, &[]));
    browser.type_text(&field, &admin).await.unwrap();
    let submit = browser
        .find("#sign-in-form button[type=submit]")
        .await
        .unwrap();
    browser.click(&submit).await.unwrap();
    // The picker offers the environments that hold schedules; any other is typed in.
    browser.wait_text("#pick-env-text", "paste the id").await;
    browser
        .wait_text(
            &format!("#env-select option[value=\"{env}\"]"),
            "1 schedule",
        )
        .await;
    browser
        .script(
            "const s = document.getElementById('env-select'); s.value = 'other'; \
             s.dispatchEvent(new Event('change')); return true;",
            json!([]),
        )
        .await
        .unwrap();
    let input = browser.wait_visible("#env-input").await;
    browser.type_text(&input, "not-a-uuid").await.unwrap();
    browser
        .click(&browser.find("#env-use").await.unwrap())
        .await
        .unwrap();
    browser.wait_text("#status", "is a UUID").await;
    browser.clear(&input).await.unwrap();
    browser.type_text(&input, &env).await.unwrap();
    browser
        .click(&browser.find("#env-use").await.unwrap())
        .await
        .unwrap();
    browser.wait_text(&format!("{row} .badge"), "active").await;

    // A token the server refuses sends the operator back to sign in.
    browser
        .script(
            "sessionStorage.setItem('sentin8-cron.admin.token', 'expired'); return true;",
            json!([]),
        )
        .await
        .unwrap();
    browser.goto(&format!("{ui}/jobs")).await.unwrap();
    browser.wait_visible("#token").await;
    browser.wait_text("#status", "The token was refused").await;
}
