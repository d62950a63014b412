-- sentin8-cron schema, version 27: answers written ahead without a foreign key to their jobs.
--
-- `job_answers_put` already joins each answer to its job (a running attempt under that
-- number), so the key checked the job a second time, and its check took a KEY SHARE lock on
-- the job's row, which wrote to the job's page once more just before its record updated it.
-- Writing a burst's answers cost about three times what the rows alone cost. Without the
-- key, the purge of finished jobs deletes their answers with them (no other statement
-- deletes a job); the record deletes the answers it records, as before.

ALTER TABLE cron.job_answers DROP CONSTRAINT job_answers_job_id_fkey;

CREATE OR REPLACE FUNCTION cron.purge_jobs(p_before timestamptz, p_limit integer) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    deleted bigint;
BEGIN
    p_before := least(p_before, now() - interval '1 day');
    EXECUTE format(
        'WITH doomed AS (
             SELECT j.id FROM cron.jobs j
              WHERE j.status IN (''succeeded'', ''failed'', ''skipped'', ''superseded'', ''cancelled'')
                AND j.updated_at < $1
                AND NOT EXISTS (SELECT 1 FROM cron.dlq d WHERE d.job_id = j.id)
              ORDER BY j.updated_at
              LIMIT %s
              FOR UPDATE SKIP LOCKED
         ), answers AS (
             DELETE FROM cron.job_answers a USING doomed WHERE a.job_id = doomed.id
         ), gone AS (
             DELETE FROM cron.jobs j USING doomed WHERE j.id = doomed.id RETURNING 1
         )
         SELECT count(*) FROM gone', least(greatest(p_limit, 0), 10000))
        INTO deleted USING p_before;
    RETURN deleted;
END
$$;
