//! Calls made ready ahead of their instants: a fire claimed ahead has its call built and signed
//! at its hand-off, and its instant sends that call (a signature issued at the hand-off, over
//! the very body received). A call made ready goes only with its own attempt, and not once it
//! is old: then it is signed again.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use sentin8_cron::callback::HttpDispatcher;
use sentin8_cron::callback::signing::CallSigner;
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::dispatch::Dispatcher;
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::JobStatus;
use serde_json::json;

use super::{ISSUER, ok_target, run_request, static_config, verify};
use crate::engine::{Harness, cron, settled_until};
use crate::support::{dev_egress, t0};

#[tokio::test]
async fn a_call_made_ready_is_sent_as_made_for_its_attempt_while_fresh() {
    let target = ok_target().await;
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let clock = Arc::new(ManualClock::new(t0()));
    let dispatcher = HttpDispatcher::with_clock(&static_config(dev_egress()), clock.clone())
        .unwrap()
        .signed(signer.clone());
    let made_at = clock.now();
    let mut request = run_request(&target.url());
    let prepared = dispatcher
        .prepare(&request)
        .expect("a call to an allowed target");

    // Five seconds later its instant: sent as made, signed when made.
    clock.advance(Duration::seconds(5));
    request.prepared = Some(prepared.clone());
    dispatcher.run(&request).await.unwrap();
    // The same attempt made at its instant, for comparison.
    request.prepared = None;
    dispatcher.run(&request).await.unwrap();
    // Another attempt of the job does not take the first one's call.
    let mut retry = request.clone();
    retry.attempt = 2;
    retry.prepared = Some(prepared.clone());
    dispatcher.run(&retry).await.unwrap();
    // A minute after it was made, the call is signed again.
    clock.advance(Duration::seconds(61));
    request.prepared = Some(prepared);
    dispatcher.run(&request).await.unwrap();

    let calls = target.requests();
    assert_eq!(calls.len(), 4);
    let iat: Vec<i64> = calls
        .iter()
        .map(|call| {
            verify(call, &signer.jwks(), &target.url()).unwrap()["iat"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let at = |secs: i64| (made_at + Duration::seconds(secs)).timestamp();
    assert_eq!(iat, [at(0), at(5), at(5), at(66)]);
    let (ready, now) = (&calls[0], &calls[1]);
    assert_eq!(
        ready.body, now.body,
        "the envelope made ready is the one made at the call"
    );
    for header in [
        "idempotency-key",
        "x-correlation-id",
        "content-type",
        "authorization",
    ] {
        assert_eq!(ready.header(header), now.header(header), "{header}");
    }
    assert_eq!(calls[2].json()["attempt"], json!(2));
}

#[tokio::test]
async fn a_fire_claimed_ahead_sends_the_call_signed_at_its_hand_off() {
    let store = crate::support::sqlite_store().await;
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(4),
        claim_ahead: StdDuration::from_secs(10),
        ..EngineConfig::default()
    };
    let mut h = Harness::with_config(store, config.clone()).await;
    let signer = Arc::new(CallSigner::generate_dev(ISSUER).unwrap());
    let dispatcher = crate::engine::dispatcher(h.clock.clone(), StdDuration::from_secs(4));
    let dispatcher = (*dispatcher).clone().signed(signer.clone());
    h.engine = Engine::new(
        h.store.clone(),
        Arc::new(dispatcher),
        h.clock.clone(),
        config,
        Arc::new(Metrics::default()),
    );
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = h.engine.run(async {
        let _ = stopped.await;
    });
    let scenario = async {
        settled_until(&h.engine, "the fire is claimed ahead", || async {
            h.jobs(s.id).await.len() == 1
        })
        .await;
        // Its hand-off, a second before its instant.
        h.clock.set(due - Duration::seconds(1));
        settled_until(&h.engine, "the fire is handed off", || async {
            h.jobs(s.id).await[0].status == JobStatus::Running
        })
        .await;
        assert!(h.target.requests().is_empty(), "called before its instant");
        h.clock.set(due);
        settled_until(&h.engine, "the call arrives", || async {
            !h.target.requests().is_empty()
        })
        .await;
        let _ = stop.send(());
    };
    tokio::join!(serve, scenario);

    let calls = h.target.requests();
    assert_eq!(calls.len(), 1);
    let claims = verify(&calls[0], &signer.jwks(), &h.target.url()).unwrap();
    assert_eq!(
        claims["iat"],
        json!((due - Duration::seconds(1)).timestamp()),
        "signed at its hand-off, sent at its instant"
    );
    let job = &h.jobs(s.id).await[0];
    assert_eq!(calls[0].json()["job_id"], json!(job.id));
    assert_eq!(job.started_at, Some(due));
}
