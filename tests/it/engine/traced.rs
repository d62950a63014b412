//! Traces: each attempt of a job is a span of the job's trace (its id is the job's), with its
//! steps as children, exported over OTLP/HTTP to a real listener standing in for a collector;
//! and every call carries the W3C `traceparent` that continues it.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::store::Store;
use sentin8_cron::telemetry::OtlpExporter;
use serde_json::{Value, json};

use super::{Harness, cron};
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

fn attribute<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
        .unwrap_or(&Value::Null)
}

pub async fn each_attempt_is_a_span_of_the_jobs_trace_and_its_call_continues_it(
    store: Arc<dyn Store>,
) {
    let collector = RawServer::start(|_: &Recorded| Reply::json(200, json!({}))).await;
    let metrics = Arc::new(sentin8_cron::core::metrics::Metrics::default());
    let exporter = OtlpExporter::start(
        &url::Url::parse(&collector.url()).unwrap(),
        "test-1",
        metrics.clone(),
    );
    let h = Harness::new(store).await;
    let engine = h
        .another_instance(EngineConfig::default())
        .with_spans(Arc::new(exporter.clone()));
    let s = h.create(cron("*/5 * * * *", 1)).await;
    // The first attempt fails; its retry succeeds.
    h.reply([Reply::status(500)]);
    h.clock.set(t0() + Duration::minutes(5));
    engine.tick().await.unwrap();
    h.clock.set(t0() + Duration::minutes(9));
    engine.tick().await.unwrap();
    exporter.flush().await;

    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let job = &jobs[0];
    assert_eq!(job.attempt, 2);
    let trace_id = job.id.0.simple().to_string();

    // Every call carried the job's trace and its own call span.
    let calls = h.target.requests();
    assert_eq!(calls.len(), 2);
    let parents: Vec<(String, String)> = calls
        .iter()
        .map(|call| {
            let header = call
                .header("traceparent")
                .expect("a traceparent")
                .to_owned();
            let parts: Vec<&str> = header.split('-').collect();
            assert_eq!(parts.len(), 4, "{header}");
            assert_eq!(
                (parts[0], parts[1], parts[3]),
                ("00", trace_id.as_str(), "01")
            );
            assert_eq!(parts[2].len(), 16);
            (
                parts[2].to_owned(),
                call.header("tracestate").unwrap().to_owned(),
            )
        })
        .collect();
    assert_ne!(
        parents[0].0, parents[1].0,
        "each attempt's call is a span of its own"
    );
    assert_eq!(parents[0].1, "sentin8-cron=attempt-1");
    assert_eq!(parents[1].1, "sentin8-cron=attempt-2");

    // What the collector received: OTLP/HTTP JSON, sentin8-cron's resource.
    let requests = collector.requests();
    assert!(!requests.is_empty());
    let mut spans: Vec<Value> = Vec::new();
    for request in &requests {
        assert_eq!(request.path, "/v1/traces");
        assert_eq!(request.header("content-type"), Some("application/json"));
        let body = request.json();
        let resource = &body["resourceSpans"][0];
        let service = resource["resource"]["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == "service.name")
            .unwrap();
        assert_eq!(service["value"]["stringValue"], "sentin8-cron");
        for scope in resource["scopeSpans"].as_array().unwrap() {
            spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
        }
    }
    assert!(
        spans
            .iter()
            .all(|span| span["traceId"] == trace_id.as_str()),
        "{spans:#?}"
    );
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|span| (span["spanId"].as_str().unwrap(), span))
        .collect();
    assert_eq!(by_id.len(), spans.len(), "no span sent twice");
    let of_attempt = |attempt: i64| -> Vec<&Value> {
        spans
            .iter()
            .filter(|span| {
                attribute(span, "sentin8_cron.attempt")["intValue"]
                    .as_str()
                    .and_then(|v| v.parse::<i64>().ok())
                    == Some(attempt)
            })
            .collect()
    };
    for (attempt, (call_span, _)) in [1, 2].into_iter().zip(&parents) {
        let mine = of_attempt(attempt);
        let names: Vec<&str> = {
            let mut names: Vec<&str> = mine.iter().map(|s| s["name"].as_str().unwrap()).collect();
            names.sort();
            names
        };
        let expected: &[&str] = if attempt == 1 {
            &["attempt", "call", "claim", "record"]
        } else {
            &["attempt", "call", "record"]
        };
        assert_eq!(names, expected, "attempt {attempt}: {mine:#?}");
        let root = mine.iter().find(|s| s["name"] == "attempt").unwrap();
        assert!(root.get("parentSpanId").is_none(), "{root}");
        for span in &mine {
            if span["name"] != "attempt" {
                assert_eq!(span["parentSpanId"], root["spanId"], "{span}");
            }
            assert_eq!(
                attribute(span, "sentin8_cron.job_id")["stringValue"],
                job.id.to_string()
            );
            assert_eq!(
                attribute(span, "sentin8_cron.schedule_id")["stringValue"],
                s.id.to_string()
            );
            assert_eq!(
                attribute(span, "sentin8_cron.env_id")["stringValue"],
                h.env.to_string()
            );
            let (start, end) = (
                span["startTimeUnixNano"]
                    .as_str()
                    .unwrap()
                    .parse::<u128>()
                    .unwrap(),
                span["endTimeUnixNano"]
                    .as_str()
                    .unwrap()
                    .parse::<u128>()
                    .unwrap(),
            );
            assert!(start <= end, "{span}");
        }
        let call = mine.iter().find(|s| s["name"] == "call").unwrap();
        assert_eq!(
            call["spanId"],
            call_span.as_str(),
            "the target's parent is the call span"
        );
        assert_eq!(call["kind"], 3, "a client span");
        let status = if attempt == 1 { 2 } else { 1 };
        assert_eq!(call["status"]["code"], status, "{call}");
        assert_eq!(root["status"]["code"], status, "{root}");
    }
    let text = metrics.render(None);
    assert!(
        text.contains("sentin8_cron_spans_dropped_total 0\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "sentin8_cron_spans_exported_total {}\n",
            spans.len()
        )),
        "every span sent was taken: {text}"
    );
}

