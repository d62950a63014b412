-- sentin8-cron schema, version 20 (embedded SQLite): what an operator counts and reads (see
-- the PostgreSQL migration of the same version). SQLite counts jobs by state with a query of
-- the store's own, so only the dead-letter entries' `backfill` mark is added here.

ALTER TABLE dlq ADD COLUMN backfill INTEGER NOT NULL DEFAULT 0 CHECK (backfill IN (0, 1));
UPDATE dlq SET backfill = 1
 WHERE job_id IN (SELECT id FROM jobs WHERE backfill = 1);
