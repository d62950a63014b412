-- sentin8-cron schema, version 18: fenced heartbeat leases.
--
-- An attempt's lease is short and renewed while its call is in flight, so the lease no longer
-- covers a whole call. Two columns make the lease a fence:
--
-- * `lease_epoch` changes every time a job is given to an instance to run (a pending job
--   claimed: a retry, a triggered or republished run, a released fire). Every write of the
--   instance that holds the attempt (its renewals, its record) names the epoch it was given, so
--   an instance that stalled past its lease while another took the job over changes nothing.
-- * `called_at` is when the holder told the store its call had started (the first renewal after
--   the call left). An attempt whose lease lapsed before that is released to run again, its
--   attempt still to come, like a fire claimed ahead whose instance stopped; one whose call was
--   known to have started is recorded as a failed attempt.

ALTER TABLE cron.jobs ADD COLUMN lease_epoch integer NOT NULL DEFAULT 0;
ALTER TABLE cron.jobs ADD COLUMN called_at timestamptz;

DROP FUNCTION cron.jobs_lease_renew(uuid[], timestamptz);

-- Extends the leases of running attempts that are still held under the given epochs, marks
-- the ones whose call has started, and returns the ids renewed: a job missing from the answer
-- is no longer this instance's (recovered, released or recorded elsewhere).
CREATE FUNCTION cron.jobs_lease_renew(p_ids uuid[], p_epochs integer[], p_called boolean[],
                                      p_until timestamptz, p_now timestamptz)
    RETURNS TABLE (job_id uuid)
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE cron.jobs j
       SET lease_until = p_until,
           called_at = CASE WHEN h.called THEN coalesce(j.called_at, p_now) ELSE j.called_at END
      FROM unnest(p_ids, p_epochs, p_called) AS h(id, epoch, called)
     WHERE j.id = h.id AND j.lease_epoch = h.epoch AND (j.status = 'running') IS TRUE
    RETURNING j.id
$$;

REVOKE ALL ON FUNCTION cron.jobs_lease_renew(uuid[], integer[], boolean[], timestamptz,
                                             timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.jobs_lease_renew(uuid[], integer[], boolean[], timestamptz,
                                                timestamptz) TO sentin8_cron_service;
