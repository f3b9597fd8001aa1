//! Helpers shared by the test modules.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;
use wal::format::{
    decode_record, decode_segment_header, Decoded, RecordView, SEGMENT_HEADER_BYTES,
};
use wal::{Durability, Wal, WalOptions};

/// A temporary directory on the real disk, for tests where fsync behaviour matters.
pub fn disk_dir(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create temp dir")
}

/// A temporary directory in memory (/dev/shm) when there is one: for tests that open many logs
/// and only care about bytes, not about fsync latency.
pub fn mem_dir(prefix: &str) -> TempDir {
    let shm = Path::new("/dev/shm");
    let builder = {
        let mut b = tempfile::Builder::new();
        b.prefix(prefix);
        b
    };
    if shm.is_dir() {
        builder
            .tempdir_in(shm)
            .expect("create temp dir in /dev/shm")
    } else {
        builder.tempdir().expect("create temp dir")
    }
}

/// Options with small segments so that tests roll.
pub fn options(dir: &Path, segment_bytes: u64, durability: Durability) -> WalOptions {
    let mut options = WalOptions::new(dir);
    options.segment_bytes = segment_bytes;
    options.durability = durability;
    options
}

/// Every record from `first_index()`.
pub fn read_all(wal: &Wal) -> wal::Result<Vec<(u64, Vec<u8>)>> {
    wal.iter_from(wal.first_index())?.collect()
}

/// A payload that encodes its index, for checking reads without keeping a model.
pub fn payload_for(index: u64, len: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(len);
    let mut x = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while payload.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        payload.push(x as u8);
    }
    payload
}

/// Segment files of a log directory, oldest first.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    files
}

/// The bytes of every segment file, by file name.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    segment_files(dir)
        .into_iter()
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, fs::read(&p).expect("read segment"))
        })
        .collect()
}

/// Writes `image` as the segment files of `dir`.
pub fn write_image(dir: &Path, image: &BTreeMap<String, Vec<u8>>) {
    for (name, bytes) in image {
        fs::write(dir.join(name), bytes).expect("write segment");
    }
}

/// Byte offset of every record in a segment image, up to the first that is not valid:
/// (offset, encoded length, index).
pub fn record_spans(bytes: &[u8]) -> Vec<(usize, usize, u64)> {
    records(bytes)
        .into_iter()
        .map(|(offset, r)| (offset, r.encoded_bytes(), r.index))
        .collect()
}

/// The first index of the batch of the last valid record in a segment image, if it has one.
pub fn last_batch_first(bytes: &[u8]) -> Option<u64> {
    let (_, last) = records(bytes).pop()?;
    Some(
        last.batch_first
            .expect("the log writes records that name their batch"),
    )
}

fn records(bytes: &[u8]) -> Vec<(usize, RecordView<'_>)> {
    let version = decode_segment_header(bytes)
        .expect("a valid segment header")
        .version;
    let mut records = Vec::new();
    let mut offset = SEGMENT_HEADER_BYTES;
    while let Decoded::Record(r) = decode_record(bytes, offset, version) {
        records.push((offset, r));
        offset += r.encoded_bytes();
    }
    records
}
