-- sentin8-cron schema, version 24: the overlap modes `buffer_all` and `cancel_other`.
--
-- `buffer_all`: every occurrence due while its schedule's job is open waits as a `buffered`
-- job (up to the engine's bound per schedule) and they run one after another.
-- `cancel_other`: the open job is cancelled for the new occurrence; it ends `cancelled`, a
-- terminal status that is never retried and is purged like the other finished ones.
--
-- Both checks only widen (every stored row meets them), so they are added NOT VALID and no
-- row is read. The finished-jobs index is rebuilt with its new predicate; this takes a lock
-- that blocks writes to cron.jobs while it builds (seconds for millions of rows).

ALTER TABLE cron.schedules DROP CONSTRAINT schedules_overlap_check;
ALTER TABLE cron.schedules ADD CONSTRAINT schedules_overlap_check
    CHECK (overlap IN ('skip', 'buffer_one', 'allow_all', 'buffer_all', 'cancel_other')) NOT VALID;

ALTER TABLE cron.jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE cron.jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('scheduled', 'pending', 'running', 'succeeded', 'failed', 'skipped',
                      'superseded', 'buffered', 'cancelled')) NOT VALID;

DROP INDEX cron.sentin8_cron_jobs_finished;
CREATE INDEX sentin8_cron_jobs_finished ON cron.jobs (updated_at)
    WHERE status IN ('succeeded', 'failed', 'skipped', 'superseded', 'cancelled');

CREATE OR REPLACE FUNCTION cron.purge_jobs(p_before timestamptz, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
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
         ), gone AS (
             DELETE FROM cron.jobs j USING doomed WHERE j.id = doomed.id RETURNING 1
         )
         SELECT count(*) FROM gone', least(greatest(p_limit, 0), 10000))
        INTO deleted USING p_before;
    RETURN deleted;
END
$$;
