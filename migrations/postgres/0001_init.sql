-- sentin8-cron schema, version 1.
--
-- Tenant tables carry env_id and are protected by row-level security (ENABLE + FORCE). The
-- service role (sentin8_cron_service, NOBYPASSRLS) sees a row only when the transaction-local
-- tenant context, set by cron.sentin8_set_tenant_context(env_id), names the row's env. The
-- engine's cross-tenant reads go through SECURITY DEFINER functions that return ids, instants
-- and counts only. Times are always passed in by the application; now() is never a decision.

CREATE SCHEMA IF NOT EXISTS cron;

-- The tenant context. NULLIF: once a transaction-local setting ends, the session keeps the
-- placeholder as '' rather than NULL.
CREATE FUNCTION cron.current_env_id() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT NULLIF(current_setting('sentin8.env_id', true), '')::uuid $$;

CREATE FUNCTION cron.sentin8_set_tenant_context(p_env_id uuid) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF p_env_id IS NULL THEN
        RAISE EXCEPTION 'tenant context requires an env_id';
    END IF;
    -- true: local to the current transaction, so it can never leak to the next user of the
    -- pooled connection.
    PERFORM set_config('sentin8.env_id', p_env_id::text, true);
END
$$;

CREATE TABLE cron.schedules (
    id            uuid PRIMARY KEY,
    env_id        uuid NOT NULL,
    domain        text NOT NULL CHECK (length(domain) BETWEEN 1 AND 128),
    schedule_type text NOT NULL CHECK (length(schedule_type) BETWEEN 1 AND 128),
    kind          text NOT NULL CHECK (kind IN ('cron', 'once')),
    cron_expr     text,
    timezone      text NOT NULL DEFAULT 'UTC',
    run_at        timestamptz,
    on_dst_gap    text NOT NULL DEFAULT 'shift' CHECK (on_dst_gap IN ('shift', 'skip')),
    on_dst_repeat text NOT NULL DEFAULT 'once' CHECK (on_dst_repeat IN ('once', 'twice')),
    target_config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(target_config) = 'object'),
    payload       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
    status        text NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'paused', 'completed', 'deleted')),
    next_run_at   timestamptz,
    last_run_at   timestamptz,
    retry_count   integer NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    max_retries   integer NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 100),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    created_by    text NOT NULL,
    updated_by    text NOT NULL,
    CONSTRAINT schedules_kind_timing CHECK (
        (kind = 'cron' AND cron_expr IS NOT NULL AND run_at IS NULL)
        OR (kind = 'once' AND run_at IS NOT NULL AND cron_expr IS NULL)),
    -- An active cron schedule always knows its next fire; an active one-shot schedule has none
    -- while its job is open (it becomes completed when the job succeeds or lands in the DLQ).
    CONSTRAINT schedules_active_has_next_run
        CHECK (status <> 'active' OR next_run_at IS NOT NULL OR kind = 'once'),
    -- Lets jobs and DLQ rows reference (id, env_id), so a child can never sit in another env.
    CONSTRAINT schedules_id_env UNIQUE (id, env_id)
);

CREATE UNIQUE INDEX sentin8_cron_schedules_type_per_domain
    ON cron.schedules (env_id, domain, schedule_type) WHERE status <> 'deleted';
CREATE INDEX sentin8_cron_schedules_due
    ON cron.schedules (next_run_at) WHERE status = 'active';
CREATE INDEX sentin8_cron_schedules_by_domain
    ON cron.schedules (env_id, domain, id) WHERE status <> 'deleted';
CREATE INDEX sentin8_cron_schedules_by_env
    ON cron.schedules (env_id, id);

CREATE TABLE cron.jobs (
    id              uuid PRIMARY KEY,
    schedule_id     uuid NOT NULL,
    env_id          uuid NOT NULL,
    status          text NOT NULL
                    CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'skipped')),
    attempt         integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    scheduled_for   timestamptz NOT NULL,
    next_attempt_at timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    result          jsonb,
    error           text,
    idempotency_key text NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT jobs_pending_has_next_attempt CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL),
    CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES cron.schedules (id, env_id)
);

