-- sentin8-cron schema, version 6 (embedded SQLite): what the admin pages read beyond the API.
--
-- The same index as the PostgreSQL migration, for the per-hour run charts. The environment
-- picker's listing is a plain statement in the store here: SQLite has no row-level security
-- to step around.

CREATE INDEX sentin8_cron_jobs_by_env_scheduled ON jobs (env_id, scheduled_for);
-- A schedule's own charts read its jobs alone.
CREATE INDEX sentin8_cron_jobs_by_env_schedule_scheduled ON jobs (env_id, schedule_id, scheduled_for);
