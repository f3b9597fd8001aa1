//! Recovery: torn tails are dropped, damage in the middle is corruption with file and offset.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use wal::format::{encode_segment_header, SEGMENT_HEADER_BYTES};
use wal::{Durability, Error, Wal, WalOptions};

use crate::util::{mem_dir, options, payload_for, read_all, record_spans, segment_files};

fn opts(dir: &Path) -> WalOptions {
    options(dir, 4096, Durability::None)
}

/// Writes records 1..=n of 100 bytes each and closes the log; returns the single segment path.
fn three_records(dir: &Path) -> std::path::PathBuf {
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

const RECORD: u64 = 16 + 100;
const DATA_END: u64 = SEGMENT_HEADER_BYTES as u64 + 3 * RECORD;

#[test]
fn partial_last_record_is_dropped_and_overwritten() {
    let dir = mem_dir("wal-torn");
    let segment = three_records(dir.path());
    // A fourth record whose header made it to disk but not all of its payload.
    let header = wal::format::encode_record_header(4, &payload_for(4, 100), false);
    patch(&segment, DATA_END, &header);
    patch(&segment, DATA_END + 16, &payload_for(4, 100)[..37]);

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
    let end = (DATA_END + 16 + 8) as usize;
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
    xor_byte(&segment, second + 16 + 50);
    expect_corruption(Wal::open(opts(dir.path())), &segment, second);
}

#[test]
fn zeroed_record_followed_by_valid_one_is_corruption() {
    let dir = mem_dir("wal-hole");
    let segment = three_records(dir.path());
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
    let last = SEGMENT_HEADER_BYTES as u64 + (16 + 6) + 2 * (16 + 50);
    patch(&segment, last, &[0u8; 66]);
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
    header[8..12].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32(&header[..28]);
    header[28..32].copy_from_slice(&crc.to_le_bytes());
    patch(&segment, 0, &header);
    assert!(matches!(
        Wal::open(opts(dir.path())),
        Err(Error::UnsupportedVersion {
            version: 2,
            supported: 1,
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
