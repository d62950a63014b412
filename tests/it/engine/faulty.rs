//! A store wrapper for fault tests: it can hold up or refuse the tenant transactions the
//! recorder opens (the claim runs on its locks' own connection, so it is not affected), fail
//! every call as if the database were down, or run a hook when a claim takes its locks (to move
//! the clock in the middle of a claim). The simulator also freezes it (nothing its instance asks
//! goes out until it wakes) and has it refuse a share of what it is asked.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use tokio::sync::watch;

pub struct FaultyStore {
    inner: Arc<dyn Store>,
    /// While true, `tenant_begin` waits.
    held: watch::Sender<bool>,
    down: AtomicBool,
    /// While true, `tenant_begin` fails (the recorder's transactions).
    refuse_tenant: AtomicBool,
    /// Tenant transactions refused so far.
    refused: AtomicUsize,
    /// Lease renewals that went through.
    renewals: AtomicUsize,
    /// Run once, the next time a claim takes its schedule locks.
    on_locks: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// While true, the answer of the wake-up query (the last read of a round) waits.
    held_wakeup: watch::Sender<bool>,
    /// Wake-up queries answered so far.
    wakeups: AtomicUsize,
    /// Hand-offs to write and then answer with an error (the answer lost on its way).
    lose_hand_offs: AtomicUsize,
    /// While true, every call waits: the instance using this store is frozen.
    frozen: watch::Sender<bool>,
    /// Calls refused, per thousand (drawn from `draws`, a sequence fixed by `seed`).
    fail_permille: AtomicU32,
    /// Calls held up for a few milliseconds, per thousand (drawn likewise).
    slow_permille: AtomicU32,
    draws: AtomicU64,
    seed: AtomicU64,
    /// Run whenever a lease renewal is refused.
    on_refused_renewal: Mutex<Option<Box<dyn Fn() + Send>>>,
    /// Schema reads (health's probe) asked for so far.
    schema_reads: AtomicUsize,
    /// While true, answers written ahead of their records wait.
    held_answers: watch::Sender<bool>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            held: watch::channel(false).0,
            down: AtomicBool::new(false),
            refuse_tenant: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
            renewals: AtomicUsize::new(0),
            on_locks: Mutex::new(None),
            held_wakeup: watch::channel(false).0,
            wakeups: AtomicUsize::new(0),
            lose_hand_offs: AtomicUsize::new(0),
            frozen: watch::channel(false).0,
            fail_permille: AtomicU32::new(0),
            slow_permille: AtomicU32::new(0),
            draws: AtomicU64::new(0),
            seed: AtomicU64::new(0),
            on_refused_renewal: Mutex::new(None),
            schema_reads: AtomicUsize::new(0),
            held_answers: watch::channel(false).0,
        })
    }

    /// While `held`, answers written ahead of their records wait (as tenant transactions do
    /// under [`FaultyStore::hold_tenant_transactions`]).
    pub fn hold_answers(&self, held: bool) {
        self.held_answers.send_replace(held);
    }

    /// Schema reads (health's database probe) asked for so far.
    pub fn schema_reads(&self) -> usize {
        self.schema_reads.load(Ordering::SeqCst)
    }

    /// Runs `hook` whenever a lease renewal is refused (the instance may lose its leases).
    pub fn when_renewal_refused(&self, hook: impl Fn() + Send + 'static) {
        *self.on_refused_renewal.lock().unwrap() = Some(Box::new(hook));
    }

    /// Freezes (or wakes) the instance's side of the store: while frozen, every call waits
    /// before it goes out, as a stopped process sends nothing.
    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }

    /// Waits while the store is frozen (the instance's calls wait on it too).
    pub fn gate(&self) -> watch::Receiver<bool> {
        self.frozen.subscribe()
    }

    /// Refuses `permille` of every thousand calls from now on, drawn from a sequence fixed by
    /// `seed` (0: none).
    pub fn fail_some(&self, permille: u32, seed: u64) {
        self.seed.store(seed, Ordering::SeqCst);
        self.fail_permille.store(permille, Ordering::SeqCst);
    }

    /// Holds up `permille` of every thousand calls for 1-8 ms (a slow database: the
    /// instances' work interleaves differently).
    pub fn slow_some(&self, permille: u32) {
        self.slow_permille.store(permille, Ordering::SeqCst);
    }

    /// Lets a call go out: not while frozen, not while down, and not if it is one of those
    /// drawn to fail.
    async fn pass(&self) -> StoreResult<()> {
        let mut frozen = self.frozen.subscribe();
        let _ = frozen.wait_for(|frozen| !*frozen).await;
        self.check()?;
        let permille = self.fail_permille.load(Ordering::SeqCst);
        let slow = self.slow_permille.load(Ordering::SeqCst);
        if permille > 0 || slow > 0 {
            let draw = self.draws.fetch_add(1, Ordering::SeqCst);
            let seed = self.seed.load(Ordering::SeqCst);
            let x = crate::sim::mix(seed ^ draw);
            if (x >> 20) % 1000 < u64::from(slow) {
                tokio::time::sleep(std::time::Duration::from_millis(1 + (x >> 40) % 8)).await;
            }
            if x % 1000 < u64::from(permille) {
                return Err(StoreError::Database(
                    "the database did not answer (simulated)".into(),
                ));
            }
        }
        Ok(())
    }

    /// Runs `hook` the next time a claim takes its schedule locks (after the claim chose what
    /// to take, before it reads the schedules under their locks).
    pub fn when_claim_locks(&self, hook: impl FnOnce() + Send + 'static) {
        *self.on_locks.lock().unwrap() = Some(Box::new(hook));
    }

    /// Holds up (or releases) the answer of the wake-up query, so a test can change what is
    /// due after a round read it and before the round ends.
    pub fn hold_wakeup(&self, held: bool) {
        self.held_wakeup.send_replace(held);
    }

    /// Wake-up queries answered so far (held or not).
    pub fn wakeups(&self) -> usize {
        self.wakeups.load(Ordering::SeqCst)
    }

    /// The next `n` hand-offs are written, then answered with an error, as when the
    /// connection (or the primary) goes away between the commit and its answer.
    pub fn lose_hand_off_answers(&self, n: usize) {
        self.lose_hand_offs.store(n, Ordering::SeqCst);
    }

    /// Holds up (or releases) tenant transactions opened on the store itself.
    pub fn hold_tenant_transactions(&self, held: bool) {
        self.held.send_replace(held);
    }

    /// Makes tenant transactions opened on the store itself fail (or work again).
    pub fn refuse_tenant_transactions(&self, refuse: bool) {
        self.refuse_tenant.store(refuse, Ordering::SeqCst);
    }

    /// Tenant transactions refused so far.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// Lease renewals that went through so far.
    pub fn renewals(&self) -> usize {
        self.renewals.load(Ordering::SeqCst)
    }

    /// Makes every call fail (or work again).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn check(&self) -> StoreResult<()> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Database("the database is down".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for FaultyStore {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn signals(&self) -> Arc<Signals> {
        self.inner.signals()
    }
    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        let mut held = self.held.subscribe();
        let _ = held.wait_for(|held| !*held).await;
        self.pass().await?;
        if self.refuse_tenant.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::Database("connection refused".into()));
        }
        self.inner.tenant_begin(env_id).await
    }
    async fn schedule_locks_try(&self, ids: &[ScheduleId]) -> StoreResult<Box<dyn ScheduleLock>> {
        self.pass().await?;
        let hook = self.on_locks.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.schedule_locks_try(ids).await
    }
    async fn schedules_due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
        seed: u32,
        share: Option<Share>,
    ) -> StoreResult<Vec<DueSchedule>> {
        self.pass().await?;
        self.inner.schedules_due(now, limit, seed, share).await
    }
    async fn instance_beat(
        &self,
        id: uuid::Uuid,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
    ) -> StoreResult<Vec<uuid::Uuid>> {
        self.pass().await?;
        self.inner.instance_beat(id, now, stale_before).await
    }
    async fn instance_leave(&self, id: uuid::Uuid) -> StoreResult<()> {
        self.pass().await?;
        self.inner.instance_leave(id).await
    }
    async fn jobs_due(
        &self,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DueJob>> {
        self.pass().await?;
        self.inner.jobs_due(now, stale_before, limit).await
    }
    async fn jobs_lease_renew(&self, renewal: &LeaseRenewal) -> StoreResult<Vec<JobId>> {
        if let Err(err) = self.pass().await {
            if let Some(hook) = &*self.on_refused_renewal.lock().unwrap() {
                hook();
            }
            return Err(err);
        }
        let renewed = self.inner.jobs_lease_renew(renewal).await?;
        self.renewals.fetch_add(1, Ordering::SeqCst);
        Ok(renewed)
    }
    async fn jobs_hand_off(
        &self,
        ids: &[JobId],
        lease: chrono::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<HandedOff>> {
        self.pass().await?;
        let handed = self.inner.jobs_hand_off(ids, lease, now).await?;
        let lose = self
            .lose_hand_offs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if lose.is_ok() {
            return Err(StoreError::Database(
                "connection reset after the commit".into(),
            ));
        }
        Ok(handed)
    }
    async fn statistics_refresh(&self) -> StoreResult<Vec<String>> {
        self.pass().await?;
        self.inner.statistics_refresh().await
    }

    async fn wakeup_next(&self) -> StoreResult<Option<DateTime<Utc>>> {
        self.pass().await?;
        let next = self.inner.wakeup_next().await;
        self.wakeups.fetch_add(1, Ordering::SeqCst);
        let mut held = self.held_wakeup.subscribe();
        let _ = held.wait_for(|held| !*held).await;
        next
    }
    async fn job_answers_put(&self, answers: &[JobAnswer]) -> StoreResult<u64> {
        let mut held = self.held_answers.subscribe();
        let _ = held.wait_for(|held| !*held).await;
        self.pass().await?;
        self.inner.job_answers_put(answers).await
    }
    async fn schedules_due_count(&self, until: DateTime<Utc>, cap: u32) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.schedules_due_count(until, cap).await
    }
    async fn dlq_envs(&self) -> StoreResult<Vec<EnvId>> {
        self.pass().await?;
        self.inner.dlq_envs().await
    }
    async fn stats_get(&self) -> StoreResult<StoreStats> {
        self.pass().await?;
        self.inner.stats_get().await
    }
    async fn outbox_parked_count(&self) -> StoreResult<i64> {
        self.pass().await?;
        self.inner.outbox_parked_count().await
    }
    async fn schedule_zones_active(&self) -> StoreResult<Vec<ZoneInUse>> {
        self.pass().await?;
        self.inner.schedule_zones_active().await
    }
    async fn envs_with_data(&self, limit: u32) -> StoreResult<Vec<EnvSummary>> {
        self.pass().await?;
        self.inner.envs_with_data(limit).await
    }
    async fn outbox_claim(&self, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>> {
        self.pass().await?;
        self.inner.outbox_claim(claim).await
    }
    async fn outbox_mark_relayed(&self, relayed: &OutboxRelayed) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.outbox_mark_relayed(relayed).await
    }
    async fn outbox_mark_failed(
        &self,
        failed: &OutboxFailed,
    ) -> StoreResult<Vec<OutboxFailureRecorded>> {
        self.pass().await?;
        self.inner.outbox_mark_failed(failed).await
    }
    async fn outbox_release(&self, release: &OutboxRelease) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.outbox_release(release).await
    }
    async fn outbox_purge(&self, purge: &OutboxPurge) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.outbox_purge(purge).await
    }
    async fn jobs_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.jobs_purge(purge).await
    }
    async fn audit_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.audit_purge(purge).await
    }
    async fn schedules_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        self.pass().await?;
        self.inner.schedules_purge(purge).await
    }
    async fn schema_status(&self) -> StoreResult<SchemaStatus> {
        self.schema_reads.fetch_add(1, Ordering::SeqCst);
        self.pass().await?;
        self.inner.schema_status().await
    }
}
