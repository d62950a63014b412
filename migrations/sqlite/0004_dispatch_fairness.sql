-- sentin8-cron schema, version 4 (embedded SQLite): fair, leased dispatch that records every
-- occurrence. The same columns and index as the PostgreSQL migration; the round-robin
-- selection and the lease renewal are plain statements in the store here.

ALTER TABLE jobs ADD COLUMN missed_first INTEGER;
ALTER TABLE jobs ADD COLUMN missed_last INTEGER;
ALTER TABLE jobs ADD COLUMN missed_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN lease_until INTEGER;

CREATE INDEX sentin8_cron_jobs_leases ON jobs (lease_until) WHERE status = 'running';
