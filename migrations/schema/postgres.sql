-- The schema as the migrations leave it: a snapshot dumped by tests/it/schema_snapshot.rs
-- and checked in CI. Not applied by anything; the migrations are.

-- table cron.audit_journal
--   id uuid NOT NULL
--   env_id uuid NOT NULL
--   actor text NOT NULL
--   action text NOT NULL
--   resource_type text NOT NULL
--   resource_id text NOT NULL
--   before jsonb
--   after jsonb
--   correlation_id text
--   at timestamp with time zone NOT NULL
--   schedule_id uuid
--   CONSTRAINT audit_journal_pkey PRIMARY KEY (id)
--   row level security: true, forced: true
CREATE UNIQUE INDEX audit_journal_pkey ON cron.audit_journal USING btree (id);
CREATE INDEX sentin8_cron_audit_at ON cron.audit_journal USING btree (at);
CREATE INDEX sentin8_cron_audit_by_env ON cron.audit_journal USING btree (env_id, at, id);
CREATE INDEX sentin8_cron_audit_by_env_id ON cron.audit_journal USING btree (env_id, id);
CREATE INDEX sentin8_cron_audit_by_schedule ON cron.audit_journal USING btree (env_id, schedule_id, id);

-- table cron.calendars
--   env_id uuid NOT NULL
--   name text NOT NULL
--   description text NOT NULL DEFAULT ''::text
--   entries jsonb NOT NULL DEFAULT '[]'::jsonb
--   created_at timestamp with time zone NOT NULL
--   updated_at timestamp with time zone NOT NULL
--   created_by text NOT NULL
--   updated_by text NOT NULL
--   CONSTRAINT calendars_name_check CHECK ((name ~ '^[A-Za-z][A-Za-z0-9_-]{0,62}$'::text))
--   CONSTRAINT calendars_pkey PRIMARY KEY (env_id, name)
--   row level security: true, forced: true
CREATE UNIQUE INDEX calendars_pkey ON cron.calendars USING btree (env_id, name);

-- table cron.dlq
--   id uuid NOT NULL
--   env_id uuid NOT NULL
--   schedule_id uuid NOT NULL
--   job_id uuid NOT NULL
--   domain text NOT NULL
--   schedule_type text NOT NULL
--   payload jsonb NOT NULL DEFAULT '{}'::jsonb
--   attempts integer NOT NULL
--   last_error text NOT NULL
--   scheduled_for timestamp with time zone NOT NULL
--   landed_at timestamp with time zone NOT NULL
--   backfill boolean NOT NULL DEFAULT false
--   CONSTRAINT dlq_attempts_check CHECK ((attempts >= 0))
--   CONSTRAINT dlq_job_id_fkey FOREIGN KEY (job_id) REFERENCES cron.jobs(id)
--   CONSTRAINT dlq_pkey PRIMARY KEY (id)
--   CONSTRAINT dlq_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES cron.schedules(id, env_id)
--   row level security: true, forced: true
CREATE UNIQUE INDEX dlq_pkey ON cron.dlq USING btree (id);
CREATE INDEX sentin8_cron_dlq_by_domain ON cron.dlq USING btree (env_id, domain, id);
CREATE INDEX sentin8_cron_dlq_by_env ON cron.dlq USING btree (env_id, id);
CREATE INDEX sentin8_cron_dlq_by_job ON cron.dlq USING btree (job_id);
CREATE INDEX sentin8_cron_dlq_by_schedule ON cron.dlq USING btree (schedule_id);

-- table cron.instances
--   id uuid NOT NULL
--   seen_at timestamp with time zone NOT NULL
--   CONSTRAINT instances_pkey PRIMARY KEY (id)
--   row level security: false, forced: false
CREATE UNIQUE INDEX instances_pkey ON cron.instances USING btree (id);

-- table cron.job_answers
--   job_id uuid NOT NULL
--   env_id uuid NOT NULL
--   attempt integer NOT NULL
--   answered_at timestamp with time zone NOT NULL
--   answer jsonb NOT NULL
--   CONSTRAINT job_answers_attempt_check CHECK ((attempt >= 1))
--   CONSTRAINT job_answers_pkey PRIMARY KEY (job_id)
--   row level security: true, forced: true
CREATE UNIQUE INDEX job_answers_pkey ON cron.job_answers USING btree (job_id);

