//! The on-disk byte layout. `docs/wal-format.md` describes the same layout in prose; the golden
//! vectors in `tests/it/golden.rs` pin it.
//!
//! Every integer is little-endian with an explicit width. A segment file is a 32-byte header
//! followed by records back to back, followed by zeroes (preallocated space) up to the end of the
//! file. The segment header's format version decides the record layout: version 2 (written) has a
//! 24-byte record header that names the first index of the record's batch, version 1 (still read)
//! a 16-byte one that does not.

/// First eight bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"FPWALSEG";
/// The format version this build writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 2;
/// Size of the segment header.
pub const SEGMENT_HEADER_BYTES: usize = 32;
/// Size of the record header this build writes (format version 2).
pub const RECORD_HEADER_BYTES: usize = 24;
/// Size of a record header of format version 1.
pub const RECORD_HEADER_BYTES_V1: usize = 16;
/// Bit 31 of a record's length word: another record of the same batch follows this one.
pub const CONTINUES_FLAG: u32 = 1 << 31;
/// Largest payload the length word can express (bits 0..=30).
pub const RECORD_PAYLOAD_BYTES_LIMIT: u32 = CONTINUES_FLAG - 1;

/// A format version this build reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Records do not name their batch: after a hole in the last segment, recovery cannot tell
    /// the rest of a torn batch from a later batch, and reports either as corruption.
    V1,
    /// Every record names the first index of its batch (bytes 16..24 of its header).
    V2,
}

impl Version {
    /// The version this build writes.
    pub const CURRENT: Version = Version::V2;

    /// The version with this number, if this build reads it.
    pub fn from_number(number: u32) -> Option<Version> {
        match number {
            1 => Some(Version::V1),
            2 => Some(Version::V2),
            _ => None,
        }
    }

    /// The number stored in a segment header.
    pub fn number(self) -> u32 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
        }
    }

    /// Size of a record header in this version.
    pub fn record_header_bytes(self) -> usize {
        match self {
            Version::V1 => RECORD_HEADER_BYTES_V1,
            Version::V2 => RECORD_HEADER_BYTES,
        }
    }
}

/// What a valid segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Index of the segment's first record.
    pub first_index: u64,
    /// Format version of the segment's records.
    pub version: Version,
}

