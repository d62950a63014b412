//! Following the host to use when the database URL names several (a failover pair), or asks
//! for a writable one: the host is chosen by connecting to each in order and asking
//! (`SHOW transaction_read_only` for `read-write`), then watched on a connection of its own.
//! When it stops answering or turns read-only the hosts are searched again until one fits;
//! the pool then opens its connections there and drops those it opened before, and health
//! reports the search while it lasts. A URL naming one host, with no rule, never comes here.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnection, PgPoolOptions};
use sqlx::{ConnectOptions as _, Connection as _, PgPool};
use tokio::sync::{Notify, watch};

use super::hosts::{Host, HostList, SessionAttrs};
use crate::core::store::{StoreError, StoreResult};
use crate::store::db_err;

/// How often the watcher asks the host in use whether it still fits.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// How long connecting to one host, or its answer, may take before the next is tried: a host
/// that is down but not refusing must not hold the search up for long.
const HOST_TIMEOUT: Duration = Duration::from_secs(3);

/// The pause between two rounds of a search that found nothing.
const SEARCH_PAUSE: Duration = Duration::from_millis(500);

/// No host fits: each with what was wrong with it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no {}: {}", wanted(*.attrs), list(.failures))]
pub struct NoHostFits {
    attrs: SessionAttrs,
    failures: Vec<(String, String)>,
}

fn wanted(attrs: SessionAttrs) -> &'static str {
    match attrs {
        SessionAttrs::ReadWrite => "writable database host",
        SessionAttrs::Any => "database host that answers",
    }
}

