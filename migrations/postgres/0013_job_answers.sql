-- sentin8-cron schema, version 13: what a service answered, written as soon as the answer
-- comes, ahead of the outcome's record.
--
-- An outcome's record (the job, the schedule's retry state, a DLQ entry, the events) waits
-- while a burst's calls go out. An instance that stopped in between used to take the answer
-- with it: the lapsed attempt was recorded as abandoned and called again. An answer written
-- here is recorded as what it was by whichever instance recovers the attempt; the record
-- deletes it in its own transaction, so the table holds only answers not recorded yet.

CREATE TABLE cron.job_answers (
    job_id      uuid PRIMARY KEY REFERENCES cron.jobs (id) ON DELETE CASCADE,
    env_id      uuid NOT NULL,
    attempt     integer NOT NULL CHECK (attempt >= 1),
    answered_at timestamptz NOT NULL,
    -- {"succeeded": <the service's result>} or {"failed": {kind, message, http_status, excerpt}}
    answer      jsonb NOT NULL
);

ALTER TABLE cron.job_answers ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.job_answers FORCE ROW LEVEL SECURITY;
CREATE POLICY job_answers_select ON cron.job_answers FOR SELECT
    USING (env_id = cron.current_env_id());
CREATE POLICY job_answers_delete ON cron.job_answers FOR DELETE
    USING (env_id = cron.current_env_id());
GRANT SELECT, DELETE ON cron.job_answers TO sentin8_cron_service;

-- Written across tenants in one statement per batch: the environment is the job's own (never
-- the caller's word), and only an attempt still running under that number takes an answer.
CREATE FUNCTION cron.job_answers_put(p_jobs uuid[], p_attempts integer[],
                                     p_answered_at timestamptz[], p_answers jsonb[])
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    WITH put AS (
        INSERT INTO cron.job_answers (job_id, env_id, attempt, answered_at, answer)
        SELECT a.job_id, j.env_id, a.attempt, a.answered_at, a.answer
          FROM unnest(p_jobs, p_attempts, p_answered_at, p_answers)
               AS a(job_id, attempt, answered_at, answer)
          JOIN cron.jobs j ON j.id = a.job_id AND j.attempt = a.attempt
         WHERE (j.status = 'running') IS TRUE
        ON CONFLICT (job_id) DO UPDATE
           SET attempt = EXCLUDED.attempt, answered_at = EXCLUDED.answered_at,
               answer = EXCLUDED.answer
        RETURNING 1)
    SELECT count(*) FROM put
$$;

REVOKE ALL ON FUNCTION cron.job_answers_put(uuid[], integer[], timestamptz[], jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION cron.job_answers_put(uuid[], integer[], timestamptz[], jsonb[])
    TO sentin8_cron_service;
