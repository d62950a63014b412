-- sentin8-cron schema, version 23: what becomes of a schedule once it has completed.
--
-- `keep` (the default, what every schedule did before) leaves it `completed`; `delete` has the
-- engine soft-delete it once its last job has ended, audited and with its event. Only a
-- schedule that can complete (a one-shot, or one with `end_at` or `remaining_runs`) may ask
-- for it; the application checks that.

ALTER TABLE cron.schedules
    ADD COLUMN after_completion text NOT NULL DEFAULT 'keep'
        CONSTRAINT schedules_after_completion_check CHECK (after_completion IN ('keep', 'delete'));