/// Encodes the header of a segment whose first record has index `first_index`, in the current
/// format version.
pub fn encode_segment_header(first_index: u64) -> [u8; SEGMENT_HEADER_BYTES] {
    assert!(
        first_index >= 1,
        "record indexes start at 1, got {first_index}"
    );
    let mut header = [0u8; SEGMENT_HEADER_BYTES];
    header[0..8].copy_from_slice(&SEGMENT_MAGIC);
    header[8..12].copy_from_slice(&Version::CURRENT.number().to_le_bytes());
    // 12..16 reserved, zero.
    header[16..24].copy_from_slice(&first_index.to_le_bytes());
    // 24..28 reserved, zero.
    let crc = crc32fast::hash(&header[0..28]);
    header[28..32].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Why a segment header was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentHeaderProblem {
    /// The file is shorter than a header.
    Short(usize),
    /// Wrong magic, bad checksum, non-zero reserved bytes or a zero first index.
    Invalid(String),
    /// A well-formed header of another format version.
    Version(u32),
}

/// Decodes a segment header.
pub fn decode_segment_header(bytes: &[u8]) -> Result<SegmentHeader, SegmentHeaderProblem> {
    if bytes.len() < SEGMENT_HEADER_BYTES {
        return Err(SegmentHeaderProblem::Short(bytes.len()));
    }
    let header = &bytes[..SEGMENT_HEADER_BYTES];
    if header[0..8] != SEGMENT_MAGIC {
        return Err(SegmentHeaderProblem::Invalid(format!(
            "bad segment magic {:02x?}",
            &header[0..8]
        )));
    }
    let stored_crc = read_u32(header, 28);
    let computed_crc = crc32fast::hash(&header[0..28]);
    if stored_crc != computed_crc {
        return Err(SegmentHeaderProblem::Invalid(format!(
            "segment header crc stored {stored_crc:#010x}, computed {computed_crc:#010x}"
        )));
    }
    let number = read_u32(header, 8);
    let Some(version) = Version::from_number(number) else {
        return Err(SegmentHeaderProblem::Version(number));
    };
    if read_u32(header, 12) != 0 || read_u32(header, 24) != 0 {
        return Err(SegmentHeaderProblem::Invalid(
            "non-zero reserved bytes in segment header".to_string(),
        ));
    }
    let first_index = read_u64(header, 16);
    if first_index == 0 {
        return Err(SegmentHeaderProblem::Invalid(
            "segment first index is 0".to_string(),
        ));
    }
    Ok(SegmentHeader {
        first_index,
        version,
    })
}

/// Encodes the 24-byte header of a record (format version 2). `batch_first` is the index of the
/// first record of the record's batch, and `continues` marks every record of a batch but its
/// last: recovery drops a batch that a crash tore as a whole, and tells the rest of a torn batch
/// from a later batch by `batch_first`.
pub fn encode_record_header(
    index: u64,
    batch_first: u64,
    payload: &[u8],
    continues: bool,
) -> [u8; RECORD_HEADER_BYTES] {
    let payload_bytes = u32::try_from(payload.len())
        .ok()
        .filter(|&n| n <= RECORD_PAYLOAD_BYTES_LIMIT)
        .unwrap_or_else(|| panic!("payload of {} bytes passed the size check", payload.len()));
    assert!(index >= 1, "record indexes start at 1, got {index}");
    assert!(
        (1..=index).contains(&batch_first),
        "record {index} names batch first index {batch_first}"
    );
    let length_word = payload_bytes | if continues { CONTINUES_FLAG } else { 0 };
    let mut header = [0u8; RECORD_HEADER_BYTES];
    header[4..8].copy_from_slice(&length_word.to_le_bytes());
    header[8..16].copy_from_slice(&index.to_le_bytes());
    header[16..24].copy_from_slice(&batch_first.to_le_bytes());
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[4..]);
    hasher.update(payload);
    header[0..4].copy_from_slice(&hasher.finalize().to_le_bytes());
    header
}

/// Encoded size of a record with `payload_bytes` of payload, in the current format version.
pub fn record_encoded_bytes(payload_bytes: usize) -> u64 {
    RECORD_HEADER_BYTES as u64 + payload_bytes as u64
}

/// A record decoded from a byte slice; `payload` borrows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The record's index.
    pub index: u64,
    /// The payload bytes.
    pub payload: &'a [u8],
    /// Another record of the same batch follows.
    pub continues: bool,
    /// Index of the first record of the record's batch; `None` in format version 1, whose
    /// records do not say.
    pub batch_first: Option<u64>,
    /// Size of the record's header.
    pub header_bytes: usize,
}

impl RecordView<'_> {
    /// Bytes the record occupies in the segment.
    pub fn encoded_bytes(&self) -> usize {
        self.header_bytes + self.payload.len()
    }
}

/// The outcome of decoding at one offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A record whose checksum holds.
    Record(RecordView<'a>),
    /// A zero record header, or fewer bytes left than a header that are all zero: the end of the
    /// written part of a segment. No valid record is all zero, because its index is at least 1.
    End,
    /// Anything else: a torn or corrupted record. The string says what check failed.
    Bad(String),
}

