-- sentin8-cron schema, version 27 (embedded SQLite): nothing to change. On PostgreSQL this
-- version drops the foreign key from an answer written ahead to its job, whose check locked
-- the job's row; SQLite locks the whole database for a write anyway, and its key still
-- deletes a purged job's answer.
SELECT 1;
