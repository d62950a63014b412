//! The failover drill's report: the drill's moments in a table, and the events the outbox and
//! the bus hold around the promotion.

use super::*;

pub(super) fn seconds(us: i64) -> String {
    format!("{:.2} s", us as f64 / 1e6)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn failover_table(
    analysis: &report::Analysis,
    group_of_schedule: &HashMap<String, String>,
    arrivals: &[Arrival],
    first: i64,
    end: i64,
    moments: &Moments,
    (claimed, recorded): (Option<i64>, Option<i64>),
    fork: Option<&str>,
    lost_wal: Option<(usize, u64)>,
) -> String {
    let window: Vec<&Arrival> = arrivals
        .iter()
        .filter(|a| (first..end).contains(&a.scheduled_for_us))
        .collect();
    let before = window
        .iter()
        .filter(|a| a.at_us < moments.kill_us)
        .map(|a| a.at_us)
        .max();
    let after = window
        .iter()
        .filter(|a| a.at_us >= moments.kill_us)
        .map(|a| a.at_us)
        .min();
    let gap = match (before, after) {
        (Some(b), Some(a)) => seconds(a - b),
        _ => "–".into(),
    };
    let since_kill = |t: Option<i64>| t.map_or("–".into(), |t| seconds(t - moments.kill_us));
    // When the calls after an occurrence's first were made, after its due instant.
    let mut firsts: HashMap<(&str, i64), i64> = HashMap::new();
    for a in &window {
        let first = firsts
            .entry((a.schedule_id.as_str(), a.scheduled_for_us))
            .or_insert(a.at_us);
        *first = (*first).min(a.at_us);
    }
    let again: Vec<i64> = window
        .iter()
        .filter(|a| firsts.get(&(a.schedule_id.as_str(), a.scheduled_for_us)) != Some(&a.at_us))
        .map(|a| a.at_us - a.scheduled_for_us)
        .collect();
    let again = match (again.iter().min(), again.iter().max()) {
        (Some(lo), Some(hi)) => format!("{} to {}", seconds(*lo), seconds(*hi)),
        _ => "–".into(),
    };
    let mut out = String::from(
        "| group | calls | occurrences called | dup same key | dup new job | db double | missing | unclaimed |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (group, s) in &analysis.totals {
        let calls = window
            .iter()
            .filter(|a| group_of_schedule.get(&a.schedule_id) == Some(group))
            .count();
        out.push_str(&format!(
            "| {group} | {calls} | {}/{} | {} | {} | {} | {} | {} |\n",
            s.fired, s.expected, s.dup_same_key, s.dup_new_job, s.db_double, s.missing, s.unclaimed
        ));
    }
    out.push_str(&format!(
        "\nCalls after an occurrence's first were made {again} after its due instant.\n\n"
    ));
    out.push_str(
        "| dispatch gap (last call before the kill → first after) | first call after the kill | promoted (after the kill) | first claim on the new primary | first outcome recorded on the new primary | timeline fork | commits on the old primary past the fork |\n|---|---|---|---|---|---|---|\n",
    );
    let (commits, bytes) = match lost_wal {
        Some((c, b)) => (c.to_string(), format!(" ({b} bytes of WAL)")),
        None => ("–".into(), String::new()),
    };
    out.push_str(&format!(
        "| {gap} | {} | {} | {} | {} | {} | {commits}{bytes} |\n",
        since_kill(after),
        seconds(moments.promoted_us - moments.kill_us),
        since_kill(claimed),
        since_kill(recorded),
        fork.unwrap_or("–"),
    ));
    out
}

/// Per answered occurrence: its `schedule:completed` events in the new primary's outbox and
/// on the stream; and per event type, what each side holds.
pub(super) fn events_table(
    arrivals: &[Arrival],
    first: i64,
    end: i64,
    outbox: &[Event],
    stream: Option<&[Event]>,
) -> String {
    let answered: HashSet<(&str, i64)> = arrivals
        .iter()
        .filter(|a| (first..end).contains(&a.scheduled_for_us))
        .map(|a| (a.schedule_id.as_str(), a.scheduled_for_us))
        .collect();
    let in_window = |e: &&Event| e.due_us.is_some_and(|t| (first..end).contains(&t));
    let completed = |events: &[Event]| {
        let mut per: HashMap<(String, i64), HashSet<String>> = HashMap::new();
        for e in events
            .iter()
            .filter(in_window)
            .filter(|e| e.event_type == COMPLETED)
        {
            per.entry((e.schedule_id.clone(), e.due_us.unwrap_or_default()))
                .or_default()
                .insert(e.id.clone());
        }
        per
    };
    let count = |per: &HashMap<(String, i64), HashSet<String>>| {
        let lost = answered
            .iter()
            .filter(|(s, t)| per.get(&(s.to_string(), *t)).is_none_or(HashSet::is_empty))
            .count();
        let repeated = per.values().filter(|ids| ids.len() > 1).count();
        (lost, repeated)
    };
    let (outbox_lost, outbox_repeated) = count(&completed(outbox));
    let mut out = format!(
        "Events: per occurrence the target answered ({}), its `schedule:completed` events.\n\n\
         | where | no event (lost) | more than one event (repeated) | events not in the new primary's outbox | outbox events never relayed | the same event id twice |\n|---|---|---|---|---|---|\n\
         | new primary's outbox | {outbox_lost} | {outbox_repeated} | – | {} | – |\n",
        answered.len(),
        outbox
            .iter()
            .filter(in_window)
            .filter(|e| e.event_type == COMPLETED && !e.relayed)
            .count(),
    );
    let outbox_ids: HashSet<&str> = outbox.iter().map(|e| e.id.as_str()).collect();
    if let Some(stream) = stream {
        let (lost, repeated) = count(&completed(stream));
        let foreign = stream
            .iter()
            .filter(in_window)
            .filter(|e| e.event_type == COMPLETED && !outbox_ids.contains(e.id.as_str()))
            .count();
        let mut seen = HashSet::new();
        let twice = stream
            .iter()
            .filter(|e| !seen.insert(e.id.as_str()))
            .count();
        out.push_str(&format!(
            "| JetStream stream | {lost} | {repeated} | {foreign} | – | {twice} |\n"
        ));
    }
    // Every type of event about the measured occurrences, on each side.
    let mut by_type: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for e in outbox.iter().filter(in_window) {
        by_type.entry(e.event_type.as_str()).or_default().0 += 1;
    }
    if let Some(stream) = stream {
        for e in stream.iter().filter(in_window) {
            let entry = by_type.entry(e.event_type.as_str()).or_default();
            entry.1 += 1;
            if !outbox_ids.contains(e.id.as_str()) {
                entry.2 += 1;
            }
        }
    }
    out.push_str(
        "\n| event type (about the measured occurrences) | in the new primary's outbox | on the stream | of them not in the outbox |\n|---|---|---|---|\n",
    );
    for (t, (o, s, f)) in by_type {
        let (s, f) = if stream.is_some() {
            (s.to_string(), f.to_string())
        } else {
            ("–".into(), "–".into())
        };
        out.push_str(&format!("| `{t}` | {o} | {s} | {f} |\n"));
    }
    out
}
