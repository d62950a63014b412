//! The egress policy wired in: a write-scoped tenant cannot make sentin8-cron send anything to
//! an origin outside the policy. Create and update refuse such a base URL with a field error;
//! a name that passes the policy but resolves to a refused address is refused at dispatch,
//! before any connection, and dead-lettered on its first attempt.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use sentin8_cron::callback::egress::EgressPolicy;
use sentin8_cron::callback::signing::CallSigner;
use sentin8_cron::callback::{DispatchConfig, HttpDispatcher, Secret, TokenSettings};
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::{EnvId, JobId, ScheduleId};
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops, OpsError};
use sentin8_cron::core::store::{DlqQuery, Store};
use sentin8_cron::core::target::Target;
use sentin8_cron::daemon::Service;
use sentin8_cron::server::auth::{ClaimRules, Hs256Key, SharedSecretAuthenticator};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::api::{AUDIENCE, Api, ISSUER, SECRET, WRITE};
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

/// A production-like policy: only the platform's services, over https.
fn platform_policy() -> EgressPolicy {
    EgressPolicy::parse(&[], Some("svc.example.com"), false).unwrap()
}

/// The API on port 0 with HS256 authentication and `policy`.
struct Server {
    base: String,
    env: EnvId,
    token: String,
    _stop: oneshot::Sender<()>,
}

