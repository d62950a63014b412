//! Checks made before a pool is opened, so a mistake is reported at once and precisely: the
//! SQLite file a read-only command would otherwise create, and a PostgreSQL server that
//! refuses connections (a pool would retry until its acquire timeout and then only say it
//! timed out).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;

use super::Backend;
use crate::core::store::{StoreError, StoreResult};

/// How long the first TCP connection to PostgreSQL may take.
const CONNECT_PROBE: Duration = Duration::from_secs(5);

/// The absolute path of the file an SQLite URL names (`None` for an in-memory database or
/// another backend).
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    if Backend::from_url(url).ok()? != Backend::Sqlite || url.contains(":memory:") {
        return None;
    }
    let options = SqliteConnectOptions::from_str(url).ok()?;
    let path = options.get_filename();
    if path.as_os_str().is_empty() || url.contains("mode=memory") {
        return None;
    }
    Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// Fails when the SQLite file of `url` does not exist: commands that only read (or that need
/// an existing schema) never create an empty database in the working directory.
pub fn require_existing_sqlite(url: &str) -> StoreResult<()> {
    match sqlite_file(url) {
        Some(path) if !path.exists() => Err(StoreError::Config(format!(
            "no database at {}: the file does not exist (check --database-url, or create it \
             with `sentin8-cron migrate --database-url sqlite://{}`)",
            path.display(),
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Connects once to the PostgreSQL server of `url` (TCP only), so a refused or unreachable
/// server is reported at once with its host and port. A URL naming several hosts passes when
/// one of them accepts (which one to use is the store's to find). Unix sockets are left to the
/// pool.
pub async fn probe_postgres(url: &str) -> StoreResult<()> {
    if Backend::from_url(url)? != Backend::Postgres {
        return Ok(());
    }
    let hosts = super::postgres::hosts_of(url)?;
    let mut failures = Vec::new();
    for host in &hosts.hosts {
        let options = &host.options;
        let (name, port) = (options.get_host().to_owned(), options.get_port());
        if options.get_socket().is_some() || name.starts_with('/') {
            return Ok(());
        }
        match probe_tcp(&name, port).await {
            Ok(()) => return Ok(()),
            Err(failure) => failures.push(format!("{name}:{port}: {failure}")),
        }
    }
    Err(StoreError::Config(match failures.as_slice() {
        [one] => format!("cannot connect to PostgreSQL at {one}"),
        many => format!(
            "cannot connect to PostgreSQL at any of its hosts: {}",
            many.join("; ")
        ),
    }))
}

/// Why a TCP connection to `host:port` failed, in a few words.
async fn probe_tcp(host: &str, port: u16) -> Result<(), String> {
    let connect = tokio::net::TcpStream::connect((host, port));
    Err(match tokio::time::timeout(CONNECT_PROBE, connect).await {
        Ok(Ok(_)) => return Ok(()),
        Ok(Err(err)) => match err.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
            _ => {
                let text = err.to_string();
                text.split_once(" (os error")
                    .map_or(text.clone(), |(reason, _)| reason.to_owned())
            }
        },
        Err(_) => format!("no answer within {}s", CONNECT_PROBE.as_secs()),
    })
}
