//! The order of each schedule's events on the stream while they are produced, and serve
//! relaying what its API calls and ticks write.

use super::*;

#[tokio::test]
async fn per_schedule_order_holds_on_the_stream_while_events_are_produced() {
    let Some((db, bus)) = pg_and_bus().await else {
        return;
    };
    let store = db.dyn_store();
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let mut schedules = Vec::new();
    for i in 0..5 {
        schedules.push(create_schedule(&ops, env, &format!("s{i}"), Utc::now()).await);
    }

    // Two relay loops run while the operations produce interleaved events.
    let (a, b, publishes, overlaps) = two_relays(&db, &bus).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut loops = Vec::new();
    for relay in [a, b] {
        let mut stopped = stopped.clone();
        loops.push(tokio::spawn(async move {
            relay
                .run(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await;
        }));
    }
    for round in 0..6 {
        for schedule in &schedules {
            let now = actor(Utc::now());
            if round % 2 == 0 {
                ops.schedule_pause(env, schedule.id, &now, None)
                    .await
                    .unwrap();
            } else {
                ops.schedule_resume(env, schedule.id, &now).await.unwrap();
            }
        }
    }

    // Bounded wait for the loops to catch up.
    let deadline = tokio::time::Instant::now() + StdDuration::from_secs(30);
    while store.stats_get().await.unwrap().outbox_unrelayed > 0 {
        assert!(tokio::time::Instant::now() < deadline, "relays caught up");
        tokio::time::sleep(StdDuration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    for task in loops {
        tokio::time::timeout(StdDuration::from_secs(15), task)
            .await
            .expect("loop stops")
            .expect("loop did not panic");
    }

    let events = outbox(&store, &[env]).await;
    assert_eq!(events.len(), 5 + 5 * 6);
    assert!(overlaps.lock().unwrap().is_empty());
    assert!(publishes.lock().unwrap().values().all(|n| *n == 1));
    assert_stream_matches_outbox(&bus, &events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_relays_events_of_api_calls_and_ticks_to_jetstream() {
    use reqwest::Method;

    let Some((db, bus)) = pg_and_bus().await else {
        return;
    };
    let sink: Arc<dyn Sink> = Arc::new(NatsSink::connect(bus.settings()).await.expect("connects"));
    let api = crate::api::Api::start_full(
        db.dyn_store(),
        axum::Router::new(),
        true,
        Some((sink, options("serve"))),
    )
    .await;
    // A schedule created and triggered through the API; serve's own ticker runs the job and
    // serve's own relay publishes every event, with nobody draining by hand.
    let id = api.create(api.env_a, "nightly").await;
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={}", api.env_a),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED);

    let expect = |s: &str| format!("{}.{s}.v1", bus.prefix);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let subjects = loop {
        let subjects: Vec<String> = bus
            .messages()
            .await
            .iter()
            .map(|m| m.subject.to_string())
            .collect();
        if subjects.contains(&expect("job.succeeded")) || std::time::Instant::now() > deadline {
            break subjects;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        subjects,
        [
            expect("schedule.created"),
            expect("schedule.triggered"),
            expect("job.succeeded")
        ]
    );
    assert_eq!(
        api.target.requests().len(),
        1,
        "the job called the target once"
    );
    let messages = bus.messages().await;
    let succeeded = body(&messages[2]);
    assert_eq!(succeeded["subject"], format!("schedules/{id}"));
    assert_eq!(succeeded["data"]["result"], serde_json::json!({"ok": true}));
    // Nothing is left unrelayed.
    let stats = db.dyn_store().stats_get().await.unwrap();
    assert_eq!(stats.outbox_unrelayed, 0);
}
