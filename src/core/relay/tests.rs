use super::*;

/// Compiles only if the loop can be spawned on a multi-threaded runtime (as `serve` does).
#[allow(dead_code)]
fn the_loop_is_spawnable(relay: Arc<Relay>) {
    drop(tokio::spawn(async move {
        relay.run(std::future::pending()).await;
    }));
}

#[test]
fn only_refusals_count_towards_parking() {
    assert!(SinkError::Rejected("too large".into()).parkable());
    assert!(!SinkError::Unavailable("connection refused".into()).parkable());
}

#[test]
fn the_envelope_names_its_fields_for_consumers() {
    let event = OutboxEvent {
        seq: 7,
        id: EventId::new(),
        env_id: EnvId::new(),
        schedule_id: Some(ScheduleId::new()),
        event_type: "sentin8:cron:schedule:paused".into(),
        payload: serde_json::json!({"status": "paused"}),
        created_at: chrono::DateTime::from_timestamp(1_900_000_000, 0).unwrap(),
        relayed_at: None,
        attempts: 0,
        last_error: None,
        parked_at: None,
    };
    let body: Value =
        serde_json::from_slice(&EventEnvelope::of(&event).to_json().unwrap()).expect("JSON");
    assert_eq!(body["id"], event.id.to_string());
    assert_eq!(body["type"], "sentin8:cron:schedule:paused");
    assert_eq!(body["env_id"], event.env_id.to_string());
    assert_eq!(body["schedule_id"], event.schedule_id.unwrap().to_string());
    assert_eq!(body["created_at"], "2030-03-17T17:46:40Z");
    assert_eq!(body["payload"], serde_json::json!({"status": "paused"}));
    assert_eq!(body.as_object().unwrap().len(), 6);
}

#[test]
fn the_publish_timeout_is_shorter_than_the_lease() {
    let options = RelayOptions::default();
    assert!(options.publish_timeout < options.lease);
    assert!(options.relay_id.starts_with("relay-"));
    assert_ne!(options.relay_id, RelayOptions::default().relay_id);
}