-- table cron.job_attempts
--   job_id uuid NOT NULL
--   env_id uuid NOT NULL
--   attempt integer NOT NULL
--   started_at timestamp with time zone
--   finished_at timestamp with time zone NOT NULL
--   duration_ms bigint
--   outcome text NOT NULL
--   http_status integer
--   error_class text
--   error text
--   response_excerpt text
--   CONSTRAINT job_attempts_attempt_check CHECK ((attempt >= 0))
--   CONSTRAINT job_attempts_job_id_fkey FOREIGN KEY (job_id) REFERENCES cron.jobs(id) ON DELETE CASCADE
--   CONSTRAINT job_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'retry'::text, 'failed'::text])))
--   CONSTRAINT job_attempts_pkey PRIMARY KEY (job_id, attempt)
--   CONSTRAINT job_attempts_response_excerpt_check CHECK ((octet_length(response_excerpt) <= 512))
--   row level security: true, forced: true
CREATE UNIQUE INDEX job_attempts_pkey ON cron.job_attempts USING btree (job_id, attempt);
CREATE INDEX sentin8_cron_job_attempts_by_env ON cron.job_attempts USING btree (env_id, job_id);

-- table cron.jobs
--   id uuid NOT NULL
--   schedule_id uuid NOT NULL
--   env_id uuid NOT NULL
--   status text NOT NULL
--   attempt integer NOT NULL DEFAULT 0
--   scheduled_for timestamp with time zone NOT NULL
--   next_attempt_at timestamp with time zone
--   started_at timestamp with time zone
--   finished_at timestamp with time zone
--   result jsonb
--   error text
--   idempotency_key text NOT NULL
--   created_at timestamp with time zone NOT NULL
--   updated_at timestamp with time zone NOT NULL
--   missed_first timestamp with time zone
--   missed_last timestamp with time zone
--   missed_count integer NOT NULL DEFAULT 0
--   lease_until timestamp with time zone
--   superseded_by uuid
--   concurrent boolean NOT NULL DEFAULT false
--   backfill boolean NOT NULL DEFAULT false
--   lease_epoch integer NOT NULL DEFAULT 0
--   called_at timestamp with time zone
--   CONSTRAINT jobs_attempt_check CHECK ((attempt >= 0))
--   CONSTRAINT jobs_missed_has_instants CHECK (((missed_count = 0) OR ((missed_first IS NOT NULL) AND (missed_last IS NOT NULL)))) NOT VALID
--   CONSTRAINT jobs_pending_has_next_attempt CHECK (((status <> 'pending'::text) OR (next_attempt_at IS NOT NULL)))
--   CONSTRAINT jobs_pkey PRIMARY KEY (id)
--   CONSTRAINT jobs_schedule FOREIGN KEY (schedule_id, env_id) REFERENCES cron.schedules(id, env_id)
--   CONSTRAINT jobs_scheduled_not_started CHECK (((status <> 'scheduled'::text) OR ((attempt = 1) AND (started_at IS NULL) AND (lease_until IS NOT NULL))))
--   CONSTRAINT jobs_status_check CHECK ((status = ANY (ARRAY['scheduled'::text, 'pending'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'skipped'::text, 'superseded'::text, 'buffered'::text, 'cancelled'::text]))) NOT VALID
--   row level security: true, forced: true
CREATE UNIQUE INDEX jobs_pkey ON cron.jobs USING btree (id);
CREATE INDEX sentin8_cron_jobs_buffered ON cron.jobs USING btree (schedule_id, backfill, scheduled_for) WHERE (status = 'buffered'::text);
CREATE INDEX sentin8_cron_jobs_by_env ON cron.jobs USING btree (env_id, id);
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON cron.jobs USING btree (env_id, schedule_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON cron.jobs USING btree (env_id, scheduled_for);
CREATE INDEX sentin8_cron_jobs_by_schedule ON cron.jobs USING btree (schedule_id, id);
CREATE INDEX sentin8_cron_jobs_finished ON cron.jobs USING btree (updated_at) WHERE (status = ANY (ARRAY['succeeded'::text, 'failed'::text, 'skipped'::text, 'superseded'::text, 'cancelled'::text]));
CREATE INDEX sentin8_cron_jobs_leases ON cron.jobs USING btree (lease_until) WHERE (status = ANY (ARRAY['scheduled'::text, 'running'::text]));
CREATE INDEX sentin8_cron_jobs_open ON cron.jobs USING btree (schedule_id) WHERE (status = ANY (ARRAY['scheduled'::text, 'pending'::text, 'running'::text]));
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule ON cron.jobs USING btree (schedule_id) WHERE ((status = ANY (ARRAY['scheduled'::text, 'pending'::text, 'running'::text])) AND (NOT concurrent));
CREATE INDEX sentin8_cron_jobs_retryable ON cron.jobs USING btree (next_attempt_at) WHERE (status = 'pending'::text);
CREATE INDEX sentin8_cron_jobs_running_unleased ON cron.jobs USING btree (started_at) WHERE ((status = 'running'::text) AND (lease_until IS NULL));

-- table cron.outbox
--   seq bigint NOT NULL
--   id uuid NOT NULL
--   env_id uuid NOT NULL
--   schedule_id uuid
--   event_type text NOT NULL
--   payload jsonb NOT NULL
--   created_at timestamp with time zone NOT NULL
--   relayed_at timestamp with time zone
--   attempts integer NOT NULL DEFAULT 0
--   last_error text
--   parked_at timestamp with time zone
--   locked_until timestamp with time zone
--   locked_by text
--   next_attempt_at timestamp with time zone
--   CONSTRAINT outbox_id_key UNIQUE (id)
--   CONSTRAINT outbox_pkey PRIMARY KEY (seq)
--   row level security: true, forced: true
CREATE UNIQUE INDEX outbox_id_key ON cron.outbox USING btree (id);
CREATE UNIQUE INDEX outbox_pkey ON cron.outbox USING btree (seq);
CREATE INDEX sentin8_cron_outbox_by_env ON cron.outbox USING btree (env_id, seq);
CREATE INDEX sentin8_cron_outbox_parked ON cron.outbox USING btree (seq) WHERE ((parked_at IS NOT NULL) AND (relayed_at IS NULL));
CREATE INDEX sentin8_cron_outbox_pending_by_schedule ON cron.outbox USING btree (schedule_id, seq) WHERE ((relayed_at IS NULL) AND (parked_at IS NULL) AND (schedule_id IS NOT NULL));
CREATE INDEX sentin8_cron_outbox_relayed ON cron.outbox USING btree (relayed_at) WHERE (relayed_at IS NOT NULL);
CREATE INDEX sentin8_cron_outbox_unrelayed ON cron.outbox USING btree (seq) WHERE (relayed_at IS NULL);

-- table cron.schedules
--   id uuid NOT NULL
--   env_id uuid NOT NULL
--   domain text NOT NULL
--   schedule_type text NOT NULL
--   kind text NOT NULL
--   cron_expr text
--   timezone text NOT NULL DEFAULT 'UTC'::text
--   run_at timestamp with time zone
--   on_dst_gap text NOT NULL DEFAULT 'shift'::text
--   on_dst_repeat text NOT NULL DEFAULT 'once'::text
--   target_config jsonb NOT NULL DEFAULT '{}'::jsonb
--   payload jsonb NOT NULL DEFAULT '{}'::jsonb
--   status text NOT NULL DEFAULT 'active'::text
--   next_run_at timestamp with time zone
--   last_run_at timestamp with time zone
--   retry_count integer NOT NULL DEFAULT 0
--   max_retries integer NOT NULL DEFAULT 3
--   created_at timestamp with time zone NOT NULL
--   updated_at timestamp with time zone NOT NULL
--   created_by text NOT NULL
--   updated_by text NOT NULL
--   claim_tie bigint DEFAULT uuid_hash_extended(id, (0)::bigint)
--   overlap text NOT NULL DEFAULT 'skip'::text
--   catchup_window_ms bigint NOT NULL DEFAULT 3600000
--   max_jitter_ms bigint NOT NULL DEFAULT 0
--   start_at timestamp with time zone
--   end_at timestamp with time zone
--   pause_on_failure boolean NOT NULL DEFAULT false
--   remaining_runs integer
--   labels jsonb NOT NULL DEFAULT '{}'::jsonb
--   after_completion text NOT NULL DEFAULT 'keep'::text
--   exclude jsonb NOT NULL DEFAULT '[]'::jsonb
--   CONSTRAINT schedules_active_has_next_run CHECK (((status <> 'active'::text) OR (next_run_at IS NOT NULL) OR (kind = 'once'::text)))
--   CONSTRAINT schedules_after_completion_check CHECK ((after_completion = ANY (ARRAY['keep'::text, 'delete'::text])))
--   CONSTRAINT schedules_bounds_in_order CHECK (((start_at IS NULL) OR (end_at IS NULL) OR (end_at > start_at)))
--   CONSTRAINT schedules_catchup_window_check CHECK ((catchup_window_ms > 0))
--   CONSTRAINT schedules_domain_check CHECK (((length(domain) >= 1) AND (length(domain) <= 128)))
--   CONSTRAINT schedules_id_env UNIQUE (id, env_id)
--   CONSTRAINT schedules_kind_check CHECK ((kind = ANY (ARRAY['cron'::text, 'once'::text])))
--   CONSTRAINT schedules_kind_timing CHECK ((((kind = 'cron'::text) AND (cron_expr IS NOT NULL) AND (run_at IS NULL)) OR ((kind = 'once'::text) AND (run_at IS NOT NULL) AND (cron_expr IS NULL))))
--   CONSTRAINT schedules_max_jitter_check CHECK ((max_jitter_ms >= 0))
--   CONSTRAINT schedules_max_retries_check CHECK (((max_retries >= 0) AND (max_retries <= 100)))
--   CONSTRAINT schedules_on_dst_gap_check CHECK ((on_dst_gap = ANY (ARRAY['shift'::text, 'skip'::text])))
--   CONSTRAINT schedules_on_dst_repeat_check CHECK ((on_dst_repeat = ANY (ARRAY['once'::text, 'twice'::text])))
--   CONSTRAINT schedules_overlap_check CHECK ((overlap = ANY (ARRAY['skip'::text, 'buffer_one'::text, 'allow_all'::text, 'buffer_all'::text, 'cancel_other'::text]))) NOT VALID
--   CONSTRAINT schedules_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text))
--   CONSTRAINT schedules_pkey PRIMARY KEY (id)
--   CONSTRAINT schedules_remaining_runs_check CHECK ((remaining_runs >= 0))
--   CONSTRAINT schedules_retry_count_check CHECK ((retry_count >= 0))
--   CONSTRAINT schedules_schedule_type_check CHECK (((length(schedule_type) >= 1) AND (length(schedule_type) <= 128)))
--   CONSTRAINT schedules_status_check CHECK ((status = ANY (ARRAY['active'::text, 'paused'::text, 'completed'::text, 'deleted'::text])))
--   CONSTRAINT schedules_target_config_check CHECK ((jsonb_typeof(target_config) = 'object'::text))
--   row level security: true, forced: true
CREATE UNIQUE INDEX schedules_id_env ON cron.schedules USING btree (id, env_id);
CREATE UNIQUE INDEX schedules_pkey ON cron.schedules USING btree (id);
CREATE INDEX sentin8_cron_schedules_active_zone ON cron.schedules USING btree (timezone, env_id) WHERE ((status = 'active'::text) AND (kind = 'cron'::text));
CREATE INDEX sentin8_cron_schedules_by_domain ON cron.schedules USING btree (env_id, domain, id) WHERE (status <> 'deleted'::text);
CREATE INDEX sentin8_cron_schedules_by_env ON cron.schedules USING btree (env_id, id);
CREATE INDEX sentin8_cron_schedules_deleted ON cron.schedules USING btree (updated_at) WHERE (status = 'deleted'::text);
CREATE INDEX sentin8_cron_schedules_due ON cron.schedules USING btree (next_run_at) WHERE (status = 'active'::text);
CREATE INDEX sentin8_cron_schedules_due_ring ON cron.schedules USING btree (env_id, next_run_at, claim_tie) WHERE (status = 'active'::text);
CREATE UNIQUE INDEX sentin8_cron_schedules_type_per_domain ON cron.schedules USING btree (env_id, domain, schedule_type) WHERE (status <> 'deleted'::text);

