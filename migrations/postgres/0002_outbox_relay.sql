-- sentin8-cron schema, version 2: the outbox relay.
--
-- A relay claims unrelayed events with a short lease, publishes them to the bus and marks them
-- relayed once the bus acknowledged them. The service role still has no UPDATE or DELETE on the
-- outbox: every change goes through the SECURITY DEFINER functions below, which (like the
-- engine's reads) are the only cross-tenant path, and which take every instant as a parameter.
--
-- Columns:
-- * locked_until / locked_by: the claim lease. A relay that dies mid-publish loses its claim
--   when the lease expires, and another relay takes the event over.
-- * next_attempt_at: after a failed publish, the event is not claimed again before this.

ALTER TABLE cron.outbox
    ADD COLUMN locked_until    timestamptz,
    ADD COLUMN locked_by       text,
    ADD COLUMN next_attempt_at timestamptz;

-- The per-schedule ordering check: is there an earlier pending event of the same schedule?
CREATE INDEX sentin8_cron_outbox_pending_by_schedule
    ON cron.outbox (schedule_id, seq)
    WHERE relayed_at IS NULL AND parked_at IS NULL AND schedule_id IS NOT NULL;
-- Retention: relayed events, oldest first.
CREATE INDEX sentin8_cron_outbox_relayed
    ON cron.outbox (relayed_at) WHERE relayed_at IS NOT NULL;
-- Parked events, for health and for operators.
CREATE INDEX sentin8_cron_outbox_parked
    ON cron.outbox (seq) WHERE parked_at IS NOT NULL AND relayed_at IS NULL;

-- Claims up to p_limit events for relay p_relay, in seq order, leasing them until
-- p_lease_until. An event is claimable when it is neither relayed nor parked, not leased to
-- anyone (or its lease expired), not backing off after a failure, and (when it belongs to a
-- schedule) no earlier event of that schedule is still pending (neither relayed nor parked),
-- whoever holds it. So a claim holds at most one event per schedule: the schedule's oldest
-- pending one. Rows another transaction is claiming right now are skipped, not waited for.
CREATE FUNCTION cron.outbox_claim(p_relay text, p_now timestamptz, p_lease_until timestamptz,
                                  p_limit integer)
    RETURNS TABLE (seq bigint, id uuid, env_id uuid, schedule_id uuid, event_type text,
                   payload jsonb, created_at timestamptz, relayed_at timestamptz,
                   attempts integer, last_error text, parked_at timestamptz)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH candidates AS (
        SELECT o.seq
          FROM cron.outbox o
         WHERE o.relayed_at IS NULL
           AND o.parked_at IS NULL
           AND (o.locked_until IS NULL OR o.locked_until <= p_now)
           AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= p_now)
           AND (o.schedule_id IS NULL OR NOT EXISTS (
                   SELECT 1
                     FROM cron.outbox e
                    WHERE e.schedule_id = o.schedule_id
                      AND e.seq < o.seq
                      AND e.relayed_at IS NULL
                      AND e.parked_at IS NULL))
         ORDER BY o.seq
         LIMIT least(greatest(p_limit, 0), 1000)
         FOR UPDATE SKIP LOCKED
    )
    UPDATE cron.outbox o
       SET locked_until = p_lease_until, locked_by = p_relay
      FROM candidates c
     WHERE o.seq = c.seq
    RETURNING o.seq, o.id, o.env_id, o.schedule_id, o.event_type, o.payload, o.created_at,
              o.relayed_at, o.attempts, o.last_error, o.parked_at
$$;

-- Marks events relayed (the bus acknowledged them) and drops their leases. Idempotent: an
-- event already marked keeps its first relayed_at. Returns how many rows changed.
CREATE FUNCTION cron.outbox_mark_relayed(p_seqs bigint[], p_now timestamptz)
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH done AS (
        UPDATE cron.outbox
           SET relayed_at = p_now, locked_until = NULL, locked_by = NULL, next_attempt_at = NULL
         WHERE seq = ANY (p_seqs) AND relayed_at IS NULL
        RETURNING 1)
    SELECT count(*) FROM done
