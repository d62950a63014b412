-- sentin8-cron schema, version 25: exclusions and calendars.
--
-- A schedule's `exclude` lists what it does not run on: dates, date ranges, cron-like specs
-- and names of calendars, as a JSON array of strings read by the application. A calendar is a
-- named list of the same specs, each with a note (a holiday's name), shared by the schedules
-- of one environment; a schedule names it, so a calendar in use is not removed (the
-- application checks, under the calendar row's lock).

ALTER TABLE cron.schedules ADD COLUMN exclude jsonb NOT NULL DEFAULT '[]'::jsonb;

CREATE TABLE cron.calendars (
    env_id      uuid NOT NULL,
    name        text NOT NULL CHECK (name ~ '^[A-Za-z][A-Za-z0-9_-]{0,62}$'),
    description text NOT NULL DEFAULT '',
    -- [{"spec": "2026-12-25", "note": "Christmas Day"}, ...]
    entries     jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    created_by  text NOT NULL,
    updated_by  text NOT NULL,
    PRIMARY KEY (env_id, name)
);

ALTER TABLE cron.calendars ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.calendars FORCE ROW LEVEL SECURITY;
CREATE POLICY calendars_select ON cron.calendars FOR SELECT
    USING (env_id = cron.current_env_id());
CREATE POLICY calendars_insert ON cron.calendars FOR INSERT
    WITH CHECK (env_id = cron.current_env_id());
CREATE POLICY calendars_update ON cron.calendars FOR UPDATE
    USING (env_id = cron.current_env_id()) WITH CHECK (env_id = cron.current_env_id());
CREATE POLICY calendars_delete ON cron.calendars FOR DELETE
    USING (env_id = cron.current_env_id());
GRANT SELECT, INSERT, UPDATE, DELETE ON cron.calendars TO sentin8_cron_service;
