//! Sealed file format version 1, read for files written before version 2 (and written by tests
//! only):
//!
//! ```text
//! header:  magic "FPSEAL01", u32 version = 1, i64 time slot, u64 checkpoint, u32 CRC32
//! chunks:  per series, sorted by (device, measurement):
//!          str16 device, str16 measurement, u8 type, u32 count,
//!          i64 × count timestamps (strictly ascending), values (as in a log entry),
//!          u32 CRC32 of the chunk's bytes before it
//! index:   u32 entries, entries × { str16 device, str16 measurement, u8 type, u64 chunk offset,
//!          u32 chunk length (with its CRC), u32 count, i64 min time, i64 max time },
//!          u32 CRC32 of the index bytes before it
//! footer:  u64 index offset, u32 index length, magic "FPSEALND"
//! ```
//!
//! A version-1 chunk is read as a chunk of one page without statistics.

use std::collections::BTreeMap;

use codec::Compressor;
use common::codec::{DecodeError, Reader};
use common::Column;

use super::{Bad, ChunkIndex, Index, PageIndex, HEADER_BYTES};

pub(super) const HEADER_MAGIC: &[u8; 8] = b"FPSEAL01";
pub(super) const VERSION: u32 = 1;

/// Parses and checks a version-1 index (`body` without its CRC, found at `base`).
pub(super) fn parse_index(body: &[u8], base: u64) -> Result<Index, Bad> {
    let decode = |e: DecodeError| (base + e.offset, e.reason);
    let mut r = Reader::new(body);
    let entries = r.u32().map_err(decode)?;
    let mut index = BTreeMap::new();
    for _ in 0..entries {
        let at = base + r.position() as u64;
        let device = r.str16().map_err(decode)?;
        let measurement = r.str16().map_err(decode)?;
        let data_type = r.data_type().map_err(decode)?;
        let offset = r.u64().map_err(decode)?;
        let length = r.u32().map_err(decode)?;
        let count = r.u32().map_err(decode)?;
        let min_time = r.i64().map_err(decode)?;
        let max_time = r.i64().map_err(decode)?;
        if offset < HEADER_BYTES || offset + length as u64 > base {
            return Err((at, "chunk position out of range".into()));
        }
        let page = PageIndex {
            offset,
            length,
            raw_length: length,
            compressor: Compressor::Uncompressed,
            count,
            min_time,
            max_time,
            stats: None,
        };
        let chunk = ChunkIndex {
            data_type,
            count,
            min_time,
            max_time,
            stats: None,
            pages: vec![page],
        };
        index.insert((device, measurement), chunk);
    }
    r.finish().map_err(decode)?;
    Ok(index)
}

/// Decodes a version-1 chunk (CRC included) of `device.measurement`, checking it against its
/// index entry.
pub(super) fn decode_chunk(
    bytes: &[u8],
    device: &str,
    measurement: &str,
    entry: &ChunkIndex,
) -> Result<(Vec<i64>, Column), Bad> {
    if bytes.len() < 4 {
        return Err((0, "chunk shorter than its CRC".into()));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
        return Err((0, "chunk CRC mismatch".into()));
    }
    let mut r = Reader::new(body);
    let decode = |e: DecodeError| (e.offset, e.reason);
    let d = r.str16().map_err(decode)?;
    let m = r.str16().map_err(decode)?;
    let data_type = r.data_type().map_err(decode)?;
    let count = r.u32().map_err(decode)? as usize;
    if d != device
        || m != measurement
        || data_type != entry.data_type
        || count != entry.count as usize
    {
        return Err((0, "chunk does not match its index entry".into()));
    }
    if count == 0 || count.saturating_mul(8) > r.remaining() {
        return Err((r.position() as u64, "timestamps overrun the chunk".into()));
    }
    let timestamps = r.i64s(count).map_err(decode)?;
    if timestamps.windows(2).any(|w| w[0] >= w[1]) {
        return Err((0, "chunk timestamps are not strictly ascending".into()));
    }
    let values = r.column(data_type, count).map_err(decode)?;
    r.finish().map_err(decode)?;
    Ok((timestamps, values))
}

/// Encodes a frozen memtable in version 1 (tests only: files of this version are read, never
/// written).
#[cfg(test)]
pub(super) fn encode(
    frozen: &memtable::FrozenMemTable,
    time_slot: i64,
    checkpoint: u64,
) -> Vec<u8> {
    use common::codec::{len32, Writer};
    let mut out = Vec::new();
    let mut w = Writer::new();
    w.bytes(HEADER_MAGIC);
    w.u32(VERSION);
    w.i64(time_slot);
    w.u64(checkpoint);
    let crc = crc32fast::hash(w.as_slice());
    w.u32(crc);
    out.extend_from_slice(w.as_slice());
    let mut entries = Vec::new();
    for series in frozen.series() {
        let count = series.timestamps.len();
        let offset = out.len() as u64;
        w.clear();
        w.str16(series.device);
        w.str16(series.measurement);
        w.u8(series.data_type.code());
        w.len32(count);
        w.i64s(series.timestamps);
        w.column_rows(series.values, 0..count);
        let crc = crc32fast::hash(w.as_slice());
        w.u32(crc);
        out.extend_from_slice(w.as_slice());
        entries.push((series, offset, len32(w.len())));
    }
    let index_offset = out.len() as u64;
    w.clear();
    w.len32(entries.len());
    for (series, offset, length) in &entries {
        w.str16(series.device);
        w.str16(series.measurement);
        w.u8(series.data_type.code());
        w.u64(*offset);
        w.u32(*length);
        w.len32(series.timestamps.len());
        w.i64(series.timestamps[0]);
        w.i64(*series.timestamps.last().unwrap());
    }
    let crc = crc32fast::hash(w.as_slice());
    w.u32(crc);
    let index_length = w.len();
    w.u64(index_offset);
    w.len32(index_length);
    w.bytes(super::FOOTER_MAGIC);
    out.extend_from_slice(w.as_slice());
    out
}

#[cfg(test)]
mod tests {
    use super::super::{FileCache, SealedFile};
    use super::*;
    use crate::error::StorageError;
    use common::{DataType, Tablet, Value};
    use memtable::FrozenMemTable;
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
    fn version_1_still_reads_and_corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.fps");
        std::fs::write(&path, encode(&frozen(), 2, 9)).unwrap();
        let file = SealedFile::open(&path, &FileCache::new(4)).unwrap();
        assert_eq!(file.version(), 1);
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
