-- sentin8-cron schema, version 8: the hand-off of fires claimed ahead.
--
-- A fire claimed ahead of its instant is a running first attempt with no start yet. Just
-- before the instant the engine hands it off: it sets the start to the instant, and only the
-- fires it could hand off are called. A pause, delete or new timing withdraws a fire that has
-- not been handed off, in its own transaction; so exactly one of the two takes the fire.
--
-- Cross-tenant like the lease renewal: ids in, ids and instants out, never tenant payloads.
--
-- Both look the ids up by primary key: written `status = 'running'`, the condition lets the
-- planner scan the partial index of running jobs instead (it believes they are few) and test
-- every one against the id array, which costs the product of the two counts in a burst.
-- `(status = 'running') IS TRUE` means the same and keeps the lookup by id.

CREATE FUNCTION cron.jobs_hand_off(p_ids uuid[], p_now timestamptz)
    RETURNS TABLE (job_id uuid, schedule_updated_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH handed AS (
        UPDATE cron.jobs SET started_at = scheduled_for, updated_at = p_now
         WHERE id = ANY (p_ids) AND (status = 'running') IS TRUE AND attempt = 1
           AND started_at IS NULL
        RETURNING id, schedule_id, env_id)
    SELECT h.id, s.updated_at
      FROM handed h
      JOIN cron.schedules s ON s.id = h.schedule_id AND s.env_id = h.env_id
$$;

CREATE OR REPLACE FUNCTION cron.jobs_lease_renew(p_ids uuid[], p_until timestamptz)
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH renewed AS (
        UPDATE cron.jobs SET lease_until = p_until
         WHERE id = ANY (p_ids) AND (status = 'running') IS TRUE
        RETURNING 1)
    SELECT count(*) FROM renewed
$$;

REVOKE ALL ON FUNCTION cron.jobs_hand_off(uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.jobs_hand_off(uuid[], timestamptz) TO sentin8_cron_service;
