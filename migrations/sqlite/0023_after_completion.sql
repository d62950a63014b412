-- sentin8-cron schema, version 23 (embedded SQLite): what becomes of a schedule once it has
-- completed (see the PostgreSQL migration of the same version).

ALTER TABLE schedules ADD COLUMN after_completion TEXT NOT NULL DEFAULT 'keep'
    CHECK (after_completion IN ('keep', 'delete'));
