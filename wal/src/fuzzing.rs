//! Harness for the recovery fuzz target (`wal/fuzz`) and its bounded smoke run in the tests.
//! Not part of the API.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::{
    encode_segment_header, read_u32, read_u64, CONTINUES_FLAG, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
};
use crate::segment::segment_file_name;
use crate::{Durability, Error, Wal, WalOptions};

/// What one harness run saw; lets the smoke test check that it reaches the interesting paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Open failed with a typed error.
    OpenFailed,
    /// Open succeeded and this many records came back.
    Recovered(u64),
}

static RUN: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` as the only segment file of a fresh log directory, opens the log, reads every
/// record, and checks what must hold whatever the bytes: open either fails with a typed error or
/// succeeds; after a successful open, reading the (single, last) segment succeeds, indexes are
/// consecutive, a reopen gives the same records, and an append after them is read back after a
/// second reopen. Panics if any of that fails: that is the bug the fuzzer looks for.
///
/// The file is named after the first index stored at bytes 16..24 when that is non-zero, so
/// inputs with a valid header reach the record parser.
pub fn recover_from_bytes(bytes: &[u8]) -> Outcome {
    let dir = scratch_dir();
    let result = std::panic::catch_unwind(|| check(&dir, bytes));
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        // Leaking a scratch directory is not a finding; say so and go on.
        eprintln!("cannot remove {}: {e}", dir.display());
    }
    match result {
        Ok(outcome) => outcome,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Entry point of the fuzz target. An even first byte passes the rest through unchanged; an odd
/// one first gives it a valid segment header and valid record checksums with
/// [`with_valid_checksums`], so the fuzzer reaches the record-level rules (indexes, batches, torn
/// and misplaced records) that random bytes almost never get past a checksum to.
pub fn recover_from_fuzz_input(data: &[u8]) -> Outcome {
    match data.split_first() {
        Some((mode, rest)) if mode & 1 == 1 => recover_from_bytes(&with_valid_checksums(rest)),
        Some((_, rest)) => recover_from_bytes(rest),
        None => recover_from_bytes(data),
    }
}

/// A segment header for first index 1 (current format version) followed by `body`, in which every
/// record header found by walking from the start gets the checksum its bytes call for. A record
/// whose length runs past the end is left as it is: a torn tail.
pub fn with_valid_checksums(body: &[u8]) -> Vec<u8> {
    let mut bytes = encode_segment_header(1).to_vec();
    bytes.extend_from_slice(body);
    let mut offset = SEGMENT_HEADER_BYTES;
    while offset + RECORD_HEADER_BYTES <= bytes.len() {
        let payload_bytes = (read_u32(&bytes, offset + 4) & !CONTINUES_FLAG) as usize;
        let end = offset + RECORD_HEADER_BYTES + payload_bytes;
        if end > bytes.len() {
            break;
        }
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&bytes[offset + 4..end]);
        let crc = hasher.finalize();
        bytes[offset..offset + 4].copy_from_slice(&crc.to_le_bytes());
        offset = end;
    }
    bytes
}

fn options(dir: &Path) -> WalOptions {
    let mut options = WalOptions::new(dir);
    options.segment_bytes = 1 << 20;
    options.durability = Durability::None;
    options.preallocate = false;
    options
}

fn check(dir: &Path, bytes: &[u8]) -> Outcome {
    std::fs::create_dir_all(dir).expect("create scratch dir");
    let name_index = if bytes.len() >= SEGMENT_HEADER_BYTES {
        read_u64(bytes, 16).max(1)
    } else {
        1
    };
    std::fs::write(dir.join(segment_file_name(name_index)), bytes).expect("write segment");

    let wal = match Wal::open(options(dir)) {
        Ok(wal) => wal,
        Err(Error::Corruption { .. } | Error::UnsupportedVersion { .. } | Error::Io { .. }) => {
            return Outcome::OpenFailed
        }
        Err(other) => panic!("open failed with an unexpected error: {other}"),
    };
    let records = read_all(&wal);
    let next_index = wal.next_index();
    assert_eq!(
        next_index - wal.first_index(),
        records.len() as u64,
        "record count and index range disagree"
    );
    drop(wal);

    let wal = Wal::open(options(dir)).expect("a log that opened once must reopen");
    assert_eq!(read_all(&wal), records, "reopen changed the records");
    let appended = wal
        .append(b"after recovery")
        .expect("append after recovery");
    assert_eq!(
        appended, next_index,
        "append did not continue after the last record"
    );
    drop(wal);

    let wal = Wal::open(options(dir)).expect("reopen after append");
    let mut again = read_all(&wal);
    assert_eq!(
        again.pop(),
        Some((next_index, b"after recovery".to_vec())),
        "appended record not read back"
    );
    assert_eq!(again, records, "append changed earlier records");
    Outcome::Recovered(records.len() as u64)
}

fn read_all(wal: &Wal) -> Vec<(u64, Vec<u8>)> {
    let first = wal.first_index();
    let mut records = Vec::new();
    for (i, item) in wal
        .iter_from(first)
        .expect("iter_from(first_index)")
        .enumerate()
    {
        let (index, payload) = item.expect("a recovered last segment must read back");
        assert_eq!(index, first + i as u64, "indexes are not consecutive");
        records.push((index, payload));
    }
    records
}

/// A fresh directory under /dev/shm when it exists (fsync is free there), else the system temp dir.
fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    base.join(format!(
        "wal-fuzz-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ))
}
