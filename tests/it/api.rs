//! The HTTP API end to end: the real `Service` on 127.0.0.1 port 0 over a real store, real
//! HS256 tokens, and a real HTTP target. Run on SQLite and PostgreSQL.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::snapshot::StatsSnapshot;
use sentin8_cron::core::store::Store;
use sentin8_cron::daemon::Service;
use sentin8_cron::server::auth::{ClaimRules, Hs256Key, SharedSecretAuthenticator};
use sentin8_cron::server::listener::ListenerLimits;
use sentin8_cron::server::system::HealthRules;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::engine::dispatcher;
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

mod access;
mod calendars;
mod describe;
mod generated_client;
mod jobs;
mod labels;
mod oncall;
mod pause_note;
mod schedules;
mod schemathesis;
mod system;

pub use access::*;
pub use calendars::*;
pub use describe::*;
pub use generated_client::*;
pub use jobs::*;
pub use labels::*;
pub use oncall::*;
pub use pause_note::*;
pub use schedules::*;
pub use schemathesis::*;
pub use system::*;

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
    /// The counts health and metrics serve; refreshed only when a test says so.
    pub stats: Arc<StatsSnapshot>,
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
        Self::start_listening(
            store,
            extra,
            run_ticker,
            relay,
            ListenerLimits::default(),
            None,
        )
        .await
    }

    /// A server with these listener limits and, optionally, `/metrics` on its own listener.
    pub async fn start_listening(
        store: Arc<dyn Store>,
        extra: axum::Router,
        run_ticker: bool,
        relay: Option<(
            Arc<dyn sentin8_cron::core::relay::Sink>,
            sentin8_cron::core::relay::RelayOptions,
        )>,
        limits: ListenerLimits,
        metrics_listener: Option<std::net::TcpListener>,
    ) -> Self {
        Self::start_configured(
            store,
            extra,
            run_ticker,
            relay,
            limits,
            metrics_listener,
            HealthRules::default(),
        )
        .await
    }

    /// A server whose health follows these rules.
    pub async fn start_with_health(store: Arc<dyn Store>, health: HealthRules) -> Self {
        Self::start_configured(
            store,
            axum::Router::new(),
            false,
            None,
            ListenerLimits::default(),
            None,
            health,
        )
        .await
    }

    async fn start_configured(
        store: Arc<dyn Store>,
        extra: axum::Router,
        run_ticker: bool,
        relay: Option<(
            Arc<dyn sentin8_cron::core::relay::Sink>,
            sentin8_cron::core::relay::RelayOptions,
        )>,
        limits: ListenerLimits,
        metrics_listener: Option<std::net::TcpListener>,
        health: HealthRules,
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
        // Refreshed by the test alone: an hour is longer than any test.
        let stats = Arc::new(StatsSnapshot::new(StdDuration::from_secs(3600)));
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
            limits,
            stats: stats.clone(),
            metrics_listener,
            // Development mode (the loopback target) plus the names these tests use.
            target_policy: Arc::new(
                sentin8_cron::callback::egress::EgressPolicy::parse(
                    &["https://billing.internal".into()],
                    None,
                    true,
                )
                .unwrap(),
            ),
            jwks: None,
            health,
            retention: None,
            waiting_cap: sentin8_cron::core::ops::DEFAULT_WAITING_CAP,
            spans: None,
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
            stats,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Recomputes the counts health and metrics serve, as the background refresh does.
    pub async fn refresh_counts(&self) {
        self.stats
            .refresh(self.store.as_ref(), self.clock.as_ref())
            .await;
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

    /// The text of an unauthenticated `GET path` (a page, a scrape), whatever its status.
    pub async fn text(&self, path: &str) -> String {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("the server answers")
            .text()
            .await
            .expect("a text body")
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

pub(crate) fn problem_type(body: &Value) -> &str {
    body["type"].as_str().unwrap_or_default()
}
#[macro_export]
macro_rules! api_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::api as suite;
            $crate::api_suite!(@tests $make;
                schedule_lifecycle,
                a_pause_says_who_when_and_why_until_the_resume,
                labels_are_declared_selected_and_acted_on_in_bulk,
                calendars_are_written_named_and_shown_through_the_api,
                a_schedule_is_described_with_its_next_calls_jobs_and_counts,
                a_generated_client_walks_a_schedule_through_its_life,
                schemathesis_finds_nothing_the_document_and_the_server_disagree_on,
                the_scrape_passes_promtool,
                one_shot_schedules_are_created_and_validated,
                invalid_requests_are_400_naming_every_field,
                policy_fields_are_validated_by_field,
                intervals_are_created_shown_and_patched_through_the_api,
                bad_credentials_are_401_with_a_challenge,
                the_policy_decides_scopes_and_environments,
                other_tenants_resources_are_404,
                jobs_and_the_dlq_through_the_api,
                a_paused_schedule_refuses_a_trigger_and_holds_its_jobs,
                the_schedule_list_includes_deleted_ones_on_request,
                lists_page_with_cursors,
                health_and_metrics,
                the_openapi_document_matches_the_routes,
                the_openapi_document_is_valid_and_true,
                bodyless_actions_take_an_empty_body_whatever_its_media_type,
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
