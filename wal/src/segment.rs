//! Segment files: naming, creation, header checks and recovery of the last segment.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use memmap2::{Mmap, MmapOptions};

use crate::error::{Error, Result};
use crate::format::{
    self, decode_record, decode_segment_header, Decoded, RecordView, SegmentHeader,
    SegmentHeaderProblem, Version, FORMAT_VERSION, SEGMENT_HEADER_BYTES,
};
use crate::spare::Spare;
use crate::sys;

pub(crate) use crate::names::{SEGMENT_SUFFIX, TEMP_SUFFIX};

/// `{first_index:020}.wal`: zero-padded so names sort like indexes.
pub(crate) fn segment_file_name(first_index: u64) -> String {
    format!("{first_index:020}{SEGMENT_SUFFIX}")
}

/// The first index encoded in a segment file name, or None if it is not one.
pub(crate) fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&i| i >= 1)
}

/// One segment file, open for reading and (if it is the active one) writing.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) first_index: u64,
    /// Format version of the segment's records; the log appends only to segments of
    /// [`Version::CURRENT`].
    pub(crate) version: Version,
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    /// Map of the whole file, created on first read once the segment is sealed. Sealed segments
    /// never change, so one map serves every reader for the segment's lifetime.
    sealed_map: OnceLock<Arc<Mmap>>,
    /// Where records start, at least `WalOptions::seek_stride_bytes` apart and sorted, so a reader that
    /// starts mid-segment checks at most a stride of records before its own instead of the whole
    /// segment (a raft follower catching up reads the log a message at a time).
    seek_points: parking_lot::Mutex<Vec<SeekPoint>>,
}

/// Where a record starts in its segment, and where its batch starts: all a reader needs to start
/// there with the checks it makes from the segment's first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeekPoint {
    pub(crate) index: u64,
    pub(crate) offset: usize,
    pub(crate) batch_first: u64,
}

