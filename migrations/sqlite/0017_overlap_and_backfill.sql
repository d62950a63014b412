-- sentin8-cron schema, version 17 (embedded SQLite): overlap policies and backfill (see the
-- PostgreSQL migration of the same version): the `buffered` status, the `concurrent` and
-- `backfill` flags, and the open-job index without concurrent jobs.
--
-- SQLite cannot change a CHECK constraint in place, so the jobs table is rebuilt as in
-- version 10, keeping every column, constraint and index.

CREATE TABLE jobs_v17 (
    id              TEXT PRIMARY KEY,
    schedule_id     TEXT NOT NULL,
    env_id          TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('scheduled', 'pending', 'running', 'succeeded', 'failed',
                                      'skipped', 'superseded', 'buffered')),
    attempt         INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    scheduled_for   INTEGER NOT NULL,
    next_attempt_at INTEGER,
    started_at      INTEGER,
    finished_at     INTEGER,
    result          TEXT CHECK (result IS NULL OR json_valid(result)),
    error           TEXT,
    idempotency_key TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    missed_first    INTEGER,
    missed_last     INTEGER,
    missed_count    INTEGER NOT NULL DEFAULT 0,
    lease_until     INTEGER,
    superseded_by   TEXT,
    concurrent      INTEGER NOT NULL DEFAULT 0 CHECK (concurrent IN (0, 1)),
    backfill        INTEGER NOT NULL DEFAULT 0 CHECK (backfill IN (0, 1)),
    CONSTRAINT jobs_pending_has_next_attempt CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL),
    CONSTRAINT jobs_missed_has_instants
        CHECK (missed_count = 0 OR (missed_first IS NOT NULL AND missed_last IS NOT NULL)),
    CONSTRAINT jobs_scheduled_not_started
        CHECK (status <> 'scheduled'
               OR (attempt = 1 AND started_at IS NULL AND lease_until IS NOT NULL)),
    CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);
INSERT INTO jobs_v17 (id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at,
                      started_at, finished_at, result, error, idempotency_key, created_at,
                      updated_at, missed_first, missed_last, missed_count, lease_until,
                      superseded_by)
SELECT id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at,
       started_at, finished_at, result, error, idempotency_key, created_at,
       updated_at, missed_first, missed_last, missed_count, lease_until,
       superseded_by
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v17 RENAME TO jobs;

CREATE INDEX sentin8_cron_jobs_by_env ON jobs (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON jobs (env_id, schedule_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON jobs (env_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_schedule ON jobs (schedule_id, id);
CREATE INDEX sentin8_cron_jobs_finished ON jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded');
CREATE INDEX sentin8_cron_jobs_leases ON jobs (lease_until) WHERE status IN ('scheduled', 'running');
CREATE INDEX sentin8_cron_jobs_retryable ON jobs (next_attempt_at) WHERE status = 'pending';
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON jobs (schedule_id) WHERE status IN ('scheduled', 'pending', 'running') AND NOT concurrent;
CREATE INDEX sentin8_cron_jobs_buffered ON jobs (schedule_id, backfill, scheduled_for)
    WHERE status = 'buffered';
