//! The life cycle of jobs, dead letters and the journal, on both backends: the attempt
//! ledger, supersede instead of a second delivery, discarding dead letters (also of deleted
//! schedules), a pause that pauses retries, the readable audit journal, the trigger event,
//! retention driven by an injected clock, and health that says `degraded`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::*;
use serde_json::{Value, json};

use crate::api::{Api, READ};
use crate::raw_http::{RawServer, Recorded, Reply};

mod audit;
mod health;
mod pause;
mod retention;
mod upgrade;

pub use audit::*;
pub use health::*;
pub use pause::*;
pub use retention::*;

/// A target that answers 503 with a body while `failing` is set, and 200 afterwards.
pub async fn switchable_target(failing: Arc<AtomicBool>) -> RawServer {
    RawServer::start(move |_: &Recorded| {
        if failing.load(Ordering::SeqCst) {
            Reply::json(503, json!({"error": "maintenance window"}))
        } else {
            Reply::json(200, json!({"ok": true}))
        }
    })
    .await
}

/// Creates a schedule calling `target` with `max_retries` and triggers it; returns the
/// schedule id and the triggered job's id.
pub async fn triggered(api: &Api, target: &RawServer, max_retries: u32) -> (String, String) {
    triggered_as(api, "ledger", target, max_retries).await
}

/// [`triggered`], for a schedule of the type `schedule_type`.
pub async fn triggered_as(
    api: &Api,
    schedule_type: &str,
    target: &RawServer,
    max_retries: u32,
) -> (String, String) {
    let env = api.env_a;
    let mut body = api.new_schedule(env, schedule_type);
    body["max_retries"] = json!(max_retries);
    body["target_config"] = json!({"baseUrl": target.url()});
    let (status, created, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&api.writer()),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, job, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    (id, job["id"].as_str().unwrap().to_owned())
}

pub async fn get(api: &Api, path: &str) -> (StatusCode, Value) {
    let (status, body, _) = api
        .call(Method::GET, path, Some(&api.token(READ)), None)
        .await;
    (status, body)
}

