-- sentin8-cron schema, version 24 (embedded SQLite): the overlap modes `buffer_all` and
-- `cancel_other`, and the `cancelled` job status (see the PostgreSQL migration of the same
-- version).
--
-- SQLite cannot change a CHECK constraint in place, so the schedules and jobs tables are
-- rebuilt (as in versions 10 and 17), keeping every column, constraint and index; the runner
-- turns foreign keys off around it and checks them before committing.

CREATE TABLE schedules_v24 (
    id               TEXT PRIMARY KEY,
    env_id           TEXT NOT NULL,
    domain           TEXT NOT NULL CHECK (length(domain) BETWEEN 1 AND 128),
    schedule_type    TEXT NOT NULL CHECK (length(schedule_type) BETWEEN 1 AND 128),
    kind             TEXT NOT NULL CHECK (kind IN ('cron', 'once')),
    cron_expr        TEXT,
    timezone         TEXT NOT NULL DEFAULT 'UTC',
    run_at           INTEGER,
    on_dst_gap       TEXT NOT NULL DEFAULT 'shift' CHECK (on_dst_gap IN ('shift', 'skip')),
    on_dst_repeat    TEXT NOT NULL DEFAULT 'once' CHECK (on_dst_repeat IN ('once', 'twice')),
    target_config    TEXT NOT NULL DEFAULT '{}'
                     CHECK (json_valid(target_config) AND json_type(target_config) = 'object'),
    payload          TEXT NOT NULL DEFAULT '{}'
                     CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    status           TEXT NOT NULL DEFAULT 'active'
                     CHECK (status IN ('active', 'paused', 'completed', 'deleted')),
    next_run_at      INTEGER,
    last_run_at      INTEGER,
    retry_count      INTEGER NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    max_retries      INTEGER NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 100),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    created_by       TEXT NOT NULL,
    updated_by       TEXT NOT NULL,
    overlap          TEXT NOT NULL DEFAULT 'skip'
                     CHECK (overlap IN ('skip', 'buffer_one', 'allow_all', 'buffer_all',
                                        'cancel_other')),
    catchup_window_ms INTEGER NOT NULL DEFAULT 3600000 CHECK (catchup_window_ms > 0),
    max_jitter_ms    INTEGER NOT NULL DEFAULT 0 CHECK (max_jitter_ms >= 0),
    start_at         INTEGER,
    end_at           INTEGER CHECK (start_at IS NULL OR end_at IS NULL OR end_at > start_at),
    pause_on_failure INTEGER NOT NULL DEFAULT 0 CHECK (pause_on_failure IN (0, 1)),
    remaining_runs   INTEGER CHECK (remaining_runs >= 0),
    labels           TEXT NOT NULL DEFAULT '{}',
    after_completion TEXT NOT NULL DEFAULT 'keep' CHECK (after_completion IN ('keep', 'delete')),
    CONSTRAINT schedules_kind_timing CHECK (
        (kind = 'cron' AND cron_expr IS NOT NULL AND run_at IS NULL)
        OR (kind = 'once' AND run_at IS NOT NULL AND cron_expr IS NULL)),
    -- An active cron schedule always knows its next fire; an active one-shot schedule has none
    -- while its job is open (it becomes completed when the job succeeds or lands in the DLQ).
    CONSTRAINT schedules_active_has_next_run
        CHECK (status <> 'active' OR next_run_at IS NOT NULL OR kind = 'once'),
    CONSTRAINT schedules_id_env UNIQUE (id, env_id)
);
INSERT INTO schedules_v24 (id, env_id, domain, schedule_type, kind, cron_expr, timezone, run_at,
                           on_dst_gap, on_dst_repeat, target_config, payload, status,
                           next_run_at, last_run_at, retry_count, max_retries, created_at,
                           updated_at, created_by, updated_by, overlap, catchup_window_ms,
                           max_jitter_ms, start_at, end_at, pause_on_failure, remaining_runs,
                           labels, after_completion)
SELECT id, env_id, domain, schedule_type, kind, cron_expr, timezone, run_at,
       on_dst_gap, on_dst_repeat, target_config, payload, status,
       next_run_at, last_run_at, retry_count, max_retries, created_at,
       updated_at, created_by, updated_by, overlap, catchup_window_ms,
       max_jitter_ms, start_at, end_at, pause_on_failure, remaining_runs,
       labels, after_completion
  FROM schedules;
DROP TABLE schedules;
ALTER TABLE schedules_v24 RENAME TO schedules;

CREATE INDEX sentin8_cron_schedules_active_zone
    ON schedules (timezone, env_id) WHERE status = 'active' AND kind = 'cron';
CREATE INDEX sentin8_cron_schedules_by_domain
    ON schedules (env_id, domain, id) WHERE status <> 'deleted';
CREATE INDEX sentin8_cron_schedules_by_env ON schedules (env_id, id);
CREATE INDEX sentin8_cron_schedules_deleted ON schedules (updated_at) WHERE status = 'deleted';
CREATE INDEX sentin8_cron_schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE UNIQUE INDEX sentin8_cron_schedules_type_per_domain
    ON schedules (env_id, domain, schedule_type) WHERE status <> 'deleted';

CREATE TABLE jobs_v24 (
    id              TEXT PRIMARY KEY,
    schedule_id     TEXT NOT NULL,
    env_id          TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('scheduled', 'pending', 'running', 'succeeded', 'failed',
                                      'skipped', 'superseded', 'buffered', 'cancelled')),
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
    lease_epoch     INTEGER NOT NULL DEFAULT 0,
    called_at       INTEGER,
    CONSTRAINT jobs_pending_has_next_attempt CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL),
    CONSTRAINT jobs_missed_has_instants
        CHECK (missed_count = 0 OR (missed_first IS NOT NULL AND missed_last IS NOT NULL)),
    CONSTRAINT jobs_scheduled_not_started
        CHECK (status <> 'scheduled'
               OR (attempt = 1 AND started_at IS NULL AND lease_until IS NOT NULL)),
    CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);
INSERT INTO jobs_v24 (id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at,
                      started_at, finished_at, result, error, idempotency_key, created_at,
                      updated_at, missed_first, missed_last, missed_count, lease_until,
                      superseded_by, concurrent, backfill, lease_epoch, called_at)
SELECT id, schedule_id, env_id, status, attempt, scheduled_for, next_attempt_at,
       started_at, finished_at, result, error, idempotency_key, created_at,
       updated_at, missed_first, missed_last, missed_count, lease_until,
       superseded_by, concurrent, backfill, lease_epoch, called_at
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v24 RENAME TO jobs;

CREATE INDEX sentin8_cron_jobs_buffered ON jobs (schedule_id, backfill, scheduled_for)
    WHERE status = 'buffered';
CREATE INDEX sentin8_cron_jobs_by_env ON jobs (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON jobs (env_id, schedule_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON jobs (env_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_schedule ON jobs (schedule_id, id);
CREATE INDEX sentin8_cron_jobs_finished ON jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded', 'cancelled');
CREATE INDEX sentin8_cron_jobs_leases ON jobs (lease_until) WHERE status IN ('scheduled', 'running');
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON jobs (schedule_id) WHERE status IN ('scheduled', 'pending', 'running') AND NOT concurrent;
CREATE INDEX sentin8_cron_jobs_retryable ON jobs (next_attempt_at) WHERE status = 'pending';