-- table cron.schema_migrations
--   version bigint NOT NULL
--   name text NOT NULL
--   checksum text NOT NULL
--   applied_at timestamp with time zone NOT NULL DEFAULT now()
--   CONSTRAINT schema_migrations_pkey PRIMARY KEY (version)
--   row level security: false, forced: false
CREATE UNIQUE INDEX schema_migrations_pkey ON cron.schema_migrations USING btree (version);

CREATE OR REPLACE FUNCTION cron.current_env_id()
 RETURNS uuid
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ SELECT NULLIF(current_setting('sentin8.env_id', true), '')::uuid $function$;

CREATE OR REPLACE FUNCTION cron.dlq_envs()
 RETURNS SETOF uuid
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ SELECT DISTINCT env_id FROM cron.dlq ORDER BY env_id $function$;

CREATE OR REPLACE FUNCTION cron.due_count(p_until timestamp with time zone, p_cap integer)
 RETURNS bigint
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT count(*) FROM (SELECT 1 FROM cron.schedules s
                           WHERE s.status = 'active' AND s.next_run_at <= p_until
                           LIMIT p_cap) c
$function$;

CREATE OR REPLACE FUNCTION cron.due_jobs(p_limit integer, p_now timestamp with time zone, p_stale_before timestamp with time zone)
 RETURNS TABLE(id uuid, schedule_id uuid, env_id uuid, status text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT d.id, d.schedule_id, d.env_id, d.status FROM (
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.next_attempt_at AS due_at
           FROM cron.jobs j
          WHERE j.status = 'pending' AND j.next_attempt_at <= p_now
            AND (SELECT s.status FROM cron.schedules s WHERE s.id = j.schedule_id)
                IS DISTINCT FROM 'paused'
          ORDER BY j.next_attempt_at
          LIMIT least(greatest(p_limit, 0), 1000))
        UNION ALL
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.lease_until AS due_at
           FROM cron.jobs j
          WHERE j.status IN ('scheduled', 'running') AND j.lease_until < p_now
          ORDER BY j.lease_until
          LIMIT least(greatest(p_limit, 0), 1000))
        UNION ALL
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.started_at AS due_at
           FROM cron.jobs j
          WHERE j.status = 'running' AND j.lease_until IS NULL AND j.started_at < p_stale_before
          ORDER BY j.started_at
          LIMIT least(greatest(p_limit, 0), 1000))
    ) d
    ORDER BY d.due_at
    LIMIT least(greatest(p_limit, 0), 1000)