fn list(failures: &[(String, String)]) -> String {
    failures
        .iter()
        .map(|(host, reason)| format!("{host} {reason}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The host in use, shared by the pool's hooks, the watcher and health.
#[derive(Debug)]
pub(super) struct Keeper {
    hosts: HostList,
    state: Mutex<State>,
    /// Counts the switches, so the LISTEN connection can follow them.
    moved: watch::Sender<u64>,
    /// Rung when the pool met a host that does not fit, so the watcher looks at once.
    nudge: Notify,
}

#[derive(Debug)]
struct State {
    current: usize,
    /// Connections opened before this were opened to the previous host.
    switched_at: Instant,
    /// Why the store is searching, while it is.
    search: Option<String>,
}

impl Keeper {
    /// Why the store is searching for a host, while it is (for health).
    pub(super) fn search(&self) -> Option<String> {
        self.lock().search.clone()
    }

    /// Changes each time the pool moves to a host (again).
    pub(super) fn moved(&self) -> watch::Receiver<u64> {
        self.moved.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn opened_before_switch(&self, age: Duration) -> bool {
        let switched_at = self.lock().switched_at;
        Instant::now()
            .checked_sub(age)
            .is_some_and(|opened| opened < switched_at)
    }

    fn searching(&self, failures: &[(String, String)]) {
        self.lock().search = Some(format!(
            "searching for a {}: {}",
            wanted(self.hosts.attrs),
            list(failures)
        ));
    }

    fn switch_to(&self, index: usize, pool: &PgPool) {
        let host = &self.hosts.hosts[index];
        pool.set_connect_options(host.options.clone());
        let mut state = self.lock();
        if state.search.is_some() || state.current != index {
            tracing::info!(host = %host.label, "database host in use");
        }
        state.current = index;
        state.switched_at = Instant::now();
        state.search = None;
        drop(state);
        self.moved.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Opens a pool on the first host that fits (searching for up to `within`, as a pool waits
/// for a server that refuses), and starts the watcher, which holds one connection beside the
/// pool's.
pub(super) async fn connect_pool(
    hosts: HostList,
    pool: PgPoolOptions,
    within: Duration,
) -> StoreResult<(PgPool, Arc<Keeper>)> {
    let (current, watched) = first_fit(&hosts, within)
        .await
        .map_err(|e| StoreError::Database(Box::new(e)))?;
    let options = hosts.hosts[current].options.clone();
    let attrs = hosts.attrs;
    let keeper = Arc::new(Keeper {
        hosts,
        state: Mutex::new(State {
            current,
            switched_at: Instant::now(),
            search: None,
        }),
        moved: watch::Sender::new(0),
        nudge: Notify::new(),
    });
    let stale = Arc::downgrade(&keeper);
    // A connection opened to the previous host is not handed out again; this hook replaces
    // the pool's check of idle connections, so it makes that check too.
    let mut pool = pool.before_acquire(move |conn, meta| {
        let fresh = !stale
            .upgrade()
            .is_some_and(|k| k.opened_before_switch(meta.age));
        Box::pin(async move { Ok(fresh && super::alive_if_idle(conn, meta).await?) })
    });
    if attrs == SessionAttrs::ReadWrite {
        // A new connection that lands on a read-only server (the host turned standby) is
        // refused, and the pool tries again; the watcher is told to look at once.
        let nudge = Arc::downgrade(&keeper);
        pool = pool.after_connect(move |conn, _| {
            let nudge = nudge.clone();
            Box::pin(async move {
                if read_only(conn).await? {
                    if let Some(keeper) = nudge.upgrade() {
                        keeper.nudge.notify_one();
                    }
                    return Err(sqlx::Error::Configuration(
                        "the server is read-only (a standby); looking for the writable host".into(),
                    ));
                }
                Ok(())
            })
        });
    }
    let pool = pool.connect_with(options).await.map_err(db_err)?;
    tokio::spawn(watch(Arc::downgrade(&keeper), pool.clone(), watched));
    Ok((pool, keeper))
}

/// One connection to the first host that fits (`migrate`).
pub(super) async fn connect_one(hosts: &HostList) -> StoreResult<PgConnection> {
    if hosts.is_single() {
        return hosts.hosts[0].options.connect().await.map_err(db_err);
    }
    fit(hosts)
        .await
        .map(|(_, conn)| conn)
        .map_err(|e| StoreError::Database(Box::new(e)))
}

/// Watches the host in use until the keeper is gone; searches when it stops fitting.
async fn watch(keeper: Weak<Keeper>, pool: PgPool, mut conn: PgConnection) {
    loop {
        let Some(k) = keeper.upgrade() else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep(WATCH_EVERY) => {}
            () = k.nudge.notified() => {}
        }
        let host = &k.hosts.hosts[k.lock().current];
        let Err(reason) = fits(&mut conn, k.hosts.attrs).await else {
            continue;
        };
        tracing::warn!(
            host = %host.label,
            reason = %reason,
            "the database host no longer fits; searching the hosts again"
        );
        k.searching(&[(host.label.clone(), reason)]);
        drop(k);
        match search(&keeper, &pool).await {
            Some(found) => conn = found,
            None => return,
        }
    }
}

/// Tries the hosts in rounds until one fits (or the keeper is gone).
async fn search(keeper: &Weak<Keeper>, pool: &PgPool) -> Option<PgConnection> {
    loop {
        let k = keeper.upgrade()?;
        match fit(&k.hosts).await {
            Ok((index, conn)) => {
                k.switch_to(index, pool);
                return Some(conn);
            }
            Err(none) => k.searching(&none.failures),
        }
        drop(k);
        tokio::time::sleep(SEARCH_PAUSE).await;
    }
}

/// Rounds of [`fit`] until one finds a host or `within` has passed (one round at least).
async fn first_fit(
    hosts: &HostList,
    within: Duration,
) -> Result<(usize, PgConnection), NoHostFits> {
    let deadline = Instant::now() + within;
    loop {
        match fit(hosts).await {
            Ok(found) => return Ok(found),
            Err(none) if Instant::now() + SEARCH_PAUSE >= deadline => return Err(none),
            Err(_) => tokio::time::sleep(SEARCH_PAUSE).await,
        }
    }
}

/// The first host, in order, that accepts a connection and fits the rule.
async fn fit(hosts: &HostList) -> Result<(usize, PgConnection), NoHostFits> {
    let mut failures = Vec::new();
    for (index, host) in hosts.hosts.iter().enumerate() {
        match try_host(host, hosts.attrs).await {
            Ok(conn) => return Ok((index, conn)),
            Err(reason) => failures.push((host.label.clone(), reason)),
        }
    }
    Err(NoHostFits {
        attrs: hosts.attrs,
        failures,
    })
}

async fn try_host(host: &Host, attrs: SessionAttrs) -> Result<PgConnection, String> {
    let mut conn = match tokio::time::timeout(HOST_TIMEOUT, host.options.connect()).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => return Err(reason(&err)),
        Err(_) => return Err(no_answer()),
    };
    if let Err(reason) = fits(&mut conn, attrs).await {
        let _ = conn.close().await;
        return Err(reason);
    }
    Ok(conn)
}

/// Whether the server of `conn` answers, and is writable when the rule asks for it.
async fn fits(conn: &mut PgConnection, attrs: SessionAttrs) -> Result<(), String> {
    let answer = tokio::time::timeout(HOST_TIMEOUT, async {
        match attrs {
            SessionAttrs::ReadWrite => read_only(conn).await,
            SessionAttrs::Any => conn.ping().await.map(|()| false),
        }
    })
    .await;
    match answer {
        Ok(Ok(false)) => Ok(()),
        Ok(Ok(true)) => Err("read-only".to_owned()),
        Ok(Err(err)) => Err(reason(&err)),
        Err(_) => Err(no_answer()),
    }
}

/// Whether the server takes no writes (a standby in recovery, or read-only by default).
async fn read_only(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let setting: String = sqlx::query_scalar("SHOW transaction_read_only")
        .fetch_one(conn)
        .await?;
    Ok(setting == "on")
}

fn no_answer() -> String {
    format!("no answer within {} s", HOST_TIMEOUT.as_secs())
}

/// What went wrong with a host, in a few words (`refused`, the server's own message).
fn reason(err: &sqlx::Error) -> String {
    match err {
        sqlx::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            "refused".to_owned()
        }
        sqlx::Error::Io(e) => {
            let text = e.to_string();
            text.split_once(" (os error")
                .map_or(text.clone(), |(reason, _)| reason.to_owned())
        }
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_host_names_each_host_and_its_reason() {
        let none = NoHostFits {
            attrs: SessionAttrs::ReadWrite,
            failures: vec![
                ("a:5432".into(), "read-only".into()),
                ("b:5433".into(), "refused".into()),
            ],
        };
        assert_eq!(
            none.to_string(),
            "no writable database host: a:5432 read-only, b:5433 refused"
        );
    }
}