/// The serve loop's path: a fire claimed ahead, handed off just before its instant, called at
/// it and recorded; its trace has every step.
pub async fn a_fire_claimed_ahead_traces_its_claim_hand_off_call_and_record(store: Arc<dyn Store>) {
    use super::ahead::{ahead_config, called_and_recorded, serving};

    let collector = RawServer::start(|_: &Recorded| Reply::json(200, json!({}))).await;
    let exporter = OtlpExporter::start(
        &url::Url::parse(&collector.url()).unwrap(),
        "test-2",
        Arc::new(sentin8_cron::core::metrics::Metrics::default()),
    );
    let mut h = Harness::with_config(store, ahead_config()).await;
    h.engine = h
        .another_instance(ahead_config())
        .with_spans(Arc::new(exporter.clone()));
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    serving(&h, async {
        super::settled_until(&h.engine, "the fire is claimed ahead", || async {
            !h.jobs(s.id).await.is_empty()
        })
        .await;
        h.clock.set(due);
        called_and_recorded(&h, s.id).await;
    })
    .await;
    exporter.flush().await;

    let mut names: Vec<String> = collector
        .requests()
        .iter()
        .flat_map(|request| {
            let body = request.json();
            body["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|span| span["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["attempt", "call", "claim", "hand-off", "record"]);
}

/// A collector that cannot be reached (or refuses a batch) costs the spans, counted, and
/// nothing else: the export neither blocks nor retries.
#[tokio::test]
async fn spans_a_collector_does_not_take_are_dropped_and_counted() {
    use sentin8_cron::core::model::{EnvId, JobId, JobStatus, ScheduleId};
    use sentin8_cron::core::trace::{Span, SpanSink, Step};

    let refusing = RawServer::start(|_: &Recorded| Reply::status(503)).await;
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let job = sentin8_cron::core::model::Job {
        id: JobId::new(),
        schedule_id: ScheduleId::new(),
        env_id: EnvId::new(),
        status: JobStatus::Running,
        attempt: 1,
        scheduled_for: t0(),
        next_attempt_at: None,
        started_at: Some(t0()),
        finished_at: None,
        result: None,
        error: None,
        idempotency_key: "k".into(),
        created_at: t0(),
        updated_at: t0(),
        superseded_by: None,
        missed: None,
        concurrent: false,
        backfill: false,
        lease_epoch: 1,
        called_at: None,
    };
    for endpoint in [refusing.url(), dead] {
        let metrics = Arc::new(sentin8_cron::core::metrics::Metrics::default());
        let exporter = OtlpExporter::start(
            &url::Url::parse(&endpoint).unwrap(),
            "test-3",
            metrics.clone(),
        );
        let span = Span::step(Step::Call, job.schedule_id, EnvId::new(), &job, t0(), t0());
        exporter.export(vec![span.clone(), span]);
        exporter.flush().await;
        let text = metrics.render(None);
        assert!(
            text.contains("sentin8_cron_spans_dropped_total 2\n"),
            "{endpoint}: {text}"
        );
        assert!(
            text.contains("sentin8_cron_spans_exported_total 0\n"),
            "{text}"
        );
    }
}
