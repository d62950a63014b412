//! The live preview of a new schedule and the public HTML shells.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;

use super::{assert_field, enc, fields};
use crate::api::{Api, READ, WRITE};

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
        "one of cron, every or run_at is required",
    );
    let (status, problem, _) = preview(String::from("cron=&run_at=")).await;
    assert_field(
        status,
        &problem,
        "cron",
        "one of cron, every or run_at is required",
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
        // The kit first: `defer` scripts run in document order.
        let kit = body
            .find("/v1/admin/ui/assets/admin-kit.js")
            .expect("the kit script");
        let pages = body
            .find("/v1/admin/ui/assets/admin.js")
            .expect("the pages script");
        assert!(kit < pages, "{page}");
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
        ("admin-kit.js", "text/javascript; charset=utf-8"),
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
        if asset.ends_with(".js") {
            // Data is written as text, never parsed as markup or code.
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "document.write",
            ] {
                assert!(!text.contains(forbidden), "{asset} uses {forbidden}");
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
    let anonymous = api.text("/v1/admin/ui/overview").await;
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
