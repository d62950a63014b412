-- sentin8-cron schema, version 5 (embedded SQLite): the life cycle of jobs, dead letters and
-- the journal.
--
-- The same columns, statuses and indexes as the PostgreSQL migration, with these differences:
-- * SQLite cannot change a CHECK constraint in place, so the jobs table is rebuilt with the
--   new status (`superseded`) and column (`superseded_by`), and its indexes recreated. The
--   rebuild keeps every column, constraint and index of version 4 (missed occurrences and
--   leases), in the same column order, and adds version 4's missed-instants check, which
--   SQLite could not add to the existing table. The runner applies every migration with
--   foreign keys off and checks them before committing.
-- * Retention, the due-job selection and the wake-up are plain statements in the store.

CREATE TABLE jobs_v5 (
    id              TEXT PRIMARY KEY,
    schedule_id     TEXT NOT NULL,
    env_id          TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'skipped',
                                      'superseded')),
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
    CONSTRAINT jobs_pending_has_next_attempt CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL),
    CONSTRAINT jobs_missed_has_instants
        CHECK (missed_count = 0 OR (missed_first IS NOT NULL AND missed_last IS NOT NULL)),
    CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);
INSERT INTO jobs_v5 (id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at,
                     started_at, finished_at, result, error, idempotency_key, created_at,
                     updated_at, missed_first, missed_last, missed_count, lease_until)
SELECT id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at, started_at,
       finished_at, result, error, idempotency_key, created_at, updated_at, missed_first,
       missed_last, missed_count, lease_until
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v5 RENAME TO jobs;

CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON jobs (schedule_id) WHERE status IN ('pending', 'running');
CREATE INDEX sentin8_cron_jobs_retryable ON jobs (next_attempt_at) WHERE status = 'pending';
CREATE INDEX sentin8_cron_jobs_running ON jobs (started_at) WHERE status = 'running';
CREATE INDEX sentin8_cron_jobs_by_env ON jobs (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_schedule ON jobs (schedule_id, id);
CREATE INDEX sentin8_cron_jobs_leases ON jobs (lease_until) WHERE status = 'running';
CREATE INDEX sentin8_cron_jobs_finished ON jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded');
CREATE INDEX sentin8_cron_schedules_deleted ON schedules (updated_at) WHERE status = 'deleted';
CREATE INDEX sentin8_cron_dlq_by_job ON dlq (job_id);
CREATE INDEX sentin8_cron_dlq_by_schedule ON dlq (schedule_id);
CREATE INDEX sentin8_cron_audit_at ON audit_journal (at);

CREATE TABLE job_attempts (
    job_id           TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    env_id           TEXT NOT NULL,
    attempt          INTEGER NOT NULL CHECK (attempt >= 0),
    started_at       INTEGER,
    finished_at      INTEGER NOT NULL,
    duration_ms      INTEGER,
    outcome          TEXT NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'failed')),
    http_status      INTEGER,
    error_class      TEXT,
    error            TEXT,
    response_excerpt TEXT CHECK (length(CAST(response_excerpt AS BLOB)) <= 512),
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX sentin8_cron_job_attempts_by_env ON job_attempts (env_id, job_id);

ALTER TABLE audit_journal ADD COLUMN schedule_id TEXT;
UPDATE audit_journal SET schedule_id = resource_id
 WHERE resource_type = 'schedule' AND length(resource_id) = 36;
CREATE INDEX sentin8_cron_audit_by_schedule ON audit_journal (env_id, schedule_id, id);
CREATE INDEX sentin8_cron_audit_by_env_id ON audit_journal (env_id, id);
