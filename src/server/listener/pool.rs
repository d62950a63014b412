//! Which connections hold the listener's cap, and which one gives way when a new one arrives at a
//! full cap. A connection is *busy* while a request on it is being answered (its response body
//! included) and *waiting* otherwise: before its first complete request head, and idle between
//! requests on a kept-alive connection. A waiting connection costs the server a slot and nothing
//! else, so at a full cap the one that has waited longest is closed to admit the newcomer. A
//! flood of connections that never finish a head, or that sit idle, from however many addresses,
//! then cannot keep a probe or a client with a request to make from getting in: only busy
//! connections hold their slots. Pure bookkeeping: the listener closes what this names.

use std::collections::{BTreeMap, HashMap};

/// Which part of the cap a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// The general part: any request.
    General,
    /// The reserve kept for health probes, used only when every general slot is busy.
    Reserve,
}

/// A connection's number in the pool.
pub(super) type ConnId = u64;

/// What admitting a connection decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Admitted {
    pub id: ConnId,
    pub part: Part,
    /// The waiting connection that gave its slot to this one and must now be closed.
    pub evicted: Option<ConnId>,
}

#[derive(Debug)]
struct Entry {
    part: Part,
    /// Requests being answered on the connection (HTTP/2 may have several).
    in_flight: usize,
    /// Its place in the waiting order while it waits.
    waiting_since: Option<u64>,
}

/// The slots of the cap and the order in which waiting connections give way.
#[derive(Debug)]
pub(super) struct Pool {
    general_max: usize,
    reserve_max: usize,
    general_held: usize,
    reserve_held: usize,
    next_id: ConnId,
    /// Increases with every move into waiting: the order of waiting, oldest first.
    next_wait: u64,
    entries: HashMap<ConnId, Entry>,
    waiting_general: BTreeMap<u64, ConnId>,
    waiting_reserve: BTreeMap<u64, ConnId>,
}

impl Pool {
    pub(super) fn new(general_max: usize, reserve_max: usize) -> Self {
        Self {
            general_max,
            reserve_max,
            general_held: 0,
            reserve_held: 0,
            next_id: 0,
            next_wait: 0,
            entries: HashMap::new(),
            waiting_general: BTreeMap::new(),
            waiting_reserve: BTreeMap::new(),
        }
    }

    /// Admits a new connection (waiting, as it has sent nothing yet): on a free general slot;
    /// else on the slot of the longest-waiting general connection; else on the reserve, free or
    /// taken from its longest-waiting connection. `None` when every slot is busy.
    pub(super) fn admit(&mut self) -> Option<Admitted> {
        let (part, evicted) = if self.general_held < self.general_max {
            self.general_held += 1;
            (Part::General, None)
        } else if let Some(victim) = self.evict_oldest(Part::General) {
            (Part::General, Some(victim))
        } else if self.reserve_held < self.reserve_max {
            self.reserve_held += 1;
            (Part::Reserve, None)
        } else if let Some(victim) = self.evict_oldest(Part::Reserve) {
            (Part::Reserve, Some(victim))
        } else {
            return None;
        };
        let id = self.next_id;
        self.next_id += 1;
        self.entries.insert(
            id,
            Entry {
                part,
                in_flight: 0,
                waiting_since: None,
            },
        );
        self.start_waiting(id);
        Some(Admitted { id, part, evicted })
    }

