-- The schema as the migrations leave it: a snapshot dumped by tests/it/schema_snapshot.rs
-- and checked in CI. Not applied by anything; the migrations are.

-- table audit_journal
CREATE TABLE audit_journal (
    id             TEXT PRIMARY KEY,
    env_id         TEXT NOT NULL,
    actor          TEXT NOT NULL,
    action         TEXT NOT NULL,
    resource_type  TEXT NOT NULL,
    resource_id    TEXT NOT NULL,
    before         TEXT CHECK (before IS NULL OR json_valid(before)),
    after          TEXT CHECK (after IS NULL OR json_valid(after)),
    correlation_id TEXT,
    at             INTEGER NOT NULL
, schedule_id TEXT);

-- index sentin8_cron_audit_at
CREATE INDEX sentin8_cron_audit_at ON audit_journal (at);

-- index sentin8_cron_audit_by_env
CREATE INDEX sentin8_cron_audit_by_env ON audit_journal (env_id, at, id);

-- index sentin8_cron_audit_by_env_id
CREATE INDEX sentin8_cron_audit_by_env_id ON audit_journal (env_id, id);

-- index sentin8_cron_audit_by_schedule
CREATE INDEX sentin8_cron_audit_by_schedule ON audit_journal (env_id, schedule_id, id);

-- table calendars
CREATE TABLE calendars (
    env_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    entries     TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    created_by  TEXT NOT NULL,
    updated_by  TEXT NOT NULL,
    PRIMARY KEY (env_id, name)
);

-- table dlq
CREATE TABLE dlq (
    id            TEXT PRIMARY KEY,
    env_id        TEXT NOT NULL,
    schedule_id   TEXT NOT NULL,
    job_id        TEXT NOT NULL REFERENCES jobs (id),
    domain        TEXT NOT NULL,
    schedule_type TEXT NOT NULL,
    payload       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    attempts      INTEGER NOT NULL CHECK (attempts >= 0),
    last_error    TEXT NOT NULL,
    scheduled_for INTEGER NOT NULL,
    landed_at     INTEGER NOT NULL, backfill INTEGER NOT NULL DEFAULT 0 CHECK (backfill IN (0, 1)),
    CONSTRAINT dlq_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);

-- index sentin8_cron_dlq_by_domain
CREATE INDEX sentin8_cron_dlq_by_domain ON dlq (env_id, domain, id);

-- index sentin8_cron_dlq_by_env
CREATE INDEX sentin8_cron_dlq_by_env ON dlq (env_id, id);

-- index sentin8_cron_dlq_by_job
CREATE INDEX sentin8_cron_dlq_by_job ON dlq (job_id);

-- index sentin8_cron_dlq_by_schedule
CREATE INDEX sentin8_cron_dlq_by_schedule ON dlq (schedule_id);

-- table instances
CREATE TABLE instances (
    id      TEXT PRIMARY KEY,
    seen_at INTEGER NOT NULL
);

-- table job_answers
CREATE TABLE job_answers (
    job_id      TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    env_id      TEXT NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    answered_at INTEGER NOT NULL,
    answer      TEXT NOT NULL CHECK (json_valid(answer))
);

-- table job_attempts
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

-- index sentin8_cron_job_attempts_by_env
CREATE INDEX sentin8_cron_job_attempts_by_env ON job_attempts (env_id, job_id);

