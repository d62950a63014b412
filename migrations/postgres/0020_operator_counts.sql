-- sentin8-cron schema, version 20: what an operator counts and reads.
--
-- * The store-wide counts include the `buffered` jobs: an occurrence waiting for its
--   schedule's open job to end (schema 17); health and `/metrics`
--   (`sentin8_cron_jobs_buffered`) count them beside the other open jobs. The partial index
--   `sentin8_cron_jobs_buffered` answers the count.
-- * A dead-letter entry says whether its job ran a backfilled occurrence (`backfill`), as the
--   job does, so the queue tells an old occurrence asked for by hand from a regular one. The
--   entries already there are marked from their jobs.

ALTER TABLE cron.dlq ADD COLUMN backfill boolean NOT NULL DEFAULT false;
UPDATE cron.dlq d SET backfill = true
  FROM cron.jobs j WHERE j.id = d.job_id AND j.backfill;

DROP FUNCTION cron.stats();
CREATE FUNCTION cron.stats()
    RETURNS TABLE (schedules_active bigint, schedules_paused bigint, jobs_scheduled bigint,
                   jobs_pending bigint, jobs_running bigint, jobs_buffered bigint,
                   dlq_entries bigint, outbox_unrelayed bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT (SELECT count(*) FROM cron.schedules WHERE status = 'active'),
           (SELECT count(*) FROM cron.schedules WHERE status = 'paused'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'scheduled'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'pending'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'running'),
           (SELECT count(*) FROM cron.jobs WHERE status = 'buffered'),
           (SELECT count(*) FROM cron.dlq),
           (SELECT count(*) FROM cron.outbox WHERE relayed_at IS NULL)
$$;

REVOKE ALL ON FUNCTION cron.stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.stats() TO sentin8_cron_service;
