-- sentin8-cron schema, version 14 (embedded SQLite): on PostgreSQL this version bounds the
-- window the due selection reads per environment; here the selection is a statement in the
-- store, so nothing changes.
SELECT 1;