/// Decodes the record of format `version` at `offset` in `data`. Does not check the index or
/// the batch against expected values; callers do, because what a mismatch means depends on
/// where they are.
pub fn decode_record(data: &[u8], offset: usize, version: Version) -> Decoded<'_> {
    let header_bytes = version.record_header_bytes();
    let rest = &data[offset.min(data.len())..];
    if rest.len() < header_bytes {
        return if rest.iter().all(|&b| b == 0) {
            Decoded::End
        } else {
            Decoded::Bad(format!(
                "record header cut short: {} of {header_bytes} bytes",
                rest.len()
            ))
        };
    }
    let header = &rest[..header_bytes];
    if header.iter().all(|&b| b == 0) {
        return Decoded::End;
    }
    let stored_crc = read_u32(header, 0);
    let length_word = read_u32(header, 4);
    let index = read_u64(header, 8);
    let payload_bytes = (length_word & !CONTINUES_FLAG) as usize;
    let available = rest.len() - header_bytes;
    if payload_bytes > available {
        return Decoded::Bad(format!(
            "record length {payload_bytes} exceeds the {available} bytes left in the segment"
        ));
    }
    let payload = &rest[header_bytes..header_bytes + payload_bytes];
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[4..]);
    hasher.update(payload);
    let computed_crc = hasher.finalize();
    if stored_crc != computed_crc {
        return Decoded::Bad(format!(
            "record crc stored {stored_crc:#010x}, computed {computed_crc:#010x}"
        ));
    }
    if index == 0 {
        return Decoded::Bad("record index 0".to_string());
    }
    let batch_first = match version {
        Version::V1 => None,
        Version::V2 => {
            let batch_first = read_u64(header, 16);
            if !(1..=index).contains(&batch_first) {
                return Decoded::Bad(format!(
                    "record {index} names batch first index {batch_first}"
                ));
            }
            Some(batch_first)
        }
    };
    Decoded::Record(RecordView {
        index,
        payload,
        continues: length_word & CONTINUES_FLAG != 0,
        batch_first,
        header_bytes,
    })
}

/// Looks for a valid record of format `version` starting anywhere in `data[from..]` whose index
/// is at least `index_min`, and returns its offset and the record. Recovery calls it after the
/// place where the scan of the last segment stopped, to tell a torn tail from damage in the
/// middle of the log.
///
/// A record's index field is non-zero, so a candidate start `q` needs a non-zero byte in
/// `q + 8 .. q + 16`; runs of zeroes (preallocated space) are skipped word by word.
pub fn find_valid_record(
    data: &[u8],
    from: usize,
    index_min: u64,
    version: Version,
) -> Option<(usize, RecordView<'_>)> {
    let header_bytes = version.record_header_bytes();
    let mut q = from;
    while q + header_bytes <= data.len() {
        // Bytes 8..16 of a record header, in every version, hold the non-zero index.
        let z = next_nonzero(data, q + 8)?;
        if z >= q + 16 {
            q = z - 15;
            continue;
        }
        // Cheap filters before the checksum: the index must be plausible for what could follow
        // and the length must fit in the file.
        let index = read_u64(data, q + 8);
        let remaining_records = ((data.len() - q) / header_bytes) as u64;
        if index >= index_min && index - index_min <= remaining_records {
            if let Decoded::Record(record) = decode_record(data, q, version) {
                return Some((q, record));
            }
        }
        q += 1;
    }
    None
}

