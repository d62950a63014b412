-- sentin8-cron schema, version 17: overlap policies and backfill.
--
-- `buffered`: an occurrence waiting for its schedule's open job to end (overlap buffer_one),
-- or a backfilled occurrence waiting its turn. It is not open: the engine releases it to
-- `pending` (due at once) in the transaction that records the open job's end.
-- `concurrent`: a job that runs beside the schedule's other open jobs (overlap allow_all,
-- or a backfill of such a schedule); the one-open-job index leaves it out.
-- `backfill`: the job runs an occurrence an operator asked for after the fact.
--
-- The open-job index is rebuilt with its new predicate; this takes a lock that blocks
-- writes to cron.jobs while it builds (seconds for millions of rows).

ALTER TABLE cron.jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE cron.jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('scheduled', 'pending', 'running', 'succeeded', 'failed', 'skipped',
                      'superseded', 'buffered')) NOT VALID;
ALTER TABLE cron.jobs
    ADD COLUMN concurrent boolean NOT NULL DEFAULT false,
    ADD COLUMN backfill boolean NOT NULL DEFAULT false;

DROP INDEX cron.sentin8_cron_jobs_open_per_schedule;
CREATE UNIQUE INDEX sentin8_cron_jobs_open_per_schedule ON cron.jobs (schedule_id)
    WHERE status IN ('scheduled', 'pending', 'running') AND NOT concurrent;
CREATE INDEX sentin8_cron_jobs_buffered ON cron.jobs (schedule_id, backfill, scheduled_for)
    WHERE status = 'buffered';
