//! The region's deletions of series and path prefixes, indexed by target for the insert check
//! (the fencing token, design §4) and for masking, and the region's fence floor (REVIEW N9).
//!
//! The floor is a ConfigNode metadata version every DataNode has moved past
//! (`RegionCommand::RaiseFenceFloor`): an insert or a `deleteData` whose token is older is
//! refused (only a late delivery can carry one), and a series or prefix deletion older than it
//! is taken for the repeat it must be (the ConfigNode raises the floor only while no fence
//! operation is pending, so every deletion below it is complete). A series deletion below the
//! floor then decides nothing the floor does not: it stays only while it masks older data
//! ([`prune_below_floor`]).

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
    /// The fence floor and the log index that raised it.
    floor: Newest,
}

/// The newest deletion of one target: its fencing token (0: none had one) and log index.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Newest {
    version: u64,
    index: u64,
}

impl Fences {
    /// The index of `tombstones` under the floor `floor`, raised at log index `floor_index`.
    pub(super) fn new<'a>(
        tombstones: impl Iterator<Item = &'a Tombstone>,
        floor: u64,
        floor_index: u64,
    ) -> Fences {
        let mut fences = Fences {
            floor: Newest {
                version: floor,
                index: floor_index,
            },
            ..Fences::default()
        };
        for t in tombstones {
            fences.add(t);
        }
        fences
    }

    /// The fence floor (0: none) and the log index that raised it.
    pub(super) fn floor(&self) -> (u64, u64) {
        (self.floor.version, self.floor.index)
    }

    /// Applies `RegionCommand::RaiseFenceFloor` at log index `index`: the floor only rises.
    pub(super) fn raise_floor(&mut self, version: u64, index: u64) {
        if version > self.floor.version {
            debug_assert!(index >= self.floor.index, "floors are raised in log order");
            self.floor = Newest { version, index };
        }
    }

    /// The floor's refusal of a command whose token is `metadata_version`.
    fn below_floor(&self, metadata_version: u64) -> Option<StorageError> {
        (metadata_version < self.floor.version).then(|| StorageError::StaleMetadata {
            target: "the region's fence floor".to_string(),
            validated: metadata_version,
            deleted: self.floor.version,
        })
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
        if let Some(refusal) = self.below_floor(metadata_version) {
            return Some(refusal);
        }
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
        if let Some(refusal) = self.below_floor(metadata_version) {
            return Some(refusal);
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
    /// [`coalesce`] forget an older deletion's operation id. A deletion below the fence floor is
    /// superseded too (every deletion below it is complete, so it is a repeat). A deletion
    /// without a token (0) is never superseded.
    pub(super) fn supersedes(&self, device: &str, measurement: Option<&str>, version: u64) -> bool {
        if version == 0 {
            return false;
        }
        if version < self.floor.version {
            return true;
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

/// Drops from `tombstones` (a manifest's, at or below its checkpoint) the series deletions below
/// `floor` (the manifest's floor, raised at or below the same checkpoint, so replay meets it)
/// for which `masks_data` finds no older source holding the series: such a deletion refuses
/// no insert and no `deleteData` the floor does not, and its repeat is a no-op under the floor
/// alike. A path-prefix deletion is kept: a table write is judged against it by the table's
/// creation version, which no floor bounds. True when some were dropped.
pub(crate) fn prune_below_floor(
    tombstones: &mut Vec<Tombstone>,
    floor: u64,
    masks_data: impl Fn(&str, &str, u64) -> bool,
) -> bool {
    let before = tombstones.len();
    tombstones.retain(|t| match t {
        Tombstone::Series {
            device,
            measurement,
            index,
            deletion,
        } => deletion.metadata_version >= floor || masks_data(device, measurement, *index),
        Tombstone::Database { .. } | Tombstone::Range { .. } => true,
    });
    tombstones.len() < before
}

/// `device` and its proper prefixes ending before a '.': the paths a prefix deletion of it may
/// name.
fn prefixes(device: &str) -> impl Iterator<Item = &str> {
    device
        .match_indices('.')
        .map(|(at, _)| &device[..at])
        .chain(std::iter::once(device))
}
