//! Golden vectors: the exact bytes of segment headers and records, hard-coded, of the format
//! version this build writes (2) and of the previous one (1), which it still reads. If a version-2
//! vector fails, the on-disk format changed: bump the format version and keep reading the old ones.

use std::fs;

use wal::format::{
    decode_record, decode_segment_header, encode_record_header, encode_segment_header, Decoded,
    SegmentHeader, Version, SEGMENT_HEADER_BYTES,
};
use wal::{Durability, Error, Wal};

use crate::util::{mem_dir, options, read_all, segment_files};

const SEGMENT_HEADER_FIRST_INDEX_1: [u8; 32] = [
    0x46, 0x50, 0x57, 0x41, 0x4c, 0x53, 0x45, 0x47, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x75, 0xa9, 0xa9, 0x1e,
];

/// Record 1, payload "hello", a single append: its batch starts at 1.
const RECORD_1_HELLO: [u8; 29] = [
    0xfa, 0xdf, 0x87, 0x05, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

/// Record 2, payload "ab", first of a batch of two: bit 31 of the length word is set, and the
/// batch starts at 2.
const RECORD_2_AB_CONTINUES: [u8; 26] = [
    0x1c, 0x41, 0x13, 0xc2, 0x02, 0x00, 0x00, 0x80, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x61, 0x62,
];

/// Record 3, empty payload, last of that batch: it names 2 as its batch's first index.
const RECORD_3_EMPTY: [u8; 24] = [
    0x02, 0x28, 0x38, 0x64, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// The same segment header in format version 1.
const V1_SEGMENT_HEADER_FIRST_INDEX_1: [u8; 32] = [
    0x46, 0x50, 0x57, 0x41, 0x4c, 0x53, 0x45, 0x47, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xbf, 0xe4, 0x00, 0xb1,
];

/// The same three records in format version 1: 16-byte headers that do not name the batch.
const V1_RECORD_1_HELLO: [u8; 21] = [
    0x2f, 0x95, 0xe5, 0x10, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x68, 0x65, 0x6c, 0x6c, 0x6f,
];
const V1_RECORD_2_AB_CONTINUES: [u8; 18] = [
    0x5a, 0x02, 0x9b, 0x9c, 0x02, 0x00, 0x00, 0x80, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x61, 0x62,
];
const V1_RECORD_3_EMPTY: [u8; 16] = [
    0x8c, 0xc1, 0x5a, 0xf5, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// The three records as the only segment of a log, in format version 2.
fn v2_segment() -> Vec<u8> {
    [
        &SEGMENT_HEADER_FIRST_INDEX_1[..],
        &RECORD_1_HELLO,
        &RECORD_2_AB_CONTINUES,
        &RECORD_3_EMPTY,
    ]
    .concat()
}

/// The three records as the only segment of a log, as format version 1 wrote them.
pub fn v1_segment() -> Vec<u8> {
    [
        &V1_SEGMENT_HEADER_FIRST_INDEX_1[..],
        &V1_RECORD_1_HELLO,
        &V1_RECORD_2_AB_CONTINUES,
        &V1_RECORD_3_EMPTY,
    ]
    .concat()
}

fn the_three_records() -> Vec<(u64, Vec<u8>)> {
    vec![(1, b"hello".to_vec()), (2, b"ab".to_vec()), (3, Vec::new())]
}

/// A log directory holding `segment` as its only segment, `00000000000000000001.wal`.
fn log_of(prefix: &str, segment: &[u8]) -> tempfile::TempDir {
    let dir = mem_dir(prefix);
    fs::write(dir.path().join("00000000000000000001.wal"), segment).expect("write");
    dir
}

fn opts(dir: &std::path::Path) -> wal::WalOptions {
    let mut opts = options(dir, 4096, Durability::None);
    opts.preallocate = false;
    opts
}

#[test]
fn segment_header_bytes() {
    assert_eq!(encode_segment_header(1), SEGMENT_HEADER_FIRST_INDEX_1);
    assert_eq!(
        decode_segment_header(&SEGMENT_HEADER_FIRST_INDEX_1),
        Ok(SegmentHeader {
            first_index: 1,
            version: Version::V2
        })
    );
    assert_eq!(
        decode_segment_header(&V1_SEGMENT_HEADER_FIRST_INDEX_1),
        Ok(SegmentHeader {
            first_index: 1,
            version: Version::V1
        })
    );
}

#[test]
fn record_bytes() {
    assert_eq!(
        encode_record_header(1, 1, b"hello", false),
        RECORD_1_HELLO[..24]
    );
    assert_eq!(
        encode_record_header(2, 2, b"ab", true),
        RECORD_2_AB_CONTINUES[..24]
    );
    assert_eq!(encode_record_header(3, 2, b"", false), RECORD_3_EMPTY);

    match decode_record(&RECORD_2_AB_CONTINUES, 0, Version::V2) {
        Decoded::Record(r) => {
            assert_eq!(
                (r.index, r.payload, r.continues, r.batch_first),
                (2, &b"ab"[..], true, Some(2))
            );
        }
        other => panic!("golden record did not decode: {other:?}"),
    }
    match decode_record(&V1_RECORD_2_AB_CONTINUES, 0, Version::V1) {
        Decoded::Record(r) => {
            assert_eq!(
                (r.index, r.payload, r.continues, r.batch_first),
                (2, &b"ab"[..], true, None)
            );
        }
        other => panic!("golden version-1 record did not decode: {other:?}"),
    }
}

/// The whole file a log writes, byte for byte, and a log opened from those hard-coded bytes.
#[test]
fn segment_file_bytes() {
    let expected = v2_segment();
    // Through the page cache the file ends with the last record; with O_DIRECT the last block
    // is padded with zeroes, which the format allows after the last record.
    for direct_io in [false, true] {
        let dir = mem_dir("wal-golden");
        let mut opts = opts(dir.path());
        opts.direct_io = direct_io;
        let wal = Wal::open(opts.clone()).expect("open");
        assert_eq!(wal.append(b"hello").expect("append"), 1);
        assert_eq!(wal.append_batch(&[b"ab", b""]).expect("append_batch"), 2);
        wal.sync().expect("sync");
        drop(wal);
        let files = segment_files(dir.path());
        assert_eq!(files.len(), 1);
        assert_eq!(
            files[0].file_name().expect("name"),
            "00000000000000000001.wal"
        );
        let mut bytes = fs::read(&files[0]).expect("read");
        if direct_io {
            assert_eq!(bytes.len(), 4096, "one padded block");
            assert!(bytes[expected.len()..].iter().all(|&b| b == 0));
            bytes.truncate(expected.len());
        }
        assert_eq!(bytes, expected, "direct_io {direct_io}");
    }

    let dir = log_of("wal-golden-read", &expected);
    let wal = Wal::open(opts(dir.path())).expect("open golden");
    assert_eq!(read_all(&wal).expect("read"), the_three_records());
    assert_eq!(wal.next_index(), 4);
}

/// A log whose last segment is of version 1 opens and reads; the segment is sealed as it is and
/// appends go to a new segment of version 2.
#[test]
fn version_1_segment_is_read_and_sealed() {
    let dir = log_of("wal-golden-v1", &v1_segment());
    let wal = Wal::open(opts(dir.path())).expect("open version 1");
    assert_eq!(read_all(&wal).expect("read"), the_three_records());
    assert_eq!(wal.append(b"four").expect("append"), 4);
    assert_eq!(wal.append_batch(&[b"five", b"six"]).expect("batch"), 5);
    wal.sync().expect("sync");
    drop(wal);

    let files = segment_files(dir.path());
    assert_eq!(files.len(), 2);
    assert_eq!(fs::read(&files[0]).expect("read"), v1_segment());
    assert_eq!(
        files[1].file_name().expect("name"),
        "00000000000000000004.wal"
    );
    let mut expected = encode_segment_header(4).to_vec();
    for (index, batch_first, payload, continues) in [
        (4, 4, &b"four"[..], false),
        (5, 5, b"five", true),
        (6, 5, b"six", false),
    ] {
        expected.extend_from_slice(&encode_record_header(
            index,
            batch_first,
            payload,
            continues,
        ));
        expected.extend_from_slice(payload);
    }
    assert_eq!(fs::read(&files[1]).expect("read"), expected);

    let wal = Wal::open(opts(dir.path())).expect("reopen");
    let mut all = the_three_records();
    all.extend([
        (4, b"four".to_vec()),
        (5, b"five".to_vec()),
        (6, b"six".to_vec()),
    ]);
    assert_eq!(read_all(&wal).expect("read"), all);
}

/// A version-1 segment without records is replaced by a version-2 one under the same name.
#[test]
fn empty_version_1_segment_is_replaced() {
    let mut empty = V1_SEGMENT_HEADER_FIRST_INDEX_1.to_vec();
    empty.resize(4096, 0);
    let dir = log_of("wal-golden-v1-empty", &empty);
    let wal = Wal::open(opts(dir.path())).expect("open version 1");
    assert_eq!((wal.first_index(), wal.next_index()), (1, 1));
    assert_eq!(wal.append(b"hello").expect("append"), 1);
    drop(wal);
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 1);
    let bytes = fs::read(&files[0]).expect("read");
    assert_eq!(bytes[..SEGMENT_HEADER_BYTES], SEGMENT_HEADER_FIRST_INDEX_1);
    assert_eq!(bytes[SEGMENT_HEADER_BYTES..][..29], RECORD_1_HELLO);
}

/// Record 2 is lost and record 3, the rest of its batch, survives. Version 2 records name their
/// batch, so that is the torn last batch and is dropped; version 1 records do not, so record 3
/// could as well be a later batch, and the log reports corruption.
#[test]
fn only_version_2_tells_the_rest_of_a_torn_batch() {
    let mut v2 = v2_segment();
    let second = SEGMENT_HEADER_BYTES + RECORD_1_HELLO.len();
    v2[second..second + RECORD_2_AB_CONTINUES.len()].fill(0);
    let dir = log_of("wal-golden-torn-v2", &v2);
    let wal = Wal::open(opts(dir.path())).expect("a torn last batch");
    assert_eq!(read_all(&wal).expect("read"), vec![(1, b"hello".to_vec())]);

    let mut v1 = v1_segment();
    let second = SEGMENT_HEADER_BYTES + V1_RECORD_1_HELLO.len();
    v1[second..second + V1_RECORD_2_AB_CONTINUES.len()].fill(0);
    let dir = log_of("wal-golden-torn-v1", &v1);
    match Wal::open(opts(dir.path())) {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, second as u64),
        Err(other) => panic!("expected corruption, got {other}"),
        Ok(_) => panic!("expected corruption, got Ok"),
    }
}
