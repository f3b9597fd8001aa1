//! Sealed files: the immutable, columnar image of one time partition's frozen memtable.
//!
//! Layout (all integers little-endian), format version 1:
//!
//! ```text
//! header  (32 bytes): magic "FPSEAL01" (8), u32 version = 1, i64 time slot, u64 checkpoint index,
//!                    u32 CRC32 of the 28 bytes before it
//! chunks:  per series, sorted by (device, measurement):
//!          str16 device, str16 measurement, u8 type, u32 count,
//!          i64 × count timestamps (strictly ascending), values (as in a log entry),
//!          u32 CRC32 of the chunk's bytes before it
//! index:   u32 entries, entries × { str16 device, str16 measurement, u8 type, u64 chunk offset,
//!          u32 chunk length (with its CRC), u32 count, i64 min time, i64 max time },
//!          u32 CRC32 of the index bytes before it
//! footer  (20 bytes): u64 index offset, u32 index length, magic "FPSEALND" (8)
//! ```
//!
//! A file is written whole, fsynced, and only then named in the region manifest; a file the
//! manifest does not name is an orphan of a crashed flush and is deleted on open.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{Column, DataType};
use memtable::FrozenMemTable;
use wal::direct::DirectWriter;

use crate::error::{Result, StorageError};
use crate::files::{FileCache, FileId};
use common::codec::{len32, DecodeError, Reader, Writer};

const HEADER_MAGIC: &[u8; 8] = b"FPSEAL01";
const FOOTER_MAGIC: &[u8; 8] = b"FPSEALND";
const FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: u64 = 32;
const FOOTER_BYTES: u64 = 20;

/// Where one series' chunk lives in a sealed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkIndex {
    /// The series' type.
    pub data_type: DataType,
    /// Byte offset of the chunk.
    pub offset: u64,
    /// Chunk bytes, CRC included.
    pub length: u32,
    /// Points in the chunk.
    pub count: u32,
    /// Smallest timestamp.
    pub min_time: i64,
    /// Greatest timestamp.
    pub max_time: i64,
}

/// A live sealed file: header facts and the index in memory, chunks read on demand through the
/// node's descriptor cache (the file holds no descriptor of its own).
#[derive(Debug)]
pub struct SealedFile {
    path: PathBuf,
    id: FileId,
    files: Arc<FileCache>,
    /// Bytes on disk.
    pub bytes: u64,
    /// Time slot of the partition the file belongs to.
    pub time_slot: i64,
    /// Applied index of the region when the memtable was frozen.
    pub checkpoint: u64,
    index: BTreeMap<(String, String), ChunkIndex>,
}

/// Bytes of file written per `write(2)` while a sealed file is encoded: the encoder holds one
/// chunk and this much of the file in memory, never the whole file.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Encodes a frozen memtable as a sealed file's bytes.
#[cfg(test)]
fn encode(frozen: &FrozenMemTable, time_slot: i64, checkpoint: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(frozen.memory_bytes() + 1024);
    encode_into(frozen, time_slot, checkpoint, &mut bytes).expect("writing to a Vec cannot fail");
    bytes
}

/// The index of an encoded file, as the encoder wrote it, and the file's length.
type Encoded = (BTreeMap<(String, String), ChunkIndex>, u64);

