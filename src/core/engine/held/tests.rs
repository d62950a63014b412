use super::*;

/// A one-shot schedule due at `at` and its job (also the recorder's tests' fixture).
pub(in crate::core::engine) fn fire(env: EnvId, at: DateTime<Utc>) -> (Schedule, Job) {
    let schedule = Schedule {
        id: ScheduleId::new(),
        env_id: env,
        domain: "billing".into(),
        schedule_type: "invoice".into(),
        timing: crate::core::timing::Timing::Once { run_at: at },
        target: crate::core::target::Target::from_stored(
            serde_json::json!({ "baseUrl": "http://127.0.0.1:9" }),
        ),
        payload: serde_json::Value::Null,
        status: ScheduleStatus::Active,
        next_run_at: Some(at),
        last_run_at: None,
        retry_count: 0,
        max_retries: 0,
        policies: Default::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
        created_at: at,
        updated_at: at,
        created_by: "test".into(),
        updated_by: "test".into(),
    };
    let job = Job {
        id: JobId::new(),
        schedule_id: schedule.id,
        env_id: env,
        status: JobStatus::Scheduled,
        attempt: 1,
        scheduled_for: at,
        next_attempt_at: None,
        started_at: None,
        finished_at: None,
        result: None,
        error: None,
        idempotency_key: "k".into(),
        created_at: at,
        updated_at: at,
        superseded_by: None,
        missed: None,
        concurrent: false,
        backfill: false,
        lease_epoch: 0,
        called_at: None,
    };
    (schedule, job)
}

#[test]
fn a_fire_goes_from_waiting_through_its_hand_off_to_ready_at_its_instant() {
    let t0 = DateTime::parse_from_rfc3339("2030-01-01T00:00:10Z")
        .unwrap()
        .with_timezone(&Utc);
    let env = EnvId::new();
    let mut held = Held::default();
    let (schedule, job) = fire(env, t0);
    let id = job.id;
    held.hold(schedule, job);
    assert_eq!((held.count(), held.per_env().get(&env)), (1, Some(&1)));
    assert!(held.scheduled().contains(&id));
    assert_eq!(
        held.next_hand_off(),
        Some(t0 - chrono::Duration::seconds(1))
    );
    // Too early to hand off.
    assert!(
        held.take_to_hand_off(t0 - chrono::Duration::seconds(2))
            .is_empty()
    );
    let taken = held.take_to_hand_off(t0 - chrono::Duration::seconds(1));
    assert_eq!(taken.len(), 1);
    assert_eq!(held.count(), 1, "counted until called or withdrawn");
    held.hand_off_answered([id]);
    assert!(held.scheduled().is_empty());
    held.handed_off(taken.into_iter().map(|(s, j)| (s, j, None)).collect());
    assert_eq!(held.next_instant(), Some(t0));
    held.instant_came(t0 - chrono::Duration::milliseconds(1));
    assert!(!held.pressing(), "not before its instant");
    held.instant_came(t0);
    assert!(held.pressing());
    let called = held.take_ready(|_| Some(()));
    assert_eq!(called.len(), 1);
    assert_eq!(called[0].0.start, Start::Fire);
    assert!(held.is_empty());
    assert!(held.per_env().is_empty());
}

#[test]
fn ready_attempts_are_taken_round_robin_and_a_full_queue_holds_back_only_itself() {
    let t0 = Utc::now();
    let (a, b) = (EnvId::new(), EnvId::new());
    let mut held = Held::default();
    for env in [a, a, a, b, b] {
        let (schedule, job) = fire(env, t0);
        held.queue(Ready {
            schedule,
            job,
            start: Start::Retry,
            held: false,
            prepared: None,
        });
    }
    // Environment a's caps are full: b's attempts still go.
    let taken = held.take_ready(|s| (s.env_id == b).then_some(()));
    assert_eq!(taken.len(), 2);
    assert!(taken.iter().all(|(r, ())| r.schedule.env_id == b));
    assert!(held.pressing());
    // Two slots free: one each turn, so a's first two.
    let mut budget = 2;
    let taken = held.take_ready(|_| {
        (budget > 0).then(|| {
            budget -= 1;
        })
    });
    assert_eq!(taken.len(), 2);
    assert!(held.pressing());
}

#[test]
fn an_attempt_back_from_a_renewal_goes_first_in_its_queue() {
    let t0 = Utc::now();
    let env = EnvId::new();
    let mut held = Held::default();
    let (schedule, job) = fire(env, t0);
    held.queue(Ready {
        schedule,
        job,
        start: Start::Fire,
        held: false,
        prepared: None,
    });
    let (schedule, job) = fire(env, t0);
    let back = job.id;
    held.queue_first(Ready {
        schedule,
        job,
        start: Start::Fire,
        held: false,
        prepared: None,
    });
    let mut one = 1;
    let taken = held.take_ready(|_| {
        (one > 0).then(|| {
            one -= 1;
        })
    });
    assert_eq!(taken[0].0.job.id, back);
}