$function$;

CREATE OR REPLACE FUNCTION cron.due_schedules(p_limit integer DEFAULT 50, p_now timestamp with time zone DEFAULT now(), p_seed bigint DEFAULT 0, p_ahead_after timestamp with time zone DEFAULT NULL::timestamp with time zone, p_shares integer DEFAULT 1, p_share integer DEFAULT 0)
 RETURNS TABLE(id uuid, env_id uuid, next_run_at timestamp with time zone)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH RECURSIVE envs(env_id) AS (
        (SELECT s.env_id FROM cron.schedules s
          WHERE s.status = 'active' AND s.next_run_at <= p_now
          ORDER BY s.env_id LIMIT 1)
        UNION ALL
        SELECT (SELECT s.env_id FROM cron.schedules s
                 WHERE s.status = 'active' AND s.next_run_at <= p_now AND s.env_id > e.env_id
                 ORDER BY s.env_id LIMIT 1)
          FROM envs e WHERE e.env_id IS NOT NULL),
    round AS (
        SELECT least(greatest(p_limit, 0), 1000) AS size,
               hashint8extended(p_seed, 0) AS start)
    SELECT d.id, d.env_id, d.next_run_at
      FROM envs e
     CROSS JOIN round r
     CROSS JOIN LATERAL (
        SELECT w.id, w.env_id, w.next_run_at, w.ring, w.claim_tie,
               row_number() OVER (ORDER BY w.next_run_at, w.ring, w.claim_tie) AS turn
          FROM ((SELECT s.id, s.env_id, s.next_run_at, s.claim_tie, 0 AS ring
                   FROM cron.schedules s
                  WHERE s.env_id = e.env_id AND s.status = 'active'
                    AND s.next_run_at <= p_now AND s.claim_tie >= r.start
                    AND (p_shares <= 1 OR s.next_run_at <= p_ahead_after
                         OR (s.claim_tie & 2147483647) % p_shares = p_share)
                  ORDER BY s.next_run_at, s.claim_tie
                  LIMIT r.size)
                UNION ALL
                (SELECT s.id, s.env_id, s.next_run_at, s.claim_tie, 1 AS ring
                   FROM cron.schedules s
                  WHERE s.env_id = e.env_id AND s.status = 'active'
                    AND s.next_run_at <= p_now AND s.claim_tie < r.start
                    AND (p_shares <= 1 OR s.next_run_at <= p_ahead_after
                         OR (s.claim_tie & 2147483647) % p_shares = p_share)
                  ORDER BY s.next_run_at, s.claim_tie
                  LIMIT r.size)) w
         ORDER BY w.next_run_at, w.ring, w.claim_tie
         LIMIT r.size) d
     WHERE e.env_id IS NOT NULL
     ORDER BY d.turn, d.next_run_at, d.ring, d.claim_tie
     LIMIT (SELECT size FROM round)