/// Encodes a frozen memtable as a sealed file into `out`, one chunk at a time.
fn encode_into(
    frozen: &FrozenMemTable,
    time_slot: i64,
    checkpoint: u64,
    out: &mut impl Write,
) -> std::io::Result<Encoded> {
    let mut w = Writer::with_capacity(HEADER_BYTES as usize);
    w.bytes(HEADER_MAGIC);
    w.u32(FORMAT_VERSION);
    w.i64(time_slot);
    w.u64(checkpoint);
    let crc = crc32fast::hash(w.as_slice());
    w.u32(crc);
    out.write_all(w.as_slice())?;
    let mut offset = w.len() as u64;
    let mut entries = Vec::new();
    for series in frozen.series() {
        let count = series.timestamps.len();
        assert_eq!(
            count,
            series.values.len(),
            "series columns differ in length"
        );
        if count == 0 {
            continue;
        }
        w.clear();
        w.str16(series.device);
        w.str16(series.measurement);
        w.u8(series.data_type.code());
        w.len32(count);
        w.i64s(series.timestamps);
        w.column_rows(series.values, 0..count);
        let crc = crc32fast::hash(w.as_slice());
        w.u32(crc);
        out.write_all(w.as_slice())?;
        entries.push((
            series.device.to_string(),
            series.measurement.to_string(),
            ChunkIndex {
                data_type: series.data_type,
                offset,
                length: len32(w.len()),
                count: len32(count),
                min_time: series.timestamps[0],
                max_time: series.timestamps[count - 1],
            },
        ));
        offset += w.len() as u64;
    }
    w.clear();
    w.len32(entries.len());
    for (device, measurement, e) in &entries {
        w.str16(device);
        w.str16(measurement);
        w.u8(e.data_type.code());
        w.u64(e.offset);
        w.u32(e.length);
        w.u32(e.count);
        w.i64(e.min_time);
        w.i64(e.max_time);
    }
    let crc = crc32fast::hash(w.as_slice());
    w.u32(crc);
    let index_length = w.len();
    w.u64(offset);
    w.len32(index_length);
    w.bytes(FOOTER_MAGIC);
    out.write_all(w.as_slice())?;
    let length = offset + w.len() as u64;
    let index = entries.into_iter().map(|(d, m, e)| ((d, m), e)).collect();
    Ok((index, length))
}

/// Writes and fsyncs a sealed file and returns it, its index as written (nothing is read back,
/// so nothing can fail after the write). The file is not live until a manifest names it.
///
/// The file bypasses the page cache (`O_DIRECT`, see [`wal::direct`]): a flush writes tens of
/// MiB that queries rarely read back soon, and copying them into fresh cache pages cost more CPU
/// than encoding them.
pub fn write(
    path: &Path,
    frozen: &FrozenMemTable,
    time_slot: i64,
    checkpoint: u64,
    files: &Arc<FileCache>,
) -> Result<SealedFile> {
    let io = |e| StorageError::io(path, e);
    let mut out = DirectWriter::create(path, WRITE_BUFFER_BYTES).map_err(io)?;
    if !out.is_direct() {
        tracing::debug!(path = %path.display(), "no O_DIRECT here: sealed file goes through the page cache");
    }
    let (index, bytes) = encode_into(frozen, time_slot, checkpoint, &mut out).map_err(io)?;
    out.finish().map_err(io)?;
    Ok(SealedFile {
        path: path.to_path_buf(),
        id: FileId::next(),
        files: files.clone(),
        bytes,
        time_slot,
        checkpoint,
        index,
    })
}

