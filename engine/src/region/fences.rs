//! The region's deletions of series and path prefixes, indexed by target for the insert check
//! (the fencing token, design §4) and for masking (REVIEW N9).

use std::collections::HashMap;

use common::Tablet;

use super::has_value;
use crate::error::StorageError;
use crate::manifest::Tombstone;

/// The series and path-prefix deletions indexed by target (derived from the tombstones): the
/// newest deletion version per target, so an insert validated against an older metadata version
/// than a deletion of one of its series (or a prefix of it) is refused, and the newest deletion's
/// log index, so whether a source is masked is a lookup rather than a pass over every tombstone
/// (REVIEW N9: a table's drop adds one per series).
#[derive(Default)]
pub(super) struct Fences {
    series: HashMap<String, HashMap<String, Newest>>,
    databases: HashMap<String, Newest>,
}

/// The newest deletion of one target: its fencing token (0: none had one) and log index.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Newest {
    version: u64,
    index: u64,
}

impl Fences {
    pub(super) fn from_tombstones<'a>(tombstones: impl Iterator<Item = &'a Tombstone>) -> Fences {
        let mut fences = Fences::default();
        for t in tombstones {
            fences.add(t);
        }
        fences
    }

    pub(super) fn add(&mut self, tombstone: &Tombstone) {
        // A deletion without a token fences nothing (version 0), but masks what it deleted.
        let version = tombstone.deletion().metadata_version;
        let slot = match tombstone {
            Tombstone::Series {
                device,
                measurement,
                ..
            } => self
                .series
                .entry(device.clone())
                .or_default()
                .entry(measurement.clone())
                .or_default(),
            Tombstone::Database { database, .. } => {
                self.databases.entry(database.clone()).or_default()
            }
            Tombstone::Range { .. } => return,
        };
        slot.version = slot.version.max(version);
        slot.index = slot.index.max(tombstone.index());
    }

    /// True when a series or prefix deletion removes `(device, measurement)` from a source with
    /// `checkpoint`: the newest such deletion came after the source's entries.
    pub(super) fn masks(&self, device: &str, measurement: &str, checkpoint: u64) -> bool {
        let series = self
            .series
            .get(device)
            .and_then(|m| m.get(measurement))
            .is_some_and(|mark| checkpoint < mark.index);
        series
            || (!self.databases.is_empty()
                && prefixes(device).any(|p| {
                    self.databases
                        .get(p)
                        .is_some_and(|mark| checkpoint < mark.index)
                }))
    }

    /// The deletion that refuses an insert into `tablet` validated against `metadata_version`
    /// (and, for rows derived from a table, `table_version`: the table's creation; 0 for a tree
    /// write). A deletion of a path prefix (a database, or a table's devices) is compared with
    /// the older of the two: a table write's device paths came from the table's schema.
    pub(super) fn refusal(
        &self,
        tablet: &Tablet,
        metadata_version: u64,
        table_version: u64,
    ) -> Option<StorageError> {
        if self.series.is_empty() && self.databases.is_empty() {
            return None;
        }
        let device = tablet.device.as_str();
        let prefix_version = match table_version {
            0 => metadata_version,
            table => metadata_version.min(table),
        };
        if let Some(refusal) = self.prefix_refusal(device, prefix_version) {
            return Some(refusal);
        }
        let stale = |target: String, deleted: u64| StorageError::StaleMetadata {
            target,
            validated: metadata_version,
            deleted,
        };
        let measurements = self.series.get(device)?;
        for (column, measurement) in tablet.measurements.iter().enumerate() {
            if !has_value(tablet, column) {
                continue;
            }
            if let Some(mark) = measurements.get(measurement) {
                if metadata_version < mark.version {
                    return Some(stale(format!("{device}.{measurement}"), mark.version));
                }
            }
        }
        None
    }

    /// The deletion of a path prefix of `device` (a database, a table's devices) newer than
    /// `version`.
    pub(super) fn prefix_refusal(&self, device: &str, version: u64) -> Option<StorageError> {
        for prefix in prefixes(device) {
            if let Some(mark) = self.databases.get(prefix) {
                if version < mark.version {
                    return Some(StorageError::StaleMetadata {
                        target: prefix.to_string(),
                        validated: version,
                        deleted: mark.version,
                    });
                }
            }
        }
        None
    }

    /// The deletion that refuses a `deleteData` of `series` resolved against
    /// `metadata_version` (0: no token, as entries written before it): one of the series, or a
    /// prefix of it, was deleted after that version, so the series the deletion names may be
    /// another one of the same name now.
    pub(super) fn deletion_refusal(
        &self,
        series: &[(String, String)],
        metadata_version: u64,
    ) -> Option<StorageError> {
        if metadata_version == 0 {
            return None;
        }
        for (device, measurement) in series {
            if let Some(refusal) = self.prefix_refusal(device, metadata_version) {
                return Some(refusal);
            }
            let mark = self.series.get(device).and_then(|m| m.get(measurement));
            if let Some(mark) = mark.filter(|mark| metadata_version < mark.version) {
                return Some(StorageError::StaleMetadata {
                    target: format!("{device}.{measurement}"),
                    validated: metadata_version,
                    deleted: mark.version,
                });
            }
        }
        None
    }

    /// True when a deletion ordered at metadata `version` of `device`'s series `measurement`
    /// (`None`: of the path prefix `device`) is superseded: this target or a prefix of it was
    /// deleted at the same or a newer version earlier in the log. The ConfigNode orders a
    /// target's fence operations one at a time (a target pending deletion cannot be created
    /// again, so nothing can be deleted again before its deletion is in every region's log), so
    /// such a delivery is a repeat of one already applied, or comes after a deletion that
    /// removed all it could and fences every insert it would; it is a no-op. This is what lets
    /// [`coalesce`] forget an older deletion's operation id. A deletion without a token (0) is
    /// never superseded.
    pub(super) fn supersedes(&self, device: &str, measurement: Option<&str>, version: u64) -> bool {
        if version == 0 {
            return false;
        }
        let series = measurement.is_some_and(|m| {
            self.series
                .get(device)
                .and_then(|marks| marks.get(m))
                .is_some_and(|mark| mark.version >= version)
        });
        series
            || prefixes(device).any(|p| {
                self.databases
                    .get(p)
                    .is_some_and(|mark| mark.version >= version)
            })
    }
}

