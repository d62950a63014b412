-- sentin8-cron schema, version 25 (embedded SQLite): exclusions and calendars (see the
-- PostgreSQL migration of the same version). JSON is stored as text.

ALTER TABLE schedules ADD COLUMN exclude TEXT NOT NULL DEFAULT '[]';

CREATE TABLE calendars (
    env_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    entries     TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    created_by  TEXT NOT NULL,
    updated_by  TEXT NOT NULL,
    PRIMARY KEY (env_id, name)
);
