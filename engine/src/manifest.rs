//! The region manifest: which sealed files are live, the flush checkpoint (log replay starts after
//! it), and the deletions that mask older data. Replaced atomically (write temp, fsync, rename,
//! fsync directory), so a crash leaves either the old or the new manifest.
//!
//! Layout (all integers little-endian), format version 5:
//!
//! ```text
//! magic "FPMANIF1" (8), u32 version = 5, u64 checkpoint index, u64 next file sequence,
//! u32 files, files × { i64 time slot, u64 sequence, u64 checkpoint },
//! u32 tombstones, tombstones × { u8 kind (1 series, 2 database, 3 time range),
//!                                str16 device or database,
//!                                str16 measurement (empty for a database), u64 index,
//!                                u64 metadata version, u64 operation id,
//!                                [kind 3: i64 start, i64 end, u8 series type] },
//! u32 operations, operations × { u64 index, u64 operation id },
//! u64 fence floor,
//! u32 CRC32 of everything before it
//! ```
//!
//! (the magic and the CRC are `common::envelope`'s).
//!
//! The operations are the `deleteData` operations applied at or below the checkpoint, the
//! newest [`DELETE_OPERATIONS_KEPT`] of them: a second delivery of one is a no-op. The fence
//! floor is the region's as of the checkpoint (`RegionCommand::RaiseFenceFloor`). Version 4 has
//! no floor, version 3 no operations either, version 2 no kind 3 either and version 1 also lacks
//! the token fields; all still load, with nothing or zeroes there. Besides masking older data,
//! series and database tombstones are the region's record of deletions for the fencing token
//! (an insert validated before a deletion of its target is refused, [`Tombstone::fences`]). A
//! series tombstone older than the fence floor fences nothing the floor does not, and is dropped
//! once it masks no live file; a database (path-prefix) tombstone is kept, one per prefix. A
//! time-range tombstone carries no
//! token; it also records its series' type (a series whose points a deletion removed keeps
//! its type, as in IoTDB). It is dropped once no live file it masks is left and a live file holds
//! the series (which then records the type).

use std::fs;
use std::path::Path;

use common::codec::DecodeError;
use common::envelope;
use common::DataType;

use crate::command::Deletion;
use crate::error::{Result, StorageError};

const MAGIC: &[u8; 8] = b"FPMANIF1";
const FORMAT_VERSION: u32 = 5;
const FORMAT_VERSION_WITHOUT_FLOOR: u32 = 4;
const FORMAT_VERSION_WITHOUT_OPERATIONS: u32 = 3;
const FORMAT_VERSION_WITHOUT_RANGES: u32 = 2;
const FORMAT_VERSION_WITHOUT_TOKENS: u32 = 1;
/// How many applied `deleteData` operations a region remembers (by operation id, the newest
/// ones, in apply order): a redelivery of one of them is a no-op. A redelivery comes from a
/// coordinator's retry within `remote_write_max_retry_ms`, so this many deletions of the
/// region in that window would be needed to forget one too early.
pub const DELETE_OPERATIONS_KEPT: usize = 1024;

/// File name of the live manifest inside a region directory.
pub const MANIFEST_FILE: &str = "MANIFEST";

/// A live sealed file, as the manifest names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Time slot of its partition.
    pub time_slot: i64,
    /// Sequence number; the file name is derived from (slot, sequence).
    pub sequence: u64,
    /// Applied index when its memtable was frozen.
    pub checkpoint: u64,
}

impl FileEntry {
    /// The file's name inside the region's `sealed/` directory.
    pub fn file_name(&self) -> String {
        format!("{}-{:016}.fps", self.time_slot, self.sequence)
    }
}

