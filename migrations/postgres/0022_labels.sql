-- sentin8-cron schema, version 22: labels.
--
-- A schedule carries `key=value` labels (Kubernetes' rules for keys and values, checked by the
-- application) that people and tools select it by: lists filter on them and bulk actions
-- take a selector. They are a JSON object of strings. Selectors always run inside one
-- environment, on its index by id, so no index on the labels is added: one would be written
-- again by every fire's update of its schedule.

ALTER TABLE cron.schedules ADD COLUMN labels jsonb NOT NULL DEFAULT '{}'::jsonb;
