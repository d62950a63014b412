-- sentin8-cron schema, version 8: the hand-off of fires claimed ahead.
--
-- A fire claimed ahead of its instant is a running first attempt with no start yet. Just
-- before the instant the engine hands it off: it sets the start to the instant, and only the
-- fires it could hand off are called. A pause, delete or new timing withdraws a fire that has
-- not been handed off, in its own transaction; so exactly one of the two takes the fire.
--
-- Cross-tenant like the lease renewal: ids in, ids and instants out, never tenant payloads.

CREATE FUNCTION cron.jobs_hand_off(p_ids uuid[], p_now timestamptz)
    RETURNS TABLE (job_id uuid, schedule_updated_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH handed AS (
        UPDATE cron.jobs SET started_at = scheduled_for, updated_at = p_now
         WHERE id = ANY (p_ids) AND status = 'running' AND attempt = 1 AND started_at IS NULL
        RETURNING id, schedule_id, env_id)
    SELECT h.id, s.updated_at
      FROM handed h
      JOIN cron.schedules s ON s.id = h.schedule_id AND s.env_id = h.env_id
$$;

REVOKE ALL ON FUNCTION cron.jobs_hand_off(uuid[], timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.jobs_hand_off(uuid[], timestamptz) TO sentin8_cron_service;
