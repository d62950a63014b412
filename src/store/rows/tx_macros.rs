//! The two macros that give each backend its tenant transaction: [`tenant_tx!`] writes the
//! `TenantTx` methods both backends implement alike once (over the functions of `shared.rs`),
//! and [`tenant_rows!`] binds a backend's query runner and SQL spellings to [`TenantRows`].
//!
//! [`TenantRows`]: super::TenantRows

/// A backend's `impl TenantTx` with the methods both backends implement alike written once:
/// `tenant_tx! { impl TenantTx for Backend { its own methods } }`. The backend also implements
/// [`TenantRows`] and has an `env_id` field. (The whole impl is generated so that `async_trait` sees every method.)
macro_rules! tenant_tx {
    (impl TenantTx for $backend:ty { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl TenantTx for $backend {
        $($own)*
        fn env_id(&self) -> $crate::core::model::EnvId {
            self.env_id
        }

        async fn schedule_insert(&mut self, new: &NewSchedule) -> StoreResult<Schedule> {
            $crate::store::rows::insert_schedule(self, new).await
        }

        async fn schedule_insert_many(
            &mut self,
            news: &[NewSchedule],
        ) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::insert_schedules(self, news).await
        }

        async fn calendars_named(
            &mut self,
            names: &[String],
            lock: bool,
        ) -> StoreResult<Vec<$crate::core::calendar::Calendar>> {
            let lock = if lock {
                <Self as $crate::store::rows::TenantRows>::FOR_UPDATE
            } else {
                ""
            };
            $crate::store::rows::calendars_named(self, names, lock).await
        }

        async fn calendar_list(&mut self) -> StoreResult<Vec<$crate::core::calendar::Calendar>> {
            $crate::store::rows::calendar_list(self).await
        }

        async fn calendar_put(
            &mut self,
            calendar: &$crate::core::calendar::Calendar,
        ) -> StoreResult<()> {
            $crate::store::rows::calendar_put(self, calendar).await
        }

        async fn calendar_delete(&mut self, name: &str) -> StoreResult<bool> {
            $crate::store::rows::calendar_delete(self, name).await
        }

        async fn schedules_naming_calendar(
            &mut self,
            name: &str,
        ) -> StoreResult<Vec<ScheduleId>> {
            $crate::store::rows::schedules_naming_calendar(self, name).await
        }

        async fn schedule_get(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
            $crate::store::rows::schedule_by_id(self, id, "").await
        }

        async fn schedule_get_for_update(
            &mut self,
            id: ScheduleId,
        ) -> StoreResult<Option<Schedule>> {
            let lock = <Self as $crate::store::rows::TenantRows>::FOR_UPDATE;
            $crate::store::rows::schedule_by_id(self, id, lock).await
        }

        // Each backend asks "which of these schedules have such jobs, how many" its own way
        // (`jobs_per_schedule`); what they ask is the same.
        async fn schedules_with_open_job(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            let found = self.jobs_per_schedule(ids, $crate::store::rows::OPEN_JOB).await?;
            Ok($crate::store::rows::only_ids(found))
        }

        async fn schedules_with_buffered(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            let found = self.jobs_per_schedule(ids, "status = 'buffered'").await?;
            Ok($crate::store::rows::only_ids(found))
        }

        async fn schedules_with_job_for_next_call(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            let found = self.jobs_per_schedule(ids, $crate::store::rows::JOB_FOR_NEXT_CALL).await?;
            Ok($crate::store::rows::only_ids(found))
        }

        async fn schedules_with_held_fire(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            let found = self.jobs_per_schedule(ids, "status = 'scheduled'").await?;
            Ok($crate::store::rows::only_ids(found))
        }

        async fn buffered_occurrence_counts(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<(ScheduleId, u32)>> {
            self.jobs_per_schedule(ids, "status = 'buffered' AND NOT backfill")
                .await
        }

        async fn jobs_open_of(&mut self, ids: &[ScheduleId]) -> StoreResult<Vec<Job>> {
            $crate::store::rows::open_jobs_of(self, ids).await
        }

        async fn schedule_list_in_zone(&mut self, timezone: &str) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::schedules_in_zone(self, timezone).await
        }

        async fn job_hours(&mut self, query: &JobHoursQuery) -> StoreResult<JobHours> {
            $crate::store::rows::hours::job_hours_of(self, query).await
        }

        async fn schedule_get_by_type(
            &mut self,
            domain: &str,
            schedule_type: &str,
        ) -> StoreResult<Option<Schedule>> {
            $crate::store::rows::schedule_by_type(self, domain, schedule_type).await
        }

        async fn job_list(&mut self, query: &JobQuery) -> StoreResult<Vec<Job>> {
            $crate::store::rows::jobs_page(self, query).await
        }

        async fn dlq_list(&mut self, query: &DlqQuery) -> StoreResult<Vec<DlqEntry>> {
            $crate::store::rows::dlq_page(self, query).await
        }

        async fn job_claim(&mut self, claim: &JobClaim) -> StoreResult<Option<Job>> {
            $crate::store::rows::claim_retry(self, claim).await
        }

        async fn job_release_uncalled(
            &mut self,
            change: &UncalledRelease,
        ) -> StoreResult<Option<Job>> {
            $crate::store::rows::release_uncalled(self, change).await
        }

        async fn schedule_list_upcoming(&mut self, limit: u32) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::schedules_upcoming(self, limit).await
        }

        async fn schedule_set_next_run(
            &mut self,
            change: &ScheduleSetNextRun,
        ) -> StoreResult<Option<Schedule>> {
            $crate::store::rows::set_schedule_guarded(
                self,
                change.id,
                $crate::store::rows::schedule_set_next_run(change),
            )
            .await
        }

        async fn schedule_set_definition(
            &mut self,
            change: &ScheduleSetDefinition,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_definition(change),
            )
            .await
        }

        async fn schedule_set_status(
            &mut self,
            change: &ScheduleSetStatus,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_status(change),
            )
            .await
        }

        async fn schedule_set_deleted(
            &mut self,
            change: &ScheduleSetDeleted,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_deleted(change),
            )
            .await
        }

        async fn schedule_set_outcome(
            &mut self,
            change: &ScheduleSetOutcome,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_outcome(change),
            )
            .await
        }

        async fn job_attempts_list(&mut self, job_id: JobId) -> StoreResult<Vec<JobAttempt>> {
            $crate::store::rows::attempts_of(self, job_id).await
        }

        async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>> {
            $crate::store::rows::open_job(self, schedule_id).await
        }

        async fn schedule_list(&mut self, query: &ScheduleQuery) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::schedules_page(self, query).await
        }

        async fn job_set_superseded(
            &mut self,
            change: &JobSetSuperseded,
        ) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_set_superseded(change),
            )
            .await
        }

        async fn job_insert(&mut self, new: &NewJob) -> StoreResult<Job> {
            $crate::store::rows::insert_job(self, new).await
        }

        async fn job_insert_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
            $crate::store::rows::insert_jobs(self, new).await
        }

        async fn job_answer_get(
            &mut self,
            id: JobId,
            attempt: i32,
        ) -> StoreResult<Option<JobAnswer>> {
            $crate::store::rows::answer_of(self, id, attempt).await
        }

        async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>> {
            let row = $crate::store::rows::row_by_id(
                self,
                "jobs",
                $crate::store::rows::JOB_COLUMNS,
                id.0,
                "",
            )
            .await?;
            $crate::store::rows::map_row(row.as_ref(), "jobs", $crate::store::rows::job)
        }

        async fn job_set_pending(&mut self, change: &JobSetPending) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_set_pending(change),
            )
            .await
        }

        async fn job_cancel(&mut self, change: &JobCancel) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_cancel(change))
                .await
        }

        async fn job_withdraw(&mut self, change: &JobWithdraw) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_withdraw(change))
                .await
        }

        async fn job_replace(&mut self, change: &JobReplace) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_replace(change))
                .await
        }

        async fn job_release(&mut self, change: &JobRelease) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_release(change))
                .await
        }

        async fn jobs_of_schedule(
            &mut self,
            schedule_id: ScheduleId,
            statuses: &[JobStatus],
        ) -> StoreResult<Vec<Job>> {
            $crate::store::rows::jobs_in_status(self, schedule_id, statuses).await
        }

        async fn jobs_buffered_first(
            &mut self,
            schedule_id: ScheduleId,
            concurrent: bool,
            limit: usize,
        ) -> StoreResult<Vec<Job>> {
            $crate::store::rows::buffered_first(self, schedule_id, concurrent, limit).await
        }

        async fn job_release_buffered(&mut self, change: &JobRelease) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_release_buffered(change),
            )
            .await
        }

        async fn job_drop_buffered(&mut self, change: &JobCancel) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_drop_buffered(change),
            )
            .await
        }

        async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry> {
            $crate::store::rows::insert_dlq(self, new).await
        }

        async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>> {
            let row =
                $crate::store::rows::row_by_id(self, "dlq", $crate::store::rows::DLQ_COLUMNS, id.0, "")
                    .await?;
            $crate::store::rows::map_row(row.as_ref(), "dlq", $crate::store::rows::dlq)
        }

        async fn dlq_delete(&mut self, id: DlqId) -> StoreResult<bool> {
            $crate::store::rows::delete_by_id(self, "dlq", id.0).await
        }

        async fn env_counts(&mut self) -> StoreResult<EnvCounts> {
            $crate::store::rows::counts(self).await
        }

        async fn schedule_job_counts(
            &mut self,
            id: ScheduleId,
            since: ::chrono::DateTime<::chrono::Utc>,
        ) -> StoreResult<ScheduleJobCounts> {
            $crate::store::rows::schedule_job_counts(self, id, since).await
        }

        async fn outbox_list(
            &mut self,
            after_seq: i64,
            limit: u32,
        ) -> StoreResult<Vec<OutboxEvent>> {
            $crate::store::rows::outbox_after(self, after_seq, limit).await
        }

        async fn audit_insert_many(&mut self, entries: &[NewAudit]) -> StoreResult<()> {
            $crate::store::rows::insert_audits(self, entries).await
        }

        async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
            $crate::store::rows::audit_first(self, limit).await
        }

        async fn audit_query(&mut self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
            $crate::store::rows::audit_page(self, query).await
        }
        }
    };
}
pub(crate) use tenant_tx;

