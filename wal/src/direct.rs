//! Writing with `O_DIRECT`: bytes go from a reused, page-aligned buffer to the disk, never
//! through the page cache. The log's appends use it (see `Writer` in `log.rs`), and so does
//! [`DirectWriter`], which writes a new file whole (the DataNode's sealed files).
//!
//! Why: log segments and sealed files are written once and rarely read back soon. Through the
//! page cache every byte is copied into freshly allocated pages, and on a VM whose freed guest
//! pages return to the host each such page also costs a host fault: `dd bs=1M conv=fdatasync`
//! into a new file spends 2.98 s of system time per GB on the development machine against
//! 0.19 s with `oflag=direct`. In an RF=3 run those copies were two fifths of all CPU.
//!
//! `O_DIRECT` needs the buffer address, the file offset and the length aligned to the device's
//! logical block; [`ALIGN`] (4 KiB) covers every common device. A partly filled last block is
//! padded with zeroes. Where the file system refuses `O_DIRECT` (tmpfs before Linux 6.6 answers
//! EINVAL, at open or at the first write), writes fall back to the page cache.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use memmap2::MmapMut;
use parking_lot::Mutex;

/// Alignment of buffer addresses, file offsets and write lengths under `O_DIRECT`.
pub use crate::sys::ALIGN;

/// [`DirectWriter`] buffers kept for reuse: a buffer's pages stay mapped, so the next file does
/// not fault them in.
const POOL_MAX: usize = 2;

static POOL: Mutex<Vec<MmapMut>> = Mutex::new(Vec::new());

/// A page-aligned byte buffer that grows (and shrinks) keeping a prefix.
pub(crate) struct AlignedBuf {
    map: MmapMut,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes rounded up to [`ALIGN`].
    pub(crate) fn new(len: usize) -> io::Result<AlignedBuf> {
        Ok(AlignedBuf {
            map: MmapMut::map_anon(len.max(ALIGN).next_multiple_of(ALIGN))?,
        })
    }

    /// Makes the buffer exactly `len` bytes (rounded up to [`ALIGN`]) if it is shorter, or
    /// longer than `shrink_above`, keeping `buf[..keep]`.
    pub(crate) fn resize(
        &mut self,
        len: usize,
        keep: usize,
        shrink_above: usize,
    ) -> io::Result<()> {
        let len = len.max(ALIGN).next_multiple_of(ALIGN);
        if self.map.len() < len || (self.map.len() > shrink_above && len <= shrink_above) {
            let mut bigger = MmapMut::map_anon(len)?;
            bigger[..keep].copy_from_slice(&self.map[..keep]);
            self.map = bigger;
        }
        Ok(())
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// Opens `path` write-only with `O_DIRECT`; `None` where the file system refuses the flag.
pub(crate) fn open_direct(path: &Path) -> io::Result<Option<File>> {
    match crate::sys::open(
        OpenOptions::new().write(true).custom_flags(libc::O_DIRECT),
        path,
    ) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `error` is the file system refusing an `O_DIRECT` write (rather than an I/O failure).
pub(crate) fn is_refusal(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EINVAL)
}

/// A file being written from start to end in `buffer_bytes` blocks.
pub struct DirectWriter {
    file: File,
    buffer: Option<MmapMut>,
    /// Bytes of `buffer` holding data not yet written.
    filled: usize,
    /// File offset of `buffer[0]`; always a multiple of [`ALIGN`].
    offset: u64,
    /// Whether the descriptor still has `O_DIRECT` (false after a fallback).
    direct: bool,
}

impl DirectWriter {
    /// Creates (or truncates) `path` for writing through a buffer of `buffer_bytes`, rounded up
    /// to a multiple of [`ALIGN`].
    pub fn create(path: &Path, buffer_bytes: usize) -> io::Result<DirectWriter> {
        DirectWriter::open(path, buffer_bytes, true)
    }

    /// [`DirectWriter::create`], trying `O_DIRECT` only when `try_direct`.
    fn open(path: &Path, buffer_bytes: usize, try_direct: bool) -> io::Result<DirectWriter> {
        let open = |flags: i32| {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags)
                .open(path)
        };
        let (file, direct) = match try_direct.then(|| open(libc::O_DIRECT)) {
            Some(Ok(file)) => (file, true),
            Some(Err(e)) if e.raw_os_error() != Some(libc::EINVAL) => return Err(e),
            // Not asked for, or refused by the file system.
            _ => (open(0)?, false),
        };
        let len = buffer_bytes.max(ALIGN).next_multiple_of(ALIGN);
        let buffer = take_buffer(len)?;
        Ok(DirectWriter {
            file,
            buffer: Some(buffer),
            filled: 0,
            offset: 0,
            direct,
        })
    }

    /// Whether the file is being written with `O_DIRECT` (false where the file system refused).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Writes what is buffered, truncates the file to the bytes written, makes it durable
    /// (`fdatasync`) and returns it.
    pub fn finish(mut self) -> io::Result<File> {
        let len = self.offset + self.filled as u64;
        let padded = self.filled.next_multiple_of(ALIGN);
        let buffer = self.buffer.as_mut().expect("the buffer lives until drop");
        buffer[self.filled..padded].fill(0);
        self.write_block(padded)?;
        self.file.set_len(len)?;
        self.file.sync_data()?;
        if !self.direct {
            drop_cached_pages(&self.file);
        }
        let file = self.file.try_clone()?;
        Ok(file)
    }

    /// Writes `buffer[..len]` at `offset` (`len` a multiple of [`ALIGN`]) and advances past it.
    fn write_block(&mut self, len: usize) -> io::Result<()> {
        debug_assert_eq!(len % ALIGN, 0);
        let buffer = self.buffer.as_ref().expect("the buffer lives until drop");
        match self.file.write_all_at(&buffer[..len], self.offset) {
            Err(e) if self.direct && is_refusal(&e) => {
                // The file system opened the file with O_DIRECT but refuses the write: go on
                // through the page cache.
                clear_direct(&self.file)?;
                self.direct = false;
                self.file.write_all_at(&buffer[..len], self.offset)?;
            }
            other => other?,
        }
        self.offset += len as u64;
        self.filled = 0;
        Ok(())
    }
}

impl Write for DirectWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let capacity = self.buffer.as_ref().map_or(0, |b| b.len());
        if self.filled == capacity {
            self.write_block(capacity)?;
        }
        let buffer = self.buffer.as_mut().expect("the buffer lives until drop");
        let n = bytes.len().min(capacity - self.filled);
        buffer[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
        self.filled += n;
        Ok(n)
    }

