-- sentin8-cron schema, version 12: how many schedules fall due soon, so the continuous loop
-- claims a large burst far enough ahead that its claims are done before its instant.
--
-- Cross-tenant like the due selection: a count only, through a SECURITY DEFINER function (the
-- service role has no privileges on the table). The count stops at p_cap, so it reads at most
-- that many entries of the due index.

CREATE FUNCTION cron.due_count(p_until timestamptz, p_cap integer) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT count(*) FROM (SELECT 1 FROM cron.schedules s
                           WHERE s.status = 'active' AND s.next_run_at <= p_until
                           LIMIT p_cap) c
$$;

REVOKE ALL ON FUNCTION cron.due_count(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.due_count(timestamptz, integer) TO sentin8_cron_service;
