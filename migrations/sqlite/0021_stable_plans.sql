-- sentin8-cron schema, version 21 (embedded SQLite): plans that do not depend on luck (see the
-- PostgreSQL migration of the same version). SQLite has no functions to change; the store
-- refreshes its statistics with `PRAGMA optimize`, which needs nothing in the schema.

SELECT 1;