impl Segment {
    /// Opens an existing segment and checks its header against the first index in its name.
    pub(crate) fn open(path: PathBuf, name_index: u64) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let mut header = [0u8; SEGMENT_HEADER_BYTES];
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        let have = (len as usize).min(SEGMENT_HEADER_BYTES);
        file.read_exact_at(&mut header[..have], 0)
            .map_err(|e| Error::io(&path, e))?;
        let SegmentHeader {
            first_index,
            version,
        } = check_header(&path, &header[..have])?;
        if first_index != name_index {
            return Err(Error::corruption(
                &path,
                16,
                format!(
                    "header first index {first_index} does not match the file name ({name_index})"
                ),
            ));
        }
        Ok(Segment {
            first_index,
            version,
            path,
            file,
            sealed_map: OnceLock::new(),
            seek_points: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// Creates segment `first_index` in `dir` so that it appears under its final name only with a
    /// durable, valid header: write the header to a temporary file, preallocate, fdatasync, rename,
    /// fsync the directory. A crash therefore never leaves a named segment with a torn header.
    pub(crate) fn create(
        dir: &Path,
        dir_file: &File,
        first_index: u64,
        preallocate_bytes: Option<u64>,
    ) -> Result<Segment> {
        let temp_path = dir.join(format!("{first_index:020}{TEMP_SUFFIX}"));
        let file = sys::open(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true),
            &temp_path,
        )
        .map_err(|e| Error::opening(&temp_path, e))?;
        Segment::install(
            dir,
            dir_file,
            first_index,
            file,
            &temp_path,
            preallocate_bytes,
        )
    }

    /// Makes `spare` (a zero-filled, durable file in `dir`) the segment whose first record has
    /// index `first_index`: header, fdatasync, rename, directory fsync, as [`Segment::create`].
    pub(crate) fn from_spare(
        dir: &Path,
        dir_file: &File,
        first_index: u64,
        spare: Spare,
    ) -> Result<Segment> {
        Segment::install(dir, dir_file, first_index, spare.file, &spare.path, None)
    }

    /// Writes the header into `file` (at `temp_path`), preallocates, makes both durable, and
    /// only then gives the file its segment name and makes the name durable.
    fn install(
        dir: &Path,
        dir_file: &File,
        first_index: u64,
        file: File,
        temp_path: &Path,
        preallocate_bytes: Option<u64>,
    ) -> Result<Segment> {
        let path = dir.join(segment_file_name(first_index));
        let header = format::encode_segment_header(first_index);
        file.write_all_at(&header, 0)
            .map_err(|e| Error::io(temp_path, e))?;
        if let Some(bytes) = preallocate_bytes {
            sys::preallocate(&file, bytes).map_err(|e| Error::io(temp_path, e))?;
        }
        sys::fdatasync(&file, temp_path).map_err(|e| Error::io(temp_path, e))?;
        fs::rename(temp_path, &path).map_err(|e| Error::io(&path, e))?;
        sys::fsync_dir(dir_file, dir).map_err(|e| Error::io(dir, e))?;
        Ok(Segment {
            first_index,
            version: Version::CURRENT,
            path,
            file,
            sealed_map: OnceLock::new(),
            seek_points: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// A map of the first `len` bytes, for reading the active segment. Only bytes below `len`
    /// are read through it, and those were fully written before `len` was published.
    /// Notes the seek points among `points` (ascending, each a whole record that stays in the
    /// log) that lie `stride` bytes past the last one noted; points only ever grow. Returns the
    /// offset from which the next point would be taken.
    pub(crate) fn note_seek_points(
        &self,
        stride: usize,
        points: impl IntoIterator<Item = SeekPoint>,
    ) -> usize {
        let mut noted = self.seek_points.lock();
        let mut next = noted
            .last()
            .map_or(SEGMENT_HEADER_BYTES, |p| p.offset + stride);
        for point in points {
            if point.offset >= next {
                noted.push(point);
                next = point.offset + stride;
            }
        }
        next
    }

    /// The last seek point at or before record `index`.
    pub(crate) fn seek_point(&self, index: u64) -> Option<SeekPoint> {
        let noted = self.seek_points.lock();
        let after = noted.partition_point(|p| p.index <= index);
        after.checked_sub(1).map(|i| noted[i])
    }

    pub(crate) fn map_prefix(&self, len: u64) -> Result<Mmap> {
        // SAFETY: the log only appends to a segment file and never truncates one while it is
        // open (recovery zeroes a torn tail before any reader exists). Bytes below `len` were
        // written before `len` was published to readers, so they do not change under the map.
        unsafe { MmapOptions::new().len(len as usize).map(&self.file) }
            .map_err(|e| Error::io(&self.path, e))
    }

    /// The shared map of a sealed segment.
    pub(crate) fn sealed_map(&self) -> Result<Arc<Mmap>> {
        if let Some(map) = self.sealed_map.get() {
            return Ok(Arc::clone(map));
        }
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io(&self.path, e))?
            .len();
        let map = Arc::new(self.map_prefix(len)?);
        // Another reader may have raced us; either map is fine.
        Ok(Arc::clone(self.sealed_map.get_or_init(|| map)))
    }
}

fn check_header(path: &Path, header: &[u8]) -> Result<SegmentHeader> {
    decode_segment_header(header).map_err(|problem| match problem {
        SegmentHeaderProblem::Short(n) => Error::corruption(
            path,
            0,
            format!("segment header cut short: {n} of {SEGMENT_HEADER_BYTES} bytes"),
        ),
        SegmentHeaderProblem::Invalid(reason) => Error::corruption(path, 0, reason),
        SegmentHeaderProblem::Version(version) => Error::UnsupportedVersion {
            segment: path.to_path_buf(),
            version,
            supported: FORMAT_VERSION,
        },
    })
}

/// Where appends continue after recovering the last segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Index of the next record.
    pub(crate) next_index: u64,
    /// Byte offset in the segment where the next record goes.
    pub(crate) write_offset: u64,
}

/// Scans the last segment, finds the end of the valid records and makes the tail after them
/// zero again.
///
/// The scan stops at the first place that is not the next valid record: a zero header (the end of
/// the written part), a record cut short by the end of the file, a checksum failure. The log ends
/// after the last record whose batch is whole: a batch was never acknowledged unless all of it
/// was written, so a batch whose last record is missing is dropped with it.
///
/// Valid records may lie after the place where the scan stopped, because the blocks of one write
/// reach the disk in any order: a crash during the write of the last batch can lose a block
/// and keep later ones. Such records are the rest of that torn batch, and are dropped with it, if
/// every one of them names the batch the scan stopped in as theirs (format version 2). Any other
/// valid record after the stop is corruption: it belongs to a later batch, written after the
/// damaged bytes and perhaps synced with them, so dropping it could drop acknowledged records.
/// Format version 1 records do not name their batch, so there any valid record after the stop
/// is corruption.
pub(crate) fn recover_last_segment(segment: &Segment, seek_stride: usize) -> Result<Recovered> {
    let path = &segment.path;
    let version = segment.version;
    let len = segment
        .file
        .metadata()
        .map_err(|e| Error::io(path, e))?
        .len();
    let map = segment.map_prefix(len)?;
    let data: &[u8] = &map;
    let mut offset = SEGMENT_HEADER_BYTES;
    let mut expected = segment.first_index;
    // Where the batch being scanned started; the log ends there unless the batch is whole.
    let mut committed = Recovered {
        next_index: expected,
        write_offset: offset as u64,
    };
    // Seek points of the batch being scanned, noted once the batch turns out whole.
    let mut batch_points = Vec::new();
    let stop_reason: Option<String> = loop {
        match decode_record(data, offset, version) {
            Decoded::Record(record) if record.index == expected => {
                batch_points.push(SeekPoint {
                    index: expected,
                    offset,
                    batch_first: committed.next_index,
                });
                if let Some(batch_first) = record.batch_first {
                    if batch_first != committed.next_index {
                        return Err(Error::corruption(
                            path,
                            offset as u64,
                            format!(
                                "record {expected} names a batch from index {batch_first}, but \
                                 its batch starts at {}",
                                committed.next_index
                            ),
                        ));
                    }
                }
                offset += record.encoded_bytes();
                expected += 1;
                if !record.continues {
                    committed = Recovered {
                        next_index: expected,
                        write_offset: offset as u64,
                    };
                    segment.note_seek_points(seek_stride, batch_points.drain(..));
                }
            }
            Decoded::Record(record) => {
                // A checksummed record with the wrong index is never a torn write: torn bytes do
                // not pass the checksum. Something else wrote here.
                return Err(Error::corruption(
                    path,
                    offset as u64,
                    format!(
                        "record index {} where {expected} was expected",
                        record.index
                    ),
                ));
            }
            Decoded::End => break None,
            Decoded::Bad(reason) => break Some(reason),
        }
    };
    let torn_batch_survivors = check_rest_is_torn_batch(segment, data, offset, expected, committed)
        .map_err(|found| {
            let what = stop_reason
                .clone()
                .unwrap_or_else(|| "zero record header".to_string());
            Error::corruption(path, offset as u64, format!("{what}, but {found}"))
        })?;
    let tail_end = last_nonzero(data, committed.write_offset as usize).map(|i| i + 1);
    drop(map);
    if let Some(tail_end) = tail_end {
        // The torn bytes must not survive: later appends may write fewer bytes than were torn,
        // and leftover records behind them would look like mid-log damage to the next recovery.
        let dropped_records = expected - committed.next_index;
        tracing::warn!(
            segment = %path.display(),
            offset = committed.write_offset,
            bytes = tail_end as u64 - committed.write_offset,
            dropped_records,
            torn_batch_survivors,
            reason = stop_reason.as_deref().unwrap_or("incomplete batch"),
            "truncating torn tail of the log"
        );
        sys::write_zeroes(
            &segment.file,
            committed.write_offset,
            tail_end as u64 - committed.write_offset,
        )
        .map_err(|e| Error::io(path, e))?;
    }
    Ok(committed)
}

/// Checks that every valid record after `stop`, where the scan of the last segment stopped
/// expecting record `expected`, is a later record of the batch that starts at
/// `committed.next_index`: the rest of a batch torn by a crash during its write. Returns how many
/// there are, or a description of the first record that is not one.
fn check_rest_is_torn_batch(
    segment: &Segment,
    data: &[u8],
    stop: usize,
    expected: u64,
    committed: Recovered,
) -> std::result::Result<u64, String> {
    let torn_batch = committed.next_index;
    let mut from = stop;
    let mut index_min = expected;
    let mut survivors = 0;
    // Set once a record of the torn batch says it is the batch's last.
    let mut torn_batch_last: Option<u64> = None;
    while let Some((at, record)) = format::find_valid_record(data, from, index_min, segment.version)
    {
        let RecordView {
            index,
            batch_first,
            continues,
            ..
        } = record;
        match (batch_first, torn_batch_last) {
            (None, _) => {
                return Err(format!(
                    "a valid record with index {index} follows at byte {at} (format version {} \
                     records do not name their batch, so it cannot be the rest of a torn one)",
                    segment.version.number()
                ))
            }
            (Some(batch_first), None) if batch_first == torn_batch => {}
            (Some(batch_first), None) => {
                return Err(format!(
                    "record {index} of the batch from index {batch_first} follows at byte {at}, \
                     and only the rest of the torn batch from index {torn_batch} may"
                ))
            }
            (Some(_), Some(last)) => {
                return Err(format!(
                    "record {index} follows at byte {at}, after record {last}, the last of the \
                     torn batch from index {torn_batch}"
                ))
            }
        }
        if !continues {
            torn_batch_last = Some(index);
        }
        survivors += 1;
        from = at + record.encoded_bytes();
        index_min = index + 1;
    }
    Ok(survivors)
}

/// Offset of the last non-zero byte at or after `from`.
fn last_nonzero(data: &[u8], from: usize) -> Option<usize> {
    if from >= data.len() {
        return None;
    }
    let rest = &data[from..];
    let tail_len = rest.len() % 8;
    let (words, tail) = rest.split_at(rest.len() - tail_len);
    if let Some(i) = tail.iter().rposition(|&b| b != 0) {
        return Some(from + words.len() + i);
    }
    for (chunk_index, chunk) in words.chunks_exact(8).enumerate().rev() {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunk of 8"));
        if word != 0 {
            let byte = 7 - (word.leading_zeros() / 8) as usize;
            return Some(from + chunk_index * 8 + byte);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(segment_file_name(1), "00000000000000000001.wal");
        assert_eq!(parse_segment_file_name("00000000000000000001.wal"), Some(1));
        assert_eq!(parse_segment_file_name("00000000000000000000.wal"), None);
        assert_eq!(parse_segment_file_name("1.wal"), None);
        assert_eq!(
            parse_segment_file_name("00000000000000000001.wal.tmp"),
            None
        );
        assert_eq!(parse_segment_file_name("LOCK"), None);
    }

    #[test]
    fn last_nonzero_finds_the_last_byte() {
        let mut data = vec![0u8; 100];
        assert_eq!(last_nonzero(&data, 0), None);
        data[3] = 1;
        assert_eq!(last_nonzero(&data, 0), Some(3));
        assert_eq!(last_nonzero(&data, 4), None);
        data[97] = 9;
        assert_eq!(last_nonzero(&data, 0), Some(97));
        data[99] = 9;
        assert_eq!(last_nonzero(&data, 5), Some(99));
        assert_eq!(last_nonzero(&data, 100), None);
    }
}