/// A deletion, applied at log index `index`: it masks every memtable snapshot or sealed file whose
/// checkpoint is below `index` (their data all came from earlier entries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tombstone {
    /// DELETE TIMESERIES of one series.
    Series {
        /// Device path.
        device: String,
        /// Measurement name.
        measurement: String,
        /// Log index of the deletion.
        index: u64,
        /// What ordered it.
        deletion: Deletion,
    },
    /// DROP DATABASE or DROP TABLE: every device under the path prefix `database` (itself
    /// included, [`device_under`]).
    Database {
        /// Database path, e.g. `root.sg`.
        database: String,
        /// Log index of the deletion.
        index: u64,
        /// What ordered it.
        deletion: Deletion,
    },
    /// `deleteData`: the points of one series with `start <= time <= end`.
    Range {
        /// Device path.
        device: String,
        /// Measurement name.
        measurement: String,
        /// The series' type when it was deleted from: the series stays registered with it
        /// even when no point is left.
        data_type: DataType,
        /// First timestamp deleted.
        start: i64,
        /// Last timestamp deleted.
        end: i64,
        /// Log index of the deletion.
        index: u64,
    },
}

impl Tombstone {
    /// True when this deletion removes `(device, measurement)` from a source with `checkpoint`.
    pub fn masks(&self, device: &str, measurement: &str, checkpoint: u64) -> bool {
        match self {
            Tombstone::Series {
                device: d,
                measurement: m,
                index,
                ..
            } => checkpoint < *index && d == device && m == measurement,
            Tombstone::Database {
                database, index, ..
            } => checkpoint < *index && device_under(device, database),
            Tombstone::Range { .. } => false,
        }
    }

    /// The time range this deletion removes from `(device, measurement)` in a source with
    /// `checkpoint`, when it is a time-range deletion of that series newer than the source.
    pub fn deletes(&self, device: &str, measurement: &str, checkpoint: u64) -> Option<(i64, i64)> {
        match self {
            Tombstone::Range {
                device: d,
                measurement: m,
                start,
                end,
                index,
                ..
            } if checkpoint < *index && d == device && m == measurement => Some((*start, *end)),
            _ => None,
        }
    }

    /// True when this deletion refuses an insert into `(device, measurement)` that was validated
    /// against `metadata_version`: the insert read metadata from before the deletion was ordered.
    pub fn fences(&self, device: &str, measurement: &str, metadata_version: u64) -> bool {
        match self {
            Tombstone::Series {
                device: d,
                measurement: m,
                deletion,
                ..
            } => metadata_version < deletion.metadata_version && d == device && m == measurement,
            Tombstone::Database {
                database, deletion, ..
            } => metadata_version < deletion.metadata_version && device_under(device, database),
            Tombstone::Range { .. } => false,
        }
    }

    /// What ordered the deletion (a time-range deletion: no token).
    pub fn deletion(&self) -> Deletion {
        match self {
            Tombstone::Series { deletion, .. } | Tombstone::Database { deletion, .. } => *deletion,
            Tombstone::Range { .. } => Deletion::default(),
        }
    }

    /// Log index of the deletion.
    pub fn index(&self) -> u64 {
        match self {
            Tombstone::Series { index, .. }
            | Tombstone::Database { index, .. }
            | Tombstone::Range { index, .. } => *index,
        }
    }
}

/// True when `device` is `prefix` or lies under it: the devices a deletion of a path prefix
/// covers. A database (`root.sg` holds `root.sg.d1`, not `root.sgx.d1`), or a table of the table
/// model, whose device of no tag values is the table's own path (`root.db.t`) and every other
/// one under it (`root.db.t.-a`). The path rules' [`common::path::is_under`].
pub fn device_under(device: &str, prefix: &str) -> bool {
    device == prefix || common::path::is_under(device, prefix)
}

/// The manifest's content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Every entry at or below this index is in the live files; replay starts after it.
    pub checkpoint: u64,
    /// Sequence number for the next sealed file.
    pub next_sequence: u64,
    /// Live sealed files, oldest first.
    pub files: Vec<FileEntry>,
    /// Deletions at or below the checkpoint that still mask live files.
    pub tombstones: Vec<Tombstone>,
    /// `(log index, operation id)` of the newest `deleteData` operations applied at or below
    /// the checkpoint, oldest first, at most [`DELETE_OPERATIONS_KEPT`].
    pub delete_operations: Vec<(u64, u64)>,
    /// The fence floor raised at or below the checkpoint (0: none).
    pub fence_floor: u64,
}