    /// Writes nothing: only whole blocks reach the file before [`DirectWriter::finish`].
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            let mut pool = POOL.lock();
            if pool.len() < POOL_MAX {
                pool.push(buffer);
            }
        }
    }
}

impl std::fmt::Debug for DirectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWriter")
            .field("offset", &self.offset)
            .field("filled", &self.filled)
            .field("direct", &self.direct)
            .finish_non_exhaustive()
    }
}

/// A file read front to back in windows of at least `window_bytes`, with `O_DIRECT` where the
/// file system has it: a merge reads each input once, in order, and through the page cache each
/// byte would be copied into freshly allocated cache pages first (the same cost as writing
/// through it, see the module documentation) only to be read once.
pub struct DirectReader {
    file: File,
    direct: bool,
    buffer: AlignedBuf,
    window: usize,
    /// File offset of `buffer[0]`; a multiple of [`ALIGN`].
    start: u64,
    /// Bytes of `buffer` read from the file.
    valid: usize,
    /// The file's length.
    len: u64,
}

impl DirectReader {
    /// Opens `path` for reading in windows of `window_bytes` (rounded up to [`ALIGN`]).
    pub fn open(path: &Path, window_bytes: usize) -> io::Result<DirectReader> {
        let open = |flags: i32| OpenOptions::new().read(true).custom_flags(flags).open(path);
        let (file, direct) = match open(libc::O_DIRECT) {
            Ok(file) => (file, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open(0)?, false),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        let window = window_bytes.max(ALIGN).next_multiple_of(ALIGN);
        Ok(DirectReader {
            file,
            direct,
            buffer: AlignedBuf::new(window)?,
            window,
            start: 0,
            valid: 0,
            len,
        })
    }

    /// Whether the file is read with `O_DIRECT` (false where the file system refused).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The `len` bytes at `offset`, from the current window when it holds them, else from a
    /// new one read from the aligned block holding `offset` on. Reading past the end of the
    /// file is an `UnexpectedEof` error.
    pub fn read(&mut self, offset: u64, len: usize) -> io::Result<&[u8]> {
        let end = offset
            .checked_add(len as u64)
            .filter(|end| *end <= self.len)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{len} bytes at {offset} pass the end of a {}-byte file",
                        self.len
                    ),
                )
            })?;
        if offset < self.start || end > self.start + self.valid as u64 {
            self.fill(offset / ALIGN as u64 * ALIGN as u64, end)?;
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buffer[at..at + len])
    }

    /// Reads the window from `start` (aligned) to at least `end`.
    fn fill(&mut self, start: u64, end: u64) -> io::Result<()> {
        let want = ((end - start) as usize)
            .max(self.window)
            .next_multiple_of(ALIGN);
        self.buffer.resize(want, 0, self.window)?;
        self.valid = 0;
        self.start = start;
        while self.valid < want {
            let at = start + self.valid as u64;
            match self.file.read_at(&mut self.buffer[self.valid..want], at) {
                Ok(0) => break,
                Ok(n) => {
                    self.valid += n;
                    // A short read is the end of the file (and leaves the offset unaligned).
                    if n % ALIGN != 0 {
                        break;
                    }
                }
                Err(e) if self.direct && is_refusal(&e) => {
                    clear_direct(&self.file)?;
                    self.direct = false;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.start + (self.valid as u64) < end {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file ended before its length",
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for DirectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectReader")
            .field("start", &self.start)
            .field("valid", &self.valid)
            .field("direct", &self.direct)
            .finish_non_exhaustive()
    }
}

/// A page-aligned buffer of exactly `len` bytes: a pooled one of that size, else a new mapping.
fn take_buffer(len: usize) -> io::Result<MmapMut> {
    let mut pool = POOL.lock();
    if let Some(at) = pool.iter().position(|b| b.len() == len) {
        return Ok(pool.swap_remove(at));
    }
    drop(pool);
    MmapMut::map_anon(len)
}

/// Clears `O_DIRECT` on an open descriptor: later writes go through the page cache.
pub(crate) fn clear_direct(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl with F_GETFL/F_SETFL reads and sets the status flags of a descriptor that
    // `file` keeps open for the duration of the calls; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Advises the kernel to drop `file`'s clean cached pages (best effort: a failure only keeps them).
pub(crate) fn drop_cached_pages(file: &File) {
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is open for the
    // duration of the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        tracing::debug!("posix_fadvise(DONTNEED): error {rc}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_reader_returns_any_range_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..3 * ALIGN as u32 + 123)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let mut reader = DirectReader::open(&path, ALIGN).unwrap();
        // Forwards, within a window, across windows, backwards, and the unaligned tail.
        for (offset, len) in [
            (0, 10),
            (5, 100),
            (ALIGN - 3, 7),
            (2 * ALIGN + 1, ALIGN),
            (17, 2),
            (bytes.len() - 5, 5),
        ] {
            assert_eq!(
                reader.read(offset as u64, len).unwrap(),
                &bytes[offset..offset + len],
                "{len} bytes at {offset}"
            );
        }
        // A range larger than the window.
        assert_eq!(reader.read(1, bytes.len() - 1).unwrap(), &bytes[1..]);
        let past = reader.read(bytes.len() as u64 - 2, 3).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::UnexpectedEof);
    }

    fn write_whole(path: &Path, buffer_bytes: usize, pieces: &[&[u8]]) -> Vec<u8> {
        write_whole_with(path, buffer_bytes, pieces, true)
    }

    fn write_whole_with(
        path: &Path,
        buffer_bytes: usize,
        pieces: &[&[u8]],
        try_direct: bool,
    ) -> Vec<u8> {
        let mut w = DirectWriter::open(path, buffer_bytes, try_direct).unwrap();
        if !try_direct {
            assert!(!w.is_direct());
        }
        let mut expected = Vec::new();
        for piece in pieces {
            w.write_all(piece).unwrap();
            expected.extend_from_slice(piece);
        }
        w.finish().unwrap();
        expected
    }

    #[test]
    fn files_of_every_length_read_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        for len in [0, 1, ALIGN - 1, ALIGN, ALIGN + 1, 3 * ALIGN + 17, 40_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            // Odd piece sizes so pieces straddle buffer boundaries.
            let pieces: Vec<&[u8]> = data.chunks(777).collect();
            let expected = write_whole(&path, ALIGN, &pieces);
            assert_eq!(std::fs::read(&path).unwrap(), expected, "length {len}");
        }
    }

    #[test]
    fn rewriting_a_longer_file_leaves_no_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_whole(&path, ALIGN, &[&[7u8; 3 * ALIGN]]);
        let expected = write_whole(&path, ALIGN, &[b"short"]);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn buffer_sizes_round_up_to_the_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let expected = write_whole(&path, 1000, &[&data]);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn without_o_direct_the_same_bytes_go_through_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..3 * ALIGN + 5).map(|i| i as u8).collect();
        let expected = write_whole_with(&path, ALIGN, &[&data], false);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }
}
