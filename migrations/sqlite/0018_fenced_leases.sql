-- sentin8-cron schema, version 18 (embedded SQLite): fenced heartbeat leases (see the
-- PostgreSQL migration of the same version): the epoch every write of an attempt's holder
-- names, and when the holder said the attempt's call had started.

ALTER TABLE jobs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN called_at INTEGER;