impl Manifest {
    /// The names of its live files in `sealed/`, in its order.
    pub fn file_names(&self) -> Vec<String> {
        self.files.iter().map(FileEntry::file_name).collect()
    }

    /// The manifest's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let bytes = self.encode_unchecked();
        debug_assert_eq!(
            Manifest::decode(&bytes).as_ref(),
            Ok(self),
            "manifest round trip"
        );
        bytes
    }

    fn encode_unchecked(&self) -> Vec<u8> {
        envelope::seal(MAGIC, |w| {
            w.u32(FORMAT_VERSION);
            w.u64(self.checkpoint);
            w.u64(self.next_sequence);
            w.len32(self.files.len());
            for f in &self.files {
                w.i64(f.time_slot);
                w.u64(f.sequence);
                w.u64(f.checkpoint);
            }
            w.len32(self.tombstones.len());
            for t in &self.tombstones {
                let (kind, a, b, range) = match t {
                    Tombstone::Series {
                        device,
                        measurement,
                        ..
                    } => (1, device.as_str(), measurement.as_str(), None),
                    Tombstone::Database { database, .. } => (2, database.as_str(), "", None),
                    Tombstone::Range {
                        device,
                        measurement,
                        data_type,
                        start,
                        end,
                        ..
                    } => (
                        3,
                        device.as_str(),
                        measurement.as_str(),
                        Some((start, end, data_type)),
                    ),
                };
                let deletion = t.deletion();
                w.u8(kind);
                w.str16(a);
                w.str16(b);
                w.u64(t.index());
                w.u64(deletion.metadata_version);
                w.u64(deletion.operation_id);
                if let Some((start, end, data_type)) = range {
                    w.i64(*start);
                    w.i64(*end);
                    w.u8(data_type.code());
                }
            }
            debug_assert!(self.delete_operations.len() <= DELETE_OPERATIONS_KEPT);
            w.len32(self.delete_operations.len());
            for (index, operation) in &self.delete_operations {
                w.u64(*index);
                w.u64(*operation);
            }
            w.u64(self.fence_floor);
        })
    }

    /// Decodes a manifest, verifying CRC, magic and version.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Manifest, DecodeError> {
        let (_, mut r) = envelope::open(bytes, &[MAGIC]).map_err(|e| DecodeError {
            reason: format!("manifest: {}", e.reason),
            ..e
        })?;
        let version = r.u32()?;
        if !matches!(
            version,
            FORMAT_VERSION
                | FORMAT_VERSION_WITHOUT_FLOOR
                | FORMAT_VERSION_WITHOUT_OPERATIONS
                | FORMAT_VERSION_WITHOUT_RANGES
                | FORMAT_VERSION_WITHOUT_TOKENS
        ) {
            return r.error(format!("unknown manifest version {version}"));
        }
        let mut m = Manifest {
            checkpoint: r.u64()?,
            next_sequence: r.u64()?,
            ..Manifest::default()
        };
        let files = r.count(24)?;
        for _ in 0..files {
            m.files.push(FileEntry {
                time_slot: r.i64()?,
                sequence: r.u64()?,
                checkpoint: r.u64()?,
            });
        }
        let tombstones = r.count(13)?;
        for _ in 0..tombstones {
            let kind = r.u8()?;
            let a = r.str16()?;
            let b = r.str16()?;
            let index = r.u64()?;
            let deletion = if version != FORMAT_VERSION_WITHOUT_TOKENS {
                Deletion {
                    metadata_version: r.u64()?,
                    operation_id: r.u64()?,
                }
            } else {
                Deletion::default()
            };
            m.tombstones.push(match kind {
                1 => Tombstone::Series {
                    device: a,
                    measurement: b,
                    index,
                    deletion,
                },
                2 => Tombstone::Database {
                    database: a,
                    index,
                    deletion,
                },
                3 if version >= FORMAT_VERSION_WITHOUT_OPERATIONS => Tombstone::Range {
                    device: a,
                    measurement: b,
                    start: r.i64()?,
                    end: r.i64()?,
                    data_type: r.data_type()?,
                    index,
                },
                k => return r.error(format!("unknown tombstone kind {k}")),
            });
        }
        if version >= FORMAT_VERSION_WITHOUT_FLOOR {
            let operations = r.count(16)?;
            if operations > DELETE_OPERATIONS_KEPT {
                return r.error(format!(
                    "{operations} deleteData operations; at most {DELETE_OPERATIONS_KEPT} are kept"
                ));
            }
            for _ in 0..operations {
                m.delete_operations.push((r.u64()?, r.u64()?));
            }
        }
        if version == FORMAT_VERSION {
            m.fence_floor = r.u64()?;
        }
        r.finish()?;
        Ok(m)
    }

    /// Reads the manifest of a region directory; `None` for a new region.
    pub fn load(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io(path, e)),
        };
        Manifest::decode(&bytes)
            .map(Some)
            .map_err(|e| StorageError::Corruption {
                what: "manifest",
                path,
                offset: e.offset,
                reason: e.reason,
            })
    }

    /// Atomically replaces the region's manifest.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST_FILE);
        common::durable::replace_durably(&path, &self.encode())
            .map_err(|e| StorageError::io(&path, e))
    }
}

