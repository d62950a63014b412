-- sentin8-cron schema, version 7 (embedded SQLite): nothing to change. The PostgreSQL
-- migration replaces SECURITY DEFINER functions (the one-day floor of retention); SQLite has
-- no functions and no service role to guard against, and its queries live in the store.
SELECT 1;
