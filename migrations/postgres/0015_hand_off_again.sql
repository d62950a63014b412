-- sentin8-cron schema, version 15: a hand-off tried again after its answer was lost takes
-- back the fires its first try handed off.
--
-- A hand-off whose commit reached the database but whose answer did not (the connection, or
-- the primary, went away in between) left its fires `running` with no call: the instance, not
-- knowing, tried again, found them no longer `scheduled`, took them as withdrawn, and they ran
-- only once their call lease lapsed, as failed attempts (a failover drill measured 35 s late).
-- A handed-off fire is the only `running` job whose start is its instant on its first attempt
-- (a released fire claimed again starts later), and only the instance holding a fire hands
-- it off, so such a row in a retried hand-off is its own earlier write: it is taken again,
-- with a fresh lease.

CREATE OR REPLACE FUNCTION cron.jobs_hand_off(p_ids uuid[], p_lease interval, p_now timestamptz)
    RETURNS TABLE (job_id uuid, schedule_updated_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
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
$$;