/// fsyncs a directory so that renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    common::durable::sync_dir(dir).map_err(|e| StorageError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            checkpoint: 7,
            next_sequence: 2,
            files: vec![FileEntry {
                time_slot: -1,
                sequence: 1,
                checkpoint: 7,
            }],
            tombstones: vec![
                Tombstone::Series {
                    device: "root.a.b".into(),
                    measurement: "s".into(),
                    index: 3,
                    deletion: Deletion {
                        metadata_version: 9,
                        operation_id: 4,
                    },
                },
                Tombstone::Database {
                    database: "root.x".into(),
                    index: 5,
                    deletion: Deletion {
                        metadata_version: 11,
                        operation_id: 6,
                    },
                },
                Tombstone::Range {
                    device: "root.a.b".into(),
                    measurement: "s".into(),
                    data_type: DataType::Double,
                    start: -2,
                    end: 0x0102,
                    index: 6,
                },
            ],
            delete_operations: vec![(6, 0x0a0b)],
            fence_floor: 0x0c0d,
        }
    }

    #[test]
    fn golden_manifest() {
        let bytes = sample().encode();
        #[rustfmt::skip]
        let golden: Vec<u8> = [
            &b"FPMANIF1"[..], &[5, 0, 0, 0], &[7, 0, 0, 0, 0, 0, 0, 0], &[2, 0, 0, 0, 0, 0, 0, 0],
            &[1, 0, 0, 0], &[0xff; 8], &[1, 0, 0, 0, 0, 0, 0, 0], &[7, 0, 0, 0, 0, 0, 0, 0],
            &[3, 0, 0, 0],
            &[1, 8, 0], b"root.a.b", &[1, 0], b"s", &[3, 0, 0, 0, 0, 0, 0, 0],
            &[9, 0, 0, 0, 0, 0, 0, 0], &[4, 0, 0, 0, 0, 0, 0, 0],
            &[2, 6, 0], b"root.x", &[0, 0], &[5, 0, 0, 0, 0, 0, 0, 0],
            &[11, 0, 0, 0, 0, 0, 0, 0], &[6, 0, 0, 0, 0, 0, 0, 0],
            &[3, 8, 0], b"root.a.b", &[1, 0], b"s", &[6, 0, 0, 0, 0, 0, 0, 0],
            &[0; 8], &[0; 8], &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            &[2, 1, 0, 0, 0, 0, 0, 0], &[DataType::Double.code()],
            &[1, 0, 0, 0], &[6, 0, 0, 0, 0, 0, 0, 0], &[0x0b, 0x0a, 0, 0, 0, 0, 0, 0],
            &[0x0d, 0x0c, 0, 0, 0, 0, 0, 0],
        ].concat();
        assert_eq!(&bytes[..golden.len()], &golden[..]);
        assert_eq!(
            &bytes[golden.len()..],
            &crc32fast::hash(&golden).to_le_bytes()
        );
        assert_eq!(Manifest::decode(&bytes).unwrap(), sample());
        // Version 4: the same without the floor.
        let mut v4 = golden.clone();
        v4[8] = 4;
        v4.truncate(golden.len() - 8);
        let v4 = [v4.clone(), crc32fast::hash(&v4).to_le_bytes().to_vec()].concat();
        let without_floor = Manifest {
            fence_floor: 0,
            ..sample()
        };
        assert_eq!(Manifest::decode(&v4).unwrap(), without_floor);
        // Version 3: the same without the operations.
        let mut v3 = golden.clone();
        v3[8] = 3;
        v3.truncate(golden.len() - 28);
        let v3 = [v3.clone(), crc32fast::hash(&v3).to_le_bytes().to_vec()].concat();
        let without = Manifest {
            delete_operations: Vec::new(),
            ..without_floor
        };
        assert_eq!(Manifest::decode(&v3).unwrap(), without);
        for i in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1;
            assert!(Manifest::decode(&flipped).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn version_1_manifests_still_load() {
        #[rustfmt::skip]
        let body: Vec<u8> = [
            &b"FPMANIF1"[..], &[1, 0, 0, 0], &[7, 0, 0, 0, 0, 0, 0, 0], &[2, 0, 0, 0, 0, 0, 0, 0],
            &[0, 0, 0, 0],
            &[1, 0, 0, 0],
            &[2, 6, 0], b"root.x", &[0, 0], &[5, 0, 0, 0, 0, 0, 0, 0],
        ].concat();
        let mut bytes = body.clone();
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        let m = Manifest::decode(&bytes).unwrap();
        assert_eq!(
            m.tombstones,
            vec![Tombstone::Database {
                database: "root.x".into(),
                index: 5,
                deletion: Deletion::default(),
            }]
        );
    }

    #[test]
    fn tombstones_fence_only_inserts_validated_before_them() {
        let t = &sample().tombstones;
        assert!(t[0].fences("root.a.b", "s", 8));
        assert!(
            !t[0].fences("root.a.b", "s", 9),
            "validated after the deletion"
        );
        assert!(!t[0].fences("root.a.b", "s2", 0), "another series");
        assert!(t[1].fences("root.x.d", "s", 10));
        assert!(!t[1].fences("root.x.d", "s", 11));
        assert!(!t[1].fences("root.xy.d", "s", 0));
    }

    #[test]
    fn tombstones_mask_only_older_sources() {
        let t = &sample().tombstones;
        assert!(t[0].masks("root.a.b", "s", 2));
        assert!(!t[0].masks("root.a.b", "s", 3));
        assert!(!t[0].masks("root.a.b", "s2", 0));
        assert!(t[1].masks("root.x.d", "s", 4));
        assert!(!t[1].masks("root.xy.d", "s", 4));
        // A time range masks no whole series, and only the points of older sources.
        assert!(!t[2].masks("root.a.b", "s", 0));
        assert!(!t[2].fences("root.a.b", "s", 0));
        assert_eq!(t[2].deletes("root.a.b", "s", 5), Some((-2, 0x0102)));
        assert_eq!(t[2].deletes("root.a.b", "s", 6), None);
        assert_eq!(t[2].deletes("root.a.b", "s2", 0), None);
        assert_eq!(t[0].deletes("root.a.b", "s", 0), None);
        assert!(device_under("root.sg.d1", "root.sg"));
        assert!(
            device_under("root.db.t", "root.db.t"),
            "a table's device of no tags"
        );
        assert!(!device_under("root.sgx.d1", "root.sg"));
        assert!(!device_under("root.sg", "root.sg.d1"));
    }
}
