-- sentin8-cron schema, version 12 (embedded SQLite): on PostgreSQL this version adds the
-- cross-tenant count of schedules due soon as a function; here it is a statement in the store,
-- over the existing due index, so nothing changes.
SELECT 1;
