-- sentin8-cron schema, version 2 (embedded SQLite): the outbox relay.
--
-- The same columns and indexes as the PostgreSQL migration. The relay's claim, mark and purge
-- statements are plain statements in the store: one writer at a time makes a conditional
-- UPDATE exclusive, so SQLite needs neither row locks nor SECURITY DEFINER functions.
--
-- * locked_until / locked_by: the claim lease (INTEGER microseconds, like every instant here).
-- * next_attempt_at: after a failed publish, the event is not claimed again before this.

ALTER TABLE outbox ADD COLUMN locked_until INTEGER;
ALTER TABLE outbox ADD COLUMN locked_by TEXT;
ALTER TABLE outbox ADD COLUMN next_attempt_at INTEGER;

CREATE INDEX sentin8_cron_outbox_pending_by_schedule
    ON outbox (schedule_id, seq)
    WHERE relayed_at IS NULL AND parked_at IS NULL AND schedule_id IS NOT NULL;
CREATE INDEX sentin8_cron_outbox_relayed ON outbox (relayed_at) WHERE relayed_at IS NOT NULL;
CREATE INDEX sentin8_cron_outbox_parked
    ON outbox (seq) WHERE parked_at IS NOT NULL AND relayed_at IS NULL;
