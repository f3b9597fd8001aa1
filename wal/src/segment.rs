//! Segment files: naming, creation, header checks and recovery of the last segment.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use memmap2::{Mmap, MmapOptions};

use crate::error::{Error, Result};
use crate::format::{
    self, decode_record, decode_segment_header, Decoded, SegmentHeaderProblem, FORMAT_VERSION,
    SEGMENT_HEADER_BYTES,
};
use crate::spare::Spare;
use crate::sys;

/// File name suffix of a segment.
pub(crate) const SEGMENT_SUFFIX: &str = ".wal";
/// Suffix of a segment being created; such files are deleted on open.
pub(crate) const TEMP_SUFFIX: &str = ".wal.tmp";

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
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    /// Map of the whole file, created on first read once the segment is sealed. Sealed segments
    /// never change, so one map serves every reader for the segment's lifetime.
    sealed_map: OnceLock<Arc<Mmap>>,
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
        let first_index = check_header(&path, &header[..have])?;
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
            path,
            file,
            sealed_map: OnceLock::new(),
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp_path)
            .map_err(|e| Error::io(&temp_path, e))?;
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
            path,
            file,
            sealed_map: OnceLock::new(),
        })
    }

    /// A map of the first `len` bytes, for reading the active segment. Only bytes below `len`
    /// are read through it, and those were fully written before `len` was published.
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

fn check_header(path: &Path, header: &[u8]) -> Result<u64> {
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
/// the written part), a record cut short by the end of the file, a checksum failure. If any valid
/// record with a plausible index lies anywhere after that place, the damage is in the middle of
/// the log and is reported as corruption; otherwise it is a torn tail from a crash and is dropped.
/// Records of a batch whose last record is missing are dropped with it: a batch was never
/// acknowledged unless all of it was written.
pub(crate) fn recover_last_segment(segment: &Segment) -> Result<Recovered> {
    let path = &segment.path;
    let len = segment
        .file
        .metadata()
        .map_err(|e| Error::io(path, e))?
        .len();
    let map = segment.map_prefix(len)?;
    let data: &[u8] = &map;
    let mut offset = SEGMENT_HEADER_BYTES;
    let mut expected = segment.first_index;
    let mut committed = Recovered {
        next_index: expected,
        write_offset: offset as u64,
    };
    let stop_reason: Option<String> = loop {
        match decode_record(data, offset) {
            Decoded::Record(record) if record.index == expected => {
                offset += record.encoded_bytes();
                expected += 1;
                if !record.continues {
                    committed = Recovered {
                        next_index: expected,
                        write_offset: offset as u64,
                    };
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
    if let Some(found) = format::find_valid_record(data, offset, expected) {
        let what = stop_reason.unwrap_or_else(|| "zero record header".to_string());
        let index = format::read_u64(data, found + 8);
        return Err(Error::corruption(
            path,
            offset as u64,
            format!("{what}, but a valid record with index {index} follows at byte {found}"),
        ));
    }
    let tail_end = last_nonzero(data, committed.write_offset as usize).map(|i| i + 1);
    drop(map);
    if let Some(tail_end) = tail_end {
        // The torn bytes must not survive: later appends may write fewer bytes than were torn,
        // and leftover garbage behind them would look like mid-log damage to the next recovery.
        let dropped_records = expected - committed.next_index;
        tracing::warn!(
            segment = %path.display(),
            offset = committed.write_offset,
            bytes = tail_end as u64 - committed.write_offset,
            dropped_records,
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
