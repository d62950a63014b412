-- sentin8-cron schema, version 15 (embedded SQLite): on PostgreSQL this version lets a
-- retried hand-off take back the fires its first try handed off; here the hand-off is a
-- statement in the store, so nothing changes.
SELECT 1;