-- Exactly one open job per schedule: the backstop to the advisory lock and the claim UPDATE.
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON cron.jobs (schedule_id) WHERE status IN ('pending', 'running');
-- The retryable-pending drain and stale-attempt recovery.
CREATE INDEX sentin8_cron_jobs_retryable ON cron.jobs (next_attempt_at) WHERE status = 'pending';
CREATE INDEX sentin8_cron_jobs_running ON cron.jobs (started_at) WHERE status = 'running';
CREATE INDEX sentin8_cron_jobs_by_env ON cron.jobs (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_schedule ON cron.jobs (schedule_id, id);

CREATE TABLE cron.dlq (
    id            uuid PRIMARY KEY,
    env_id        uuid NOT NULL,
    schedule_id   uuid NOT NULL,
    job_id        uuid NOT NULL REFERENCES cron.jobs (id),
    domain        text NOT NULL,
    schedule_type text NOT NULL,
    payload       jsonb NOT NULL DEFAULT '{}',
    attempts      integer NOT NULL CHECK (attempts >= 0),
    last_error    text NOT NULL,
    scheduled_for timestamptz NOT NULL,
    landed_at     timestamptz NOT NULL,
    CONSTRAINT dlq_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES cron.schedules (id, env_id)
);
CREATE INDEX sentin8_cron_dlq_by_env ON cron.dlq (env_id, id);
CREATE INDEX sentin8_cron_dlq_by_domain ON cron.dlq (env_id, domain, id);

-- The transactional outbox. seq orders the relay; writers of one schedule's events hold that
-- schedule's row lock, so per schedule seq order is commit order.
CREATE TABLE cron.outbox (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          uuid NOT NULL UNIQUE,
    env_id      uuid NOT NULL,
    schedule_id uuid,
    event_type  text NOT NULL,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    relayed_at  timestamptz,
    attempts    integer NOT NULL DEFAULT 0,
    last_error  text,
    parked_at   timestamptz
);
CREATE INDEX sentin8_cron_outbox_unrelayed ON cron.outbox (seq) WHERE relayed_at IS NULL;
CREATE INDEX sentin8_cron_outbox_by_env ON cron.outbox (env_id, seq);

CREATE TABLE cron.audit_journal (
    id             uuid PRIMARY KEY,
    env_id         uuid NOT NULL,
    actor          text NOT NULL,
    action         text NOT NULL,
    resource_type  text NOT NULL,
    resource_id    text NOT NULL,
    before         jsonb,
    after          jsonb,
    correlation_id text,
    at             timestamptz NOT NULL
);
CREATE INDEX sentin8_cron_audit_by_env ON cron.audit_journal (env_id, at, id);

-- Row-level security. Per-command policies, so a missing command (DELETE on schedules and
-- jobs, UPDATE on the DLQ and the journal) is denied even to a role that was granted it.
ALTER TABLE cron.schedules ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.schedules FORCE ROW LEVEL SECURITY;
CREATE POLICY schedules_select ON cron.schedules FOR SELECT USING (env_id = cron.current_env_id());
CREATE POLICY schedules_insert ON cron.schedules FOR INSERT WITH CHECK (env_id = cron.current_env_id());
CREATE POLICY schedules_update ON cron.schedules FOR UPDATE
    USING (env_id = cron.current_env_id()) WITH CHECK (env_id = cron.current_env_id());

ALTER TABLE cron.jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY jobs_select ON cron.jobs FOR SELECT USING (env_id = cron.current_env_id());
CREATE POLICY jobs_insert ON cron.jobs FOR INSERT WITH CHECK (env_id = cron.current_env_id());
CREATE POLICY jobs_update ON cron.jobs FOR UPDATE
    USING (env_id = cron.current_env_id()) WITH CHECK (env_id = cron.current_env_id());

ALTER TABLE cron.dlq ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.dlq FORCE ROW LEVEL SECURITY;
CREATE POLICY dlq_select ON cron.dlq FOR SELECT USING (env_id = cron.current_env_id());
CREATE POLICY dlq_insert ON cron.dlq FOR INSERT WITH CHECK (env_id = cron.current_env_id());
CREATE POLICY dlq_delete ON cron.dlq FOR DELETE USING (env_id = cron.current_env_id());

ALTER TABLE cron.outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.outbox FORCE ROW LEVEL SECURITY;
CREATE POLICY outbox_select ON cron.outbox FOR SELECT USING (env_id = cron.current_env_id());
CREATE POLICY outbox_insert ON cron.outbox FOR INSERT WITH CHECK (env_id = cron.current_env_id());

ALTER TABLE cron.audit_journal ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.audit_journal FORCE ROW LEVEL SECURITY;
CREATE POLICY audit_select ON cron.audit_journal FOR SELECT USING (env_id = cron.current_env_id());
CREATE POLICY audit_insert ON cron.audit_journal FOR INSERT WITH CHECK (env_id = cron.current_env_id());

-- The engine's cross-tenant reads. SECURITY DEFINER runs them as the schema owner (who must
-- bypass RLS); the pinned search_path keeps a caller from substituting objects.