impl SealedFile {
    /// Opens a sealed file, verifying header, footer and index.
    pub fn open(path: &Path, files: &Arc<FileCache>) -> Result<SealedFile> {
        let id = FileId::next();
        let file = files.get(id, path).map_err(|e| StorageError::io(path, e))?;
        let len = file
            .metadata()
            .map_err(|e| StorageError::io(path, e))?
            .len();
        let corrupt = |offset: u64, reason: String| StorageError::Corruption {
            what: "sealed file",
            path: path.to_path_buf(),
            offset,
            reason,
        };
        if len < HEADER_BYTES + FOOTER_BYTES {
            return Err(corrupt(
                0,
                format!("file of {len} bytes is shorter than header + footer"),
            ));
        }
        let header = read_at(&file, path, 0, HEADER_BYTES as usize)?;
        let footer = read_at(&file, path, len - FOOTER_BYTES, FOOTER_BYTES as usize)?;
        if &header[..8] != HEADER_MAGIC || &footer[12..] != FOOTER_MAGIC {
            return Err(corrupt(0, "bad magic".into()));
        }
        if crc32fast::hash(&header[..28]) != u32::from_le_bytes(header[28..].try_into().unwrap()) {
            return Err(corrupt(0, "header CRC mismatch".into()));
        }
        let mut h = Reader::new(&header[8..28]);
        let decode = |e: DecodeError, base: u64| corrupt(base + e.offset, e.reason);
        let version = h.u32().map_err(|e| decode(e, 8))?;
        if version != FORMAT_VERSION {
            return Err(corrupt(8, format!("unknown format version {version}")));
        }
        let time_slot = h.i64().map_err(|e| decode(e, 8))?;
        let checkpoint = h.u64().map_err(|e| decode(e, 8))?;
        let mut f = Reader::new(&footer);
        let index_offset = f.u64().map_err(|e| decode(e, len - FOOTER_BYTES))?;
        let index_length = f.u32().map_err(|e| decode(e, len - FOOTER_BYTES))? as u64;
        if index_length < 8
            || index_offset < HEADER_BYTES
            || index_offset + index_length != len - FOOTER_BYTES
        {
            return Err(corrupt(
                len - FOOTER_BYTES,
                "index position out of range".into(),
            ));
        }
        let index_bytes = read_at(&file, path, index_offset, index_length as usize)?;
        let (body, crc) = index_bytes.split_at(index_bytes.len() - 4);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
            return Err(corrupt(index_offset, "index CRC mismatch".into()));
        }
        let mut r = Reader::new(body);
        let entries = r.u32().map_err(|e| decode(e, index_offset))?;
        let mut index = BTreeMap::new();
        for _ in 0..entries {
            let at = index_offset + r.position() as u64;
            let device = r.str16().map_err(|e| decode(e, index_offset))?;
            let measurement = r.str16().map_err(|e| decode(e, index_offset))?;
            let entry = ChunkIndex {
                data_type: r.data_type().map_err(|e| decode(e, index_offset))?,
                offset: r.u64().map_err(|e| decode(e, index_offset))?,
                length: r.u32().map_err(|e| decode(e, index_offset))?,
                count: r.u32().map_err(|e| decode(e, index_offset))?,
                min_time: r.i64().map_err(|e| decode(e, index_offset))?,
                max_time: r.i64().map_err(|e| decode(e, index_offset))?,
            };
            if entry.offset < HEADER_BYTES || entry.offset + entry.length as u64 > index_offset {
                return Err(corrupt(at, "chunk position out of range".into()));
            }
            index.insert((device, measurement), entry);
        }
        r.finish().map_err(|e| decode(e, index_offset))?;
        Ok(SealedFile {
            path: path.to_path_buf(),
            id,
            files: files.clone(),
            bytes: len,
            time_slot,
            checkpoint,
            index,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every series in the file with its chunk facts, sorted.
    pub fn series(&self) -> impl Iterator<Item = (&str, &str, &ChunkIndex)> {
        self.index
            .iter()
            .map(|((d, m), e)| (d.as_str(), m.as_str(), e))
    }

    /// The chunk facts of one series, if present.
    pub fn chunk(&self, device: &str, measurement: &str) -> Option<&ChunkIndex> {
        // BTreeMap<(String, String)> cannot be probed with borrowed strs; the index is small and
        // this runs once per query per file.
        self.index
            .iter()
            .find(|((d, m), _)| d == device && m == measurement)
            .map(|(_, e)| e)
    }

    /// Reads one series' points (timestamps strictly ascending), verifying the chunk's CRC.
    pub fn read(&self, device: &str, measurement: &str) -> Result<Option<(Vec<i64>, Column)>> {
        let Some(entry) = self.chunk(device, measurement) else {
            return Ok(None);
        };
        let file = self
            .files
            .get(self.id, &self.path)
            .map_err(|e| StorageError::io(&self.path, e))?;
        let bytes = read_at(&file, &self.path, entry.offset, entry.length as usize)?;
        let corrupt = |offset: u64, reason: String| StorageError::Corruption {
            what: "sealed chunk",
            path: self.path.clone(),
            offset: entry.offset + offset,
            reason,
        };
        if bytes.len() < 4 {
            return Err(corrupt(0, "chunk shorter than its CRC".into()));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
            return Err(corrupt(0, "chunk CRC mismatch".into()));
        }
        let mut r = Reader::new(body);
        let decode = |e: DecodeError| corrupt(e.offset, e.reason);
        let d = r.str16().map_err(decode)?;
        let m = r.str16().map_err(decode)?;
        let data_type = r.data_type().map_err(decode)?;
        let count = r.u32().map_err(decode)? as usize;
        if d != device
            || m != measurement
            || data_type != entry.data_type
            || count != entry.count as usize
        {
            return Err(corrupt(0, "chunk does not match its index entry".into()));
        }
        if count.saturating_mul(8) > r.remaining() {
            return Err(corrupt(
                r.position() as u64,
                "timestamps overrun the chunk".into(),
            ));
        }
        let timestamps = r.i64s(count).map_err(decode)?;
        if timestamps.windows(2).any(|w| w[0] >= w[1]) {
            return Err(corrupt(
                0,
                "chunk timestamps are not strictly ascending".into(),
            ));
        }
        let values = r.column(data_type, count).map_err(decode)?;
        r.finish().map_err(decode)?;
        Ok(Some((timestamps, values)))
    }
}

impl Drop for SealedFile {
    fn drop(&mut self) {
        // The file is no longer live here (compacted away, replaced by a snapshot, or the region
        // closed): its descriptor need not stay cached.
        self.files.forget(self.id);
    }
}

fn read_at(file: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| StorageError::io(path, e))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Tablet, Value};
    use memtable::{MemTable, MemTableConfig};

