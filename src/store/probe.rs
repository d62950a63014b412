//! Checks made before a pool is opened, so a mistake is reported at once and precisely: the
//! SQLite file a read-only command would otherwise create, and a PostgreSQL server that
//! refuses connections (a pool would retry until its acquire timeout and then only say it
//! timed out).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
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
/// server is reported at once with its host and port. Unix-socket URLs are left to the pool.
pub async fn probe_postgres(url: &str) -> StoreResult<()> {
    if Backend::from_url(url)? != Backend::Postgres {
        return Ok(());
    }
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid PostgreSQL URL: {e}")))?;
    let (host, port) = (options.get_host().to_owned(), options.get_port());
    if host.starts_with('/') {
        return Ok(());
    }
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    let failure = match tokio::time::timeout(CONNECT_PROBE, connect).await {
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
    };
    Err(StoreError::Config(format!(
        "cannot connect to PostgreSQL at {host}:{port}: {failure}"
    )))
}
