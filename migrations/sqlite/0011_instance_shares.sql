-- sentin8-cron schema, version 11 (embedded SQLite): the instances' heartbeats, as on
-- PostgreSQL (see there). The heartbeat and the due selection's share are statements in the
-- store.
CREATE TABLE instances (
    id      TEXT PRIMARY KEY,
    seen_at INTEGER NOT NULL
);
