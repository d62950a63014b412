//! One `serve` process: the HTTP server, the ticker loop and the outbox relay over one store,
//! with one shutdown. Built by `sentin8-cron serve` from flags and the
//! environment, and directly by tests on port 0.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::watch;

use crate::core::clock::Clock;
use crate::core::dispatch::Dispatcher;
use crate::core::engine::{Engine, EngineConfig};
use crate::core::metrics::Metrics;
use crate::core::ops::Ops;
use crate::core::relay::{Relay, RelayOptions, Sink};
use crate::core::retention::{Retention, RetentionConfig};
use crate::core::snapshot::StatsSnapshot;
use crate::core::statistics;
use crate::core::store::Store;
use crate::core::target::TargetPolicy;
use crate::server::auth::Authenticator;
use crate::server::listener::{HEALTH_PATH, ListenerLimits, limit_requests, serve};
use crate::server::rate::RateLimits;
use crate::server::system::{HealthRules, health_report, metrics_text};
use crate::server::{AppState, app};

/// Everything a serving process is made of.
pub struct Service {
    pub store: Arc<dyn Store>,
    pub auth: Arc<dyn Authenticator>,
    pub dispatcher: Arc<dyn Dispatcher>,
    pub clock: Arc<dyn Clock>,
    pub engine: EngineConfig,
    pub metrics: Arc<Metrics>,
    pub tls: Option<RustlsConfig>,
    /// How long in-flight requests and the in-flight tick get after a shutdown signal.
    pub drain: Duration,
    /// Runs the ticker loop in this process (tests of the API alone may turn it off).
    pub run_ticker: bool,
    /// Runs the outbox relay in this process, publishing to this sink.
    pub relay: Option<(Arc<dyn Sink>, RelayOptions)>,
    /// Extra routes merged under the same layers (the API and the admin pages are always there).
    pub extra_routes: Router,
    /// Timeouts and the connection cap of the listeners.
    pub limits: ListenerLimits,
    /// The counts health and metrics report, refreshed in the background.
    pub stats: Arc<StatsSnapshot>,
    /// Serves `/metrics` on this listener instead of the main one.
    pub metrics_listener: Option<std::net::TcpListener>,
    /// The egress policy base URLs are checked against at create and update.
    pub target_policy: Arc<dyn TargetPolicy>,
    /// The public keys of signed calls, served at `/.well-known/jwks.json` when given.
    pub jwks: Option<serde_json::Value>,
    /// When health reports `degraded`.
    pub health: HealthRules,
    /// Removes rows past their retention in the background (`None`: keeps everything).
    pub retention: Option<RetentionConfig>,
    /// At most this many jobs of one environment wait their turn (backfills beyond: 409).
    pub waiting_cap: u64,
    /// Where the attempts' spans are exported (OTLP/HTTP), when an endpoint is set.
    pub spans: Option<crate::telemetry::OtlpExporter>,
}

impl Service {
    /// The application state the handlers share.
    pub fn state(&self) -> Arc<AppState> {
        Arc::new(AppState {
            ops: Ops::new(self.store.clone())
                .with_target_policy(self.target_policy.clone())
                .with_waiting_cap(self.waiting_cap),
            store: self.store.clone(),
            auth: self.auth.clone(),
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
            tick_interval: self.engine.tick_interval,
            started_at: self.clock.now(),
            stats: self.stats.clone(),
            metrics_elsewhere: self.metrics_listener.is_some(),
            jwks: self.jwks.clone().map(Arc::new),
            health: self.health,
            rate: Arc::new(RateLimits::new(self.limits.rate)),
            http: Arc::default(),
        })
    }

    /// Serves on `listener` until `shutdown` resolves; then stops accepting, lets in-flight
    /// requests and the in-flight tick finish (bounded by `drain`), and returns.
    pub async fn run(
        mut self,
        listener: std::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };

        if let Err(err) = self.store.signals_listen().await {
            tracing::warn!(error = %err, "cross-process change notifications unavailable; relying on polling");
        }

        if self.run_ticker {
            // Rows loaded before this start (a bulk enroll, a restore) are planned for as they
            // are from the first burst on.
            statistics::refresh(self.store.as_ref()).await;
        }
        let ticker = self.run_ticker.then(|| {
            let mut engine = Engine::new(
                self.store.clone(),
                self.dispatcher.clone(),
                self.clock.clone(),
                self.engine.clone(),
                self.metrics.clone(),
            );
            if let Some(exporter) = &self.spans {
                engine = engine.with_spans(Arc::new(exporter.clone()));
            }
            let spans = self.spans.clone();
            let rx = stop_rx.clone();
            tokio::spawn(async move {
                engine.run(stopped(rx)).await;
                // The spans of the last attempts go out before the process ends.
                if let Some(exporter) = spans {
                    exporter.flush().await;
                }
                tracing::info!("ticker stopped");
            })
        });