$$;

-- Records failed publishes by relay p_relay: one more attempt, the error, a retry no earlier
-- than p_retry_at, and the lease dropped. An event whose failure is parkable (the bus refused
-- it) and that reached p_max_attempts is parked. Only events still leased to p_relay and still
-- pending change; the others were taken over or finished meanwhile.
CREATE FUNCTION cron.outbox_mark_failed(p_relay text, p_seqs bigint[], p_errors text[],
                                        p_parkable boolean[], p_now timestamptz,
                                        p_retry_at timestamptz, p_max_attempts integer)
    RETURNS TABLE (seq bigint, attempts integer, parked boolean)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH failures AS (
        SELECT f.seq, f.error, f.parkable
          FROM unnest(p_seqs, p_errors, p_parkable) AS f (seq, error, parkable))
    UPDATE cron.outbox o
       SET attempts = o.attempts + 1,
           last_error = left(f.error, 2000),
           locked_until = NULL,
           locked_by = NULL,
           next_attempt_at = p_retry_at,
           parked_at = CASE WHEN f.parkable AND o.attempts + 1 >= p_max_attempts
                            THEN p_now END
      FROM failures f
     WHERE o.seq = f.seq
       AND o.relayed_at IS NULL
       AND o.parked_at IS NULL
       AND o.locked_by = p_relay
    RETURNING o.seq, o.attempts, o.parked_at IS NOT NULL
$$;

-- Gives back claimed events relay p_relay did not try to publish: their leases are dropped,
-- nothing else changes. Returns how many were released.
CREATE FUNCTION cron.outbox_release(p_relay text, p_seqs bigint[])
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH released AS (
        UPDATE cron.outbox
           SET locked_until = NULL, locked_by = NULL
         WHERE seq = ANY (p_seqs) AND locked_by = p_relay AND relayed_at IS NULL
        RETURNING 1)
    SELECT count(*) FROM released
$$;

-- Deletes at most p_limit relayed events whose relayed_at is before p_before, oldest first.
-- Pending and parked events are never deleted. Returns how many were deleted.
CREATE FUNCTION cron.outbox_purge(p_before timestamptz, p_limit integer)
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH doomed AS (
        SELECT o.seq
          FROM cron.outbox o
         WHERE o.relayed_at IS NOT NULL AND o.relayed_at < p_before
         ORDER BY o.relayed_at
         LIMIT least(greatest(p_limit, 0), 10000)
         FOR UPDATE SKIP LOCKED),
    gone AS (
        DELETE FROM cron.outbox o USING doomed d WHERE o.seq = d.seq RETURNING 1)
    SELECT count(*) FROM gone
$$;

-- Outbox counts for health and metrics: numbers only, no tenant rows.
CREATE FUNCTION cron.outbox_stats()
    RETURNS TABLE (outbox_parked bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    SELECT count(*) FROM cron.outbox WHERE parked_at IS NOT NULL AND relayed_at IS NULL
$$;

REVOKE ALL ON FUNCTION cron.outbox_claim(text, timestamptz, timestamptz, integer),
    cron.outbox_mark_relayed(bigint[], timestamptz),
    cron.outbox_mark_failed(text, bigint[], text[], boolean[], timestamptz, timestamptz, integer),
    cron.outbox_release(text, bigint[]),
    cron.outbox_purge(timestamptz, integer),
    cron.outbox_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.outbox_claim(text, timestamptz, timestamptz, integer),
    cron.outbox_mark_relayed(bigint[], timestamptz),
    cron.outbox_mark_failed(text, bigint[], text[], boolean[], timestamptz, timestamptz, integer),
    cron.outbox_release(text, bigint[]),
    cron.outbox_purge(timestamptz, integer),
    cron.outbox_stats() TO sentin8_cron_service;