/// A backend tenant transaction's [`TenantRows`]: its `tx` runs the backend's `query` (the
/// statement with its values bound, named at the expansion site) with `placeholder`; the
/// block holds the backend's spellings (`CONTAINS_IGNORING_CASE`, `FOR_UPDATE`, ...):
/// `tenant_rows!(Backend, Row, { const ...; })`.
macro_rules! tenant_rows {
    ($backend:ty, $row:ty, { $($dialect:tt)* }) => {
        impl $crate::store::rows::TenantRows for $backend {
            type Row = $row;
            const PLACEHOLDER: $crate::store::rows::Placeholder = placeholder;
            $($dialect)*

            fn tenant(&self) -> EnvId {
                self.env_id
            }

            async fn fetch_optional(
                &mut self,
                sql: &$crate::store::rows::Sql,
            ) -> StoreResult<Option<$row>> {
                query(sql)
                    .fetch_optional(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)
            }

            async fn fetch_one(&mut self, sql: &$crate::store::rows::Sql) -> StoreResult<$row> {
                query(sql)
                    .fetch_one(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)
            }

            async fn fetch_all(
                &mut self,
                sql: &$crate::store::rows::Sql,
            ) -> StoreResult<Vec<$row>> {
                query(sql)
                    .fetch_all(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)
            }

            async fn execute(&mut self, sql: &$crate::store::rows::Sql) -> StoreResult<u64> {
                let done = query(sql)
                    .execute(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use tenant_rows;