        let relay = self.relay.take().map(|(sink, options)| {
            let relay = Relay::new(
                self.store.clone(),
                sink,
                self.clock.clone(),
                options,
                self.metrics.clone(),
            );
            let rx = stop_rx.clone();
            tokio::spawn(async move {
                relay.run(stopped(rx)).await;
                tracing::info!("outbox relay stopped");
            })
        });

        // Where the ticker runs, the planner's statistics follow its bursts and bulk loads.
        let statistics = self.run_ticker.then(|| {
            let (store, clock) = (self.store.clone(), self.clock.clone());
            let rx = stop_rx.clone();
            tokio::spawn(async move {
                statistics::keep_fresh(store.as_ref(), clock.as_ref(), stopped(rx)).await;
            })
        });

        // Retention only deletes rows nothing needs: stopping it mid-pass loses nothing.
        let retention = self.retention.map(|config| {
            let retention = Retention::new(self.store.clone(), self.clock.clone(), config);
            let rx = stop_rx.clone();
            tokio::spawn(async move { retention.run(stopped(rx)).await })
        });

        // Health and metrics read counts from memory; the first ones exist before serving.
        self.stats
            .refresh(self.store.as_ref(), self.clock.as_ref())
            .await;
        let counter = {
            let (stats, store, clock) =
                (self.stats.clone(), self.store.clone(), self.clock.clone());
            let rx = stop_rx.clone();
            tokio::spawn(async move {
                stats.run(store.as_ref(), clock.as_ref(), stopped(rx)).await;
            })
        };
        // Health's database probe, once a second whatever the rate of requests.
        let prober = {
            let (stats, store, clock) =
                (self.stats.clone(), self.store.clone(), self.clock.clone());
            let rx = stop_rx.clone();
            tokio::spawn(async move {
                stats
                    .probe_every_second(store.as_ref(), clock.as_ref(), stopped(rx))
                    .await;
            })
        };

        let state = self.state();
        let drain = self.drain;
        let metrics = self.metrics_listener.take().map(|listener| {
            // The operator's address: health with its detail, on connections of its own, so
            // probes pass while clients fill the main listener.
            let router = Router::new()
                .route(
                    "/metrics",
                    get(|State(state): State<Arc<AppState>>| async move { metrics_text(&state) }),
                )
                .route(
                    HEALTH_PATH,
                    get(|State(state): State<Arc<AppState>>| async move {
                        health_report(&state, true).await
                    }),
                )
                .with_state(state.clone());
            let rx = stop_rx.clone();
            let limits = self.limits;
            tokio::spawn(
                async move { serve(listener, router, None, limits, stopped(rx), drain).await },
            )
        });
        let router = limit_requests(app(state, self.extra_routes), &self.limits);
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        });
        let served = serve(
            listener,
            router,
            self.tls,
            self.limits,
            stopped(stop_rx),
            drain,
        )
        .await;
        if let Some(metrics) = metrics {
            match tokio::time::timeout(drain, metrics).await {
                Ok(Ok(Err(err))) => tracing::warn!(error = %err, "the metrics listener failed"),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!("the metrics listener did not stop within the drain timeout")
                }
            }
        }
        // A refresh and a probe only read, and an ANALYZE cut short changes nothing: stopping
        // them mid-way loses nothing.
        counter.abort();
        prober.abort();
        if let Some(statistics) = statistics {
            statistics.abort();
        }
        if let Some(retention) = retention {
            retention.abort();
        }

        // The ticker and the relay finish the round in flight, bounded by the drain timeout;
        // the ticker's calls in flight get their job timeout and the time to record them.
        let engine_drain = ticker_drain(drain, &self.engine);
        for (name, task, bound) in [
            ("tick", ticker, engine_drain),
            ("relay round", relay, drain),
        ] {
            if let Some(task) = task
                && tokio::time::timeout(bound, task).await.is_err()
            {
                tracing::warn!("the in-flight {name} did not finish within the drain timeout");
            }
        }
        served
    }
}

/// How long shutdown waits for the ticker: at least the lead (fires claimed ahead are still
/// called at their instants) plus a call's job timeout plus the lease margin (the time to
/// record its outcome), so an answered call is recorded rather than recovered and delivered
/// again by another instance.
fn ticker_drain(drain: Duration, engine: &EngineConfig) -> Duration {
    drain.max(engine.lead() + engine.job_timeout + crate::core::engine::RECORD_MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ticker_drains_for_a_whole_call_and_its_record() {
        let engine = EngineConfig {
            job_timeout: Duration::from_secs(30),
            claim_ahead: Duration::from_secs(10),
            ..EngineConfig::default()
        };
        let bound = ticker_drain(Duration::from_secs(30), &engine);
        assert!(bound > engine.job_timeout, "{bound:?}");
        assert_eq!(
            bound,
            Duration::from_secs(10) + engine.job_timeout + crate::core::engine::RECORD_MARGIN
        );
        // A longer drain setting is kept.
        let long = Duration::from_secs(120);
        assert_eq!(ticker_drain(long, &engine), long);
    }
}
