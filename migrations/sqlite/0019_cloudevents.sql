-- sentin8-cron schema, version 19 (embedded SQLite): events as CloudEvents 1.0.
--
-- The relay now publishes each event as a CloudEvent in the structured JSON format, with types
-- in reverse-DNS style and versioned (`io.sentin8.cron.job.succeeded.v1`). The outbox keeps the
-- type it publishes, so the events already written take their new names here (those still
-- waiting for the relay go out under them), and their payloads, which become the CloudEvents
-- `data`, lose the two fields the envelope now carries (`event_type` as `type`, `at` as `time`).
-- `schedule:completed` meant "a job succeeded" and becomes `job.succeeded.v1`; a schedule that
-- is done has its own new event, `schedule.completed.v1`.

UPDATE outbox SET
  event_type = CASE event_type
    WHEN 'sentin8:cron:schedule:created' THEN 'io.sentin8.cron.schedule.created.v1'
    WHEN 'sentin8:cron:schedule:updated' THEN 'io.sentin8.cron.schedule.updated.v1'
    WHEN 'sentin8:cron:schedule:deleted' THEN 'io.sentin8.cron.schedule.deleted.v1'
    WHEN 'sentin8:cron:schedule:paused' THEN 'io.sentin8.cron.schedule.paused.v1'
    WHEN 'sentin8:cron:schedule:resumed' THEN 'io.sentin8.cron.schedule.resumed.v1'
    WHEN 'sentin8:cron:schedule:completed' THEN 'io.sentin8.cron.job.succeeded.v1'
    WHEN 'sentin8:cron:schedule:failed' THEN 'io.sentin8.cron.job.failed.v1'
    WHEN 'sentin8:cron:schedule:triggered' THEN 'io.sentin8.cron.schedule.triggered.v1'
    WHEN 'sentin8:cron:schedule:backfilled' THEN 'io.sentin8.cron.schedule.backfilled.v1'
    WHEN 'sentin8:cron:job:retried' THEN 'io.sentin8.cron.job.retried.v1'
    WHEN 'sentin8:cron:job:skipped' THEN 'io.sentin8.cron.job.skipped.v1'
    WHEN 'sentin8:cron:job:buffered' THEN 'io.sentin8.cron.job.buffered.v1'
    WHEN 'sentin8:cron:dlq:republished' THEN 'io.sentin8.cron.dlq.republished.v1'
    WHEN 'sentin8:cron:dlq:discarded' THEN 'io.sentin8.cron.dlq.discarded.v1'
    ELSE event_type
  END,
  payload = json_remove(payload, '$.event_type', '$.at')
WHERE event_type LIKE 'sentin8:cron:%';