$function$;

CREATE OR REPLACE FUNCTION cron.envs_with_data(max_rows integer)
 RETURNS TABLE(env_id uuid, schedules bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT s.env_id, count(*) FILTER (WHERE s.status <> 'deleted')
      FROM cron.schedules s
     GROUP BY s.env_id
    HAVING count(*) FILTER (WHERE s.status <> 'deleted') > 0
     ORDER BY s.env_id
     LIMIT max_rows
$function$;

CREATE OR REPLACE FUNCTION cron.instance_beat(p_id uuid, p_now timestamp with time zone, p_stale_before timestamp with time zone)
 RETURNS SETOF uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    INSERT INTO cron.instances (id, seen_at) VALUES (p_id, p_now)
        ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at;
    DELETE FROM cron.instances WHERE seen_at < p_stale_before;
    RETURN QUERY SELECT i.id FROM cron.instances i ORDER BY i.id;
END
$function$;

CREATE OR REPLACE FUNCTION cron.instance_leave(p_id uuid)
 RETURNS void
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$ DELETE FROM cron.instances WHERE id = p_id $function$;

CREATE OR REPLACE FUNCTION cron.job_answers_put(p_jobs uuid[], p_attempts integer[], p_answered_at timestamp with time zone[], p_answers jsonb[])
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    written bigint;
BEGIN
    WITH put AS (
        INSERT INTO cron.job_answers (job_id, env_id, attempt, answered_at, answer)
        SELECT a.job_id, j.env_id, a.attempt, a.answered_at, a.answer
          FROM unnest(p_jobs, p_attempts, p_answered_at, p_answers,
                      array_fill('running'::text, ARRAY[cardinality(p_jobs)]))
               AS a(job_id, attempt, answered_at, answer, was)
          JOIN cron.jobs j ON j.id = a.job_id AND j.attempt = a.attempt AND j.status = a.was
        ON CONFLICT (job_id) DO UPDATE
           SET attempt = EXCLUDED.attempt, answered_at = EXCLUDED.answered_at,
               answer = EXCLUDED.answer
        RETURNING 1)
    SELECT count(*) INTO written FROM put;
    RETURN written;
END
$function$;

CREATE OR REPLACE FUNCTION cron.jobs_hand_off(p_ids uuid[], p_lease interval, p_now timestamp with time zone)
 RETURNS TABLE(job_id uuid, schedule_updated_at timestamp with time zone)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH handed AS (
        UPDATE cron.jobs SET status = 'running', started_at = scheduled_for,
                             lease_until = greatest(scheduled_for, p_now) + p_lease
         WHERE id = ANY (p_ids)
           AND ((status = 'scheduled') IS TRUE
                OR ((status = 'running') IS TRUE AND attempt = 1
                    AND started_at = scheduled_for))
        RETURNING id, schedule_id, env_id)
    SELECT h.id, s.updated_at
      FROM handed h
      JOIN cron.schedules s ON s.id = h.schedule_id AND s.env_id = h.env_id
$function$;

CREATE OR REPLACE FUNCTION cron.jobs_lease_renew(p_ids uuid[], p_epochs integer[], p_called boolean[], p_until timestamp with time zone, p_now timestamp with time zone)
 RETURNS TABLE(job_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
 SET enable_seqscan TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE cron.jobs j
       SET lease_until = p_until,
           called_at = CASE WHEN h.called THEN coalesce(j.called_at, p_now) ELSE j.called_at END
      FROM unnest(p_ids, p_epochs, p_called,
                  array_fill('running'::text, ARRAY[cardinality(p_ids)]))
           AS h(id, epoch, called, was)
     WHERE j.id = h.id AND j.lease_epoch = h.epoch AND j.status = h.was
    RETURNING j.id;
END
$function$;

CREATE OR REPLACE FUNCTION cron.next_wakeup()
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT least(
        (SELECT min(next_run_at) FROM cron.schedules WHERE status = 'active'),
        (SELECT min(j.next_attempt_at) FROM cron.jobs j
          WHERE j.status = 'pending'
            AND NOT EXISTS (SELECT 1 FROM cron.schedules s
                             WHERE s.id = j.schedule_id AND s.status = 'paused')),
        (SELECT min(lease_until) FROM cron.jobs WHERE status IN ('scheduled', 'running')))
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_claim(p_relay text, p_now timestamp with time zone, p_lease_until timestamp with time zone, p_limit integer)
 RETURNS TABLE(seq bigint, id uuid, env_id uuid, schedule_id uuid, event_type text, payload jsonb, created_at timestamp with time zone, relayed_at timestamp with time zone, attempts integer, last_error text, parked_at timestamp with time zone)
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH candidates AS (
        SELECT o.seq
          FROM cron.outbox o
         WHERE o.relayed_at IS NULL
           AND o.parked_at IS NULL
           AND (o.locked_until IS NULL OR o.locked_until <= p_now)
           AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= p_now)
           AND (o.schedule_id IS NULL OR NOT EXISTS (
                   SELECT 1
                     FROM cron.outbox e
                    WHERE e.schedule_id = o.schedule_id
                      AND e.seq < o.seq
                      AND e.relayed_at IS NULL
                      AND e.parked_at IS NULL))
         ORDER BY o.seq
         LIMIT least(greatest(p_limit, 0), 1000)
         FOR UPDATE SKIP LOCKED
    )
    UPDATE cron.outbox o
       SET locked_until = p_lease_until, locked_by = p_relay
      FROM candidates c
     WHERE o.seq = c.seq
    RETURNING o.seq, o.id, o.env_id, o.schedule_id, o.event_type, o.payload, o.created_at,
              o.relayed_at, o.attempts, o.last_error, o.parked_at
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_mark_failed(p_relay text, p_seqs bigint[], p_errors text[], p_parkable boolean[], p_now timestamp with time zone, p_retry_at timestamp with time zone, p_max_attempts integer)
 RETURNS TABLE(seq bigint, attempts integer, parked boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET plan_cache_mode TO 'force_custom_plan'
 SET enable_seqscan TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH failures AS (
        SELECT f.seq, f.error, f.parkable
          FROM unnest(p_seqs, p_errors, p_parkable) AS f (seq, error, parkable))
    UPDATE cron.outbox o
       SET attempts = o.attempts + 1,
           last_error = left(f.error, 2000),
           locked_until = NULL,
           locked_by = NULL,
           next_attempt_at = p_retry_at,
           parked_at = CASE WHEN f.parkable AND o.attempts + 1 >= p_max_attempts
                            THEN p_now END
      FROM failures f
     WHERE o.seq = f.seq
       AND o.relayed_at IS NULL
       AND o.parked_at IS NULL
       AND o.locked_by = p_relay
    RETURNING o.seq, o.attempts, o.parked_at IS NOT NULL;
END
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_mark_relayed(p_seqs bigint[], p_now timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH done AS (
        UPDATE cron.outbox
           SET relayed_at = p_now, locked_until = NULL, locked_by = NULL, next_attempt_at = NULL
         WHERE seq = ANY (p_seqs) AND relayed_at IS NULL
        RETURNING 1)
    SELECT count(*) FROM done
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_oldest_unrelayed()
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT o.created_at FROM cron.outbox o
     WHERE o.relayed_at IS NULL AND o.parked_at IS NULL
     ORDER BY o.seq LIMIT 1
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_purge(p_before timestamp with time zone, p_limit integer)
 RETURNS bigint
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH doomed AS (
        SELECT o.seq
          FROM cron.outbox o
         WHERE o.relayed_at IS NOT NULL AND o.relayed_at < p_before
         ORDER BY o.relayed_at
         LIMIT least(greatest(p_limit, 0), 10000)
         FOR UPDATE SKIP LOCKED),
    gone AS (
        DELETE FROM cron.outbox o USING doomed d WHERE o.seq = d.seq RETURNING 1)
    SELECT count(*) FROM gone
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_release(p_relay text, p_seqs bigint[])
 RETURNS bigint
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH released AS (
        UPDATE cron.outbox
           SET locked_until = NULL, locked_by = NULL
         WHERE seq = ANY (p_seqs) AND locked_by = p_relay AND relayed_at IS NULL
        RETURNING 1)
    SELECT count(*) FROM released
$function$;

CREATE OR REPLACE FUNCTION cron.outbox_stats()
 RETURNS TABLE(outbox_parked bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT count(*) FROM cron.outbox WHERE parked_at IS NOT NULL AND relayed_at IS NULL
$function$;

CREATE OR REPLACE FUNCTION cron.purge_audit(p_before timestamp with time zone, p_limit integer)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    deleted bigint;
BEGIN
    p_before := least(p_before, now() - interval '1 day');
    EXECUTE format(
        'WITH doomed AS (
             SELECT a.id FROM cron.audit_journal a
              WHERE a.at < $1
              ORDER BY a.at
              LIMIT %s
         ), gone AS (
             DELETE FROM cron.audit_journal a USING doomed WHERE a.id = doomed.id RETURNING 1
         )
         SELECT count(*) FROM gone', least(greatest(p_limit, 0), 10000))
        INTO deleted USING p_before;
    RETURN deleted;
END
$function$;

CREATE OR REPLACE FUNCTION cron.purge_jobs(p_before timestamp with time zone, p_limit integer)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    deleted bigint;
BEGIN
    p_before := least(p_before, now() - interval '1 day');
    EXECUTE format(
        'WITH doomed AS (
             SELECT j.id FROM cron.jobs j
              WHERE j.status IN (''succeeded'', ''failed'', ''skipped'', ''superseded'', ''cancelled'')
                AND j.updated_at < $1
                AND NOT EXISTS (SELECT 1 FROM cron.dlq d WHERE d.job_id = j.id)
              ORDER BY j.updated_at
              LIMIT %s
              FOR UPDATE SKIP LOCKED
         ), answers AS (
             DELETE FROM cron.job_answers a USING doomed WHERE a.job_id = doomed.id
         ), gone AS (
             DELETE FROM cron.jobs j USING doomed WHERE j.id = doomed.id RETURNING 1
         )
         SELECT count(*) FROM gone', least(greatest(p_limit, 0), 10000))
        INTO deleted USING p_before;
    RETURN deleted;
END
$function$;

CREATE OR REPLACE FUNCTION cron.purge_schedules(p_before timestamp with time zone, p_limit integer)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    deleted bigint;
BEGIN
    p_before := least(p_before, now() - interval '1 day');
    EXECUTE format(
        'WITH doomed AS (
             SELECT s.id FROM cron.schedules s
              WHERE s.status = ''deleted'' AND s.updated_at < $1
                AND NOT EXISTS (SELECT 1 FROM cron.jobs j WHERE j.schedule_id = s.id)
                AND NOT EXISTS (SELECT 1 FROM cron.dlq d WHERE d.schedule_id = s.id)
              ORDER BY s.updated_at
              LIMIT %s
              FOR UPDATE SKIP LOCKED
         ), gone AS (
             DELETE FROM cron.schedules s USING doomed WHERE s.id = doomed.id RETURNING 1
         )
         SELECT count(*) FROM gone', least(greatest(p_limit, 0), 10000))
        INTO deleted USING p_before;
    RETURN deleted;
END
$function$;

CREATE OR REPLACE FUNCTION cron.refresh_statistics()
 RETURNS SETOF text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    t record;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('sentin8_cron.refresh_statistics')) THEN
        RETURN;
    END IF;
    FOR t IN
        SELECT s.relname
          FROM pg_stat_user_tables s
          JOIN pg_class c ON c.oid = s.relid
         WHERE s.schemaname = 'cron'
           AND s.relname IN ('schedules', 'jobs')
           AND s.n_mod_since_analyze >= 1000
           AND s.n_mod_since_analyze > 0.1 * greatest(c.reltuples, 0)
         ORDER BY s.relname
    LOOP
        EXECUTE format('ANALYZE cron.%I', t.relname);
        RETURN NEXT t.relname;
    END LOOP;
END
$function$;

CREATE OR REPLACE FUNCTION cron.schedule_zones_active()
 RETURNS TABLE(env_id uuid, timezone text)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT DISTINCT s.env_id, s.timezone
      FROM cron.schedules s
     WHERE s.status = 'active' AND s.kind = 'cron'
     ORDER BY s.env_id, s.timezone
$function$;

CREATE OR REPLACE FUNCTION cron.sentin8_set_tenant_context(p_env_id uuid)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_env_id IS NULL THEN
        RAISE EXCEPTION 'tenant context requires an env_id';
    END IF;
    -- true: local to the current transaction, so it can never leak to the next user of the
    -- pooled connection.
    PERFORM set_config('sentin8.env_id', p_env_id::text, true);
END
$function$;

CREATE OR REPLACE FUNCTION cron.stats()
 RETURNS TABLE(schedules_active bigint, schedules_paused bigint, jobs_scheduled bigint, jobs_pending bigint, jobs_running bigint, jobs_buffered bigint, dlq_entries bigint, outbox_unrelayed bigint)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT (SELECT count(*) FROM cron.schedules WHERE status = 'active'),
           (SELECT count(*) FROM cron.schedules WHERE status = 'paused'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'scheduled'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'pending'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'running'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'buffered'),
           (SELECT count(*) FROM cron.dlq),
           (SELECT count(*) FROM cron.outbox WHERE relayed_at IS NULL)
$function$;