-- Due active schedules, earliest first. At most p_limit rows (capped at 1000).
CREATE FUNCTION cron.due_schedules(p_limit integer DEFAULT 50, p_now timestamptz DEFAULT now())
    RETURNS TABLE (id uuid, env_id uuid, next_run_at timestamptz)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT s.id, s.env_id, s.next_run_at
      FROM cron.schedules s
     WHERE s.status = 'active' AND s.next_run_at <= p_now
     ORDER BY s.next_run_at
     LIMIT least(greatest(p_limit, 0), 1000)
$$;

-- Jobs whose next attempt is due, and running attempts that went stale, earliest first.
CREATE FUNCTION cron.due_jobs(p_limit integer, p_now timestamptz, p_stale_before timestamptz)
    RETURNS TABLE (id uuid, schedule_id uuid, env_id uuid, status text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT d.id, d.schedule_id, d.env_id, d.status FROM (
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.next_attempt_at AS due_at
           FROM cron.jobs j
          WHERE j.status = 'pending' AND j.next_attempt_at <= p_now
          ORDER BY j.next_attempt_at
          LIMIT least(greatest(p_limit, 0), 1000))
        UNION ALL
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.started_at AS due_at
           FROM cron.jobs j
          WHERE j.status = 'running' AND j.started_at < p_stale_before
          ORDER BY j.started_at
          LIMIT least(greatest(p_limit, 0), 1000))
    ) d
    ORDER BY d.due_at
    LIMIT least(greatest(p_limit, 0), 1000)
$$;

-- The earliest instant at which a schedule or a job attempt becomes due.
CREATE FUNCTION cron.next_wakeup() RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT least(
        (SELECT min(next_run_at) FROM cron.schedules WHERE status = 'active'),
        (SELECT min(next_attempt_at) FROM cron.jobs WHERE status = 'pending'))
$$;

-- The environments that have dead-letter entries: ids only, for the operator's listing.
CREATE FUNCTION cron.dlq_envs() RETURNS SETOF uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT DISTINCT env_id FROM cron.dlq ORDER BY env_id $$;

-- Aggregate counts for health and metrics: numbers only, no tenant rows.
CREATE FUNCTION cron.stats()
    RETURNS TABLE (schedules_active bigint, schedules_paused bigint, jobs_pending bigint,
                   jobs_running bigint, dlq_entries bigint, outbox_unrelayed bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT (SELECT count(*) FROM cron.schedules WHERE status = 'active'),
           (SELECT count(*) FROM cron.schedules WHERE status = 'paused'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'pending'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'running'),
           (SELECT count(*) FROM cron.dlq),
           (SELECT count(*) FROM cron.outbox WHERE relayed_at IS NULL)
$$;

-- The service role gets exactly what it needs, nothing by default.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA cron FROM PUBLIC;
GRANT USAGE ON SCHEMA cron TO sentin8_cron_service;
GRANT SELECT, INSERT, UPDATE ON cron.schedules, cron.jobs TO sentin8_cron_service;
GRANT SELECT, INSERT, DELETE ON cron.dlq TO sentin8_cron_service;
GRANT SELECT, INSERT ON cron.outbox, cron.audit_journal TO sentin8_cron_service;
GRANT EXECUTE ON FUNCTION cron.current_env_id(), cron.sentin8_set_tenant_context(uuid),
    cron.due_schedules(integer, timestamptz), cron.due_jobs(integer, timestamptz, timestamptz),
    cron.next_wakeup(), cron.dlq_envs(), cron.stats() TO sentin8_cron_service;
