//! Golden vectors: the exact bytes of a segment header and of records, hard-coded. If one of
//! these fails, the on-disk format changed: bump the format version and keep reading version 1.

use std::fs;

use wal::format::{
    decode_record, decode_segment_header, encode_record_header, encode_segment_header, Decoded,
};
use wal::{Durability, Wal};

use crate::util::{mem_dir, options, read_all, segment_files};

const SEGMENT_HEADER_FIRST_INDEX_1: [u8; 32] = [
    0x46, 0x50, 0x57, 0x41, 0x4c, 0x53, 0x45, 0x47, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xbf, 0xe4, 0x00, 0xb1,
];

/// Record 1, payload "hello", a single append.
const RECORD_1_HELLO: [u8; 21] = [
    0x2f, 0x95, 0xe5, 0x10, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

/// Record 2, payload "ab", first of a batch of two: bit 31 of the length word is set.
const RECORD_2_AB_CONTINUES: [u8; 18] = [
    0x5a, 0x02, 0x9b, 0x9c, 0x02, 0x00, 0x00, 0x80, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x61, 0x62,
];

/// Record 3, empty payload, last of that batch.
const RECORD_3_EMPTY: [u8; 16] = [
    0x8c, 0xc1, 0x5a, 0xf5, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

#[test]
fn segment_header_bytes() {
    assert_eq!(encode_segment_header(1), SEGMENT_HEADER_FIRST_INDEX_1);
    assert_eq!(decode_segment_header(&SEGMENT_HEADER_FIRST_INDEX_1), Ok(1));
}

#[test]
fn record_bytes() {
    assert_eq!(
        encode_record_header(1, b"hello", false),
        RECORD_1_HELLO[..16]
    );
    assert_eq!(
        encode_record_header(2, b"ab", true),
        RECORD_2_AB_CONTINUES[..16]
    );
    assert_eq!(encode_record_header(3, b"", false), RECORD_3_EMPTY);

    match decode_record(&RECORD_2_AB_CONTINUES, 0) {
        Decoded::Record(r) => {
            assert_eq!((r.index, r.payload, r.continues), (2, &b"ab"[..], true));
        }
        other => panic!("golden record did not decode: {other:?}"),
    }
}

/// The whole file a log writes, byte for byte, and a log opened from those hard-coded bytes.
#[test]
fn segment_file_bytes() {
    let mut expected = SEGMENT_HEADER_FIRST_INDEX_1.to_vec();
    expected.extend_from_slice(&RECORD_1_HELLO);
    expected.extend_from_slice(&RECORD_2_AB_CONTINUES);
    expected.extend_from_slice(&RECORD_3_EMPTY);

    // Through the page cache the file ends with the last record; with O_DIRECT the last block
    // is padded with zeroes, which the format allows after the last record.
    for direct_io in [false, true] {
        let dir = mem_dir("wal-golden");
        let mut opts = options(dir.path(), 4096, Durability::None);
        opts.preallocate = false;
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

    let dir2 = mem_dir("wal-golden-read");
    fs::write(dir2.path().join("00000000000000000001.wal"), &expected).expect("write");
    let mut opts2 = options(dir2.path(), 4096, Durability::None);
    opts2.preallocate = false;
    let wal = Wal::open(opts2).expect("open golden");
    assert_eq!(
        read_all(&wal).expect("read"),
        vec![(1, b"hello".to_vec()), (2, b"ab".to_vec()), (3, Vec::new())]
    );
    assert_eq!(wal.next_index(), 4);
}
