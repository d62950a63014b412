//! The admin pages' JSON endpoints and HTML shells, through the real `Service` on port 0: the
//! same authentication, policy and tenant transactions as the API. Run on SQLite and
//! PostgreSQL.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::{ADMIN, Api, READ, WRITE};
use crate::raw_http::{RawServer, Recorded, Reply};

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| e["field"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A 400 naming exactly `field` (among possibly others), with a message containing `text`.
fn assert_field(status: StatusCode, problem: &Value, field: &str, text: &str) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let error = problem["errors"]
        .as_array()
        .and_then(|errors| errors.iter().find(|e| e["field"] == field))
        .unwrap_or_else(|| panic!("no error for {field}: {problem}"));
    assert!(
        error["message"].as_str().unwrap_or_default().contains(text),
        "{field}: {problem}"
    );
}

fn enc(text: &str) -> String {
    text.replace(' ', "%20")
        .replace('/', "%2F")
        .replace('+', "%2B")
}

pub async fn admin_endpoints_need_a_token_a_scope_and_an_environment(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let a = api.env_a;
    let with_env = [
        "/v1/admin/overview",
        "/v1/admin/schedules",
        "/v1/admin/preview?cron=*%20*%20*%20*%20*",
    ];
    let join = |path: &str, env: &str| {
        let separator = if path.contains('?') { '&' } else { '?' };
        format!("{path}{separator}target_env_id={env}")
    };
    let mut all: Vec<String> = vec!["/v1/admin/envs".to_owned()];
    all.extend(with_env.iter().map(|p| join(p, &a.to_string())));

    // No token, or a bad one: 401 with the challenge.
    for path in &all {
        let (status, problem, headers) = api.call(Method::GET, path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {problem}");
        assert!(headers.contains_key("www-authenticate"), "{path}");
        let (status, _, _) = api.call(Method::GET, path, Some("garbage"), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // A token without any of the three scopes: 403, whether or not an environment is named.
    let nothing = Api::sign(&api.claims("openid profile", &[a]));
    for path in all.iter().map(String::as_str).chain(with_env) {
        let (status, problem, _) = api.call(Method::GET, path, Some(&nothing), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {problem}");
        assert_eq!(problem["type"], "urn:sentin8-cron:problem:forbidden");
    }
    // target_env_id is required: a 400 naming it, never a fallback to the token's list.
    let writer = api.writer();
    for path in with_env {
        let (status, problem, _) = api.call(Method::GET, path, Some(&writer), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {problem}");
        assert_eq!(fields(&problem), ["target_env_id"], "{path}");
    }
    // An environment the token does not grant: 403, even for a writer.
    let stranger = EnvId::new().to_string();
    for path in with_env {
        let (status, problem, _) = api
            .call(Method::GET, &join(path, &stranger), Some(&writer), None)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains("environment"),
            "{problem}"
        );
    }
    // The read scope is enough for every admin read; admins reach any environment.
    let reader = api.token(READ);
    let admin = Api::sign(&api.claims(ADMIN, &[]));
    for path in &all {
        let (status, body, _) = api.call(Method::GET, path, Some(&reader), None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    for path in with_env {
        let (status, body, _) = api
            .call(Method::GET, &join(path, &stranger), Some(&admin), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    // Unknown parameters are refused, as on the API.
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={a}&colour=blue"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

pub async fn envs_lists_what_the_token_grants(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let mut granted = vec![api.env_a.0.to_string(), api.env_b.0.to_string()];
    granted.sort();

    let (status, reader, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&api.token(READ)), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{reader}");
    assert_eq!(reader["subject"], "svc-billing");
    assert_eq!(reader["all"], false);
    assert_eq!(reader["can_write"], false);
    assert_eq!(reader["dev"], false);
    let mut envs: Vec<String> = reader["envs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    envs.sort();
    assert_eq!(envs, granted);

    let (_, writer, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&api.writer()), None)
        .await;
    assert_eq!(writer["can_write"], true);
    assert_eq!(writer["all"], false);

    let admin = Api::sign(&api.claims(ADMIN, &[]));
    let (status, all, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(all["all"], true);
    assert_eq!(all["envs"], json!([]));
    assert_eq!(all["can_write"], true);

    let (_, none, _) = api
        .call(
            Method::GET,
            "/v1/admin/envs",
            Some(&Api::sign(&api.claims(READ, &[]))),
            None,
        )
        .await;
    assert_eq!(none["envs"], json!([]), "a reader of nothing");
}

pub async fn overview_counts_failures_and_next_fires(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let token = api.writer();
    // Two active schedules (London at 02:00, and hourly in UTC), one paused.
    api.create(env, "nightly").await;
    let mut hourly = api.new_schedule(env, "hourly");
    hourly["cron"] = json!("15 * * * *");
    hourly["timezone"] = json!("UTC");
    let (status, _, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(hourly))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let paused = api.create(env, "paused").await;
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{paused}/pause?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // One that fails straight into the dead-letter queue.
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let mut doomed = api.new_schedule(env, "doomed");
    doomed["max_retries"] = json!(0);
    doomed["target_config"] = json!({"baseUrl": failing.url()});
    let (_, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(doomed))
        .await;
    let doomed_id = created["id"].as_str().unwrap().to_owned();
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{doomed_id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1);

    let (status, overview, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={env}"),
            Some(&api.token(READ)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    assert_eq!(overview["env_id"], json!(env));
    assert_eq!(overview["now"], "2030-01-01T00:00:00Z");
    assert_eq!(
        overview["counts"],
        json!({
            "schedules_active": 3, "schedules_paused": 1, "schedules_completed": 0,
            "jobs_pending": 0, "jobs_running": 0, "jobs_succeeded": 0, "jobs_failed": 1,
            "jobs_skipped": 0, "dlq_entries": 1,
        })
    );
    assert_eq!(overview["ticker"]["status"], "ok");
    assert_eq!(overview["ticker"]["tick_interval_seconds"], 60);
    let failures = overview["recent_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["schedule_type"], "doomed");
    assert_eq!(failures[0]["domain"], "billing");
    assert_eq!(failures[0]["schedule_id"], json!(doomed_id));
    assert_eq!(failures[0]["error"], "proxy-back status 500");
    // Soonest first, each on its own clock; the paused one is not listed.
    let next: Vec<(&str, &str)> = overview["next_fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["schedule_type"].as_str().unwrap(),
                n["fire"]["display"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        next,
        [
            ("hourly", "Tue 2030-01-01 00:15 UTC"),
            ("nightly", "Tue 2030-01-01 02:00 GMT"),
            ("doomed", "Tue 2030-01-01 02:00 GMT"),
        ]
    );
    assert_eq!(
        overview["next_fires"][1]["fire"]["at"],
        "2030-01-01T02:00:00Z"
    );
    assert_eq!(
        overview["next_fires"][1]["fire"]["local"],
        "2030-01-01T02:00:00+00:00"
    );

    // Another environment sees none of it.
    let (_, other, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(other["counts"]["schedules_active"], 0);
    assert_eq!(other["counts"]["dlq_entries"], 0);
    assert_eq!(other["recent_failures"], json!([]));
    assert_eq!(other["next_fires"], json!([]));
    assert_eq!(failing.requests().len(), 1);
}

pub async fn schedules_show_their_next_fires_in_their_zone(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let token = api.writer();
    api.create(env, "nightly").await;
    let mut new_york = api.new_schedule(env, "spring");
    new_york["cron"] = json!("30 2 10 3 *");
    new_york["timezone"] = json!("America/New_York");
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(new_york))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let spring = created["id"].as_str().unwrap().to_owned();
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{spring}/pause?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut once = api.new_schedule(env, "cutover");
    once.as_object_mut().unwrap().remove("cron");
    once.as_object_mut().unwrap().remove("timezone");
    once["run_at"] = json!("2030-06-01T12:00:00Z");
    let (status, _, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(once))
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let reader = api.token(READ);
    let (status, page, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["now"], "2030-01-01T00:00:00Z");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    // The API's fields are all there, plus the fires.
    let nightly = &items[0];
    assert_eq!(nightly["schedule_type"], "nightly");
    assert_eq!(nightly["cron"], "0 2 * * *");
    assert_eq!(nightly["next_run_at"], "2030-01-01T02:00:00Z");
    let displays: Vec<&str> = nightly["upcoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["display"].as_str().unwrap())
        .collect();
    assert_eq!(
        displays,
        [
            "Tue 2030-01-01 02:00 GMT",
            "Wed 2030-01-02 02:00 GMT",
            "Thu 2030-01-03 02:00 GMT"
        ]
    );
    // A paused schedule shows what it would do if resumed: 02:30 does not exist on
    // 10 March 2030 in New York, so the fire moves to the end of the gap.
    let spring_row = &items[1];
    assert_eq!(spring_row["status"], "paused");
    assert_eq!(
        spring_row["upcoming"][0],
        json!({
            "at": "2030-03-10T07:00:00Z",
            "local": "2030-03-10T03:00:00-04:00",
            "display": "Sun 2030-03-10 03:00 EDT",
            "dst": "shifted",
        })
    );
    assert_eq!(spring_row["upcoming"][1]["at"], "2031-03-10T06:30:00Z");
    assert_eq!(spring_row["upcoming"][1]["dst"], Value::Null);
    let cutover = &items[2];
    assert_eq!(cutover["kind"], "once");
    assert_eq!(cutover["upcoming"].as_array().unwrap().len(), 1);
    assert_eq!(cutover["upcoming"][0]["at"], "2030-06-01T12:00:00Z");

    // The API's filters and paging apply, and the number of fires is chosen.
    let (_, paused, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&status=paused&fires=5"),
            Some(&reader),
            None,
        )
        .await;
    let paused = paused["items"].as_array().unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["upcoming"].as_array().unwrap().len(), 5);
    let (_, first, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&limit=2&fires=0"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(first["items"][0]["upcoming"], json!([]));
    let cursor = first["next_cursor"].as_str().unwrap();
    let (_, second, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&limit=2&cursor={cursor}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(second["items"][0]["schedule_type"], "cutover");
    for (query, field) in [
        ("fires=21", "fires"),
        ("limit=1000", "limit"),
        ("status=deleted", "status"),
        ("status=sleeping", "status"),
    ] {
        let (status, problem, _) = api
            .call(
                Method::GET,
                &format!("/v1/admin/schedules?target_env_id={env}&{query}"),
                Some(&reader),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {problem}");
        assert_eq!(fields(&problem), [field], "{query}");
    }
    // Deleted schedules are gone from the list, as on the API.
    let (status, _, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/schedules/{spring}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, after, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(after["items"].as_array().unwrap().len(), 2);
    // And env B is empty.
    let (_, other, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={}", api.env_b),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(other["items"], json!([]));
}

pub async fn preview_validates_like_creation_and_names_the_field(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let reader = api.token(READ);
    let preview = |query: String| {
        let path = format!("/v1/admin/preview?target_env_id={}&{query}", api.env_a);
        let reader = reader.clone();
        let api = &api;
        async move { api.call(Method::GET, &path, Some(&reader), None).await }
    };

    let (status, ok, _) = preview(format!(
        "cron={}&timezone={}&count=3",
        enc("0 2 * * *"),
        enc("Europe/London")
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(ok["kind"], "cron");
    assert_eq!(ok["cron"], "0 2 * * *");
    assert_eq!(ok["timezone"], "Europe/London");
    assert_eq!(ok["fixed_time"], true);
    assert_eq!(ok["now"], "2030-01-01T00:00:00Z");
    let at: Vec<&str> = ok["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["at"].as_str().unwrap())
        .collect();
    assert_eq!(
        at,
        [
            "2030-01-01T02:00:00Z",
            "2030-01-02T02:00:00Z",
            "2030-01-03T02:00:00Z"
        ]
    );
    let (_, default_count, _) = preview(format!("cron={}", enc("*/15 * * * *"))).await;
    assert_eq!(default_count["fires"].as_array().unwrap().len(), 5);
    assert_eq!(default_count["fixed_time"], false);
    assert_eq!(default_count["timezone"], "UTC");

    // The DST policies, on a wall time that does not exist on 10 March 2030 in New York.
    let spring = format!(
        "cron={}&timezone={}&count=1",
        enc("30 2 10 3 *"),
        enc("America/New_York")
    );
    let (_, shifted, _) = preview(spring.clone()).await;
    assert_eq!(shifted["fires"][0]["at"], "2030-03-10T07:00:00Z");
    assert_eq!(shifted["fires"][0]["dst"], "shifted");
    assert_eq!(shifted["fires"][0]["display"], "Sun 2030-03-10 03:00 EDT");
    let (_, skipped, _) = preview(format!("{spring}&on_dst_gap=skip&on_dst_repeat=twice")).await;
    assert_eq!(skipped["fires"][0]["at"], "2031-03-10T06:30:00Z");

    // A one-shot instant.
    let (status, once, _) = preview("run_at=2030-06-01T12:00:00Z".to_owned()).await;
    assert_eq!(status, StatusCode::OK, "{once}");
    assert_eq!(once["kind"], "once");
    assert_eq!(once["fires"][0]["at"], "2030-06-01T12:00:00Z");

    // Every problem names its field, with the same messages as creating a schedule.
    let (status, problem, _) = preview(format!("cron={}", enc("61 * * * *"))).await;
    assert_field(status, &problem, "cron", "minute: 61 is out of range 0-59");
    let (status, problem, _) = preview(format!("cron={}", enc("0 0 30 2 *"))).await;
    assert_field(status, &problem, "cron", "no future fire");
    let (status, problem, _) = preview(format!("cron={}", enc("0 2 * *"))).await;
    assert_field(status, &problem, "cron", "expected 5 fields");
    let (status, problem, _) = preview(String::from("count=3")).await;
    assert_field(
        status,
        &problem,
        "cron",
        "one of cron or run_at is required",
    );
    let (status, problem, _) = preview(String::from("cron=&run_at=")).await;
    assert_field(
        status,
        &problem,
        "cron",
        "one of cron or run_at is required",
    );
    let (status, problem, _) = preview(format!(
        "cron={}&timezone={}",
        enc("0 2 * * *"),
        enc("Mars/Olympus")
    ))
    .await;
    assert_field(status, &problem, "timezone", "unknown time zone");
    let (status, problem, _) =
        preview(format!("cron={}&on_dst_gap=sideways", enc("0 2 * * *"))).await;
    assert_field(status, &problem, "on_dst_gap", "shift, skip");
    let (status, problem, _) =
        preview(format!("cron={}&on_dst_repeat=thrice", enc("0 2 * * *"))).await;
    assert_field(status, &problem, "on_dst_repeat", "once, twice");
    for count in ["0", "21"] {
        let (status, problem, _) =
            preview(format!("cron={}&count={count}", enc("0 2 * * *"))).await;
        assert_field(status, &problem, "count", "between 1 and 20");
    }
    let (status, problem, _) = preview("run_at=2020-01-01T00:00:00Z".to_owned()).await;
    assert_field(status, &problem, "run_at", "");
    let (status, problem, _) = preview("run_at=tomorrow".to_owned()).await;
    assert_field(status, &problem, "run_at", "RFC 3339");
    let (status, problem, _) =
        preview("run_at=2030-06-01T12:00:00Z&timezone=Europe%2FLondon".to_owned()).await;
    assert_field(status, &problem, "timezone", "only applies to cron");
    let (status, problem, _) = preview(format!(
        "cron={}&run_at=2030-06-01T12:00:00Z",
        enc("0 2 * * *")
    ))
    .await;
    assert_field(status, &problem, "run_at", "cannot be combined with cron");
    // A base URL, when given, is checked by the same parser as creating a schedule.
    for (bad, message) in [
        ("http://127.0.0.1:99999", "invalid port number"),
        ("ftp://billing.internal", "not http or https"),
        ("http://billing.internal/%0D%0Ax", "control characters"),
        ("http://svc@billing.internal", "credentials"),
    ] {
        let (status, problem, _) =
            preview(format!("cron={}&base_url={}", enc("0 2 * * *"), enc(bad))).await;
        assert_field(status, &problem, "target_config.baseUrl", message);
    }
    let (status, ok, _) = preview(format!(
        "cron={}&base_url={}",
        enc("0 2 * * *"),
        enc("http://127.0.0.1:9999/billing")
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    // Several at once: all listed.
    let (status, problem, _) = preview(format!(
        "cron={}&timezone=Nowhere&on_dst_gap=x&count=99",
        enc("0 25 * * *")
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut got = fields(&problem);
    got.sort();
    assert_eq!(
        got,
        ["count", "cron", "on_dst_gap", "timezone"],
        "{problem}"
    );
    // The preview changes nothing.
    let mut tx = api.store.tenant_begin(api.env_a).await.unwrap();
    assert!(tx.audit_list(10).await.unwrap().is_empty());
}

pub async fn pages_are_public_shells_with_a_strict_policy(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    for page in ["overview", "schedules", "schedules/new", "jobs", "dlq"] {
        let response = api
            .http
            .get(format!("{}/v1/admin/ui/{page}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{page}");
        let headers = response.headers().clone();
        assert_eq!(headers["content-type"], "text/html; charset=utf-8");
        let csp = headers["content-security-policy"].to_str().unwrap();
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ] {
            assert!(csp.contains(directive), "{page}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert!(headers.contains_key("x-request-id"));
        let body = response.text().await.unwrap();
        assert!(body.contains(&format!("data-page=\"{page}\"")), "{page}");
        assert!(body.contains("/v1/admin/ui/assets/admin.js"));
        assert!(body.contains("aria-live=\"polite\""));
        assert!(!body.contains("<script>"), "no inline script");
    }
    // The bare prefix leads to the overview.
    let response = api
        .http
        .get(format!("{}/v1/admin/ui", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.url().path().ends_with("/v1/admin/ui/overview"));

    for (asset, content_type) in [
        ("admin.js", "text/javascript; charset=utf-8"),
        ("admin.css", "text/css; charset=utf-8"),
    ] {
        let response = api
            .http
            .get(format!("{}/v1/admin/ui/assets/{asset}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], content_type);
        let text = response.text().await.unwrap();
        assert!(text.len() > 1000, "{asset}");
        if asset == "admin.js" {
            // Data is written as text, never parsed as markup or code.
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "document.write",
            ] {
                assert!(!text.contains(forbidden), "admin.js uses {forbidden}");
            }
            // And it talks to this origin only.
            assert!(!text.contains("http://") && !text.contains("https://"));
        }
    }
    let (status, problem, _) = api
        .call(Method::GET, "/v1/admin/ui/secrets", None, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(problem["type"], "urn:sentin8-cron:problem:not-found");
    // The shells are the same for everyone: no data, whatever the caller sends.
    let anonymous = api
        .http
        .get(format!("{}/v1/admin/ui/overview", api.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let with_token = api
        .http
        .get(format!("{}/v1/admin/ui/overview", api.base))
        .bearer_auth(api.token(WRITE))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(anonymous, with_token);
}

#[macro_export]
macro_rules! admin_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::admin as suite;
            $crate::admin_suite!(@tests $make;
                admin_endpoints_need_a_token_a_scope_and_an_environment,
                envs_lists_what_the_token_grants,
                overview_counts_failures_and_next_fires,
                schedules_show_their_next_fires_in_their_zone,
                preview_validates_like_creation_and_names_the_field,
                pages_are_public_shells_with_a_strict_policy,
            );
        }
    };
    (@tests $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((store, _guard)) = $make.await else { return };
                suite::$name(store).await;
            }
        )+
    };
}
