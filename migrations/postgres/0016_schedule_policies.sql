-- sentin8-cron schema, version 16: schedule policies.
--
-- overlap: what a due occurrence does while another job of its schedule is open.
-- catchup_window_ms: how late the latest missed occurrence may still run (default 1 hour).
-- max_jitter_ms: calls are spread over [instant, instant + max_jitter); next_run_at holds
--   the call instant.
-- start_at / end_at: the bounds of the occurrences; past its end a schedule is completed.
-- pause_on_failure: a job of the schedule that dead-letters pauses it.
-- remaining_runs: fires left before the schedule completes (NULL: no limit).
--
-- Every column has a constant default, so adding them rewrites nothing.

ALTER TABLE cron.schedules
    ADD COLUMN overlap text NOT NULL DEFAULT 'skip'
        CONSTRAINT schedules_overlap_check CHECK (overlap IN ('skip', 'buffer_one', 'allow_all')),
    ADD COLUMN catchup_window_ms bigint NOT NULL DEFAULT 3600000
        CONSTRAINT schedules_catchup_window_check CHECK (catchup_window_ms > 0),
    ADD COLUMN max_jitter_ms bigint NOT NULL DEFAULT 0
        CONSTRAINT schedules_max_jitter_check CHECK (max_jitter_ms >= 0),
    ADD COLUMN start_at timestamptz,
    ADD COLUMN end_at timestamptz,
    ADD COLUMN pause_on_failure boolean NOT NULL DEFAULT false,
    ADD COLUMN remaining_runs integer
        CONSTRAINT schedules_remaining_runs_check CHECK (remaining_runs >= 0),
    ADD CONSTRAINT schedules_bounds_in_order
        CHECK (start_at IS NULL OR end_at IS NULL OR end_at > start_at);
