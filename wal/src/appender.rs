//! The `O_DIRECT` append path of the log's active segment.

use std::fs::File;

use crate::direct::{self, AlignedBuf, ALIGN};
use crate::error::{Error, Result};
use crate::format;
use crate::segment::Segment;
use crate::sys;

/// The encode buffer is shrunk back to this capacity after a larger batch, so one huge batch
/// does not pin its memory for the lifetime of the log.
pub(crate) const ENCODE_BUFFER_BYTES_KEPT: usize = 4 << 20;

/// The `O_DIRECT` append path: a batch is encoded into `buf` behind the bytes of the active
/// segment's last, partly written block, padded with zeroes to whole blocks and written at
/// that block's start. Rewriting the block with the same leading bytes is safe against a torn
/// write: a sector holds either its old bytes or its new ones, and the old ones are a prefix of
/// the new.
pub(crate) struct DirectAppender {
    /// The active segment, opened again write-only with `O_DIRECT`.
    file: File,
    buf: AlignedBuf,
    /// `buf[..tail_len]` are the segment's bytes from the last block boundary at or below the
    /// write offset up to it.
    tail_len: usize,
}

impl DirectAppender {
    /// Opens the direct path on `segment`, whose bytes end at `write_offset`, with the buffer in
    /// `buf` (a new one when there is none); `None` where the file system refuses `O_DIRECT`.
    /// The buffer is taken only when the path opens: after an error (out of descriptors at a
    /// roll, say) the caller keeps it for the next attempt.
    pub(crate) fn open(
        segment: &Segment,
        write_offset: u64,
        buf: &mut Option<AlignedBuf>,
    ) -> Result<Option<DirectAppender>> {
        let io = |e| Error::io(&segment.path, e);
        let opened =
            direct::open_direct(&segment.path).map_err(|e| Error::opening(&segment.path, e))?;
        let Some(file) = opened else {
            tracing::info!(
                segment = %segment.path.display(),
                "the file system refuses O_DIRECT: log appends go through the page cache"
            );
            return Ok(None);
        };
        if buf.is_none() {
            *buf = Some(AlignedBuf::new(ENCODE_BUFFER_BYTES_KEPT).map_err(io)?);
        }
        let tail_len = (write_offset % ALIGN as u64) as usize;
        let buffer = buf.as_mut().expect("set above");
        std::os::unix::fs::FileExt::read_exact_at(
            &segment.file,
            &mut buffer[..tail_len],
            write_offset - tail_len as u64,
        )
        .map_err(io)?;
        Ok(Some(DirectAppender {
            file,
            buf: buf.take().expect("set above"),
            tail_len,
        }))
    }

    /// The buffer, for the appender of the next segment.
    pub(crate) fn into_buf(self) -> AlignedBuf {
        self.buf
    }

    /// Encodes `payloads` (indexes from `first_index`, `batch_bytes` in all) after the tail and
    /// writes them at `write_offset`. Returns `Err(refused)` with the file system's refusal of
    /// an `O_DIRECT` write, nothing written; the caller goes on without the direct path.
    pub(crate) fn write(
        &mut self,
        segment: &Segment,
        write_offset: u64,
        first_index: u64,
        payloads: &[&[u8]],
        batch_bytes: u64,
    ) -> Result<std::result::Result<(), std::io::Error>> {
        let io = |e| Error::io(&segment.path, e);
        let end = self.tail_len + batch_bytes as usize;
        let padded = end.next_multiple_of(ALIGN);
        self.buf
            .resize(padded, self.tail_len, ENCODE_BUFFER_BYTES_KEPT)
            .map_err(io)?;
        let mut at = self.tail_len;
        for (i, payload) in payloads.iter().enumerate() {
            let continues = i + 1 < payloads.len();
            let header = format::encode_record_header(
                first_index + i as u64,
                first_index,
                payload,
                continues,
            );
            self.buf[at..at + header.len()].copy_from_slice(&header);
            at += header.len();
            self.buf[at..at + payload.len()].copy_from_slice(payload);
            at += payload.len();
        }
        debug_assert_eq!(at, end, "planned write size");
        self.buf[end..padded].fill(0);
        let block_start = write_offset - self.tail_len as u64;
        match sys::pwrite_direct(&self.file, &segment.path, &self.buf[..padded], block_start) {
            Err(e) if direct::is_refusal(&e) => return Ok(Err(e)),
            other => other.map_err(io)?,
        }
        let last_block = end / ALIGN * ALIGN;
        self.buf.copy_within(last_block..end, 0);
        self.tail_len = end - last_block;
        Ok(Ok(()))
    }
}
