-- sentin8-cron schema, version 4: fair, leased dispatch that records every occurrence.
--
-- * Missed occurrences (an outage, an overload) are recorded as one skipped job per run of
--   them: the first, the last and how many (0 on every other job).
-- * A running attempt holds a lease its instance renews while the call is in flight; an
--   attempt whose lease ran out (its instance died) is recovered by any instance.
-- * Due schedules are taken round-robin across environments, and schedules due at the same
--   instant are ordered by a per-instance hash, so instances start on different ones.

ALTER TABLE cron.jobs
    ADD COLUMN missed_first timestamptz,
    ADD COLUMN missed_last timestamptz,
    ADD COLUMN missed_count integer NOT NULL DEFAULT 0,
    ADD COLUMN lease_until timestamptz;
-- NOT VALID: existing rows satisfy it by construction (the count defaults to 0), so the table
-- is not scanned under its ACCESS EXCLUSIVE lock; new and updated rows are checked.
ALTER TABLE cron.jobs ADD CONSTRAINT jobs_missed_has_instants
    CHECK (missed_count = 0 OR (missed_first IS NOT NULL AND missed_last IS NOT NULL)) NOT VALID;

CREATE INDEX sentin8_cron_jobs_leases ON cron.jobs (lease_until) WHERE status = 'running';

DROP FUNCTION cron.due_schedules(integer, timestamptz);

-- Due active schedules, round-robin across environments: every environment's earliest first,
-- then every environment's second, and so on. Environments with due work are found by a skip
-- scan of the index below; each contributes its earliest 2 x p_limit due schedules, ordered by
-- instant and, at one instant, by a hash of the id seeded by the caller, also when picking
-- those candidates (so instances with different seeds start on different schedules of a
-- burst larger than the candidates; an incremental sort over the index orders each instant's
-- ties). The work per call grows with the environments that have due work.
CREATE INDEX sentin8_cron_schedules_due_by_env
    ON cron.schedules (env_id, next_run_at) WHERE status = 'active';

CREATE FUNCTION cron.due_schedules(p_limit integer DEFAULT 50, p_now timestamptz DEFAULT now(),
                                   p_seed bigint DEFAULT 0)
    RETURNS TABLE (id uuid, env_id uuid, next_run_at timestamptz)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH RECURSIVE envs(env_id) AS (
        (SELECT s.env_id FROM cron.schedules s
          WHERE s.status = 'active' AND s.next_run_at <= p_now
          ORDER BY s.env_id LIMIT 1)
        UNION ALL
        SELECT (SELECT s.env_id FROM cron.schedules s
                 WHERE s.status = 'active' AND s.next_run_at <= p_now AND s.env_id > e.env_id
                 ORDER BY s.env_id LIMIT 1)
          FROM envs e WHERE e.env_id IS NOT NULL)
    SELECT d.id, d.env_id, d.next_run_at
      FROM envs e
     CROSS JOIN LATERAL (
        SELECT w.id, w.env_id, w.next_run_at, w.tie,
               row_number() OVER (ORDER BY w.next_run_at, w.tie) AS turn
          FROM (SELECT s.id, s.env_id, s.next_run_at, uuid_hash_extended(s.id, p_seed) AS tie
                  FROM cron.schedules s
                 WHERE s.env_id = e.env_id AND s.status = 'active' AND s.next_run_at <= p_now
                 ORDER BY s.next_run_at, tie
                 LIMIT least(greatest(p_limit, 0), 1000) * 2) w) d
     WHERE e.env_id IS NOT NULL
     ORDER BY d.turn, d.next_run_at, d.tie
     LIMIT least(greatest(p_limit, 0), 1000)
$$;

-- Jobs whose next attempt is due, and running attempts whose lease ran out (or, for an
-- attempt without a lease, that started before p_stale_before), earliest first.
CREATE OR REPLACE FUNCTION cron.due_jobs(p_limit integer, p_now timestamptz, p_stale_before timestamptz)
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

-- The earliest instant at which a schedule, a job attempt or a lease expiry becomes due.
CREATE OR REPLACE FUNCTION cron.next_wakeup() RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT least(
        (SELECT min(next_run_at) FROM cron.schedules WHERE status = 'active'),
        (SELECT min(next_attempt_at) FROM cron.jobs WHERE status = 'pending'),
        (SELECT min(lease_until) FROM cron.jobs WHERE status = 'running'))
$$;

-- Extends the leases of running attempts (ids only): the instance running them is alive.
CREATE FUNCTION cron.jobs_lease_renew(p_ids uuid[], p_until timestamptz)
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH renewed AS (
        UPDATE cron.jobs SET lease_until = p_until
         WHERE id = ANY (p_ids) AND status = 'running'
        RETURNING 1)
    SELECT count(*) FROM renewed
$$;

REVOKE ALL ON FUNCTION cron.due_schedules(integer, timestamptz, bigint),
    cron.jobs_lease_renew(uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.due_schedules(integer, timestamptz, bigint),
    cron.jobs_lease_renew(uuid[], timestamptz) TO sentin8_cron_service;
