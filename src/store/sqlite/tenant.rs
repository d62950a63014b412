//! The tenant transaction: every tenant read and write binds the transaction's own env id.

use std::sync::Arc;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, Transaction};

use super::{placeholder, query};
use crate::core::model::*;
use crate::core::store::*;
use crate::store::rows::hours::HoursDialect;
use crate::store::rows::{
    self, EXCLUSIVE_OPEN_JOB, JOB_COLUMNS, SCHEDULE_COLUMNS, Sql, TenantRows, Val,
};
use crate::store::{Rings, db_err};

pub(super) struct SqliteTenantTx {
    pub(super) tx: Transaction<'static, Sqlite>,
    pub(super) env_id: EnvId,
    on_commit: Rings,
}

impl SqliteTenantTx {
    pub(super) fn new(
        tx: Transaction<'static, Sqlite>,
        env_id: EnvId,
        signals: Arc<Signals>,
    ) -> Self {
        Self {
            tx,
            env_id,
            on_commit: Rings::new(signals),
        }
    }

    pub(super) fn env(&self) -> String {
        self.env_id.0.to_string()
    }

    /// Those of the schedules `ids` with jobs that match `predicate` (plain SQL), with how
    /// many, in one statement per 500 ids.
    async fn jobs_per_schedule(
        &mut self,
        ids: &[ScheduleId],
        predicate: &str,
    ) -> StoreResult<Vec<(ScheduleId, u32)>> {
        let mut found = Vec::new();
        for chunk in ids.chunks(500) {
            let mut sql = Sql::new(placeholder);
            let env = sql.val(Val::uuid(self.env_id.0));
            let list: Vec<String> = chunk.iter().map(|id| sql.val(Val::uuid(id.0))).collect();
            sql.text = format!(
                "SELECT schedule_id, count(*) AS n FROM jobs WHERE env_id = {env} \
                 AND schedule_id IN ({}) AND {predicate} GROUP BY schedule_id",
                list.join(", ")
            );
            for row in self.fetch_all(&sql).await? {
                let id: String = row.try_get("schedule_id").map_err(db_err)?;
                let n: i64 = row.try_get("n").map_err(db_err)?;
                let id = id.parse().map_err(|_| StoreError::Corrupt {
                    table: "jobs",
                    detail: format!("schedule_id {id:?} is not a uuid"),
                })?;
                found.push((ScheduleId(id), u32::try_from(n).unwrap_or(u32::MAX)));
            }
        }
        Ok(found)
    }
}

rows::tenant_rows!(SqliteTenantTx, SqliteRow, {
    const CONTAINS_IGNORING_CASE: fn(&str, &str) -> String =
        |column, needle| format!("instr(lower({column}), lower({needle})) > 0");
    // A label key holds no '"' (the label rules), so it can be quoted into a JSON path.
    const LABEL_VALUE: fn(&mut Sql, &str) -> String = |sql, key| {
        let path = sql.val(Val::text(format!("$.\"{key}\"")));
        format!("json_extract(labels, {path})")
    };
    // One connection serialises every transaction: plain reads are already exclusive.
    const FOR_UPDATE: &'static str = "";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = "";
    const HOURS: HoursDialect = HoursDialect {
        hour: "scheduled_for / 3600000000",
        late: "({first} - scheduled_for) / 1000",
    };
});

// The methods both backends run alike come from the macro; these are this backend's own.
rows::tenant_tx! {
impl TenantTx for SqliteTenantTx {
    fn notify_on_commit(&mut self, channel: Channel) {
        // One process owns the file in practice; other processes fall back to polling.
        self.on_commit.request(channel, false);
    }

    async fn schedule_get_many(
        &mut self,
        ids: &[ScheduleId],
        _for_update: bool,
    ) -> StoreResult<Vec<Schedule>> {
        // One connection serialises every transaction: plain reads are already exclusive.
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(schedule) = self.schedule_get(*id).await? {
                found.push(schedule);
            }
        }
        found.sort_by_key(|s| s.id);
        found.dedup_by_key(|s| s.id);
        Ok(found)
    }

    async fn schedule_claim_many(
        &mut self,
        claims: &[ScheduleClaim],
    ) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "UPDATE schedules SET next_run_at = ?4, updated_at = ?5, remaining_runs = ?6 \
             WHERE env_id = ?1 AND id = ?2 AND status = 'active' AND next_run_at = ?3 \
             RETURNING {SCHEDULE_COLUMNS}"
        );
        let mut claimed = Vec::with_capacity(claims.len());
        for claim in claims {
            let row = sqlx::query(&sql)
                .bind(self.env())
                .bind(claim.id.0.to_string())
                .bind(claim.expected_next_run_at.timestamp_micros())
                .bind(claim.next_run_at.map(|t| t.timestamp_micros()))
                .bind(claim.now.timestamp_micros())
                .bind(claim.remaining_runs)
                .fetch_optional(&mut *self.tx)
                .await
                .map_err(db_err)?;
            claimed.extend(rows::map_row(row.as_ref(), "schedules", rows::schedule)?);
        }
        Ok(claimed)
    }

    async fn jobs_waiting_count(&mut self) -> StoreResult<u64> {
        // One writing connection: a backfill's count and insert already exclude another's.
        rows::waiting_count(self).await
    }

    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
        let mut opened = Vec::with_capacity(new.len());
        for job in new {
            let columns = rows::job_insert(self.env_id, job);
            let mut sql = Sql::insert(placeholder, "jobs", columns, "");
            sql.text = format!(
                "{} ON CONFLICT (schedule_id) WHERE {EXCLUSIVE_OPEN_JOB} DO NOTHING \
                 RETURNING {JOB_COLUMNS}",
                sql.text
            );
            let row = self.fetch_optional(&sql).await?;
            opened.extend(rows::map_row(row.as_ref(), "jobs", rows::job)?);
        }
        Ok(opened)
    }

    async fn job_finish_many(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>> {
        let mut finished = Vec::with_capacity(finishes.len());
        for finish in finishes {
            let sql = rows::job_finish_sql(
                placeholder,
                Val::uuid(self.env_id.0),
                Val::uuid(finish.id.0),
                finish,
            );
            let row = self.fetch_optional(&sql).await?;
            if let Some(job) = rows::map_row(row.as_ref(), "jobs", rows::job)? {
                self.attempts_insert(&[finish]).await?;
                if let (None, Some(at)) = (finish.lease_expired_by, finish.detail.started_at) {
                    self.last_run_set(job.schedule_id, at).await?;
                }
                finished.push(job);
            }
        }
        let written: Vec<JobId> = finished.iter().map(|j| j.id).collect();
        rows::answers_forget(self, &written).await?;
        Ok(finished)
    }


    async fn outbox_insert_many(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        for event in events {
            let columns = rows::outbox_insert(self.env_id, event);
            let sql = Sql::insert(placeholder, "outbox", columns, "");
            query(&sql).execute(&mut *self.tx).await.map_err(db_err)?;
        }
        if !events.is_empty() {
            self.on_commit.request(Channel::Outbox, false);
        }
        Ok(())
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let this = *self;
        this.on_commit.commit(this.tx).await
    }
}
}
