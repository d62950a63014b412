-- sentin8-cron schema, version 10: a fire claimed ahead is a job of its own status.
--
-- Until now a fire claimed ahead of its instant was spelled "a running first attempt with no
-- start". It is `scheduled` now: claimed for a future instant, no call made. Its transitions:
--
--   scheduled --hand-off--> running      the engine, just before the instant (jobs_hand_off)
--   scheduled --withdraw--> skipped      a pause, delete or new timing, in its own transaction
--   scheduled --release---> pending      its claim lease ran out (its instance stopped)
--
-- A scheduled job holds a short claim lease (a couple of seconds past its instant), not the
-- call lease: a stopped instance's fires are released and called by another instance seconds
-- after their instant, not after a whole call lease. The hand-off gives the job its call lease.
--
-- Instances of an earlier version must be stopped before this applies: they neither claim nor
-- hand off `scheduled` jobs.

ALTER TABLE cron.jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE cron.jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('scheduled', 'pending', 'running', 'succeeded', 'failed', 'skipped',
                      'superseded'))
    NOT VALID;

-- The fires held by instances of the previous version when they stopped.
-- Their claim lease is the new one (two seconds past the instant), so another instance
-- releases them then, not a whole call lease later.
UPDATE cron.jobs SET status = 'scheduled', lease_until = scheduled_for + interval '2 seconds'
 WHERE status = 'running' AND attempt = 1 AND started_at IS NULL;

-- A scheduled job is a first attempt that has not started.
ALTER TABLE cron.jobs ADD CONSTRAINT jobs_scheduled_not_started
    CHECK (status <> 'scheduled' OR (attempt = 1 AND started_at IS NULL AND lease_until IS NOT NULL));

-- One open job per schedule: a scheduled one is open.
DROP INDEX cron.sentin8_cron_jobs_open_per_schedule;
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule
    ON cron.jobs (schedule_id) WHERE status IN ('scheduled', 'pending', 'running');

-- Claim leases run out like call leases.
DROP INDEX cron.sentin8_cron_jobs_leases;
CREATE INDEX sentin8_cron_jobs_leases ON cron.jobs (lease_until)
    WHERE status IN ('scheduled', 'running');

-- Due jobs: pending ones (unless their schedule is paused), running attempts whose lease ran
-- out (or, without a lease, that started before p_stale_before), and scheduled fires whose
-- claim lease ran out, earliest first.
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
$$;

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
        (SELECT min(lease_until) FROM cron.jobs WHERE status IN ('scheduled', 'running')))
$$;

-- The hand-off: scheduled -> running, its start its instant and its call lease p_lease past
-- that, or past p_now for a fire handed off late (a lease already run out would let another
-- instance recover a call about to be made). Only a job still scheduled is taken (a
-- withdrawal or a release may have come first). Like version 9's, the hand-off cannot be
-- rewritten in place any more: it changes the status, which the partial indexes read.
-- `(status = 'scheduled') IS TRUE` keeps the lookup by id (see version 8).
DROP FUNCTION cron.jobs_hand_off(uuid[], timestamptz);
DROP FUNCTION cron.jobs_hand_off(uuid[]);
CREATE FUNCTION cron.jobs_hand_off(p_ids uuid[], p_lease interval, p_now timestamptz)
    RETURNS TABLE (job_id uuid, schedule_updated_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH handed AS (
        UPDATE cron.jobs SET status = 'running', started_at = scheduled_for,
                             lease_until = greatest(scheduled_for, p_now) + p_lease
         WHERE id = ANY (p_ids) AND (status = 'scheduled') IS TRUE
        RETURNING id, schedule_id, env_id)
    SELECT h.id, s.updated_at
      FROM handed h
      JOIN cron.schedules s ON s.id = h.schedule_id AND s.env_id = h.env_id
$$;

REVOKE ALL ON FUNCTION cron.jobs_hand_off(uuid[], interval, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.jobs_hand_off(uuid[], interval, timestamptz)
    TO sentin8_cron_service;

-- Health and metrics count scheduled jobs apart from running ones.
DROP FUNCTION cron.stats();
CREATE FUNCTION cron.stats()
    RETURNS TABLE (schedules_active bigint, schedules_paused bigint, jobs_scheduled bigint,
                   jobs_pending bigint, jobs_running bigint, dlq_entries bigint,
                   outbox_unrelayed bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT (SELECT count(*) FROM cron.schedules WHERE status = 'active'),
           (SELECT count(*) FROM cron.schedules WHERE status = 'paused'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'scheduled'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'pending'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'running'),
           (SELECT count(*) FROM cron.dlq),
           (SELECT count(*) FROM cron.outbox WHERE relayed_at IS NULL)
$$;

REVOKE ALL ON FUNCTION cron.stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.stats() TO sentin8_cron_service;
