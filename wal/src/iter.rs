//! Reading records back.

use std::ops::Deref;
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::format::{decode_record, Decoded, RecordView, SEGMENT_HEADER_BYTES};
use crate::segment::{SeekPoint, Segment};

/// The bytes of the segment being read.
enum View {
    /// A sealed segment's shared map.
    Sealed(Arc<Mmap>),
    /// The written prefix of the segment that was active when the iterator was made.
    Active(Mmap),
}

impl Deref for View {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            View::Sealed(map) => map,
            View::Active(map) => map,
        }
    }
}

/// Iterator over `(index, payload)` from a starting index to the end of the log as it was when
/// [`crate::Wal::iter_from`] was called; later appends are not seen. Every record is checked
/// against its checksum and expected index before it is returned; after the first error the
/// iterator ends. It keeps the segments it still has to read open, so a concurrent
/// `truncate_prefix` does not pull them from under it.
pub struct WalIter {
    /// Segments from the one holding the start index to the last one at creation.
    segments: Vec<Arc<Segment>>,
    /// Position in `segments` of the segment being read.
    segment_pos: usize,
    /// Bytes of the segment being read, mapped on entry.
    view: Option<View>,
    /// Offset in `view` of the record with index `cursor`.
    offset: usize,
    /// Index of the record at `offset`.
    cursor: u64,
    /// Index of the first record of the batch that the record at `offset` belongs to.
    batch_first: u64,
    /// First index to return; records before it in the first segment are skipped.
    start: u64,
    /// One past the last index to return.
    end: u64,
    /// Written length of the last segment at creation.
    active_written: u64,
    /// Offset in `view` from which a record read is noted as the segment's next seek point.
    note_from: usize,
    /// `WalOptions::seek_stride_bytes`.
    seek_stride: usize,
    done: bool,
}

impl WalIter {
    pub(crate) fn new(
        segments: Vec<Arc<Segment>>,
        start: u64,
        end: u64,
        active_written: u64,
        seek_stride: usize,
    ) -> WalIter {
        WalIter {
            segments,
            segment_pos: 0,
            view: None,
            offset: 0,
            cursor: 0,
            batch_first: 0,
            start,
            end,
            active_written,
            note_from: 0,
            seek_stride,
            done: start >= end,
        }
    }

    /// The index the next call to `next` returns, if any is left.
    pub fn next_index(&self) -> u64 {
        self.start
    }

    fn last_index_of(&self, pos: usize) -> u64 {
        match self.segments.get(pos + 1) {
            Some(next) => next.first_index - 1,
            None => self.end - 1,
        }
    }

    /// Maps the segment at `segment_pos` and places the cursor at its first record, or at the
    /// last record known to begin at or before the first one wanted.
    fn enter(&mut self, segment: &Segment) -> Result<()> {
        let is_last = self.segment_pos + 1 == self.segments.len();
        let view = if is_last {
            View::Active(segment.map_prefix(self.active_written)?)
        } else {
            View::Sealed(segment.sealed_map()?)
        };
        self.offset = SEGMENT_HEADER_BYTES;
        self.cursor = segment.first_index;
        self.batch_first = segment.first_index;
        // Start at the last record known to begin at or before the first one wanted (one below
        // `end` lies in the mapped prefix), not at the segment's first.
        if let Some(point) = segment
            .seek_point(self.start)
            .filter(|p| p.index < self.end && p.index > segment.first_index)
        {
            self.offset = point.offset;
            self.cursor = point.index;
            self.batch_first = point.batch_first;
        }
        debug_assert!(
            self.batch_first <= self.cursor && self.offset <= view.len(),
            "segment {}: entered at record {} of the batch from {}, offset {} of {}",
            segment.path.display(),
            self.cursor,
            self.batch_first,
            self.offset,
            view.len()
        );
        self.view = Some(view);
        self.note_from = segment.note_seek_points(self.seek_stride, None);
        Ok(())
    }

    /// Checks that only zeroes follow the segment's last record `last_index`: anything else is
    /// records that the next segment's name says do not exist.
    fn check_segment_end(&self, view: &[u8], segment: &Segment, last_index: u64) -> Result<()> {
        if decode_record(view, self.offset, segment.version) == Decoded::End {
            return Ok(());
        }
        Err(Error::corruption(
            &segment.path,
            self.offset as u64,
            format!(
                "bytes after the segment's last record {last_index}, \
                 the next segment starts at {}",
                last_index + 1
            ),
        ))
    }

    /// The record at the cursor, checked: its index is the cursor's, it names the batch the
    /// cursor is in, and its batch does not continue past the segment's last record.
    fn checked_record<'v>(
        &self,
        view: &'v [u8],
        segment: &Segment,
        last_index: u64,
    ) -> Result<RecordView<'v>> {
        let corruption =
            |reason: String| Error::corruption(&segment.path, self.offset as u64, reason);
        let record = match decode_record(view, self.offset, segment.version) {
            Decoded::Record(record) if record.index == self.cursor => record,
            Decoded::Record(record) => {
                return Err(corruption(format!(
                    "record index {} where {} was expected",
                    record.index, self.cursor
                )))
            }
            Decoded::End => {
                return Err(corruption(format!(
                    "segment ends before record {} (it must hold up to {last_index})",
                    self.cursor
                )))
            }
            Decoded::Bad(reason) => return Err(corruption(reason)),
        };
        if let Some(named) = record
            .batch_first
            .filter(|&first| first != self.batch_first)
        {
            return Err(corruption(format!(
                "record {} names a batch from index {named}, but its batch starts at {}",
                record.index, self.batch_first
            )));
        }
        if record.index == last_index && record.continues {
            return Err(corruption(format!(
                "batch continues past record {last_index}, the segment's last"
            )));
        }
        Ok(record)
    }

    fn step(&mut self) -> Result<(u64, Vec<u8>)> {
        loop {
            let segment = Arc::clone(&self.segments[self.segment_pos]);
            if self.view.is_none() {
                self.enter(&segment)?;
            }
            let last_index = self.last_index_of(self.segment_pos);
            let view = self.view.as_ref().expect("view was just set");
            if self.cursor > last_index {
                self.check_segment_end(view, &segment, last_index)?;
                // The cursor moves one record at a time, so it stops right after the last.
                debug_assert_eq!(self.cursor, last_index + 1, "{}", segment.path.display());
                self.segment_pos += 1;
                self.view = None;
                continue;
            }
            let record = self.checked_record(view, &segment, last_index)?;
            if self.offset >= self.note_from {
                self.note_from = segment.note_seek_points(
                    self.seek_stride,
                    Some(SeekPoint {
                        index: record.index,
                        offset: self.offset,
                        batch_first: self.batch_first,
                    }),
                );
            }
            self.offset += record.encoded_bytes();
            self.cursor += 1;
            if !record.continues {
                self.batch_first = self.cursor;
            }
            if record.index >= self.start {
                return Ok((record.index, record.payload.to_vec()));
            }
        }
    }
}

impl Iterator for WalIter {
    type Item = Result<(u64, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step();
        match &item {
            Ok((index, _)) => {
                self.start = index + 1;
                if self.start >= self.end {
                    self.done = true;
                    self.segments.clear();
                    self.view = None;
                }
            }
            Err(_) => {
                self.done = true;
                self.segments.clear();
                self.view = None;
            }
        }
        Some(item)
    }
}

impl std::iter::FusedIterator for WalIter {}