/// Offset of the first non-zero byte at or after `from`.
fn next_nonzero(data: &[u8], from: usize) -> Option<usize> {
    if from >= data.len() {
        return None;
    }
    let rest = &data[from..];
    let mut chunks = rest.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunk of 8"));
        if word != 0 {
            return Some(from + base + (word.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b != 0)
        .map(|i| from + base + i)
}

pub(crate) fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let payload = b"payload bytes";
        let mut data = encode_record_header(7, 5, payload, true).to_vec();
        data.extend_from_slice(payload);
        data.extend_from_slice(&[0u8; 40]);
        match decode_record(&data, 0, Version::V2) {
            Decoded::Record(r) => {
                assert_eq!(r.index, 7);
                assert_eq!(r.batch_first, Some(5));
                assert_eq!(r.payload, payload);
                assert!(r.continues);
                assert_eq!(r.encoded_bytes(), 24 + payload.len());
                assert_eq!(
                    decode_record(&data, r.encoded_bytes(), Version::V2),
                    Decoded::End
                );
            }
            other => panic!("expected a record, got {other:?}"),
        }
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let payload = b"0123456789";
        let mut data = encode_record_header(3, 2, payload, false).to_vec();
        data.extend_from_slice(payload);
        for bit in 0..data.len() * 8 {
            let mut flipped = data.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            if let Decoded::Record(r) = decode_record(&flipped, 0, Version::V2) {
                panic!("flip of bit {bit} decoded as {r:?}");
            }
        }
    }

    #[test]
    fn short_tails() {
        for version in [Version::V1, Version::V2] {
            assert_eq!(decode_record(&[0u8; 5], 0, version), Decoded::End);
            assert_eq!(decode_record(&[0u8; 20], 0, version), Decoded::End);
            assert_eq!(decode_record(&[], 0, version), Decoded::End);
            assert!(matches!(
                decode_record(&[0, 0, 1], 0, version),
                Decoded::Bad(_)
            ));
        }
    }

    #[test]
    fn batch_first_is_checked_when_decoding() {
        // A header whose checksum holds but whose batch starts after the record.
        let mut header = encode_record_header(4, 4, b"", false);
        header[16..24].copy_from_slice(&5u64.to_le_bytes());
        let crc = crc32fast::hash(&header[4..]);
        header[0..4].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            decode_record(&header, 0, Version::V2),
            Decoded::Bad(reason) if reason.contains("batch first index 5")
        ));
    }

    #[test]
    fn version_1_records_have_no_batch() {
        // Record 1, payload "hello", as format version 1 wrote it.
        let bytes = [
            0x2f, 0x95, 0xe5, 0x10, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
        ];
        match decode_record(&bytes, 0, Version::V1) {
            Decoded::Record(r) => {
                assert_eq!(
                    (r.index, r.payload, r.batch_first),
                    (1, &b"hello"[..], None)
                );
                assert_eq!(r.encoded_bytes(), bytes.len());
            }
            other => panic!("expected a record, got {other:?}"),
        }
        assert!(matches!(
            decode_record(&bytes, 0, Version::V2),
            Decoded::Bad(_)
        ));
    }

    #[test]
    fn segment_header_round_trip_and_rejects() {
        let header = encode_segment_header(42);
        assert_eq!(
            decode_segment_header(&header),
            Ok(SegmentHeader {
                first_index: 42,
                version: Version::V2
            })
        );
        assert_eq!(
            decode_segment_header(&header[..10]),
            Err(SegmentHeaderProblem::Short(10))
        );
        let mut bad = header;
        bad[0] ^= 1;
        assert!(matches!(
            decode_segment_header(&bad),
            Err(SegmentHeaderProblem::Invalid(_))
        ));
        let with_version = |number: u32| {
            let mut h = header;
            h[8..12].copy_from_slice(&number.to_le_bytes());
            let crc = crc32fast::hash(&h[0..28]);
            h[28..32].copy_from_slice(&crc.to_le_bytes());
            h
        };
        assert_eq!(
            decode_segment_header(&with_version(1)).map(|h| h.version),
            Ok(Version::V1)
        );
        for number in [0, 3] {
            assert_eq!(
                decode_segment_header(&with_version(number)),
                Err(SegmentHeaderProblem::Version(number))
            );
        }
    }

    #[test]
    fn find_valid_record_skips_zeroes_and_garbage() {
        let payload = b"xyz";
        let mut data = vec![0u8; 1000];
        data[100..110].copy_from_slice(&[0xAB; 10]);
        let header = encode_record_header(5, 3, payload, false);
        data[777..801].copy_from_slice(&header);
        data[801..804].copy_from_slice(payload);
        let found = find_valid_record(&data, 0, 5, Version::V2).map(|(at, r)| (at, r.index));
        assert_eq!(found, Some((777, 5)));
        assert!(find_valid_record(&data, 0, 6, Version::V2).is_none());
        assert!(find_valid_record(&data, 778, 1, Version::V2).is_none());
        assert!(find_valid_record(&data, 0, 1, Version::V1).is_none());
        assert_eq!(next_nonzero(&data, 0), Some(100));
        assert_eq!(next_nonzero(&data, 804), None);
    }
}