#[test]
fn a_longer_hand_off_lead_hands_a_burst_off_earlier() {
    let t0 = Utc::now();
    let env = EnvId::new();
    let mut held = Held::default();
    let (schedule, job) = fire(env, t0 + chrono::Duration::seconds(5));
    held.hold(schedule, job);
    assert!(held.take_to_hand_off(t0).is_empty());
    held.set_hand_off_before(Duration::from_secs(6));
    assert_eq!(
        held.next_hand_off(),
        Some(t0 - chrono::Duration::seconds(1))
    );
    assert_eq!(held.take_to_hand_off(t0).len(), 1);
    // Never beyond the bound, never under the floor.
    held.set_hand_off_before(Duration::from_secs(600));
    assert_eq!(held.hand_off_before, HAND_OFF_MAX);
    held.set_hand_off_before(Duration::ZERO);
    assert_eq!(held.hand_off_before, HAND_OFF_BEFORE);
}

#[test]
fn a_stopping_instance_lets_go_of_the_fires_beyond_its_lead() {
    let t0 = Utc::now();
    let env = EnvId::new();
    let mut held = Held::default();
    for s in [1, 5, 30] {
        let (schedule, job) = fire(env, t0 + chrono::Duration::seconds(s));
        held.hold(schedule, job);
    }
    assert_eq!(
        held.leave_after(t0 + chrono::Duration::seconds(10)).len(),
        1
    );
    assert_eq!((held.count(), held.scheduled().len()), (2, 2));
    assert_eq!(
        held.take_to_hand_off(t0 + chrono::Duration::seconds(5))
            .len(),
        2
    );
}

#[test]
fn a_failed_hand_off_puts_its_fires_back_in_instant_order() {
    let t0 = Utc::now();
    let env = EnvId::new();
    let mut held = Held::default();
    for s in [3, 1, 2] {
        let (schedule, job) = fire(env, t0 + chrono::Duration::milliseconds(s * 100));
        held.hold(schedule, job);
    }
    let taken = held.take_to_hand_off(t0);
    assert_eq!(taken.len(), 3);
    let instants: Vec<_> = taken.iter().map(|(_, j)| j.scheduled_for).collect();
    assert!(instants.is_sorted());
    held.put_back(taken);
    assert_eq!(held.count(), 3);
    assert_eq!(held.scheduled().len(), 3, "still scheduled, still ours");
    assert_eq!(held.take_to_hand_off(t0).len(), 3);
}

#[test]
fn a_hand_off_that_falls_in_a_bursts_calls_begins_a_step_earlier() {
    use super::super::burst::{BURST_MIN, CLEAR_BEFORE};
    assert_eq!(
        CLEAR_BEFORE, HAND_OFF_STEP,
        "a hand-off moved a step early is clear of the burst"
    );
    let t0 = DateTime::parse_from_rfc3339("2030-01-01T00:00:10Z")
        .unwrap()
        .with_timezone(&Utc);
    let second = chrono::Duration::seconds(1);
    let step = chrono::Duration::from_std(HAND_OFF_STEP).unwrap();
    let env = EnvId::new();
    let mut held = Held::default();
    // Every second a burst: this second's fires are handed off, the next second's wait.
    let this: Vec<HandedOffFire> = (0..BURST_MIN)
        .map(|_| {
            let (schedule, job) = fire(env, t0);
            (schedule, job, None)
        })
        .collect();
    held.handed_off(this);
    for _ in 0..BURST_MIN {
        let (schedule, job) = fire(env, t0 + second);
        held.hold(schedule, job);
    }
    // Due at t0, the burst's instant: it begins a step before, and takes the next second's.
    assert_eq!(held.next_hand_off(), Some(t0 - step));
    assert!(
        held.take_to_hand_off(t0 - step - chrono::Duration::milliseconds(1))
            .is_empty()
    );
    assert_eq!(held.take_to_hand_off(t0 - step).len(), BURST_MIN);

    // A few fires are no burst: the hand-off keeps its time.
    let mut few = Held::default();
    let (schedule, job) = fire(env, t0);
    few.handed_off(vec![(schedule, job, None)]);
    let (schedule, job) = fire(env, t0 + second);
    few.hold(schedule, job);
    assert_eq!(few.next_hand_off(), Some(t0));
}