    /// A request on `id` is being answered. Nothing for a connection already evicted.
    pub(super) fn request_started(&mut self, id: ConnId) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        entry.in_flight += 1;
        if let Some(since) = entry.waiting_since.take() {
            let part = entry.part;
            self.waiting_mut(part).remove(&since);
        }
    }

    /// A request on `id` has been answered, its body sent or abandoned.
    pub(super) fn request_finished(&mut self, id: ConnId) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        if entry.in_flight == 0 {
            self.start_waiting(id);
        }
    }

    /// `id` is closed: its slot is free, unless it was evicted (its slot went to the newcomer).
    pub(super) fn closed(&mut self, id: ConnId) {
        let Some(entry) = self.entries.remove(&id) else {
            return;
        };
        if let Some(since) = entry.waiting_since {
            self.waiting_mut(entry.part).remove(&since);
        }
        match entry.part {
            Part::General => self.general_held -= 1,
            Part::Reserve => self.reserve_held -= 1,
        }
    }

    fn start_waiting(&mut self, id: ConnId) {
        let since = self.next_wait;
        self.next_wait += 1;
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if entry.waiting_since.is_none() {
            entry.waiting_since = Some(since);
            let part = entry.part;
            self.waiting_mut(part).insert(since, id);
        }
    }

    /// Takes the longest-waiting connection of `part` out of the pool; its slot stays held, for
    /// the newcomer.
    fn evict_oldest(&mut self, part: Part) -> Option<ConnId> {
        let (_, victim) = self.waiting_mut(part).pop_first()?;
        self.entries.remove(&victim);
        Some(victim)
    }

    fn waiting_mut(&mut self, part: Part) -> &mut BTreeMap<u64, ConnId> {
        match part {
            Part::General => &mut self.waiting_general,
            Part::Reserve => &mut self.waiting_reserve,
        }
    }

    /// Slots held: (general, reserve).
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        (self.general_held, self.reserve_held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_full_cap_of_waiting_connections_gives_way_oldest_first() {
        let mut pool = Pool::new(3, 1);
        let first: Vec<_> = (0..3).map(|_| pool.admit().unwrap()).collect();
        assert!(
            first
                .iter()
                .all(|a| a.part == Part::General && a.evicted.is_none())
        );
        let newcomer = pool.admit().unwrap();
        assert_eq!(newcomer.part, Part::General);
        assert_eq!(
            newcomer.evicted,
            Some(first[0].id),
            "the oldest waiting gives way"
        );
        assert_eq!(pool.admit().unwrap().evicted, Some(first[1].id));
        assert_eq!(pool.held(), (3, 0), "an eviction hands the slot over");
    }

    #[test]
    fn busy_connections_keep_their_slots_and_the_reserve_takes_the_next() {
        let mut pool = Pool::new(2, 1);
        let a = pool.admit().unwrap();
        let b = pool.admit().unwrap();
        pool.request_started(a.id);
        pool.request_started(b.id);
        let probe = pool.admit().unwrap();
        assert_eq!((probe.part, probe.evicted), (Part::Reserve, None));
        // The reserve's own waiting connection gives way to the next probe.
        let next = pool.admit().unwrap();
        assert_eq!((next.part, next.evicted), (Part::Reserve, Some(probe.id)));
        pool.request_started(next.id);
        assert_eq!(pool.admit(), None, "every slot busy: refused");
        // An answered request makes its connection waiting again, and so evictable.
        pool.request_finished(a.id);
        let later = pool.admit().unwrap();
        assert_eq!((later.part, later.evicted), (Part::General, Some(a.id)));
    }

    #[test]
    fn idle_order_is_the_order_of_the_last_answer_not_of_admission() {
        let mut pool = Pool::new(2, 0);
        let a = pool.admit().unwrap();
        let b = pool.admit().unwrap();
        pool.request_started(a.id);
        pool.request_finished(a.id);
        assert_eq!(pool.admit().unwrap().evicted, Some(b.id));
    }

    #[test]
    fn an_evicted_connection_closing_frees_nothing_and_its_late_requests_count_nowhere() {
        let mut pool = Pool::new(1, 0);
        let a = pool.admit().unwrap();
        let b = pool.admit().unwrap();
        assert_eq!(b.evicted, Some(a.id));
        pool.request_started(a.id);
        pool.request_finished(a.id);
        pool.closed(a.id);
        assert_eq!(pool.held(), (1, 0));
        pool.closed(b.id);
        assert_eq!(pool.held(), (0, 0));
    }

    #[test]
    fn http2_connections_wait_only_when_every_stream_is_answered() {
        let mut pool = Pool::new(1, 0);
        let a = pool.admit().unwrap();
        pool.request_started(a.id);
        pool.request_started(a.id);
        pool.request_finished(a.id);
        assert_eq!(pool.admit(), None, "one stream still open");
        pool.request_finished(a.id);
        assert_eq!(pool.admit().unwrap().evicted, Some(a.id));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit,
        Start(usize),
        Finish(usize),
        Close(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Admit),
            2 => (0usize..64).prop_map(Op::Start),
            2 => (0usize..64).prop_map(Op::Finish),
            1 => (0usize..64).prop_map(Op::Close),
        ]
    }

    proptest! {
        /// Whatever happens: the cap holds for connections not evicted, a busy connection is
        /// never evicted, a newcomer is refused only when every slot is busy, and closing
        /// everything gives every slot back.
        #[test]
        fn the_cap_holds_and_only_waiting_connections_give_way(
            general in 1usize..6, reserve in 0usize..3, ops in proptest::collection::vec(op(), 1..200)
        ) {
            let mut pool = Pool::new(general, reserve);
            // Live connections as the model sees them: id -> requests in flight.
            let mut live: Vec<(ConnId, usize)> = Vec::new();
            for op in ops {
                match op {
                    Op::Admit => {
                        let busy_before = live.iter().filter(|(_, n)| *n > 0).count();
                        match pool.admit() {
                            Some(admitted) => {
                                if let Some(victim) = admitted.evicted {
                                    let at = live.iter().position(|(id, _)| *id == victim);
                                    let at = at.expect("the victim was live");
                                    prop_assert_eq!(live[at].1, 0, "a busy connection was evicted");
                                    live.remove(at);
                                }
                                live.push((admitted.id, 0));
                            }
                            None => prop_assert_eq!(busy_before, general + reserve),
                        }
                    }
                    Op::Start(i) if !live.is_empty() => {
                        let at = i % live.len();
                        pool.request_started(live[at].0);
                        live[at].1 += 1;
                    }
                    Op::Finish(i) if !live.is_empty() => {
                        let at = i % live.len();
                        if live[at].1 > 0 {
                            pool.request_finished(live[at].0);
                            live[at].1 -= 1;
                        }
                    }
                    Op::Close(i) if !live.is_empty() => {
                        let (id, _) = live.remove(i % live.len());
                        pool.closed(id);
                    }
                    _ => {}
                }
                let (g, r) = pool.held();
                prop_assert!(g <= general && r <= reserve);
                prop_assert_eq!(g + r, live.len());
            }
            for (id, _) in live {
                pool.closed(id);
            }
            prop_assert_eq!(pool.held(), (0, 0));
        }
    }
}
