-- sentin8-cron schema, version 8 (embedded SQLite): nothing to change. The PostgreSQL
-- migration adds the SECURITY DEFINER function that hands off fires claimed ahead; SQLite has
-- no functions, and its query lives in the store.
SELECT 1;
