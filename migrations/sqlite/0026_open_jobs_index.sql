-- sentin8-cron schema, version 26 (embedded SQLite): an index of the open jobs (see the
-- PostgreSQL migration of the same version).

CREATE INDEX sentin8_cron_jobs_open ON jobs (schedule_id)
    WHERE status IN ('scheduled', 'pending', 'running');

CREATE INDEX sentin8_cron_jobs_running_unleased ON jobs (started_at)
    WHERE status = 'running' AND lease_until IS NULL;
