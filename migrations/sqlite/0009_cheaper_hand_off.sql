-- sentin8-cron schema, version 9 (embedded SQLite): the index of running jobs by start goes,
-- as on PostgreSQL (recovering running attempts without a lease reads the leases index). The
-- hand-off's query, which no longer sets updated_at, lives in the store.
DROP INDEX IF EXISTS sentin8_cron_jobs_running;
