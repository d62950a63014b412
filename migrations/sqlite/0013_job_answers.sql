-- sentin8-cron schema, version 13 (embedded SQLite): what a service answered, written as soon
-- as the answer comes, ahead of the outcome's record, so an answer outlives a process killed
-- before the record (see the PostgreSQL migration of the same version). The record deletes it.
CREATE TABLE job_answers (
    job_id      TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    env_id      TEXT NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    answered_at INTEGER NOT NULL,
    answer      TEXT NOT NULL CHECK (json_valid(answer))
);