/// The event types env A's outbox holds, in order.
pub async fn event_types(api: &Api) -> Vec<String> {
    let mut tx = api.store.tenant_begin(api.env_a).await.unwrap();
    tx.outbox_list(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect()
}

/// The double delivery of one occurrence, now refused: a job fails into the DLQ, its dead
/// letter is republished and succeeds, and retrying the original answers 409 naming the
/// successor. Every attempt is in the ledger; the trigger published its event.
pub async fn republish_supersedes_and_retry_is_refused(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let failing = Arc::new(AtomicBool::new(true));
    let target = switchable_target(failing.clone()).await;
    let (schedule_id, original) = triggered(&api, &target, 0).await;
    assert!(
        event_types(&api)
            .await
            .contains(&"io.sentin8.cron.schedule.triggered.v1".to_owned()),
        "the trigger wrote its event in the same transaction"
    );
    api.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(api.engine().tick().await.unwrap().dead_lettered, 1);

    let (status, job) = get(&api, &format!("/v1/jobs/{original}?target_env_id={env}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(job["status"], "failed");
    let attempts = job["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{job}");
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["outcome"], "failed");
    assert_eq!(attempts[0]["http_status"], 503);
    assert_eq!(attempts[0]["error_class"], "status");
    assert!(
        attempts[0]["response_excerpt"]
            .as_str()
            .unwrap()
            .contains("maintenance window")
    );
    assert!(attempts[0]["started_at"].is_string());
    assert!(attempts[0]["duration_ms"].as_i64().unwrap() >= 0);

    let (_, dlq) = get(&api, &format!("/v1/dlq?target_env_id={env}")).await;
    let dlq_id = dlq["items"][0]["id"].as_str().unwrap().to_owned();
    let (status, successor, _) = api
        .call(
            Method::POST,
            &format!("/v1/dlq/{dlq_id}/republish?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{successor}");
    let successor = successor["id"].as_str().unwrap().to_owned();
    let (_, superseded) = get(&api, &format!("/v1/jobs/{original}?target_env_id={env}")).await;
    assert_eq!(superseded["status"], "superseded");
    assert_eq!(superseded["superseded_by"], json!(successor));

    failing.store(false, Ordering::SeqCst);
    api.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(api.engine().tick().await.unwrap().succeeded, 1);
    let (_, done) = get(&api, &format!("/v1/jobs/{successor}?target_env_id={env}")).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["attempts"][0]["outcome"], "succeeded");
    assert_eq!(done["attempts"][0]["response_excerpt"], r#"{"ok":true}"#);

    // Retrying the original would deliver the 20:47 occurrence again: refused.
    let (status, problem, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{original}/retry?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains(&successor),
        "the conflict names the successor: {problem}"
    );
    assert_eq!(
        problem["successor_job_id"],
        json!(successor),
        "and says it as an extension member: {problem}"
    );
    let (status, problem, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{successor}/retry?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("succeeded"));
    assert_eq!(target.requests().len(), 2, "one failed call, one success");

    // The overview's failures are the unresolved ones only.
    let overview = api.engine_overview().await;
    assert!(overview.recent_failures.is_empty(), "{overview:?}");
    let _ = schedule_id;
}

/// Dead letters of a deleted schedule can be read about, not republished, and discarded (with
/// an event and an audit entry); a deleted schedule can be read and listed when asked for.
pub async fn dead_letters_of_deleted_schedules_are_discarded(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let target = switchable_target(Arc::new(AtomicBool::new(true))).await;
    let (schedule_id, _) = triggered(&api, &target, 0).await;
    api.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(api.engine().tick().await.unwrap().dead_lettered, 1);
    let (_, dlq) = get(&api, &format!("/v1/dlq?target_env_id={env}")).await;
    let dlq_id = dlq["items"][0]["id"].as_str().unwrap().to_owned();

    let (status, _, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/schedules/{schedule_id}?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let path = format!("/v1/schedules/{schedule_id}?target_env_id={env}");
    assert_eq!(get(&api, &path).await.0, StatusCode::NOT_FOUND);
    let (status, deleted) = get(&api, &format!("{path}&include_deleted=true")).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["status"], "deleted");
    let (status, listed) = get(
        &api,
        &format!("/v1/schedules?target_env_id={env}&status=deleted"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["items"][0]["id"], json!(schedule_id));
    let (_, live) = get(&api, &format!("/v1/schedules?target_env_id={env}")).await;
    assert!(live["items"].as_array().unwrap().is_empty());

    let (status, problem, _) = api
        .call(
            Method::POST,
            &format!("/v1/dlq/{dlq_id}/republish?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("schedule deleted")
    );

    let discard = format!("/v1/dlq/{dlq_id}?target_env_id={env}");
    let (status, _, _) = api
        .call(Method::DELETE, &discard, Some(&api.token(READ)), None)
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "discarding needs the write scope"
    );
    let elsewhere = format!("/v1/dlq/{dlq_id}?target_env_id={}", api.env_b);
    let (status, _, _) = api
        .call(Method::DELETE, &elsewhere, Some(&api.writer()), None)
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "not visible from another environment"
    );
    let (status, discarded, _) = api
        .call(Method::DELETE, &discard, Some(&api.writer()), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{discarded}");
    assert_eq!(discarded["id"], json!(dlq_id));
    let (status, _, _) = api
        .call(Method::DELETE, &discard, Some(&api.writer()), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        get(&api, &format!("/v1/dlq/{dlq_id}?target_env_id={env}"))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        event_types(&api).await.last().map(String::as_str),
        Some("io.sentin8.cron.dlq.discarded.v1")
    );
    let (_, journal) = get(
        &api,
        &format!("/v1/audit?target_env_id={env}&schedule_id={schedule_id}&limit=1"),
    )
    .await;
    assert_eq!(journal["items"][0]["action"], "dlq.discard");
    assert_eq!(journal["items"][0]["resource_id"], json!(dlq_id));
}

/// Discarding a dead letter ends its occurrence: the original job becomes `superseded` with no
/// successor in the same transaction, a retry of it answers 409 ("discarded") and nothing is
/// delivered again, and the overview no longer lists it among the failures.
pub async fn a_discarded_dead_letter_s_job_is_never_retried(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let failing = switchable_target(Arc::new(AtomicBool::new(true))).await;
    let (_, original) = triggered(&api, &failing, 0).await;
    api.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(api.engine().tick().await.unwrap().dead_lettered, 1);
    assert_eq!(api.engine_overview().await.recent_failures.len(), 1);
    let (_, dlq) = get(&api, &format!("/v1/dlq?target_env_id={env}")).await;
    let dlq_id = dlq["items"][0]["id"].as_str().unwrap().to_owned();

    let (status, discarded, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/dlq/{dlq_id}?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{discarded}");
    let (_, job) = get(&api, &format!("/v1/jobs/{original}?target_env_id={env}")).await;
    assert_eq!(job["status"], "superseded", "{job}");
    assert_eq!(job["superseded_by"], Value::Null, "{job}");

    let (status, problem, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{original}/retry?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("discarded"),
        "{problem}"
    );
    assert!(problem.get("successor_job_id").is_none(), "{problem}");
    api.clock.advance(chrono::Duration::seconds(1));
    let report = api.engine().tick().await.unwrap();
    assert_eq!(report.retried_attempts, 0, "{report:?}");
    assert_eq!(failing.requests().len(), 1, "delivered once, never again");
    let overview = api.engine_overview().await;
    assert!(overview.recent_failures.is_empty(), "{overview:?}");
    assert_eq!(overview.counts.jobs_failed, 0, "{overview:?}");
}

impl Api {
    /// The admin overview's read model of env A.
    pub async fn engine_overview(&self) -> sentin8_cron::core::ops::EnvOverview {
        sentin8_cron::core::ops::Ops::new(self.store.clone())
            .env_overview(self.env_a, 20, 20)
            .await
            .unwrap()
    }
}

#[macro_export]
macro_rules! lifecycle_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::lifecycle as suite;
            $crate::lifecycle_suite!(@tests $make;
                republish_supersedes_and_retry_is_refused,
                dead_letters_of_deleted_schedules_are_discarded,
                a_discarded_dead_letter_s_job_is_never_retried,
                the_attempt_ledger_is_written_with_the_outcome,
                a_paused_schedule_s_retries_wait_until_resumed,
                a_broken_stored_expression_can_be_paused_resumed_patched_and_deleted,
                the_audit_journal_is_readable_and_paged,
                retention_removes_only_what_it_may,
                health_says_degraded_with_its_reasons,
                health_follows_the_relay_s_view_of_the_bus,
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