-- table jobs
CREATE TABLE "jobs" (
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

-- index sentin8_cron_jobs_buffered
CREATE INDEX sentin8_cron_jobs_buffered ON jobs (schedule_id, backfill, scheduled_for)
    WHERE status = 'buffered';

-- index sentin8_cron_jobs_by_env
CREATE INDEX sentin8_cron_jobs_by_env ON jobs (env_id, id);

-- index sentin8_cron_jobs_by_env_schedule_scheduled
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON jobs (env_id, schedule_id, scheduled_for);

-- index sentin8_cron_jobs_by_env_scheduled
CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON jobs (env_id, scheduled_for);

-- index sentin8_cron_jobs_by_schedule
CREATE INDEX sentin8_cron_jobs_by_schedule ON jobs (schedule_id, id);

-- index sentin8_cron_jobs_finished
CREATE INDEX sentin8_cron_jobs_finished ON jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded', 'cancelled');

-- index sentin8_cron_jobs_leases
CREATE INDEX sentin8_cron_jobs_leases ON jobs (lease_until) WHERE status IN ('scheduled', 'running');

-- index sentin8_cron_jobs_open
CREATE INDEX sentin8_cron_jobs_open ON jobs (schedule_id)
    WHERE status IN ('scheduled', 'pending', 'running');

-- index sentin8_cron_jobs_open_per_schedule
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON jobs (schedule_id) WHERE status IN ('scheduled', 'pending', 'running') AND NOT concurrent;

-- index sentin8_cron_jobs_retryable
CREATE INDEX sentin8_cron_jobs_retryable ON jobs (next_attempt_at) WHERE status = 'pending';

-- index sentin8_cron_jobs_running_unleased
CREATE INDEX sentin8_cron_jobs_running_unleased ON jobs (started_at)
    WHERE status = 'running' AND lease_until IS NULL;

-- table outbox
CREATE TABLE outbox (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    env_id      TEXT NOT NULL,
    schedule_id TEXT,
    event_type  TEXT NOT NULL,
    payload     TEXT NOT NULL CHECK (json_valid(payload)),
    created_at  INTEGER NOT NULL,
    relayed_at  INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    parked_at   INTEGER
, locked_until INTEGER, locked_by TEXT, next_attempt_at INTEGER);

-- index sentin8_cron_outbox_by_env
CREATE INDEX sentin8_cron_outbox_by_env ON outbox (env_id, seq);

-- index sentin8_cron_outbox_parked
CREATE INDEX sentin8_cron_outbox_parked
    ON outbox (seq) WHERE parked_at IS NOT NULL AND relayed_at IS NULL;

-- index sentin8_cron_outbox_pending_by_schedule
CREATE INDEX sentin8_cron_outbox_pending_by_schedule
    ON outbox (schedule_id, seq)
    WHERE relayed_at IS NULL AND parked_at IS NULL AND schedule_id IS NOT NULL;

-- index sentin8_cron_outbox_relayed
CREATE INDEX sentin8_cron_outbox_relayed ON outbox (relayed_at) WHERE relayed_at IS NOT NULL;

-- index sentin8_cron_outbox_unrelayed
CREATE INDEX sentin8_cron_outbox_unrelayed ON outbox (seq) WHERE relayed_at IS NULL;

-- table schedules
CREATE TABLE "schedules" (
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
    after_completion TEXT NOT NULL DEFAULT 'keep' CHECK (after_completion IN ('keep', 'delete')), exclude TEXT NOT NULL DEFAULT '[]',
    CONSTRAINT schedules_kind_timing CHECK (
        (kind = 'cron' AND cron_expr IS NOT NULL AND run_at IS NULL)
        OR (kind = 'once' AND run_at IS NOT NULL AND cron_expr IS NULL)),
    -- An active cron schedule always knows its next fire; an active one-shot schedule has none
    -- while its job is open (it becomes completed when the job succeeds or lands in the DLQ).
    CONSTRAINT schedules_active_has_next_run
        CHECK (status <> 'active' OR next_run_at IS NOT NULL OR kind = 'once'),
    CONSTRAINT schedules_id_env UNIQUE (id, env_id)
);

-- index sentin8_cron_schedules_active_zone
CREATE INDEX sentin8_cron_schedules_active_zone
    ON schedules (timezone, env_id) WHERE status = 'active' AND kind = 'cron';

-- index sentin8_cron_schedules_by_domain
CREATE INDEX sentin8_cron_schedules_by_domain
    ON schedules (env_id, domain, id) WHERE status <> 'deleted';

-- index sentin8_cron_schedules_by_env
CREATE INDEX sentin8_cron_schedules_by_env ON schedules (env_id, id);

-- index sentin8_cron_schedules_deleted
CREATE INDEX sentin8_cron_schedules_deleted ON schedules (updated_at) WHERE status = 'deleted';

-- index sentin8_cron_schedules_due
CREATE INDEX sentin8_cron_schedules_due ON schedules (next_run_at) WHERE status = 'active';

-- index sentin8_cron_schedules_type_per_domain
CREATE UNIQUE INDEX sentin8_cron_schedules_type_per_domain
    ON schedules (env_id, domain, schedule_type) WHERE status <> 'deleted';

-- table schema_migrations
CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL);
