//! The simulated side of a call: each instance's clock (which a freeze can hide from its lease
//! checks, the planted defect), and the owning service, in process and in virtual time, which
//! answers, fails or hangs as the seed says and keeps the ledger of every call made, checking
//! the promises about calls as they are made.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::clock::{Clock, ManualClock, Sleep};
use sentin8_cron::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use sentin8_cron::core::model::JobId;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Rng;

/// An instance's clock: a manual clock the world moves, whose monotonic reading can leave out
/// a freeze (`unseen`), the planted defect: an instance that cannot tell it stalled.
#[derive(Debug)]
pub struct SimClock {
    pub inner: ManualClock,
    unseen: AtomicU64,
}

impl SimClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            inner: ManualClock::new(start),
            unseen: AtomicU64::new(0),
        }
    }

    /// Hides `span` of monotonic time from the instance.
    pub fn hide(&self, span: StdDuration) {
        let micros = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
        self.unseen.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        self.inner.now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_> {
        self.inner.sleep_until(at)
    }

    fn monotonic(&self) -> StdDuration {
        let unseen = StdDuration::from_micros(self.unseen.load(Ordering::SeqCst));
        self.inner.monotonic().saturating_sub(unseen)
    }
}

/// How the service answers, drawn per call.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Ok(Duration),
    Fail(Duration),
    /// Never answers: the caller's timeout ends the call.
    Hang,
}

/// The service's behaviour for a seed: how often it fails or hangs, and how slow it is.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    pub fail_permille: u64,
    pub hang_permille: u64,
    /// The longest answer, in milliseconds.
    pub slowest_ms: i64,
}

impl Service {
    pub const HEALTHY: Service = Service {
        fail_permille: 0,
        hang_permille: 0,
        slowest_ms: 200,
    };
}

#[derive(Debug)]
struct InFlight {
    call: u64,
    instance: usize,
    /// Its instance stalled (or died) while it was out: a second call of the occurrence is
    /// inside the window the README documents.
    excused: bool,
}

/// Every call made, and what the checks found.
#[derive(Debug)]
struct Book {
    rng: Rng,
    service: Service,
    calls: u64,
    in_flight: HashMap<JobId, Vec<InFlight>>,
    /// Jobs whose success the store has recorded (as of the last look).
    succeeded: HashSet<JobId>,
    violations: Vec<String>,
    /// What happened, in order, for a replay to print.
    trace: Vec<String>,
}

/// The service's ledger, shared by every instance's target.
#[derive(Debug, Clone)]
pub struct Ledger(Arc<Mutex<Book>>);

impl Ledger {
    pub fn new(seed: u64) -> Self {
        Self(Arc::new(Mutex::new(Book {
            rng: Rng::new(seed ^ 0x5eed_ca11),
            service: Service::HEALTHY,
            calls: 0,
            in_flight: HashMap::new(),
            succeeded: HashSet::new(),
            violations: Vec::new(),
            trace: Vec::new(),
        })))
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_service(&self, service: Service) {
        self.book().service = service;
    }

    /// The store recorded these jobs' successes: a later call of any is a violation.
    pub fn succeeded(&self, jobs: impl IntoIterator<Item = JobId>) {
        self.book().succeeded.extend(jobs);
    }

    /// `instance` stalled or died: its calls out are in the documented window.
    pub fn excuse(&self, instance: usize) {
        for calls in self.book().in_flight.values_mut() {
            for call in calls.iter_mut().filter(|c| c.instance == instance) {
                call.excused = true;
            }
        }
    }

    /// Notes what the world did, in order with the calls.
    pub fn note(&self, what: String) {
        self.book().trace.push(what);
    }

    pub fn trace(&self) -> Vec<String> {
        self.book().trace.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.book().violations.clone()
    }

    pub fn calls(&self) -> u64 {
        self.book().calls
    }

    /// A call arrives from `instance` at `now` on its clock: checked, booked, and answered as
    /// the service's behaviour draws.
    fn arrive(&self, instance: usize, request: &RunRequest, now: DateTime<Utc>) -> (u64, Answer) {
        let mut book = self.book();
        book.calls += 1;
        let call = book.calls;
        book.trace.push(format!("call {call}:"));
        let job = request.job_id;
        if now < request.scheduled_for {
            book.violations.push(format!(
                "job {job} called at {now} by instance {instance}, before its instant {}",
                request.scheduled_for
            ));
        }
        if book.succeeded.contains(&job) {
            book.violations.push(format!(
                "job {job} (attempt {}) called at {now} by instance {instance} after its success was recorded",
                request.attempt
            ));
        }
        let out = book.in_flight.entry(job).or_default();
        if let Some(other) = out.iter().find(|c| !c.excused) {
            let first = other.call;
            let other = other.instance;
            book.violations.push(format!(
                "job {job} called at {now} by instance {instance} while instance {other}'s call {first} of it was in flight"
            ));
        }
        book.in_flight.entry(job).or_default().push(InFlight {
            call,
            instance,
            excused: false,
        });
        let service = book.service;
        let draw = book.rng.below(1000);
        let latency = Duration::milliseconds(book.rng.below(service.slowest_ms as u64 + 1) as i64);
        let answer = if draw < service.hang_permille {
            Answer::Hang
        } else if draw < service.hang_permille + service.fail_permille {
            Answer::Fail(latency)
        } else {
            Answer::Ok(latency)
        };
        book.trace.push(format!(
            "{now} instance {instance} calls job {job} attempt {} ({answer:?})",
            request.attempt
        ));
        (call, answer)
    }

    fn leave(&self, job: JobId, call: u64) {
        let mut book = self.book();
        book.trace.push(format!("call {call} of job {job} ends"));
        if let Some(out) = book.in_flight.get_mut(&job) {
            out.retain(|c| c.call != call);
            if out.is_empty() {
                book.in_flight.remove(&job);
            }
        }
    }
}

/// A call out, until it ends or its caller drops it (the caller died).
struct Out<'a> {
    ledger: &'a Ledger,
    job: JobId,
    call: u64,
}

impl Drop for Out<'_> {
    fn drop(&mut self) {
        self.ledger.leave(self.job, self.call);
    }
}

/// One instance's way to the service. Like the HTTP dispatcher it checks the attempt's fence
/// just before the request leaves; a frozen instance sends nothing, and sees no answer, until
/// it wakes.
pub struct SimTarget {
    pub instance: usize,
    pub clock: Arc<SimClock>,
    pub gate: watch::Receiver<bool>,
    pub ledger: Ledger,
}

impl SimTarget {
    async fn unfrozen(&self) {
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|frozen| !*frozen).await;
    }
}

#[async_trait]
impl Dispatcher for SimTarget {
    async fn run(&self, request: &RunRequest) -> Result<Value, DispatchError> {
        self.unfrozen().await;
        if request.fence.as_ref().is_some_and(|fence| !fence.holds()) {
            return Err(DispatchError::LeaseUnsure);
        }
        let (call, answer) = self.ledger.arrive(self.instance, request, self.clock.now());
        let _out = Out {
            ledger: &self.ledger,
            job: request.job_id,
            call,
        };
        let sent = self.clock.now();
        let result = match answer {
            Answer::Ok(latency) => {
                self.clock.sleep_until(sent + latency).await;
                Ok(json!({"ok": true}))
            }
            Answer::Fail(latency) => {
                self.clock.sleep_until(sent + latency).await;
                Err(DispatchError::Status(500, "simulated failure".into()))
            }
            Answer::Hang => std::future::pending().await,
        };
        self.unfrozen().await;
        result
    }
}