impl Server {
    async fn start(store: Arc<dyn Store>, policy: EgressPolicy) -> Self {
        let clock = Arc::new(ManualClock::new(t0()));
        let auth = SharedSecretAuthenticator::new(
            Hs256Key::new(SECRET).unwrap(),
            ClaimRules {
                issuer: Some(ISSUER.into()),
                audience: Some(AUDIENCE.into()),
                ..ClaimRules::default()
            },
            clock.clone(),
        );
        let service = Service {
            store,
            auth: Arc::new(auth),
            dispatcher: Arc::new(HttpDispatcher::new(&DispatchConfig::default()).unwrap()),
            clock: clock.clone(),
            engine: EngineConfig::default(),
            metrics: Arc::new(Metrics::default()),
            tls: None,
            drain: Duration::from_secs(2),
            run_ticker: false,
            relay: None,
            extra_routes: axum::Router::new(),
            target_policy: Arc::new(policy),
            jwks: None,
            health: Default::default(),
            retention: None,
            waiting_cap: sentin8_cron::core::ops::DEFAULT_WAITING_CAP,
            spans: None,
            limits: Default::default(),
            stats: Default::default(),
            metrics_listener: None,
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel();
        tokio::spawn(service.run(listener, async move {
            let _ = rx.await;
        }));
        let env = EnvId::new();
        let now = clock.now().timestamp();
        let token = Api::sign(&json!({
            "sub": "svc-billing", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600,
            "scope": WRITE, "envs": [env.to_string()],
        }));
        Self {
            base,
            env,
            token,
            _stop: tx,
        }
    }

    async fn call(&self, method: Method, path: &str, body: Value) -> (StatusCode, Value) {
        let response = reqwest::Client::new()
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    fn schedule(&self, schedule_type: &str, target_config: Value) -> Value {
        json!({
            "target_env_id": self.env, "domain": "billing", "schedule_type": schedule_type,
            "cron": "0 2 * * *", "target_config": target_config,
        })
    }
}

/// The fields of a problem document's errors.
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

/// The URLs a tenant was able to point its schedules at before the policy, in the spellings
/// that reach metadata services, private networks and loopback.
const REFUSED: &[&str] = &[
    "http://169.254.169.254",
    "https://169.254.169.254/latest/meta-data",
    "https://[fd00:ec2::254]",
    "https://metadata.google.internal",
    "https://10.0.0.1:6379",
    "https://localhost:5432",
    "https://2130706433",
    "https://0x7f000001",
    "https://0177.0.0.1",
    "https://127.1",
    "https://[::ffff:127.0.0.1]",
    "https://[::1]",
    "https://100.64.0.1",
    "https://attacker.example",
    "http://billing.svc.example.com",
    "https://billing.svc.example.com:8443",
    "https://svc.example.com",
];

#[tokio::test]
async fn a_write_scoped_tenant_cannot_point_a_schedule_outside_the_policy() {
    let server = Server::start(crate::support::sqlite_store().await, platform_policy()).await;
    for (i, url) in REFUSED.iter().enumerate() {
        let body = server.schedule(&format!("job-{i}"), json!({"baseUrl": url}));
        let (status, problem) = server.call(Method::POST, "/v1/schedules", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {problem}");
        assert_eq!(
            fields(&problem),
            ["target_config.baseUrl"],
            "{url}: {problem}"
        );
        assert!(!problem.to_string().contains("Bearer"), "{url}: {problem}");
    }

    // The platform's own services are accepted...
    let body = server.schedule(
        "allowed",
        json!({"baseUrl": "https://billing.svc.example.com/api"}),
    );
    let (status, created) = server.call(Method::POST, "/v1/schedules", body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");

    // ...and cannot be moved outside the policy afterwards.
    let path = format!(
        "/v1/schedules/{}?target_env_id={}",
        created["id"].as_str().unwrap(),
        server.env
    );
    let (status, problem) = server
        .call(
            Method::PATCH,
            &path,
            json!({"target_config": {"baseUrl": "http://169.254.169.254"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(fields(&problem), ["target_config.baseUrl"]);

    // A target_config is capped at 8 KiB.
    let padding = "x".repeat(8 * 1024);
    let body = server.schedule(
        "padded",
        json!({"baseUrl": "https://billing.svc.example.com", "note": padding}),
    );
    let (status, problem) = server.call(Method::POST, "/v1/schedules", body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(fields(&problem), ["target_config"]);
}

fn run_request(base_url: &str) -> RunRequest {
    let schedule_id = ScheduleId::new();
    let job_id = JobId::new();
    RunRequest {
        schedule_id,
        job_id,
        domain: "billing".into(),
        schedule_type: "nightly".into(),
        env_id: EnvId::new(),
        payload: json!({}),
        attempt: 1,
        scheduled_for: t0(),
        correlation_id: schedule_id.to_string(),
        idempotency_key: format!("schedule:{schedule_id}:{job_id}"),
        base_url: Target::from_stored(json!({"baseUrl": base_url}))
            .base_url()
            .cloned()
            .map_err(Clone::clone),
        fence: None,
        trace: None,
        prepared: None,
    }
}

/// A loopback listener allow-listed by name (`http://localhost:{port}`) while loopback
/// addresses are not allowed, and a dispatcher carrying a token, for that policy.
async fn target_behind_localhost() -> (RawServer, String, HttpDispatcher) {
    let target = RawServer::start(|_: &Recorded| Reply::json(200, json!({"ok": true}))).await;
    let port = target.url().rsplit(':').next().unwrap().to_owned();
    let base_url = format!("http://localhost:{port}");
    let policy = EgressPolicy::parse(std::slice::from_ref(&base_url), None, false).unwrap();
    let config = DispatchConfig {
        token: TokenSettings::Static(Secret::new("must-not-leak")),
        job_timeout: Duration::from_secs(10),
        egress: policy,
        ..DispatchConfig::default()
    };
    let signer = Arc::new(CallSigner::generate_dev("https://cron.test").unwrap());
    let dispatcher = HttpDispatcher::new(&config).unwrap().signed(signer);
    (target, base_url, dispatcher)
}

#[tokio::test]
async fn a_name_resolving_to_a_refused_address_is_refused_at_dispatch() {
    let (target, base_url, dispatcher) = target_behind_localhost().await;
    // The name passes the URL check (an entry names it exactly)...
    let policy = EgressPolicy::parse(std::slice::from_ref(&base_url), None, false).unwrap();
    assert!(
        policy
            .check_url(&url::Url::parse(&base_url).unwrap())
            .is_ok()
    );
    // ...but it resolves to loopback, which no entry names: nothing is sent.
    let err = dispatcher.run(&run_request(&base_url)).await.unwrap_err();
    assert_eq!(err, DispatchError::EgressRefused);
    assert_eq!(err.to_string(), "target refused by the egress policy");
    assert_eq!(target.connections(), 0);

    // An IP-literal target outside the policy is refused before any resolution.
    let literal = target.url();
    let err = dispatcher.run(&run_request(&literal)).await.unwrap_err();
    assert_eq!(err, DispatchError::EgressRefused);
    assert_eq!(target.connections(), 0);
}

#[tokio::test]
async fn a_refused_target_is_dead_lettered_on_its_first_attempt() {
    let (target, base_url, dispatcher) = target_behind_localhost().await;
    let store = crate::support::sqlite_store().await;
    let clock = Arc::new(ManualClock::new(t0()));
    let env = EnvId::new();
    let actor = Actor {
        name: "tester".into(),
        correlation_id: None,
        now: t0(),
    };
    let policy = EgressPolicy::parse(std::slice::from_ref(&base_url), None, false).unwrap();
    let ops = Ops::new(store.clone()).with_target_policy(Arc::new(policy));
    let spec = ScheduleDecl {
        schedule_type: "nightly".into(),
        cron: Some("* * * * *".into()),
        max_retries: Some(5),
        ..ScheduleDecl::default()
    }
    .validate(t0())
    .unwrap();
    let create = |base: &str| CreateSchedule {
        domain: "billing".into(),
        spec: spec.clone(),
        target: Target::validate(&json!({"baseUrl": base})).unwrap(),
    };
    // The operations refuse what the policy refuses, whoever calls them.
    let refused = ops
        .schedule_create(env, create("http://127.0.0.1:9"), &actor)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, OpsError::Invalid(errors) if errors[0].field == "target_config.baseUrl"),
        "{refused:?}"
    );
    let schedule = ops
        .schedule_create(env, create(&base_url), &actor)
        .await
        .unwrap();

    let engine = Engine::new(
        store.clone(),
        Arc::new(dispatcher),
        clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    clock.set(schedule.next_run_at.unwrap());
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1, "{summary:?}");
    let mut tx = store.tenant_begin(env).await.unwrap();
    let dlq = tx
        .dlq_list(&DlqQuery {
            limit: 10,
            ..DlqQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(dlq.len(), 1);
    assert_eq!(
        dlq[0].last_error,
        "configuration: target refused by the egress policy"
    );
    assert_eq!(target.connections(), 0);
}
