-- sentin8-cron schema, version 1 (embedded SQLite).
--
-- The same tables, constraints and version number as the PostgreSQL schema, with these
-- differences, each forced by SQLite:
-- * no schemas: tables are unprefixed;
-- * no row-level security: tenant scoping is enforced by the storage code, where every tenant
--   statement is bound to the transaction's env_id by construction;
-- * no SECURITY DEFINER functions: the cross-tenant reads are plain queries in the store;
-- * uuids are TEXT (hyphenated, lower case), instants are INTEGER microseconds since the Unix
--   epoch (so they compare and sort as numbers), JSON is TEXT checked with json_valid().

CREATE TABLE schedules (
    id            TEXT PRIMARY KEY,
    env_id        TEXT NOT NULL,
    domain        TEXT NOT NULL CHECK (length(domain) BETWEEN 1 AND 128),
    schedule_type TEXT NOT NULL CHECK (length(schedule_type) BETWEEN 1 AND 128),
    kind          TEXT NOT NULL CHECK (kind IN ('cron', 'once')),
    cron_expr     TEXT,
    timezone      TEXT NOT NULL DEFAULT 'UTC',
    run_at        INTEGER,
    on_dst_gap    TEXT NOT NULL DEFAULT 'shift' CHECK (on_dst_gap IN ('shift', 'skip')),
    on_dst_repeat TEXT NOT NULL DEFAULT 'once' CHECK (on_dst_repeat IN ('once', 'twice')),
    target_config TEXT NOT NULL DEFAULT '{}'
                  CHECK (json_valid(target_config) AND json_type(target_config) = 'object'),
    payload       TEXT NOT NULL DEFAULT '{}'
                  CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    status        TEXT NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'paused', 'completed', 'deleted')),
    next_run_at   INTEGER,
    last_run_at   INTEGER,
    retry_count   INTEGER NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    max_retries   INTEGER NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 100),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    created_by    TEXT NOT NULL,
    updated_by    TEXT NOT NULL,
    CONSTRAINT schedules_kind_timing CHECK (
        (kind = 'cron' AND cron_expr IS NOT NULL AND run_at IS NULL)
        OR (kind = 'once' AND run_at IS NOT NULL AND cron_expr IS NULL)),
    -- An active cron schedule always knows its next fire; an active one-shot schedule has none
    -- while its job is open (it becomes completed when the job succeeds or lands in the DLQ).
    CONSTRAINT schedules_active_has_next_run
        CHECK (status <> 'active' OR next_run_at IS NOT NULL OR kind = 'once'),
    CONSTRAINT schedules_id_env UNIQUE (id, env_id)
);

CREATE UNIQUE INDEX sentin8_cron_schedules_type_per_domain
    ON schedules (env_id, domain, schedule_type) WHERE status <> 'deleted';
CREATE INDEX sentin8_cron_schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX sentin8_cron_schedules_by_domain
    ON schedules (env_id, domain, id) WHERE status <> 'deleted';
CREATE INDEX sentin8_cron_schedules_by_env ON schedules (env_id, id);

CREATE TABLE jobs (
    id              TEXT PRIMARY KEY,
    schedule_id     TEXT NOT NULL,
    env_id          TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'skipped')),
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
    CONSTRAINT jobs_pending_has_next_attempt CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL),
    CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);

CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON jobs (schedule_id) WHERE status IN ('pending', 'running');
CREATE INDEX sentin8_cron_jobs_retryable ON jobs (next_attempt_at) WHERE status = 'pending';
CREATE INDEX sentin8_cron_jobs_running ON jobs (started_at) WHERE status = 'running';
CREATE INDEX sentin8_cron_jobs_by_env ON jobs (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_schedule ON jobs (schedule_id, id);

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
    landed_at     INTEGER NOT NULL,
    CONSTRAINT dlq_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES schedules (id, env_id)
);
CREATE INDEX sentin8_cron_dlq_by_env ON dlq (env_id, id);
CREATE INDEX sentin8_cron_dlq_by_domain ON dlq (env_id, domain, id);

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
);
CREATE INDEX sentin8_cron_outbox_unrelayed ON outbox (seq) WHERE relayed_at IS NULL;
CREATE INDEX sentin8_cron_outbox_by_env ON outbox (env_id, seq);

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
);
CREATE INDEX sentin8_cron_audit_by_env ON audit_journal (env_id, at, id);
