-- sentin8-cron schema, version 7: corrections to the life cycle's functions.
--
-- * Retention has a floor of one day: the purge functions are SECURITY DEFINER and cross
--   tenants, so whatever cut-off the caller passes, they never remove a row younger than one
--   day by the database's own clock (`purge_audit('infinity', ...)` cannot erase the journal).
--   The settings refuse a retention under one day, so the floor only binds a caller that
--   bypasses them.
-- * The outbox backlog's age leaves parked events out: they are never relayed or purged, so
--   one parked event would otherwise keep health degraded for ever (parked events are counted
--   on their own, `outbox_parked`).
--
-- CREATE OR REPLACE keeps each function's owner and grants.

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

CREATE OR REPLACE FUNCTION cron.purge_audit(p_before timestamptz, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
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
$$;

CREATE OR REPLACE FUNCTION cron.purge_schedules(p_before timestamptz, p_limit integer)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
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
$$;

-- When the oldest event waiting to be relayed (not relayed, not parked) was written.
CREATE OR REPLACE FUNCTION cron.outbox_oldest_unrelayed() RETURNS timestamptz
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT o.created_at FROM cron.outbox o
     WHERE o.relayed_at IS NULL AND o.parked_at IS NULL
     ORDER BY o.seq LIMIT 1
$$;
