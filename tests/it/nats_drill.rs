//! The node-loss drill on a throwaway cluster (`nats_cluster`): the relay runs against it
//! through a seed list of all three servers while a burst of outbox events is written; the
//! server holding the relay's connection (moved to lead the stream first, where a few step
//! downs manage it) is killed in the middle of the burst and started again later, and the
//! report says what reached the stream and when. Shared by the node-loss test
//! (`relay_cluster`) and the bench (`relay_node_loss`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_trait::async_trait;
use sentin8_cron::bus::{NatsSettings, NatsSink, nats::CLIENT_NAME};
use sentin8_cron::core::clock::SystemClock;
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::{EnvId, EventId, OutboxEvent, ScheduleId};
use sentin8_cron::core::relay::{Delivery, Relay, RelayOptions, Sink, SinkError};
use sentin8_cron::core::store::{NewEvent, Store};

use crate::nats_cluster::*;

/// The shape of one drill.
#[derive(Debug, Clone)]
pub struct Drill {
    /// Events of the burst, spread round-robin over `schedules` schedules.
    pub events: usize,
    pub schedules: usize,
    /// How long the burst takes to write (one transaction every 50 ms).
    pub burst: Duration,
    /// When the server is killed, counted from the burst's start.
    pub kill_after: Duration,
    /// How long it stays down.
    pub down_for: Duration,
    /// How long the relay may take to relay everything once the burst is written.
    pub settle_bound: Duration,
    /// The relay's tuning (`serve`'s defaults, but for the relay id, unless a test says).
    pub relay: RelayOptions,
}

/// What one publish came to, and when.
#[derive(Debug, Clone)]
pub enum Outcome {
    Acked { duplicate: bool },
    Failed(String),
}

/// A sink that publishes through the real NATS sink and notes every outcome with its instant.
struct Timeline {
    inner: NatsSink,
    outcomes: Arc<Mutex<Vec<(Instant, Outcome)>>>,
}

#[async_trait]
impl Sink for Timeline {
    fn kind(&self) -> &'static str {
        "nats"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        let result = self.inner.publish(event).await;
        let outcome = match &result {
            Ok(delivery) => Outcome::Acked {
                duplicate: delivery.duplicate,
            },
            Err(err) => Outcome::Failed(err.to_string()),
        };
        let mut outcomes = self.outcomes.lock().unwrap_or_else(|p| p.into_inner());
        outcomes.push((Instant::now(), outcome));
        result
    }
}

/// What a drill saw.
#[derive(Debug)]
pub struct DrillReport {
    /// Every event written (warm-up and burst), in outbox order, as the outbox holds it after
    /// the drill.
    pub events: Vec<OutboxEvent>,
    /// The `Nats-Msg-Id` of every message on the stream, in stream order, and the stream's own
    /// message count.
    pub stream_ids: Vec<String>,
    pub stream_messages: u64,
    /// The stream's replicas, as its configuration says.
    pub stream_replicas: usize,
    /// The killed server's name, and whether it led the stream when it was killed.
    pub killed: String,
    pub killed_leader: bool,
    /// The restarted server was a current replica again before the drill ended.
    pub rejoined: bool,
    /// Each publish's outcome, with its instant.
    pub outcomes: Vec<(Instant, Outcome)>,
    pub burst_started: Instant,
    pub burst_written: Instant,
    pub killed_at: Instant,
    pub restarted_at: Instant,
    /// When the outbox had nothing left to relay (`None`: not within the settle bound).
    pub all_relayed: Option<Instant>,
    pub leftover_unrelayed: i64,
    pub parked: i64,
}

