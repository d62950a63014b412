-- sentin8-cron schema, version 5: the life cycle of jobs, dead letters and the journal.
--
-- * A republished dead letter supersedes its original job: status `superseded` (terminal) and
--   `superseded_by`, the job that replaced it. No foreign key: retention may remove the
--   successor first, and a link to a removed job is still an answer.
-- * The attempt ledger: one row per attempt of a job, written with the attempt's outcome.
--   Attempts share their job's retention (they are deleted with it).
-- * The audit journal records the schedule an entry concerns, so it can be filtered by it.
-- * Retention removes finished jobs, journal entries and soft-deleted schedules in bounded
--   batches through SECURITY DEFINER functions (the service role has no DELETE on them). Each
--   batch is one short statement over an index on the age column, so it holds row locks on
--   old rows only and never blocks the ticker's writes to current rows.
-- * A paused schedule's pending retries wait: the due-job selection and the wake-up skip them.
-- * Health reports the age of the outbox backlog.

ALTER TABLE cron.jobs DROP CONSTRAINT jobs_status_check;
-- NOT VALID: the new list only widens the old one, so existing rows satisfy it and the table
-- is not scanned under its ACCESS EXCLUSIVE lock; new and updated rows are checked.
ALTER TABLE cron.jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'skipped', 'superseded'))
    NOT VALID;
ALTER TABLE cron.jobs ADD COLUMN superseded_by uuid;

-- Retention's scans: terminal jobs by age, deleted schedules by age, the journal by age, and
-- the "is it referenced by a dead letter" probe.
CREATE INDEX sentin8_cron_jobs_finished ON cron.jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded');
CREATE INDEX sentin8_cron_schedules_deleted ON cron.schedules (updated_at)
    WHERE status = 'deleted';
CREATE INDEX sentin8_cron_dlq_by_job ON cron.dlq (job_id);
CREATE INDEX sentin8_cron_dlq_by_schedule ON cron.dlq (schedule_id);
CREATE INDEX sentin8_cron_audit_at ON cron.audit_journal (at);

CREATE TABLE cron.job_attempts (
    job_id           uuid NOT NULL REFERENCES cron.jobs (id) ON DELETE CASCADE,
    env_id           uuid NOT NULL,
    attempt          integer NOT NULL CHECK (attempt >= 0),
    started_at       timestamptz,
    finished_at      timestamptz NOT NULL,
    duration_ms      bigint,
    outcome          text NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'failed')),
    http_status      integer,
    error_class      text,
    error            text,
    response_excerpt text CHECK (octet_length(response_excerpt) <= 512),
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX sentin8_cron_job_attempts_by_env ON cron.job_attempts (env_id, job_id);

ALTER TABLE cron.job_attempts ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.job_attempts FORCE ROW LEVEL SECURITY;
CREATE POLICY job_attempts_select ON cron.job_attempts FOR SELECT
    USING (env_id = cron.current_env_id());
CREATE POLICY job_attempts_insert ON cron.job_attempts FOR INSERT
    WITH CHECK (env_id = cron.current_env_id());

ALTER TABLE cron.audit_journal ADD COLUMN schedule_id uuid;
UPDATE cron.audit_journal SET schedule_id = resource_id::uuid
 WHERE resource_type = 'schedule'
   AND resource_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
CREATE INDEX sentin8_cron_audit_by_schedule ON cron.audit_journal (env_id, schedule_id, id);
CREATE INDEX sentin8_cron_audit_by_env_id ON cron.audit_journal (env_id, id);

