-- sentin8-cron schema, version 10 (embedded SQLite): a fire claimed ahead is a job of its own
-- status, `scheduled` (see the PostgreSQL migration for its transitions and claim lease).
--
-- SQLite cannot change a CHECK constraint in place, so the jobs table is rebuilt with the new
-- status and the `scheduled` check, keeping every column (in the same order), constraint and
-- index of version 9; the open-job index and the leases index take `scheduled` in. The due-job
-- selection, the wake-up and the hand-off are plain statements in the store.

CREATE TABLE jobs_v10 (
    id              TEXT PRIMARY KEY,
    schedule_id     TEXT NOT NULL,
    env_id          TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('scheduled', 'pending', 'running', 'succeeded', 'failed',
                                      'skipped', 'superseded')),
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
    CONSTRAINT jobs_scheduled_not_started
        CHECK (status <> 'scheduled'
               OR (attempt = 1 AND started_at IS NULL AND lease_until IS NOT NULL)),
    CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);
INSERT INTO jobs_v10 (id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at,
                      started_at, finished_at, result, error, idempotency_key, created_at,
                      updated_at, missed_first, missed_last, missed_count, lease_until,
                      superseded_by)
SELECT id, schedule_id, env_id,
       -- The fires held by an instance of the previous version when it stopped.
       CASE WHEN status = 'running' AND attempt = 1 AND started_at IS NULL
            THEN 'scheduled' ELSE status END,
       attempt, scheduled_for, next_attempt_at, started_at, finished_at, result, error,
       idempotency_key, created_at, updated_at, missed_first, missed_last, missed_count,
       -- Their claim lease is the new one, two seconds past the instant.
       CASE WHEN status = 'running' AND attempt = 1 AND started_at IS NULL
            THEN scheduled_for + 2000000 ELSE lease_until END,
       superseded_by
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v10 RENAME TO jobs;

CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON jobs (schedule_id) WHERE status IN ('scheduled', 'pending', 'running');
CREATE INDEX sentin8_cron_jobs_retryable ON jobs (next_attempt_at) WHERE status = 'pending';
CREATE INDEX sentin8_cron_jobs_by_env ON jobs (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_schedule ON jobs (schedule_id, id);
CREATE INDEX sentin8_cron_jobs_leases ON jobs (lease_until) WHERE status IN ('scheduled', 'running');
CREATE INDEX sentin8_cron_jobs_finished ON jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded');
CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON jobs (env_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON jobs (env_id, schedule_id, scheduled_for);