impl DrillReport {
    /// Acknowledged publishes (re-sends the stream dropped included).
    pub fn acks(&self) -> impl Iterator<Item = Instant> + '_ {
        self.outcomes
            .iter()
            .filter_map(|(at, outcome)| match outcome {
                Outcome::Acked { .. } => Some(*at),
                Outcome::Failed(_) => None,
            })
    }

    /// Re-sends the stream recognised by their message id and dropped.
    pub fn duplicates_dropped(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Acked { duplicate: true }))
            .count()
    }

    /// Failed publishes, and the distinct reasons given.
    pub fn failures(&self) -> (usize, Vec<String>) {
        let mut reasons: Vec<String> = Vec::new();
        let mut count = 0;
        for (_, outcome) in &self.outcomes {
            if let Outcome::Failed(reason) = outcome {
                count += 1;
                if !reasons.contains(reason) {
                    reasons.push(reason.clone());
                }
            }
        }
        (count, reasons)
    }

    /// The longest time without an acknowledged publish between `from` and `to` (both ends
    /// count as edges).
    pub fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        let mut edges: Vec<Instant> = self.acks().filter(|at| *at > from && *at < to).collect();
        edges.push(from);
        edges.push(to);
        edges.sort();
        edges
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .max()
            .unwrap_or_default()
    }

    /// The relay's stall: the longest time without an acknowledged publish from the kill until
    /// everything was relayed.
    pub fn stall(&self) -> Duration {
        self.longest_gap(
            self.killed_at,
            self.all_relayed.unwrap_or_else(Instant::now),
        )
    }

    /// Message ids on the stream more than once.
    pub fn duplicate_ids(&self) -> usize {
        let distinct: std::collections::HashSet<&String> = self.stream_ids.iter().collect();
        self.stream_ids.len() - distinct.len()
    }
}

