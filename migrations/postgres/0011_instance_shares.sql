-- sentin8-cron schema, version 11: instances share the fires they claim ahead.
--
-- Each `serve` instance records a heartbeat; the instances alive, ordered by id, split the
-- schedules claimed ahead of their instant between them by a hash of the schedule id, so a
-- burst is shared evenly rather than taken by whichever instance looks first. An occurrence
-- already due is everyone's: the share of an instance that stopped is claimed at its instant
-- by the others until its heartbeat is forgotten.
--
-- Cross-tenant like the due selection: ids and instants only, through SECURITY DEFINER
-- functions (the service role has no privileges on the table).

CREATE TABLE cron.instances (
    id      uuid PRIMARY KEY,
    seen_at timestamptz NOT NULL
);

CREATE FUNCTION cron.instance_beat(p_id uuid, p_now timestamptz, p_stale_before timestamptz)
    RETURNS SETOF uuid
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    INSERT INTO cron.instances (id, seen_at) VALUES (p_id, p_now)
        ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at;
    DELETE FROM cron.instances WHERE seen_at < p_stale_before;
    RETURN QUERY SELECT i.id FROM cron.instances i ORDER BY i.id;
END
$$;

CREATE FUNCTION cron.instance_leave(p_id uuid) RETURNS void
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ DELETE FROM cron.instances WHERE id = p_id $$;

-- Version 4's due selection with the share: of the schedules due after p_ahead_after (claimed
-- ahead), only those whose id hashes to p_share among p_shares.
DROP FUNCTION cron.due_schedules(integer, timestamptz, bigint);
CREATE FUNCTION cron.due_schedules(p_limit integer DEFAULT 50, p_now timestamptz DEFAULT now(),
                                   p_seed bigint DEFAULT 0,
                                   p_ahead_after timestamptz DEFAULT NULL,
                                   p_shares integer DEFAULT 1, p_share integer DEFAULT 0)
    RETURNS TABLE (id uuid, env_id uuid, next_run_at timestamptz)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH RECURSIVE envs(env_id) AS (
        (SELECT s.env_id FROM cron.schedules s
          WHERE s.status = 'active' AND s.next_run_at <= p_now
          ORDER BY s.env_id LIMIT 1)
        UNION ALL
        SELECT (SELECT s.env_id FROM cron.schedules s
                 WHERE s.status = 'active' AND s.next_run_at <= p_now AND s.env_id > e.env_id
                 ORDER BY s.env_id LIMIT 1)
          FROM envs e WHERE e.env_id IS NOT NULL)
    SELECT d.id, d.env_id, d.next_run_at
      FROM envs e
     CROSS JOIN LATERAL (
        SELECT w.id, w.env_id, w.next_run_at, w.tie,
               row_number() OVER (ORDER BY w.next_run_at, w.tie) AS turn
          FROM (SELECT s.id, s.env_id, s.next_run_at, uuid_hash_extended(s.id, p_seed) AS tie
                  FROM cron.schedules s
                 WHERE s.env_id = e.env_id AND s.status = 'active' AND s.next_run_at <= p_now
                   AND (p_shares <= 1 OR s.next_run_at <= p_ahead_after
                        OR (uuid_hash_extended(s.id, 0) & 2147483647) % p_shares = p_share)
                 ORDER BY s.next_run_at, tie
                 LIMIT least(greatest(p_limit, 0), 1000) * 2) w) d
     WHERE e.env_id IS NOT NULL
     ORDER BY d.turn, d.next_run_at, d.tie
     LIMIT least(greatest(p_limit, 0), 1000)
$$;

REVOKE ALL ON FUNCTION cron.instance_beat(uuid, timestamptz, timestamptz),
    cron.instance_leave(uuid),
    cron.due_schedules(integer, timestamptz, bigint, timestamptz, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.instance_beat(uuid, timestamptz, timestamptz),
    cron.instance_leave(uuid),
    cron.due_schedules(integer, timestamptz, bigint, timestamptz, integer, integer)
    TO sentin8_cron_service;
