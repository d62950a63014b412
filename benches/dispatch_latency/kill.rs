//! The kill scenario's own count: what became of the calls the killed instance had made.
//! Every call to the fast target is answered 200 as it arrives, so an arrival is an answered
//! call. For each answered call the database's record of that attempt is looked up: recorded
//! as succeeded (its outcome was durable before the kill), recorded otherwise (the answer was
//! lost: the attempt was abandoned and counted as failed), or not recorded at all. Calls
//! answered within 250 ms before the kill may be lost by design; earlier ones must not be.
//! Also counted: occurrences called again after a success was recorded (the same key). Only the
//! burst the kill fell into is counted.

use std::collections::HashMap;

use sqlx::{Connection, PgConnection, Row};

use crate::target::Arrival;

/// What an answered call's attempt became.
#[derive(Default, Debug)]
pub struct KillCount {
    pub answered_before_kill: usize,
    pub answered_in_last_250ms: usize,
    pub lost_before_window: usize,
    pub lost_in_window: usize,
    pub unrecorded: usize,
    pub called_after_success: usize,
    pub answered_after_kill: usize,
}

/// Reads every attempt's outcome (by idempotency key and attempt) and counts.
pub async fn count(
    owner_url: &str,
    arrivals: &[Arrival],
    instant_us: i64,
    kill_us: i64,
) -> anyhow::Result<KillCount> {
    // The burst the kill fell into; later minutes' calls are the ordinary report's.
    let arrivals: Vec<&Arrival> = arrivals
        .iter()
        .filter(|a| a.scheduled_for_us == instant_us)
        .collect();
    let mut conn = PgConnection::connect(owner_url).await?;
    // The idempotency key is `schedule:{schedule_id}:{job_id}`.
    let rows = sqlx::query(&format!(
        "SELECT 'schedule:' || j.schedule_id::text || ':' || j.id::text, a.attempt, a.outcome, \
         {} FROM cron.job_attempts a JOIN cron.jobs j ON j.id = a.job_id",
        "(extract(epoch FROM a.finished_at) * 1000000)::int8"
    ))
    .fetch_all(&mut conn)
    .await?;
    let mut outcome: HashMap<(String, i32), (String, Option<i64>)> = HashMap::new();
    let mut succeeded_at: HashMap<String, i64> = HashMap::new();
    for row in rows {
        let key: String = row.get(0);
        let attempt: i32 = row.get(1);
        let result: String = row.get(2);
        let finished: Option<i64> = row.get(3);
        if result == "succeeded"
            && let Some(at) = finished
        {
            succeeded_at.insert(key.clone(), at);
        }
        outcome.insert((key, attempt), (result, finished));
    }
    let mut count = KillCount::default();
    for arrival in arrivals {
        if let Some(at) = succeeded_at.get(&arrival.key)
            && arrival.at_us > *at
        {
            count.called_after_success += 1;
        }
        if arrival.at_us >= kill_us {
            count.answered_after_kill += 1;
            continue;
        }
        let in_window = arrival.at_us >= kill_us - 250_000;
        count.answered_before_kill += 1;
        if in_window {
            count.answered_in_last_250ms += 1;
        }
        match outcome.get(&(arrival.key.clone(), arrival.attempt)) {
            Some((result, _)) if result == "succeeded" => {}
            Some(_) if in_window => count.lost_in_window += 1,
            Some(_) => count.lost_before_window += 1,
            None => count.unrecorded += 1,
        }
    }
    Ok(count)
}

/// The count as a Markdown table.
pub fn table(count: &KillCount, after_ms: u64) -> String {
    format!(
        "The first instance was killed (SIGKILL) {after_ms} ms after the instant.\n\n\
         | answered before the kill | of them in its last 250 ms | answered, recorded as not succeeded (before the last 250 ms) | (in the last 250 ms) | answered, no record of the attempt | called again after a recorded success | answered after the kill |\n\
         |---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {} | {} | {} |\n",
        count.answered_before_kill,
        count.answered_in_last_250ms,
        count.lost_before_window,
        count.lost_in_window,
        count.unrecorded,
        count.called_after_success,
        count.answered_after_kill,
    )
}
