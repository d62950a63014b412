-- sentin8-cron schema, version 21: plans that do not depend on luck.
--
-- Two causes made a burst's statements slow on a freshly loaded database:
--
-- * A LANGUAGE sql function is planned without its arguments' values, so an array argument
--   counts as 10 elements. The functions below join a table to thousands of ids; planned for
--   10, the join read every running job once per id. They become PL/pgSQL functions whose
--   statements get a custom plan on each call (`plan_cache_mode = force_custom_plan`): planned
--   with the arrays as they are.
-- * The statistics count the jobs `running` when they were taken: a few, between bursts. A
--   burst has thousands, and a plan that filtered the table on `status = 'running'` believed
--   one row would pass and read the batch once per running job. The functions expect their
--   jobs running as a join condition with a column of the batch (`j.status = h.was`), which
--   the table's statistics do not narrow. And each finds its rows by their keys, never by
--   reading the table whole (`enable_seqscan = off`): on a small table a whole read looks
--   cheaper, and a small table is what a fresh install has when its first bursts come.
-- * Statistics taken before a bulk load (the tables empty after the migration, then 50,000
--   schedules enrolled and their first jobs written within a minute) make an environment look
--   like a handful of rows. `cron.refresh_statistics()` analyzes each table that changed a
--   lot since it was last analyzed; `enroll` and `migrate` call it after writing, and `serve`
--   at start-up and every 30 s (a read of the statistics views when nothing changed).

CREATE OR REPLACE FUNCTION cron.jobs_lease_renew(p_ids uuid[], p_epochs integer[],
                                                 p_called boolean[], p_until timestamptz,
                                                 p_now timestamptz)
    RETURNS TABLE (job_id uuid)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    AS $$
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
$$;

CREATE OR REPLACE FUNCTION cron.job_answers_put(p_jobs uuid[], p_attempts integer[],
                                                p_answered_at timestamptz[], p_answers jsonb[])
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    AS $$
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
$$;

CREATE OR REPLACE FUNCTION cron.outbox_mark_failed(p_relay text, p_seqs bigint[],
                                                   p_errors text[], p_parkable boolean[],
                                                   p_now timestamptz, p_retry_at timestamptz,
                                                   p_max_attempts integer)
    RETURNS TABLE (seq bigint, attempts integer, parked boolean)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    AS $$
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
$$;

-- The due retries skip those of paused schedules. As an anti-join, the planner could read the
-- paused schedules whole (a sequential scan, materialized) on statistics that counted few of
-- them; as a look-up of each candidate's schedule by its key, it reads one row per retry
-- looked at, whatever the statistics say.
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
$$;

-- A call's record writes its schedule's `last_run_at`, no indexed column: with room left on
-- the schedule's page the new row version goes beside the old one (a HOT update) and no index
-- changes. The claim ahead fills the pages first (its `next_run_at` is indexed), so leave a
-- fifth of each page free for the record. New pages follow at once; existing ones as rows move.
ALTER TABLE cron.schedules SET (fillfactor = 80);

-- Analyzes each of the two busy tables whose rows changed by more than a tenth of what
-- it held when last analyzed (and at least 1,000 rows), or that was never analyzed and holds
-- 1,000 rows; returns the tables analyzed. Autovacuum does the same, but only when its next
-- round comes (a minute by default), and a burst on a table analyzed while empty is planned
-- as if each environment held a handful of rows until then. Instances that call it at once
-- take turns: one analyzes, the others return nothing. (Not the outbox: taken at the end of a
-- burst, when every event is relayed, its statistics have the relay's claim plan for a
-- backlog of none, and the next burst's claims cost three times as much.)
CREATE FUNCTION cron.refresh_statistics()
    RETURNS SETOF text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
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
$$;

REVOKE ALL ON FUNCTION cron.refresh_statistics() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.refresh_statistics() TO sentin8_cron_service;
