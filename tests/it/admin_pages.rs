//! The pages about one record and the live overview, in headless Chromium: a schedule's page
//! (timing in words, next fires, callback, payload, run charts read with the keyboard, recent
//! jobs, audit trail, Edit, its policies and why it was paused on failure), a job's page
//! (attempts, next retry, Retry), the server-side type search, and an overview that follows
//! changes made through the API without a reload (its ticker turning red, its window and pause
//! controls). Screenshots land in `test-artifacts/admin/`. Skips without chromium and
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
async fn schedule_and_job_pages_charts_and_a_live_overview() {
    Browser::run_bounded(OVERALL, async |browser| scenario(browser).await).await;
}

async fn create(api: &Api, token: &str, body: Value) -> String {
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(token), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

async fn count(browser: &Browser, css: &str, expected: usize) {
    browser
        .wait(&format!("{expected} × {css}"), || async {
            Ok((browser.find_all(css).await?.len() == expected).then_some(()))
        })
        .await;
}

async fn scenario(browser: &Browser) {
    let shots = artifacts();
    let mut api = Api::start(sqlite_store().await).await;
    let env = api.env_a.to_string();
    let ui = format!("{}/v1/admin/ui", api.base);
    let token = api.writer();

    let mut nightly = api.new_schedule(api.env_a, "nightly-report");
    nightly["cron"] = json!("30 2 * * *");
    nightly["max_retries"] = json!(3);
    // A key besides baseUrl, which an edit of the base URL must keep.
    nightly["target_config"]["region"] = json!("eu-west");
    let target_url = nightly["target_config"]["baseUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let nightly = create(&api, &token, nightly).await;
    let failing =
        RawServer::start(|_: &Recorded| Reply::json(503, json!({"error": "database down"}))).await;
    let mut doomed = api.new_schedule(api.env_a, "doomed-sync");
    doomed["max_retries"] = json!(0);
    doomed["target_config"] = json!({"baseUrl": failing.url()});
    let doomed = create(&api, &token, doomed).await;
    for id in [&nightly, &doomed] {
        let (status, _, _) = api
            .call(
                Method::POST,
                &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
                Some(&token),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1, "{summary:?}");

    // Sign in and pick the environment.
    browser.goto(&format!("{ui}/overview")).await.unwrap();
    let field = browser.wait_visible("#token").await;
    browser.type_text(&field, &token).await.unwrap();
    let submit = browser
        .find("#sign-in-form button[type=submit]")
        .await
        .unwrap();
    browser.click(&submit).await.unwrap();
    let option = browser
        .wait_visible(&format!("#env-select option[value=\"{env}\"]"))
        .await;
    browser.click(&option).await.unwrap();
    // Choosing in the list does not switch yet (arrowing through it must not): "Use" does.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        browser
            .find_all("#content:not([hidden])")
            .await
            .unwrap()
            .is_empty(),
        "the environment switched before Use was pressed"
    );
    browser
        .click(&browser.find("#env-use").await.unwrap())
        .await
        .unwrap();
    browser.wait_visible("#content").await;

    // The schedule's page: what it does, in words, and how it has been running.
    browser
        .goto(&format!("{ui}/schedules/view?id={nightly}"))
        .await
        .unwrap();
    browser
        .wait_text("#s-words", "At 02:30 (Europe/London)")
        .await;
    browser
        .wait_text("#s-callback", "/billing/v1/internal/schedules/run")
        .await;
    browser
        .wait_text("#s-payload", "\"report\": \"nightly\"")
        .await;
    browser
        .wait_text("#s-fires li", "Tue 2030-01-01 02:30 GMT")
        .await;
    browser
        .wait_text("#s-jobs-table tbody tr", "succeeded")
        .await;
    count(browser, "#s-runs-day .hour", 24).await;
    count(browser, "#s-runs-week .hour", 168).await;
    count(browser, "#s-chart-day figure[data-fires=\"1\"]", 1).await;
    count(browser, "#s-runs-day .bar.ok", 1).await;
    let audit = browser.find("#s-audit").await.unwrap();
    browser
        .wait("the audit trail (or its absence) shown", || async {
            let text = browser.text(&audit).await?;
            Ok((text != "–" && !text.is_empty()).then_some(()))
        })
        .await;
    // The whole page, for the docs.
    browser.resize(1280, 1700).await.unwrap();
    browser
        .script("window.scrollTo(0, 0); return true;", json!([]))
        .await
        .unwrap();
    browser
        .screenshot(&shots.join("schedule.png"))
        .await
        .unwrap();
    browser.resize(1280, 900).await.unwrap();
    // The chart reads with the keyboard: one tab stop (the latest hour), arrow keys between
    // hours, the focused hour read out.
    count(browser, "#s-runs-day .hour[tabindex=\"0\"]", 1).await;
    count(browser, "#s-runs-day .hour[tabindex=\"-1\"]", 23).await;
    let latest = browser
        .find("#s-runs-day .hour[tabindex=\"0\"]")
        .await
        .unwrap();
    // Arrow left, then right (WebDriver's key codes), sent to the chart's one tab stop.
    browser.type_text(&latest, "\u{E012}").await.unwrap();
    browser
        .wait_text("#s-runs-day-readout", "23:00 UTC: 0 fires")
        .await;
    count(browser, "#s-runs-day .hour[tabindex=\"0\"]", 1).await;
    let moved = browser
        .script(
            "return document.activeElement.getAttribute('tabindex');",
            json!([]),
        )
        .await
        .unwrap();
    assert_eq!(moved, json!("0"), "focus follows the roving tab stop");
    let focused = browser
        .find("#s-runs-day .hour[tabindex=\"0\"]")
        .await
        .unwrap();
    browser.type_text(&focused, "\u{E014}").await.unwrap();
    browser
        .wait_text(
            "#s-runs-day-readout",
            "00:00 UTC: 1 fire, 0 failures, 0 skips",
        )
        .await;

    // Edit: a bad zone is named under its field; a good change is saved through the API.
    let edit = browser
        .wait_visible("button[aria-label=\"Edit billing/nightly-report\"]")
        .await;
    browser.click(&edit).await.unwrap();
    let zone = browser.wait_visible("#e-timezone").await;
    browser.clear(&zone).await.unwrap();
    browser.type_text(&zone, "Mars/Olympus").await.unwrap();
    let retries = browser.find("#e-max_retries").await.unwrap();
    browser.clear(&retries).await.unwrap();
    browser.type_text(&retries, "5").await.unwrap();
    let save = browser.find("#e-save").await.unwrap();
    browser.click(&save).await.unwrap();
    browser
        .wait_text("#e-timezone-error", "unknown time zone")
        .await;
    browser.clear(&zone).await.unwrap();
    browser.type_text(&zone, "Europe/Paris").await.unwrap();
    browser.click(&save).await.unwrap();
    browser
        .wait_text("#status", "Saved billing/nightly-report.")
        .await;
    browser.wait_text("#s-words", "(Europe/Paris)").await;
    let (_, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{nightly}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(fetched["max_retries"], 5);
    assert_eq!(fetched["timezone"], "Europe/Paris");
    assert_eq!(fetched["payload"], json!({"report": "nightly"}));
    assert_eq!(
        fetched["target_config"],
        json!({"baseUrl": target_url, "region": "eu-west"})
    );

    // Editing the base URL keeps the target's other keys.
    let edit = browser
        .wait_visible("button[aria-label=\"Edit billing/nightly-report\"]")
        .await;
    browser.click(&edit).await.unwrap();
    let base = browser.wait_visible("#e-base_url").await;
    browser.clear(&base).await.unwrap();
    let moved_url = format!("{target_url}/v2");
    browser.type_text(&base, &moved_url).await.unwrap();
    browser.click(&save).await.unwrap();
    browser
        .wait_text("#s-callback", "/billing/v2/v1/internal")
        .await;
    let (_, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{nightly}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        fetched["target_config"],
        json!({"baseUrl": moved_url, "region": "eu-west"})
    );

    // A job's page, from the schedule's recent jobs.
    let link = browser.wait_visible("#s-jobs-table tbody tr a").await;
    browser.click(&link).await.unwrap();
    browser.wait_text("#j-title", "nightly-report").await;
    browser.wait_text("#j-title", "succeeded").await;
    browser.wait_text("#j-attempts-table tbody tr", "2xx").await;

    // The failed job: its attempt's status and response, then a retry with its next attempt.
    let (_, failed, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={env}&schedule_id={doomed}"),
            Some(&token),
            None,
        )
        .await;
    let failed_id = failed["items"][0]["id"].as_str().unwrap().to_owned();
    browser
        .goto(&format!("{ui}/jobs/view?id={failed_id}"))
        .await
        .unwrap();
    browser.wait_text("#j-attempts-table tbody tr", "503").await;
    browser
        .wait_text("#j-attempts-table tbody tr", "database down")
        .await;
    browser.screenshot(&shots.join("job.png")).await.unwrap();
    let retry = browser
        .wait_visible("#j-actions button[aria-label^=\"Retry job\"]")
        .await;
    browser.click(&retry).await.unwrap();
    browser.wait_text("#status", "will be retried now").await;
    browser.wait_text("#j-title", "pending").await;
    browser.wait_text("#j-next-retry", "2030-01-01").await;

    // The type search runs on the server: only matching schedules come back.
    browser.goto(&format!("{ui}/schedules")).await.unwrap();
    browser
        .wait_text("tr[data-type=\"doomed-sync\"]", "doomed")
        .await;
    let search = browser.find("#f-search").await.unwrap();
    browser.type_text(&search, "REPORT").await.unwrap();
    let apply = browser.find("#filters button[type=submit]").await.unwrap();
    browser.click(&apply).await.unwrap();
    browser.wait_gone("tr[data-type=\"doomed-sync\"]").await;
    browser
        .wait_text("tr[data-type=\"nightly-report\"]", "At 02:30")
        .await;

    // The overview keeps itself current: a change through the API shows without a reload.
    browser.goto(&format!("{ui}/overview")).await.unwrap();
    browser.wait_text("#c-schedules-active", "2").await;
    browser.wait_text("#c-win-fires", "2").await;
    browser.wait_text("#c-win-failures", "0").await;
    browser.wait_text("#ticker-status", "Ticking").await;
    count(browser, "#ov-runs .hour", 24).await;
    browser
        .script("window.sentin8NoReload = true; return true;", json!([]))
        .await
        .unwrap();
    create(&api, &token, api.new_schedule(api.env_a, "weekly-digest")).await;
    browser.wait_text("#c-schedules-active", "3").await;
    // The ticker stalls (the clock runs past three tick intervals with no tick): red.
    api.clock.advance(chrono::Duration::minutes(10));
    browser.wait_text("#ticker-status", "Stalled").await;
    let ticker = browser.find("#ticker-status").await.unwrap();
    let class = browser.attribute(&ticker, "class").await.unwrap();
    assert!(class.is_some_and(|c| c.contains("bad")));
    let kept = browser
        .script("return window.sentin8NoReload === true;", json!([]))
        .await
        .unwrap();
    assert_eq!(kept, json!(true), "the page was reloaded");

    // A week's window, then pause and resume.
    browser
        .script(
            "const w = document.getElementById('ov-window'); w.value = '168'; \
             w.dispatchEvent(new Event('change')); return true;",
            json!([]),
        )
        .await
        .unwrap();
    count(browser, "#ov-runs .hour", 168).await;
    // (Shown upper-cased by the style sheet.)
    browser.wait_text("#win-title", "LAST 7 DAYS").await;
    browser
        .screenshot(&shots.join("overview-live.png"))
        .await
        .unwrap();
    let pause = browser.find("#ov-pause").await.unwrap();
    browser.click(&pause).await.unwrap();
    browser.wait_text("#ov-updated", "Updates paused.").await;
    assert_eq!(
        browser.attribute(&pause, "aria-pressed").await.unwrap(),
        Some("true".into())
    );
    // While paused, a change through the API stays off the page (past one refresh period);
    // on resume it shows.
    create(&api, &token, api.new_schedule(api.env_a, "paused-digest")).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let active = browser.find("#c-schedules-active").await.unwrap();
    assert_eq!(browser.text(&active).await.unwrap(), "3");
    browser.click(&pause).await.unwrap();
    browser.wait_text("#ov-updated", "refreshes every").await;
    browser.wait_text("#c-schedules-active", "4").await;

    // Phone width: the schedule's page stacks, the charts scale.
    browser.resize(390, 844).await.unwrap();
    browser
        .goto(&format!("{ui}/schedules/view?id={nightly}"))
        .await
        .unwrap();
    count(browser, "#s-runs-day .hour", 24).await;
    // The tick labels are drawn at least 9 CSS pixels high, every other one hidden.
    let smallest = browser
        .script(
            "const ticks = [...document.querySelectorAll('#s-runs-day .tick')] \
               .filter((t) => getComputedStyle(t).display !== 'none'); \
             return ticks.length ? Math.min(...ticks.map((t) => t.getBoundingClientRect().height)) : 0;",
            json!([]),
        )
        .await
        .unwrap();
    assert!(
        smallest.as_f64().unwrap() >= 9.0,
        "tick labels {smallest} px high on a phone"
    );
    browser
        .screenshot(&shots.join("schedule-phone.png"))
        .await
        .unwrap();
    browser.resize(1280, 900).await.unwrap();

    // A schedule's policies on its page: each field, the description that includes them, the
    // stored call as its next run, and no more fires than its runs left.
    let mut throttled = api.new_schedule(api.env_a, "throttled-sync");
    throttled["cron"] = json!("*/15 * * * *");
    throttled["timezone"] = json!("UTC");
    throttled["max_jitter"] = json!("2m");
    throttled["catchup_window"] = json!("30m");
    throttled["start_at"] = json!("2030-02-01T00:00:00Z");
    throttled["end_at"] = json!("2030-03-01T00:00:00Z");
    throttled["remaining_runs"] = json!(4);
    let throttled = create(&api, &token, throttled).await;
    let (_, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{throttled}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    let next_run: chrono::DateTime<chrono::Utc> =
        fetched["next_run_at"].as_str().unwrap().parse().unwrap();
    browser
        .goto(&format!("{ui}/schedules/view?id={throttled}"))
        .await
        .unwrap();
    browser
        .wait_text("#s-words", "each call up to 2m after its instant (jitter)")
        .await;
    browser.wait_text("#s-words", "4 runs left").await;
    browser.wait_text("#s-overlap", "skip").await;
    browser.wait_text("#s-catchup", "30m").await;
    browser.wait_text("#s-jitter", "up to 2m").await;
    browser.wait_text("#s-start", "2030-02-01 00:00 UTC").await;
    browser.wait_text("#s-end", "2030-03-01 00:00 UTC").await;
    browser.wait_text("#s-pause-on-failure", "no").await;
    browser.wait_text("#s-remaining", "4").await;
    browser
        .wait_text(
            "#s-next-run",
            &next_run.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
        .await;
    count(browser, "#s-fires li", 4).await;
    browser.wait_text("#s-fires li .jitter", "+").await;
    browser
        .screenshot(&shots.join("schedule-policies.png"))
        .await
        .unwrap();

    // A schedule paused by a dead letter says why.
    let mut fragile = api.new_schedule(api.env_a, "fragile-sync");
    fragile["max_retries"] = json!(0);
    fragile["pause_on_failure"] = json!(true);
    fragile["target_config"] = json!({"baseUrl": failing.url()});
    let fragile = create(&api, &token, fragile).await;
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{fragile}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    api.engine().tick().await.unwrap();
    browser
        .goto(&format!("{ui}/schedules/view?id={fragile}"))
        .await
        .unwrap();
    browser.wait_text("#s-title", "paused").await;
    browser.wait_text("#s-pause-on-failure", "yes").await;
    browser
        .wait_text("#s-paused-reason", "landed in the dead-letter queue")
        .await;

    // Backfill from the schedule's page: a range reaching into the future is refused under
    // its field; a past one creates its jobs, recorded as a backfill, under the overlap policy
    // chosen (`skip`: the oldest runs, the others are skipped on the record).
    let mut hourly = api.new_schedule(api.env_a, "hourly-export");
    hourly["cron"] = json!("0 * * * *");
    hourly["timezone"] = json!("UTC");
    let hourly = create(&api, &token, hourly).await;
    browser
        .goto(&format!("{ui}/schedules/view?id={hourly}"))
        .await
        .unwrap();
    let backfill = browser
        .wait_visible("button[aria-label=\"Backfill past occurrences of billing/hourly-export\"]")
        .await;
    browser.click(&backfill).await.unwrap();
    let from = browser.wait_visible("#b-from").await;
    browser
        .type_text(&from, "2029-12-31T21:00:00Z")
        .await
        .unwrap();
    let to = browser.find("#b-to").await.unwrap();
    browser
        .type_text(&to, "2031-01-01T00:00:00Z")
        .await
        .unwrap();
    let run = browser.find("#b-run").await.unwrap();
    browser.click(&run).await.unwrap();
    browser.wait_text("#b-to-error", "is in the future").await;
    browser.clear(&to).await.unwrap();
    browser
        .type_text(&to, "2029-12-31T23:00:00Z")
        .await
        .unwrap();
    let skip = browser
        .find("#b-overlap option[value=\"skip\"]")
        .await
        .unwrap();
    browser.click(&skip).await.unwrap();
    browser.click(&run).await.unwrap();
    browser
        .wait_text(
            "#status",
            "Backfilled billing/hourly-export under skip: 3 occurrence(s); 1 started, 2 skipped",
        )
        .await;
    let (_, jobs, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?schedule_id={hourly}&target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    let items = jobs["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{jobs}");
    assert!(items.iter().all(|j| j["backfill"] == true), "{jobs}");
    let skipped = items.iter().filter(|j| j["status"] == "skipped").count();
    assert_eq!(skipped, 2, "{jobs}");

    // Signing out stops the overview's refresh: no read is made after it.
    browser.goto(&format!("{ui}/overview")).await.unwrap();
    browser.wait_text("#ov-updated", "refreshes every").await;
    browser
        .click(&browser.find("#sign-out").await.unwrap())
        .await
        .unwrap();
    browser.wait_visible("#token").await;
    let reads = "return performance.getEntriesByType('resource') \
                 .filter((e) => e.name.includes('/v1/admin/overview')).length;";
    let before = browser.script(reads, json!([])).await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(browser.script(reads, json!([])).await.unwrap(), before);
    browser.wait_text("#status", "Signed out.").await;

    // A server that stops answering: the ticker turns unknown, not "Ticking".
    let field = browser.wait_visible("#token").await;
    browser.type_text(&field, &token).await.unwrap();
    browser
        .click(
            &browser
                .find("#sign-in-form button[type=submit]")
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    let option = browser
        .wait_visible(&format!("#env-select option[value=\"{env}\"]"))
        .await;
    browser.click(&option).await.unwrap();
    browser
        .click(&browser.find("#env-use").await.unwrap())
        .await
        .unwrap();
    browser.wait_text("#ov-updated", "refreshes every").await;
    api.stop().await.unwrap();
    browser.wait_text("#ticker-status", "Unknown").await;
    browser
        .wait_text("#ticker-detail", "No answer from the server")
        .await;
    let ticker = browser.find("#ticker-status").await.unwrap();
    let class = browser.attribute(&ticker, "class").await.unwrap();
    assert!(class.is_some_and(|c| c.contains("bad")));
}
