//! Recovery: torn tails are dropped, damage in the middle is corruption with file and offset.

use std::fs;
use std::ops::{Range, RangeInclusive};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use wal::format::{encode_segment_header, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use wal::{Durability, Error, Wal, WalOptions};

use crate::util::{mem_dir, options, payload_for, read_all, record_spans, segment_files};

fn opts(dir: &Path) -> WalOptions {
    options(dir, 4096, Durability::None)
}

/// Writes records 1..=n of 100 bytes each and closes the log; returns the single segment path.
fn three_records(dir: &Path) -> PathBuf {
    let wal = Wal::open(opts(dir)).expect("open");
    for i in 1..=3 {
        wal.append(&payload_for(i, 100)).expect("append");
    }
    drop(wal);
    segment_files(dir).remove(0)
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let file = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open segment");
    file.write_all_at(bytes, offset).expect("patch");
}

fn xor_byte(path: &Path, offset: u64) {
    let mut bytes = fs::read(path).expect("read");
    bytes[offset as usize] ^= 0x40;
    fs::write(path, bytes).expect("write");
}

fn expect_corruption(result: wal::Result<impl Sized>, segment: &Path, offset: u64) {
    match result {
        Err(Error::Corruption {
            segment: s,
            offset: o,
            reason,
        }) => {
            assert_eq!(s, segment, "{reason}");
            assert_eq!(o, offset, "{reason}");
        }
        Err(other) => panic!("expected corruption, got {other}"),
        Ok(_) => panic!("expected corruption, got Ok"),
    }
}

const HEADER: u64 = RECORD_HEADER_BYTES as u64;
const RECORD: u64 = HEADER + 100;
const DATA_END: u64 = SEGMENT_HEADER_BYTES as u64 + 3 * RECORD;

#[test]
fn partial_last_record_is_dropped_and_overwritten() {
    let dir = mem_dir("wal-torn");
    let segment = three_records(dir.path());
    // A fourth record whose header made it to disk but not all of its payload.
    let header = wal::format::encode_record_header(4, 4, &payload_for(4, 100), false);
    patch(&segment, DATA_END, &header);
    patch(&segment, DATA_END + HEADER, &payload_for(4, 100)[..37]);

    let wal = Wal::open(opts(dir.path())).expect("open");
    assert_eq!(wal.next_index(), 4);
    assert_eq!(read_all(&wal).expect("read").len(), 3);
    assert_eq!(wal.append(b"new four").expect("append"), 4);
    drop(wal);
    let wal = Wal::open(opts(dir.path())).expect("reopen");
    let all = read_all(&wal).expect("read");
    assert_eq!(all.len(), 4);
    assert_eq!(all[3], (4, b"new four".to_vec()));
    // The torn bytes behind the new, shorter record were zeroed.
    let bytes = fs::read(&segment).expect("read");
    let end = (DATA_END + HEADER + 8) as usize;
    assert!(bytes[end..].iter().all(|&b| b == 0));
}

#[test]
fn garbage_after_last_record_is_dropped() {
    let dir = mem_dir("wal-garbage");
    let segment = three_records(dir.path());
    patch(&segment, DATA_END, &[0xFF; 300]);
    let wal = Wal::open(opts(dir.path())).expect("open");
    assert_eq!(wal.next_index(), 4);
}

#[test]
fn bad_record_followed_by_valid_one_is_corruption() {
    let dir = mem_dir("wal-mid");
    let segment = three_records(dir.path());
    let second = SEGMENT_HEADER_BYTES as u64 + RECORD;
    xor_byte(&segment, second + HEADER + 50);
    expect_corruption(Wal::open(opts(dir.path())), &segment, second);
}

#[test]
fn hole_followed_by_a_later_synced_batch_is_corruption() {
    let dir = mem_dir("wal-hole");
    let wal = Wal::open(opts(dir.path())).expect("open");
    for i in 1..=3 {
        wal.append(&payload_for(i, 100)).expect("append");
        wal.sync().expect("sync");
    }
    drop(wal);
    let segment = segment_files(dir.path()).remove(0);
    // Record 2 was synced, and record 3, its own batch, was written and synced after it: a zeroed
    // record 2 is damage to acknowledged data, not a write that never reached the disk.
    let second = SEGMENT_HEADER_BYTES as u64 + RECORD;
    patch(&segment, second, &[0u8; RECORD as usize]);
    expect_corruption(Wal::open(opts(dir.path())), &segment, second);
}

#[test]
fn damaged_last_record_is_a_torn_tail() {
    let dir = mem_dir("wal-last");
    let segment = three_records(dir.path());
    xor_byte(&segment, DATA_END - 5);
    let wal = Wal::open(opts(dir.path())).expect("open");
    assert_eq!(wal.next_index(), 3);
}

#[test]
fn torn_batch_is_dropped_whole() {
    let dir = mem_dir("wal-torn-batch");
    let wal = Wal::open(opts(dir.path())).expect("open");
    wal.append(b"single").expect("append");
    let batch: Vec<Vec<u8>> = (0..3).map(|i| payload_for(i, 50)).collect();
    let refs: Vec<&[u8]> = batch.iter().map(|b| b.as_slice()).collect();
    assert_eq!(wal.append_batch(&refs).expect("batch"), 2);
    drop(wal);
    let segment = segment_files(dir.path()).remove(0);
    // The crash lost the batch's last record.
    let last = SEGMENT_HEADER_BYTES as u64 + (HEADER + 6) + 2 * (HEADER + 50);
    patch(&segment, last, &[0u8; HEADER as usize + 50]);
    let wal = Wal::open(opts(dir.path())).expect("open");
    assert_eq!(
        wal.next_index(),
        2,
        "the first two records of the batch went with it"
    );
    assert_eq!(read_all(&wal).expect("read"), vec![(1, b"single".to_vec())]);
}

#[test]
fn bad_record_in_sealed_segment_is_corruption_when_read() {
    let dir = mem_dir("wal-sealed");
    let wal = Wal::open(opts(dir.path())).expect("open");
    for i in 1..=40u64 {
        wal.append(&payload_for(i, 300)).expect("append");
    }
    drop(wal);
    let files = segment_files(dir.path());
    assert!(files.len() >= 3);
    let bytes = fs::read(&files[1]).expect("read");
    let spans = record_spans(&bytes);
    let (offset, _, index) = spans[2];
    xor_byte(&files[1], offset as u64 + 20);

    let wal = Wal::open(opts(dir.path())).expect("open scans only the last segment");
    let mut iter = wal.iter_from(1).expect("iter");
    let mut good = 0;
    let error = loop {
        match iter
            .next()
            .expect("the iterator must not end before the damage")
        {
            Ok((i, payload)) => {
                assert_eq!(payload, payload_for(i, 300));
                good += 1;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(good, index - 1);
    expect_corruption(Err::<(), _>(error), &files[1], offset as u64);
    assert!(iter.next().is_none(), "the iterator ends after an error");
    // Starting inside the damaged segment runs into the damage; the next segment reads fine.
    assert!(wal.iter_from(index + 1).expect("iter").any(|r| r.is_err()));
    let next_first = record_spans(&fs::read(&files[2]).expect("read"))[0].2;
    let rest = wal.iter_from(next_first).expect("iter");
    assert_eq!(
        rest.collect::<wal::Result<Vec<_>>>()
            .expect("records")
            .len() as u64,
        41 - next_first
    );
}

#[test]
fn missing_segment_is_corruption() {
    let dir = mem_dir("wal-gap");
    let wal = Wal::open(opts(dir.path())).expect("open");
    for i in 1..=40u64 {
        wal.append(&payload_for(i, 300)).expect("append");
    }
    drop(wal);
    let files = segment_files(dir.path());
    fs::remove_file(&files[1]).expect("remove");
    let wal = Wal::open(opts(dir.path())).expect("open");
    let error = read_all(&wal).expect_err("gap");
    match error {
        Error::Corruption { segment, .. } => assert_eq!(segment, files[0]),
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn bad_segment_headers() {
    // Damaged header.
    let dir = mem_dir("wal-hdr");
    let segment = three_records(dir.path());
    xor_byte(&segment, 3);
    expect_corruption(Wal::open(opts(dir.path())), &segment, 0);

    // A well-formed header of a future version.
    let dir = mem_dir("wal-hdr-version");
    let segment = three_records(dir.path());
    let mut header = encode_segment_header(1);
    header[8..12].copy_from_slice(&3u32.to_le_bytes());
    let crc = crc32(&header[..28]);
    header[28..32].copy_from_slice(&crc.to_le_bytes());
    patch(&segment, 0, &header);
    assert!(matches!(
        Wal::open(opts(dir.path())),
        Err(Error::UnsupportedVersion {
            version: 3,
            supported: 2,
            ..
        })
    ));

    // Name and header disagree.
    let dir = mem_dir("wal-hdr-name");
    let segment = three_records(dir.path());
    let renamed = dir.path().join("00000000000000000005.wal");
    fs::rename(&segment, &renamed).expect("rename");
    expect_corruption(Wal::open(opts(dir.path())), &renamed, 16);

    // A file cut inside its header.
    let dir = mem_dir("wal-hdr-short");
    let segment = three_records(dir.path());
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("open");
    file.set_len(10).expect("truncate");
    expect_corruption(Wal::open(opts(dir.path())), &segment, 0);
}

#[test]
fn unfinished_segment_creation_is_cleaned_up() {
    let dir = mem_dir("wal-tmp");
    three_records(dir.path());
    let temp = dir.path().join("00000000000000000004.wal.tmp");
    fs::write(&temp, b"half").expect("write");
    let wal = Wal::open(opts(dir.path())).expect("open");
    assert!(!temp.exists());
    assert_eq!(wal.next_index(), 4);
}

fn crc32(bytes: &[u8]) -> u32 {
    // The segment header's crc, computed the same way the format does (IEEE CRC32).
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *entry = c;
    }
    let mut crc = !0u32;
    for &b in bytes {
        crc = table[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Options of the raft logs: O_DIRECT, synced explicitly by the caller.
fn raft_opts(dir: &Path) -> WalOptions {
    let mut options = options(dir, 1 << 20, Durability::None);
    options.direct_io = true;
    options
}

const BLOCK: u64 = wal::direct::ALIGN as u64;

/// Records 1 and 2 appended and synced, then records 3..=8 (2000 bytes each, four 4 KiB blocks
/// with the records in front) as one batch: one pwrite, never synced. Returns the segment and the
/// byte range of the batch.
fn synced_records_then_unsynced_batch(dir: &Path) -> (PathBuf, Range<u64>) {
    let wal = Wal::open(raft_opts(dir)).expect("open");
    for i in 1..=2 {
        wal.append(&payload_for(i, 100)).expect("append");
    }
    wal.sync().expect("sync");
    let batch: Vec<Vec<u8>> = (3..=8).map(|i| payload_for(i, 2000)).collect();
    let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    assert_eq!(wal.append_batch(&refs).expect("batch"), 3);
    drop(wal);
    let segment = segment_files(dir).remove(0);
    let range = record_range(&segment, 3..=8);
    assert!(
        range.end - range.start > 2 * BLOCK,
        "the batch spans three blocks"
    );
    (segment, range)
}

/// Byte range of the records `indexes` in `segment`.
fn record_range(segment: &Path, indexes: RangeInclusive<u64>) -> Range<u64> {
    let spans = record_spans(&fs::read(segment).expect("read"));
    let span = |index: u64| {
        *spans
            .iter()
            .find(|span| span.2 == index)
            .unwrap_or_else(|| panic!("record {index} in {spans:?}"))
    };
    let (start, _, _) = span(*indexes.start());
    let (last, last_bytes, _) = span(*indexes.end());
    start as u64..(last + last_bytes) as u64
}

/// Offset of the first record of `segment` with a byte in `bytes`.
fn first_record_touching(segment: &Path, bytes: Range<u64>) -> u64 {
    let spans = record_spans(&fs::read(segment).expect("read"));
    spans
        .iter()
        .map(|&(offset, len, _)| (offset as u64, (offset + len) as u64))
        .find(|&(start, end)| start < bytes.end && end > bytes.start)
        .expect("a record in the range")
        .0
}

/// The 4 KiB block at `block_start` never reached the disk after `written` was written into it:
/// it holds what it held before, the bytes in front of `written` and zeroes from there.
fn lose_block(segment: &Path, block_start: u64, written: &Range<u64>) {
    assert_eq!(
        block_start % BLOCK,
        0,
        "a block starts at a multiple of {BLOCK}"
    );
    let from = block_start.max(written.start);
    let to = (block_start + BLOCK).min(written.end.next_multiple_of(BLOCK));
    patch(segment, from, &vec![0u8; (to - from) as usize]);
}

/// After a crash tore the unsynced batch 3..=8: the log opens, holds records 1 and 2 only, no
/// byte of the batch is left behind them, and appends continue at 3 and survive a reopen.
fn expect_torn_batch_dropped(dir: &Path, segment: &Path, batch: &Range<u64>) {
    let synced = vec![(1, payload_for(1, 100)), (2, payload_for(2, 100))];
    let wal = Wal::open(raft_opts(dir)).expect("a torn unsynced batch is not corruption");
    assert_eq!(wal.next_index(), 3, "the whole torn batch is dropped");
    assert_eq!(read_all(&wal).expect("read"), synced);
    let bytes = fs::read(segment).expect("read");
    assert!(
        bytes[batch.start as usize..].iter().all(|&b| b == 0),
        "the surviving records of the torn batch were zeroed"
    );
    assert_eq!(wal.append(b"after the tear").expect("append"), 3);
    let batch_after: Vec<Vec<u8>> = (4..=6).map(|i| payload_for(i, 2000)).collect();
    let refs: Vec<&[u8]> = batch_after.iter().map(Vec::as_slice).collect();
    assert_eq!(wal.append_batch(&refs).expect("batch"), 4);
    wal.sync().expect("sync");
    drop(wal);

    let wal = Wal::open(raft_opts(dir)).expect("reopen");
    let mut expected = synced;
    expected.push((3, b"after the tear".to_vec()));
    expected.extend((4..=6).map(|i| (i, payload_for(i, 2000))));
    assert_eq!(read_all(&wal).expect("read"), expected);
    assert_eq!(wal.next_index(), 7);
}

#[test]
fn torn_middle_block_of_the_unsynced_final_batch_is_dropped() {
    let dir = mem_dir("wal-torn-middle");
    let (segment, batch) = synced_records_then_unsynced_batch(dir.path());
    // Power failed during the batch's pwrite: the block after its first reached the disk, and
    // the blocks after that did, but that one did not.
    let middle = batch.start.next_multiple_of(BLOCK);
    assert!(middle + BLOCK < batch.end);
    lose_block(&segment, middle, &batch);
    expect_torn_batch_dropped(dir.path(), &segment, &batch);
}

#[test]
fn torn_first_block_of_the_unsynced_final_batch_is_dropped() {
    let dir = mem_dir("wal-torn-first");
    let (segment, batch) = synced_records_then_unsynced_batch(dir.path());
    // The batch's first block, shared with the synced records in front of it, kept its old bytes.
    let first = batch.start / BLOCK * BLOCK;
    lose_block(&segment, first, &batch);
    expect_torn_batch_dropped(dir.path(), &segment, &batch);
}

#[test]
fn hole_in_a_batch_followed_by_a_later_batch_is_corruption() {
    let dir = mem_dir("wal-hole-batch");
    let wal = Wal::open(raft_opts(dir.path())).expect("open");
    let batch: Vec<Vec<u8>> = (1..=6).map(|i| payload_for(i, 2000)).collect();
    let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    assert_eq!(wal.append_batch(&refs).expect("batch"), 1);
    wal.sync().expect("sync");
    assert_eq!(wal.append_batch(&[b"seven", b"eight"]).expect("batch"), 7);
    wal.sync().expect("sync");
    drop(wal);
    let segment = segment_files(dir.path()).remove(0);
    // The first batch was synced before the second was written: a block of it lost now is
    // damage to acknowledged records, whatever follows it.
    let synced = record_range(&segment, 1..=6);
    let middle = synced.start.next_multiple_of(BLOCK);
    let hole = first_record_touching(&segment, middle..middle + BLOCK);
    lose_block(&segment, middle, &synced);
    expect_corruption(Wal::open(raft_opts(dir.path())), &segment, hole);
}

#[test]
fn hole_across_two_batches_is_corruption() {
    let dir = mem_dir("wal-hole-across");
    let wal = Wal::open(raft_opts(dir.path())).expect("open");
    for first in [1, 7] {
        let batch: Vec<Vec<u8>> = (first..first + 6).map(|i| payload_for(i, 1500)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        assert_eq!(wal.append_batch(&refs).expect("batch"), first);
        wal.sync().expect("sync");
    }
    drop(wal);
    let segment = segment_files(dir.path()).remove(0);
    // One block holding the end of the first batch and the start of the second is lost; the rest
    // of the second batch, the last of the log, survives. Those records continue a batch, like
    // the rest of a torn final batch would, but not the batch the hole began in.
    let first_batch = record_range(&segment, 1..=6);
    let block = (first_batch.end - 1) / BLOCK * BLOCK;
    let whole = record_range(&segment, 1..=12);
    assert!(
        block + BLOCK < whole.end,
        "records of the second batch survive"
    );
    let hole = first_record_touching(&segment, block..block + BLOCK);
    patch(&segment, block, &[0u8; BLOCK as usize]);
    expect_corruption(Wal::open(raft_opts(dir.path())), &segment, hole);
}
