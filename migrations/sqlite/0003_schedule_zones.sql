-- sentin8-cron schema, version 3 (embedded SQLite): the time zones active schedules use.
--
-- The same index as the PostgreSQL migration. Listing the (environment, zone) pairs in use is
-- a plain statement in the store here: SQLite has no row-level security to step around.

CREATE INDEX sentin8_cron_schedules_active_zone
    ON schedules (timezone, env_id) WHERE status = 'active' AND kind = 'cron';
