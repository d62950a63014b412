//! How a committed change wakes what waits for it: the channels a change may ring, and this
//! process's signals, rung after a commit (and, on backends that listen, after another
//! process's).

use tokio::sync::Notify;

/// What a committed change may need to wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Schedules changed: the ticker recomputes when to wake.
    Schedules,
    /// Events were appended: the relay drains the outbox.
    Outbox,
}

impl Channel {
    /// The PostgreSQL NOTIFY channel name.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Schedules => "sentin8_cron_schedules",
            Channel::Outbox => "sentin8_cron_outbox",
        }
    }
}

/// In-process wake-up signals, rung after a commit that asked for them, and (on backends with
/// `listen_notify`) when another process commits such a change.
#[derive(Debug, Default)]
pub struct Signals {
    pub schedules: Notify,
    pub outbox: Notify,
}

impl Signals {
    /// Rings one channel. A permit is stored when nobody waits, so a waiter never misses it.
    pub fn ring(&self, channel: Channel) {
        match channel {
            Channel::Schedules => self.schedules.notify_one(),
            Channel::Outbox => self.outbox.notify_one(),
        }
    }
}
