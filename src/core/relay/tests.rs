use serde_json::Value;

use super::*;
use crate::core::model::{EnvId, EventId, ScheduleId};

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

/// An outbox event of `event_type` with `payload`, written at 2030-03-17T17:46:40Z.
fn outbox_event(event_type: &str, payload: Value) -> OutboxEvent {
    OutboxEvent {
        seq: 7,
        id: EventId::new(),
        env_id: EnvId::new(),
        schedule_id: Some(ScheduleId::new()),
        event_type: event_type.into(),
        payload,
        created_at: chrono::DateTime::from_timestamp(1_900_000_000, 0).unwrap(),
        relayed_at: None,
        attempts: 0,
        last_error: None,
        parked_at: None,
    }
}

#[test]
fn the_envelope_is_a_structured_cloudevent() {
    let event = outbox_event(
        crate::core::events::SCHEDULE_PAUSED,
        serde_json::json!({"status": "paused"}),
    );
    let envelope = EventEnvelope::of(&event);
    let body: Value = serde_json::from_slice(&envelope.to_json().unwrap()).expect("JSON");
    assert_eq!(body["specversion"], "1.0");
    assert_eq!(body["id"], event.id.to_string());
    assert_eq!(
        body["source"],
        format!("/sentin8-cron/envs/{}", event.env_id)
    );
    assert_eq!(body["type"], "io.sentin8.cron.schedule.paused.v1");
    assert_eq!(
        body["subject"],
        format!("schedules/{}", event.schedule_id.unwrap())
    );
    assert_eq!(body["time"], "2030-03-17T17:46:40Z");
    assert_eq!(body["datacontenttype"], "application/json");
    assert_eq!(body["data"], serde_json::json!({"status": "paused"}));
    assert_eq!(body.as_object().unwrap().len(), 8);
    let read: EventEnvelope = serde_json::from_value(body).unwrap();
    assert_eq!(read, envelope);
}

#[test]
fn an_event_written_under_a_former_name_goes_out_under_its_new_one() {
    let event = outbox_event(
        "sentin8:cron:schedule:completed",
        serde_json::json!({"event_type": "sentin8:cron:schedule:completed",
            "at": "2030-01-01T00:00:00Z", "status": "active"}),
    );
    let envelope = EventEnvelope::of(&event);
    assert_eq!(envelope.event_type, crate::core::events::JOB_SUCCEEDED);
    assert_eq!(envelope.data, serde_json::json!({"status": "active"}));
    let foreign = OutboxEvent {
        event_type: "acme.other".into(),
        payload: serde_json::json!({"at": 1}),
        ..event
    };
    assert_eq!(
        EventEnvelope::of(&foreign).data,
        serde_json::json!({"at": 1})
    );
}

#[test]
fn the_publish_timeout_is_shorter_than_the_lease() {
    let options = RelayOptions::default();
    assert!(options.publish_timeout < options.lease);
    assert!(options.relay_id.starts_with("relay-"));
    assert_ne!(options.relay_id, RelayOptions::default().relay_id);
}
