-- sentin8-cron schema, version 3: the time zones active schedules use.
--
-- At start-up a process may run with newer time-zone rules than the ones active schedules
-- were computed with, and recomputes their next fires. It first needs to know which
-- (environment, zone) pairs are in use, across tenants: like the engine's other cross-tenant
-- reads this is a SECURITY DEFINER function that returns ids and zone names, never payloads.
-- The schedules themselves are then read and written in ordinary tenant transactions.

CREATE INDEX sentin8_cron_schedules_active_zone
    ON cron.schedules (timezone, env_id) WHERE status = 'active' AND kind = 'cron';

-- Distinct (env_id, timezone) pairs of active cron schedules, in that order.
CREATE FUNCTION cron.schedule_zones_active()
    RETURNS TABLE (env_id uuid, timezone text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT DISTINCT s.env_id, s.timezone
      FROM cron.schedules s
     WHERE s.status = 'active' AND s.kind = 'cron'
     ORDER BY s.env_id, s.timezone
$$;

REVOKE ALL ON FUNCTION cron.schedule_zones_active() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.schedule_zones_active() TO sentin8_cron_service;
