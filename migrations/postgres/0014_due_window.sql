-- sentin8-cron schema, version 14: the due selection reads a bounded part of each
-- environment's due schedules, so its cost no longer grows with the burst.
--
-- Before, each environment's due schedules were all read and ordered by a seeded hash to pick
-- the round's batch: with 5,000 due in an environment (a 50,000 burst claimed ahead), every
-- round of 500 read and hashed them all (about 90 ms a round). Now each schedule keeps its
-- hash (`claim_tie`), an index orders the due schedules by instant and hash, and an instance
-- starts from a point of that ring its seed picks: the rows from that point on, then the rows
-- before it, each read in index order and only as many as the round takes. Instances with
-- different seeds still start on different schedules of a burst.
--
-- Adding the stored column rewrites cron.schedules once (an exclusive lock for as long as
-- that takes: seconds per million schedules).

ALTER TABLE cron.schedules
    ADD COLUMN claim_tie bigint GENERATED ALWAYS AS (uuid_hash_extended(id, 0)) STORED;

-- The same columns as the index it replaces, with the hash after them.
CREATE INDEX sentin8_cron_schedules_due_ring
    ON cron.schedules (env_id, next_run_at, claim_tie) WHERE status = 'active';
DROP INDEX cron.sentin8_cron_schedules_due_by_env;

CREATE OR REPLACE FUNCTION cron.due_schedules(p_limit integer DEFAULT 50,
                                              p_now timestamptz DEFAULT now(),
                                              p_seed bigint DEFAULT 0,
                                              p_ahead_after timestamptz DEFAULT NULL,
                                              p_shares integer DEFAULT 1,
                                              p_share integer DEFAULT 0)
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
          FROM envs e WHERE e.env_id IS NOT NULL),
    round AS (
        SELECT least(greatest(p_limit, 0), 1000) AS size,
               hashint8extended(p_seed, 0) AS start)
    SELECT d.id, d.env_id, d.next_run_at
      FROM envs e
     CROSS JOIN round r
     CROSS JOIN LATERAL (
        SELECT w.id, w.env_id, w.next_run_at, w.ring, w.claim_tie,
               row_number() OVER (ORDER BY w.next_run_at, w.ring, w.claim_tie) AS turn
          FROM ((SELECT s.id, s.env_id, s.next_run_at, s.claim_tie, 0 AS ring
                   FROM cron.schedules s
                  WHERE s.env_id = e.env_id AND s.status = 'active'
                    AND s.next_run_at <= p_now AND s.claim_tie >= r.start
                    AND (p_shares <= 1 OR s.next_run_at <= p_ahead_after
                         OR (s.claim_tie & 2147483647) % p_shares = p_share)
                  ORDER BY s.next_run_at, s.claim_tie
                  LIMIT r.size)
                UNION ALL
                (SELECT s.id, s.env_id, s.next_run_at, s.claim_tie, 1 AS ring
                   FROM cron.schedules s
                  WHERE s.env_id = e.env_id AND s.status = 'active'
                    AND s.next_run_at <= p_now AND s.claim_tie < r.start
                    AND (p_shares <= 1 OR s.next_run_at <= p_ahead_after
                         OR (s.claim_tie & 2147483647) % p_shares = p_share)
                  ORDER BY s.next_run_at, s.claim_tie
                  LIMIT r.size)) w
         ORDER BY w.next_run_at, w.ring, w.claim_tie
         LIMIT r.size) d
     WHERE e.env_id IS NOT NULL
     ORDER BY d.turn, d.next_run_at, d.ring, d.claim_tie
     LIMIT (SELECT size FROM round)
$$;