-- 0004's due jobs and wake-up, with a paused schedule's pending retries left waiting: jobs
-- whose next attempt is due (unless their schedule is paused), and running attempts whose lease
-- ran out (or, for an attempt without a lease, that started before p_stale_before), earliest
-- first. An abandoned attempt of a paused schedule is still recovered (it becomes a retry that
-- waits for the resume).
CREATE OR REPLACE FUNCTION cron.due_jobs(p_limit integer, p_now timestamptz,
                                         p_stale_before timestamptz)
    RETURNS TABLE (id uuid, schedule_id uuid, env_id uuid, status text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT d.id, d.schedule_id, d.env_id, d.status FROM (
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.next_attempt_at AS due_at
           FROM cron.jobs j
          WHERE j.status = 'pending' AND j.next_attempt_at <= p_now
            AND NOT EXISTS (SELECT 1 FROM cron.schedules s
                             WHERE s.id = j.schedule_id AND s.status = 'paused')
          ORDER BY j.next_attempt_at
          LIMIT least(greatest(p_limit, 0), 1000))
        UNION ALL
        (SELECT j.id, j.schedule_id, j.env_id, j.status, j.lease_until AS due_at
           FROM cron.jobs j
          WHERE j.status = 'running' AND j.lease_until < p_now
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
$$;

-- The earliest instant at which a schedule, a job attempt or a lease expiry becomes due; a
-- paused schedule's pending retry is not due.
CREATE OR REPLACE FUNCTION cron.next_wakeup() RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT least(
        (SELECT min(next_run_at) FROM cron.schedules WHERE status = 'active'),
        (SELECT min(j.next_attempt_at) FROM cron.jobs j
          WHERE j.status = 'pending'
            AND NOT EXISTS (SELECT 1 FROM cron.schedules s
                             WHERE s.id = j.schedule_id AND s.status = 'paused')),
        (SELECT min(lease_until) FROM cron.jobs WHERE status = 'running'))
$$;

-- When the oldest event not yet relayed (parked ones included) was written.
CREATE FUNCTION cron.outbox_oldest_unrelayed() RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT o.created_at FROM cron.outbox o WHERE o.relayed_at IS NULL ORDER BY o.seq LIMIT 1
$$;

-- Retention's batches. Each is planned afresh with its LIMIT as a constant (EXECUTE): with a
-- limit the planner cannot see, it assumes a tenth of the table and picks a scan of all of
-- it, which on ten million rows turns a millisecond batch into seconds.

-- Deletes at most p_limit terminal jobs last changed before p_before (with their attempts),
-- oldest first, never one a dead-letter entry references. Rows locked elsewhere are skipped.
CREATE FUNCTION cron.purge_jobs(p_before timestamptz, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    deleted bigint;
BEGIN
    EXECUTE format(
        'WITH doomed AS (
             SELECT j.id FROM cron.jobs j
              WHERE j.status IN (''succeeded'', ''failed'', ''skipped'', ''superseded'')
                AND j.updated_at < $1
                AND NOT EXISTS (SELECT 1 FROM cron.dlq d WHERE d.job_id = j.id)
              ORDER BY j.updated_at
              LIMIT %s
              FOR UPDATE SKIP LOCKED
         ), gone AS (
             DELETE FROM cron.jobs j USING doomed WHERE j.id = doomed.id RETURNING 1
         )
         SELECT count(*) FROM gone', least(greatest(p_limit, 0), 10000))
        INTO deleted USING p_before;
    RETURN deleted;
END
$$;

-- Deletes at most p_limit journal entries written before p_before, oldest first.
CREATE FUNCTION cron.purge_audit(p_before timestamptz, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    deleted bigint;
BEGIN
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
$$;

-- Deletes at most p_limit schedules soft-deleted before p_before that no job or dead letter
-- references any more.
CREATE FUNCTION cron.purge_schedules(p_before timestamptz, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    deleted bigint;
BEGIN
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
$$;

REVOKE ALL ON FUNCTION cron.outbox_oldest_unrelayed(), cron.purge_jobs(timestamptz, integer),
    cron.purge_audit(timestamptz, integer), cron.purge_schedules(timestamptz, integer)
    FROM PUBLIC;
GRANT SELECT, INSERT ON cron.job_attempts TO sentin8_cron_service;
GRANT EXECUTE ON FUNCTION cron.outbox_oldest_unrelayed(), cron.purge_jobs(timestamptz, integer),
    cron.purge_audit(timestamptz, integer), cron.purge_schedules(timestamptz, integer)
    TO sentin8_cron_service;
