-- sentin8-cron schema, version 26: an index of the open jobs.
--
-- "Which of these schedules have an open job" (asked of every schedule a round claims ahead
-- under an overlap policy other than `allow_all`, and by the operations on one schedule) had
-- no index of its own since version 17, when the one-open-job index left out the jobs that run
-- side by side (`concurrent`): it was answered through the index of every job of the
-- schedules, filtering their whole history, so its cost grew with the jobs kept (a schedule
-- that runs every second keeps 86,400 a day). Open jobs are few; this index holds only them.
-- Building it reads the table once, under a lock that holds writes to `jobs` meanwhile.

CREATE INDEX sentin8_cron_jobs_open ON cron.jobs (schedule_id)
    WHERE status IN ('scheduled', 'pending', 'running');

-- The sweep for running attempts without a lease (written before leases existed; normally
-- none) gets an index of exactly those: with the index above it would otherwise read every
-- open job of a burst and filter them.
CREATE INDEX sentin8_cron_jobs_running_unleased ON cron.jobs (started_at)
    WHERE status = 'running' AND lease_until IS NULL;
