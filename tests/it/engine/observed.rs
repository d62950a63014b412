//! What the engine tells an operator through its metrics: each call's duration under the class
//! of what came back, and, when asked for, the counts of each environment (the ones past the
//! cap summed as `other`).

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::{CallClass, Metrics};
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::store::Store;

use super::{Harness, cron, dispatcher};
use crate::raw_http::Reply;
use crate::support::t0;

pub async fn calls_are_measured_by_status_class_and_counted_by_environment(store: Arc<dyn Store>) {
    let h = Harness::new(store.clone()).await;
    let metrics = Arc::new(Metrics::with_env_breakdown(1));
    let engine = Engine::new(
        store,
        dispatcher(h.clock.clone(), StdDuration::from_secs(5)),
        h.clock.clone(),
        EngineConfig::default(),
        metrics.clone(),
    );
    let first = h.env;
    let second = EnvId::new();
    let third = EnvId::new();
    let url = h.target.url();
    h.create_in(first, &url, cron("*/5 * * * *", 0)).await;
    h.create_in(second, &url, cron("*/5 * * * *", 0)).await;
    h.create_in(third, &url, cron("*/5 * * * *", 0)).await;
    // One of the three calls is answered 503; which one depends on the order of the calls.
    h.reply([Reply::status(503)]);
    h.clock.set(t0() + Duration::minutes(5));
    engine.tick().await.unwrap();

    assert_eq!(metrics.calls.count(CallClass::Status2xx), 2);
    assert_eq!(metrics.calls.count(CallClass::Status5xx), 1);
    assert_eq!(metrics.calls.count(CallClass::Timeout), 0);
    let text = metrics.render(None);
    let value = |series: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{series} in\n{text}"))
    };
    // The first environment seen has series of its own; the other two are `other`.
    let fires = |env: &str| value(&format!("sentin8_cron_env_fires_total{{env_id=\"{env}\"}}"));
    let own: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("sentin8_cron_env_fires_total{env_id=\""))
        .filter_map(|l| l.split('"').next())
        .filter(|env| *env != "other")
        .map(str::to_owned)
        .collect();
    assert_eq!(own.len(), 1, "{text}");
    assert_eq!(fires(&own[0]) + fires("other"), 3);
    assert_eq!(fires("other"), 2);
    let outcomes = [
        "sentin8_cron_env_job_successes_total",
        "sentin8_cron_env_job_failures_total",
    ]
    .map(|name| {
        value(&format!("{name}{{env_id=\"{}\"}}", own[0]))
            + value(&format!("{name}{{env_id=\"other\"}}"))
    });
    assert_eq!(outcomes, [2, 1]);
    assert!(
        text.contains("sentin8_cron_call_duration_seconds_count{status_class=\"5xx\"} 1\n"),
        "{text}"
    );
}
