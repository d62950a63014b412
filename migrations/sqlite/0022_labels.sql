-- sentin8-cron schema, version 22 (embedded SQLite): labels (see the PostgreSQL migration of
-- the same version). The object is stored as JSON text and read with `json_extract`.

ALTER TABLE schedules ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
