//! How `serve` instances share a burst. Each instance beats (`Store::instance_beat`) every
//! [`BEAT_EVERY`]; the instances alive, ordered by id, split the schedules claimed ahead of
//! their instant between them by a hash of the schedule id (the due selection filters by the
//! share), so two instances each take about half of a burst instead of the first to look
//! taking it all. An occurrence already due is everyone's, so a stopped instance's share is
//! claimed at its instant by the others until its heartbeat is [`STALE_AFTER`] old and
//! forgotten (a stopping instance leaves at once).

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::core::clock::Clock;
use tokio::sync::watch;

use crate::core::store::Store;

use super::parts::chrono_duration;

/// How often an instance says it is alive.
pub const BEAT_EVERY: Duration = Duration::from_secs(2);

/// An instance not heard from for this long is forgotten, and its share goes to the others.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// `me`'s place among the instances alive (`alive` in the store's order): its index and their
/// number; alone when it is not among them.
pub(super) fn place(alive: &[Uuid], me: Uuid) -> (u32, u32) {
    match alive.iter().position(|id| *id == me) {
        Some(index) => (
            u32::try_from(index).unwrap_or(0),
            u32::try_from(alive.len()).unwrap_or(1),
        ),
        None => (0, 1),
    }
}

/// One heartbeat: records `me` as alive and updates its place. A failed beat keeps the last
/// place (the database is away: nothing is claimed meanwhile anyway).
pub(super) async fn beat(
    store: &dyn Store,
    clock: &dyn Clock,
    me: Uuid,
    cell: &watch::Sender<(u32, u32)>,
) {
    let now = clock.now();
    let stale_before = now - chrono_duration(STALE_AFTER);
    match store.instance_beat(me, now, stale_before).await {
        Ok(alive) => {
            cell.send_replace(place(&alive, me));
        }
        Err(err) => tracing::warn!(error = %err, "cannot record this instance's heartbeat"),
    }
}

/// Beats every [`BEAT_EVERY`] until `stopped`, then leaves, so the others take this instance's
/// share at once.
pub(super) async fn keep_share(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    me: Uuid,
    cell: Arc<watch::Sender<(u32, u32)>>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            biased;
            _ = stopped.wait_for(|s| *s) => break,
            () = tokio::time::sleep(BEAT_EVERY) => {}
        }
        beat(&*store, &*clock, me, &cell).await;
    }
    if let Err(err) = store.instance_leave(me).await {
        tracing::warn!(error = %err, "cannot remove this instance's heartbeat");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_s_place_is_its_index_among_the_instances_alive() {
        let ids: Vec<Uuid> = (1..=3u128).map(Uuid::from_u128).collect();
        assert_eq!(place(&ids, ids[0]), (0, 3));
        assert_eq!(place(&ids, ids[2]), (2, 3));
        // Not among them (its beat was not recorded): it claims as if alone.
        assert_eq!(place(&ids, Uuid::from_u128(9)), (0, 1));
        assert_eq!(place(&[], ids[0]), (0, 1));
    }
}