    fn frozen() -> FrozenMemTable {
        let mut m = MemTable::new(MemTableConfig::default());
        let mut t = Tablet::new("root.sg.d1", &[("s1", DataType::Int64)]);
        t.push_row(5, vec![Some(Value::Int64(50))]);
        t.push_row(3, vec![Some(Value::Int64(30))]);
        m.insert_tablet(&t, &[0, 1]).unwrap();
        m.freeze()
    }

    #[test]
    fn golden_sealed_file() {
        let bytes = encode(&frozen(), 2, 9);
        #[rustfmt::skip]
        let golden: Vec<u8> = [
            &b"FPSEAL01"[..], &[1, 0, 0, 0], &[2, 0, 0, 0, 0, 0, 0, 0], &[9, 0, 0, 0, 0, 0, 0, 0],
            &crc32fast::hash(&[&b"FPSEAL01"[..], &[1, 0, 0, 0], &[2, 0, 0, 0, 0, 0, 0, 0], &[9, 0, 0, 0, 0, 0, 0, 0]].concat()).to_le_bytes(),
            // chunk at offset 32
            &[10, 0], b"root.sg.d1", &[2, 0], b"s1", &[2], &[2, 0, 0, 0],
            &[3, 0, 0, 0, 0, 0, 0, 0], &[5, 0, 0, 0, 0, 0, 0, 0],
            &[30, 0, 0, 0, 0, 0, 0, 0], &[50, 0, 0, 0, 0, 0, 0, 0],
        ].concat();
        assert_eq!(&bytes[..golden.len()], &golden[..]);
        let chunk_crc = crc32fast::hash(&golden[32..]);
        assert_eq!(
            &bytes[golden.len()..golden.len() + 4],
            &chunk_crc.to_le_bytes()
        );
        assert_eq!(&bytes[bytes.len() - 8..], b"FPSEALND");
        assert_eq!(
            bytes.len(),
            golden.len() + 4 + (4 + 12 + 4 + 1 + 8 + 4 + 4 + 8 + 8 + 4) + 20
        );
    }

    #[test]
    fn round_trip_and_corruption_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.fps");
        let files = FileCache::new(4);
        let written = write(&path, &frozen(), 2, 9, &files).unwrap();
        let file = SealedFile::open(&path, &files).unwrap();
        assert_eq!(
            written.index, file.index,
            "the index as written is the index as read"
        );
        assert_eq!(written.bytes, file.bytes);
        assert_eq!((file.time_slot, file.checkpoint), (2, 9));
        let (ts, values) = file.read("root.sg.d1", "s1").unwrap().unwrap();
        assert_eq!(ts, vec![3, 5]);
        assert_eq!(values, Column::Int64(vec![30, 50]));
        assert!(file.read("root.sg.d1", "s2").unwrap().is_none());

        let clean = std::fs::read(&path).unwrap();
        for i in 0..clean.len() {
            let mut bytes = clean.clone();
            bytes[i] ^= 0x10;
            std::fs::write(&path, &bytes).unwrap();
            let outcome = SealedFile::open(&path, &FileCache::new(1))
                .and_then(|f| f.read("root.sg.d1", "s1"));
            match outcome {
                Err(StorageError::Corruption { .. }) => {}
                other => panic!("flip at byte {i} not detected: {other:?}"),
            }
        }
    }
}
