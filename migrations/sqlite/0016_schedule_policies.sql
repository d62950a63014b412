-- sentin8-cron schema, version 16 (embedded SQLite): schedule policies (overlap, catch-up
-- window, jitter, start and end, pause on failure, limited runs); see the PostgreSQL
-- migration of the same version. Durations in whole milliseconds, instants in microseconds.

ALTER TABLE schedules ADD COLUMN overlap TEXT NOT NULL DEFAULT 'skip'
    CHECK (overlap IN ('skip', 'buffer_one', 'allow_all'));
ALTER TABLE schedules ADD COLUMN catchup_window_ms INTEGER NOT NULL DEFAULT 3600000
    CHECK (catchup_window_ms > 0);
ALTER TABLE schedules ADD COLUMN max_jitter_ms INTEGER NOT NULL DEFAULT 0
    CHECK (max_jitter_ms >= 0);
ALTER TABLE schedules ADD COLUMN start_at INTEGER;
ALTER TABLE schedules ADD COLUMN end_at INTEGER
    CHECK (start_at IS NULL OR end_at IS NULL OR end_at > start_at);
ALTER TABLE schedules ADD COLUMN pause_on_failure INTEGER NOT NULL DEFAULT 0
    CHECK (pause_on_failure IN (0, 1));
ALTER TABLE schedules ADD COLUMN remaining_runs INTEGER CHECK (remaining_runs >= 0);
