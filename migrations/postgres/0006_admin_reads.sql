-- sentin8-cron schema, version 6: what the admin pages read beyond the API.
--
-- An admin's environment picker lists the environments that hold schedules. That read crosses
-- tenants, so like the engine's cross-tenant reads it is a SECURITY DEFINER function with a
-- pinned search_path, and it returns ids and counts only, never a schedule's content.
--
-- The run charts sum a window of jobs per hour by their scheduled instant: an index on
-- (env_id, scheduled_for) keeps that read to the window's rows.

CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON cron.jobs (env_id, scheduled_for);
-- A schedule's own charts read its jobs alone.
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON cron.jobs (env_id, schedule_id, scheduled_for);

-- (env_id, schedules not deleted) of every environment with a schedule not deleted, in id order.
CREATE FUNCTION cron.envs_with_data(max_rows integer)
    RETURNS TABLE (env_id uuid, schedules bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT s.env_id, count(*) FILTER (WHERE s.status <> 'deleted')
      FROM cron.schedules s
     GROUP BY s.env_id
    HAVING count(*) FILTER (WHERE s.status <> 'deleted') > 0
     ORDER BY s.env_id
     LIMIT max_rows
$$;

REVOKE ALL ON FUNCTION cron.envs_with_data(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.envs_with_data(integer) TO sentin8_cron_service;