/// `tombstones` (in log order) without the series and prefix deletions a later one makes
/// redundant: a deletion of the same target, or of a prefix of it, at the same or a newer
/// metadata version. The later one masks every source the earlier one masks (its log index is
/// higher), refuses every insert and `deleteData` the earlier one refuses (its version is not
/// lower), and makes a repeat of the earlier one a no-op ([`Fences::supersedes`]), so the
/// region's verdicts do not change (REVIEW N9: a table dropped and created again 100 times
/// leaves one deletion, not 100). Time-range deletions and deletions without a token are kept.
/// Only deletions at or below a checkpoint may be coalesced: those above it are replayed from
/// the log, and each entry must meet the deletions it met when it was first applied.
pub(crate) fn coalesce(tombstones: &mut Vec<Tombstone>) {
    tombstones.sort_by_key(Tombstone::index);
    let mut newer = Fences::default();
    let mut keep = vec![true; tombstones.len()];
    for (i, t) in tombstones.iter().enumerate().rev() {
        let version = t.deletion().metadata_version;
        keep[i] = match t {
            Tombstone::Series {
                device,
                measurement,
                ..
            } => !newer.supersedes(device, Some(measurement), version),
            Tombstone::Database { database, .. } => !newer.supersedes(database, None, version),
            Tombstone::Range { .. } => true,
        };
        newer.add(t);
    }
    let mut keep = keep.into_iter();
    tombstones.retain(|_| keep.next().expect("one flag per tombstone"));
}

/// `device` and its proper prefixes ending before a '.': the paths a prefix deletion of it may
/// name.
fn prefixes(device: &str) -> impl Iterator<Item = &str> {
    device
        .match_indices('.')
        .map(|(at, _)| &device[..at])
        .chain(std::iter::once(device))
}