/// Runs the drill (see the module's documentation) on `cluster`, the relay reading `store`.
/// The stream is created by the relay's sink, with three replicas and the default duplicate
/// window, under `prefix`/`stream`.
pub async fn node_loss_drill(
    cluster: &mut NatsCluster,
    store: Arc<dyn Store>,
    prefix: &str,
    stream_name: &str,
    drill: &Drill,
) -> Result<DrillReport, String> {
    let client = cluster.client("s8c drill observer").await?;
    let js = jetstream::new(client.clone());
    let env = EnvId::new();
    let schedules: Vec<ScheduleId> = (0..drill.schedules.max(1))
        .map(|_| ScheduleId::new())
        .collect();

    let mut settings = NatsSettings::new(cluster.urls(), prefix.to_owned(), stream_name.to_owned());
    settings.replicas = 3;
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let sink = Timeline {
        inner: NatsSink::new(settings),
        outcomes: outcomes.clone(),
    };
    let relay = Arc::new(Relay::new(
        store.clone(),
        Arc::new(sink),
        Arc::new(SystemClock),
        drill.relay.clone(),
        Arc::new(Metrics::default()),
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let relay_loop = {
        let relay = relay.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            relay
                .run(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await;
        })
    };
    let result = drive(
        cluster,
        &store,
        &js,
        &client,
        stream_name,
        env,
        &schedules,
        drill,
    )
    .await;
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(15), relay_loop).await;
    let mut report = result?;
    report.outcomes = outcomes.lock().unwrap_or_else(|p| p.into_inner()).clone();

    let (ids, messages) = stream_message_ids(&js, stream_name).await?;
    report.stream_ids = ids;
    report.stream_messages = messages;
    report.stream_replicas = match js.get_stream(stream_name).await {
        Ok(mut handle) => handle
            .info()
            .await
            .map(|info| info.config.num_replicas)
            .unwrap_or(0),
        Err(_) => 0,
    };
    let mut tx = store.tenant_begin(env).await.map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    loop {
        let after = events.last().map_or(0, |e: &OutboxEvent| e.seq);
        let page = tx
            .outbox_list(after, 1000)
            .await
            .map_err(|e| e.to_string())?;
        if page.is_empty() {
            break;
        }
        events.extend(page);
    }
    tx.commit().await.map_err(|e| e.to_string())?;
    report.events = events;
    let _ = js.delete_stream(stream_name).await;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    cluster: &mut NatsCluster,
    store: &Arc<dyn Store>,
    js: &jetstream::Context,
    client: &async_nats::Client,
    stream_name: &str,
    env: EnvId,
    schedules: &[ScheduleId],
    drill: &Drill,
) -> Result<DrillReport, String> {
    // Warm-up: one event per schedule, so the relay has connected and created the stream.
    let warmup: Vec<ScheduleId> = schedules.to_vec();
    write_events(store, env, &warmup, 0).await?;
    wait_relayed(store, Duration::from_secs(20))
        .await
        .map_err(|left| {
            format!(
                "the warm-up was not relayed ({left} left)\n{}",
                cluster.logs()
            )
        })?;

    // The victim: the server the relay is connected to, made the stream's leader if a few
    // step downs manage it, so its loss costs the relay its connection and the stream its
    // leader at once.
    let victim = cluster
        .server_of_connection(CLIENT_NAME)
        .await
        .ok_or("no server lists the relay's connection")?;
    cluster
        .move_stream_leader(client, js, stream_name, victim, 8)
        .await;
    // Let the relay go back to its steady state after the elections.
    wait_relayed(store, Duration::from_secs(20))
        .await
        .map_err(|left| format!("{left} events stuck after the leader moved"))?;

    let burst_started = Instant::now();
    let writer = {
        let store = store.clone();
        let schedules = schedules.to_vec();
        let events = drill.events;
        let burst = drill.burst;
        tokio::spawn(async move { write_burst(&store, env, &schedules, events, burst).await })
    };

    tokio::time::sleep_until((burst_started + drill.kill_after).into()).await;
    let killed_leader = cluster.stream_leader(js, stream_name).await == Some(victim);
    cluster.kill(victim);
    let killed_at = Instant::now();
    tokio::time::sleep_until((killed_at + drill.down_for).into()).await;
    cluster.restart(victim).await?;
    let restarted_at = Instant::now();

    writer
        .await
        .map_err(|e| format!("the burst's writer: {e}"))??;
    let burst_written = Instant::now();
    let (all_relayed, leftover_unrelayed) = match wait_relayed(store, drill.settle_bound).await {
        Ok(at) => (Some(at), 0),
        Err(left) => (None, left),
    };
    let parked = store
        .stats_get()
        .await
        .map(|stats| stats.outbox_parked)
        .unwrap_or(-1);
    let rejoin_deadline = Instant::now() + Duration::from_secs(15);
    let mut rejoined = false;
    while !rejoined && Instant::now() < rejoin_deadline {
        rejoined = cluster.is_current_replica(js, stream_name, victim).await;
        if !rejoined {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(DrillReport {
        events: Vec::new(),
        stream_ids: Vec::new(),
        stream_messages: 0,
        stream_replicas: 0,
        killed: cluster.nodes[victim].name.clone(),
        killed_leader,
        rejoined,
        outcomes: Vec::new(),
        burst_started,
        burst_written,
        killed_at,
        restarted_at,
        all_relayed,
        leftover_unrelayed,
        parked,
    })
}

/// Writes `events` events over `burst`: one transaction every 50 ms, each with its share.
async fn write_burst(
    store: &Arc<dyn Store>,
    env: EnvId,
    schedules: &[ScheduleId],
    events: usize,
    burst: Duration,
) -> Result<(), String> {
    let ticks = (burst.as_millis() / 50).max(1) as usize;
    let started = tokio::time::Instant::now();
    let mut written = 0;
    for tick in 0..ticks {
        let upto = events * (tick + 1) / ticks;
        let batch: Vec<ScheduleId> = (written..upto)
            .map(|n| schedules[n % schedules.len()])
            .collect();
        write_events(store, env, &batch, written).await?;
        written = upto;
        tokio::time::sleep_until(started + Duration::from_millis(50) * (tick as u32 + 1)).await;
    }
    Ok(())
}

/// One tenant transaction with an event for each schedule listed, numbered from `first`.
async fn write_events(
    store: &Arc<dyn Store>,
    env: EnvId,
    schedules: &[ScheduleId],
    first: usize,
) -> Result<(), String> {
    if schedules.is_empty() {
        return Ok(());
    }
    let mut tx = store.tenant_begin(env).await.map_err(|e| e.to_string())?;
    for (n, schedule) in schedules.iter().enumerate() {
        tx.outbox_insert(&NewEvent {
            id: EventId::new(),
            schedule_id: Some(*schedule),
            event_type: "io.sentin8.cron.job.succeeded.v1".into(),
            payload: serde_json::json!({"n": first + n}),
            now: chrono::Utc::now(),
        })
        .await
        .map_err(|e| e.to_string())?;
    }
    tx.commit().await.map_err(|e| e.to_string())
}

/// Waits until the outbox has nothing left to relay: the instant it saw that, or how many
/// events were still waiting when `bound` ran out.
async fn wait_relayed(store: &Arc<dyn Store>, bound: Duration) -> Result<Instant, i64> {
    let deadline = Instant::now() + bound;
    loop {
        let left = store
            .stats_get()
            .await
            .map(|stats| stats.outbox_unrelayed)
            .unwrap_or(-1);
        if left == 0 {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            return Err(left);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
