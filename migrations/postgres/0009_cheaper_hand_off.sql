-- sentin8-cron schema, version 9: a hand-off that can leave the jobs indexes alone.
--
-- Handing off a fire claimed ahead sets its start and nothing else. When an update changes no
-- indexed column and the row's page has room, PostgreSQL rewrites the row in place (a
-- heap-only tuple) and leaves every index of the table alone; the jobs table has nine once this
-- migration drops one, so this is most of the hand-off's cost. Three changes let the hand-off
-- be such an update:
--
-- * The index of running jobs by start goes. It served the recovery of running attempts
--   without a lease (rows written before version 4); the leases index, which holds running
--   jobs with no lease too, serves that query now.
-- * The hand-off leaves updated_at alone (it is indexed for retention), and so loses its
--   instant parameter: the row's last change stays its claim until its outcome is recorded.
--   The two-argument form stays, ignoring the instant, for instances of the previous version
--   still running while this applies (a rolling upgrade); a later version drops it.
-- * Job pages are filled to 85%, so a handed-off row can fit beside the claimed one (pages
--   written from now on). Only a few rows of a page fit: in a steady 500 fires a second about
--   a quarter of the hand-offs were rewritten in place; the rest still update the indexes.

DROP INDEX cron.sentin8_cron_jobs_running;

ALTER TABLE cron.jobs SET (fillfactor = 85);

CREATE FUNCTION cron.jobs_hand_off(p_ids uuid[])
    RETURNS TABLE (job_id uuid, schedule_updated_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH handed AS (
        UPDATE cron.jobs SET started_at = scheduled_for
         WHERE id = ANY (p_ids) AND (status = 'running') IS TRUE AND attempt = 1
           AND started_at IS NULL
        RETURNING id, schedule_id, env_id)
    SELECT h.id, s.updated_at
      FROM handed h
      JOIN cron.schedules s ON s.id = h.schedule_id AND s.env_id = h.env_id
$$;

REVOKE ALL ON FUNCTION cron.jobs_hand_off(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.jobs_hand_off(uuid[]) TO sentin8_cron_service;

CREATE OR REPLACE FUNCTION cron.jobs_hand_off(p_ids uuid[], p_now timestamptz)
    RETURNS TABLE (job_id uuid, schedule_updated_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT h.job_id, h.schedule_updated_at FROM cron.jobs_hand_off(p_ids) h
$$;
