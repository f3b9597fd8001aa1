//! Sealed files: the immutable, columnar image of one time partition's data, written by a flush
//! or a compaction.
//!
//! Every version shares the frame (all integers little-endian):
//!
//! ```text
//! header (32 bytes): magic "FPSEAL0<v>" (8), u32 version, i64 time slot, u64 checkpoint index,
//!                    u32 CRC32 of the 28 bytes before it
//! body:              the series' data, sorted by (device, measurement)
//! index:             the version's index, u32 CRC32 of the index bytes before it
//! footer (20 bytes): u64 index offset, u32 index length, magic "FPSEALND" (8)
//! ```
//!
//! Version 2 ([`v2`], written today) stores each series as pages of encoded, compressed columns
//! with statistics in the index; version 1 ([`v1`], raw 8-byte timestamps and values) is still
//! read, for files written before it.
//!
//! A file is written whole, fsynced, and only then named in the region manifest; a file the
//! manifest does not name is an orphan of a crashed flush and is deleted on open.

mod stats;
mod v1;
mod v2;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use codec::SeriesCodec;
use common::codec::{DecodeError, Reader};
use common::{Column, DataType};
use memtable::FrozenMemTable;
use wal::direct::{DirectReader, DirectWriter};

use crate::error::{Result, StorageError};
use crate::files::{FileCache, FileId};

pub use stats::Stats;
pub use v2::{SealedOptions, SealedWriter};

const FOOTER_MAGIC: &[u8; 8] = b"FPSEALND";
const HEADER_BYTES: u64 = 32;
const FOOTER_BYTES: u64 = 20;

/// Where one series lives in a sealed file, and what its index says about it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkIndex {
    /// The series' type.
    pub data_type: DataType,
    /// Points in the chunk.
    pub count: u32,
    /// Smallest timestamp.
    pub min_time: i64,
    /// Greatest timestamp.
    pub max_time: i64,
    /// The chunk's statistics (none in version 1).
    pub stats: Option<Stats>,
    /// The chunk's pages, in time order (version 1: one, the whole chunk).
    pub pages: Vec<PageIndex>,
}

/// One page of a chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct PageIndex {
    /// Byte offset of the page.
    pub offset: u64,
    /// Page bytes as stored, CRC included.
    pub length: u32,
    /// Bytes of the page's encoded columns before compression (version 1: `length`).
    pub raw_length: u32,
    /// How the stored bytes are compressed.
    pub compressor: codec::Compressor,
    /// Points in the page.
    pub count: u32,
    /// Smallest timestamp.
    pub min_time: i64,
    /// Greatest timestamp.
    pub max_time: i64,
    /// The page's statistics (none in version 1).
    pub stats: Option<Stats>,
}

/// A sealed file's index: every series' chunk facts by (device, measurement).
pub type Index = BTreeMap<(String, String), ChunkIndex>;

/// A live sealed file: header facts and the index in memory, pages read on demand through the
/// node's descriptor cache (the file holds no descriptor of its own).
#[derive(Debug)]
pub struct SealedFile {
    path: PathBuf,
    id: FileId,
    files: Arc<FileCache>,
    version: u32,
    /// Bytes on disk.
    pub bytes: u64,
    /// Time slot of the partition the file belongs to.
    pub time_slot: i64,
    /// Applied index of the region when its data was frozen.
    pub checkpoint: u64,
    index: Index,
}

/// Bytes of file written per `write(2)` while a sealed file is encoded: the encoder holds one
/// page and this much of the file in memory, never the whole file.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Writes a frozen memtable as a sealed file, fsyncs it, and returns it with the index it wrote
/// (nothing is read back, so nothing can fail after the write). The file is not live until a
/// manifest names it.
///
/// The file bypasses the page cache (`O_DIRECT`, see [`wal::direct`]): a flush writes tens of
/// MiB that queries rarely read back soon, and copying them into fresh cache pages cost more CPU
/// than encoding them.
pub fn write(
    path: &Path,
    frozen: &FrozenMemTable,
    header: Header,
    options: &SealedOptions,
    codecs: &SeriesCodecs,
    files: &Arc<FileCache>,
) -> Result<SealedFile> {
    let mut writer = create(path, header, options, files)?;
    for series in frozen.series() {
        writer.series(
            series.device,
            series.measurement,
            series.timestamps,
            series.values,
            codecs.get(series.device, series.measurement),
        )?;
    }
    writer.finish()
}

/// The series that declared an encoding or compressor (device → measurement → declaration),
/// as the region last learned them ([`DataRegion::set_series_codecs`]); flushes and compactions
/// write each series with its declaration, every other series with the file's defaults.
///
/// [`DataRegion::set_series_codecs`]: crate::DataRegion::set_series_codecs
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeriesCodecs {
    by_device: BTreeMap<String, BTreeMap<String, SeriesCodec>>,
}

impl SeriesCodecs {
    /// Records a series' declaration (an undeclared one is not stored).
    pub fn insert(&mut self, device: &str, measurement: &str, codec: SeriesCodec) {
        if codec.is_declared() {
            self.by_device
                .entry(device.to_string())
                .or_default()
                .insert(measurement.to_string(), codec);
        }
    }

    /// A series' declaration; undeclared when it has none.
    pub fn get(&self, device: &str, measurement: &str) -> SeriesCodec {
        self.by_device
            .get(device)
            .and_then(|m| m.get(measurement))
            .copied()
            .unwrap_or_default()
    }

    /// Series with a declaration.
    pub fn len(&self) -> usize {
        self.by_device.values().map(BTreeMap::len).sum()
    }

    /// True when no series declared anything.
    pub fn is_empty(&self) -> bool {
        self.by_device.is_empty()
    }
}

/// A sealed file's header facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The partition's time slot.
    pub time_slot: i64,
    /// The region's applied index its data is complete up to.
    pub checkpoint: u64,
}

/// Starts a sealed file at `path` (through `O_DIRECT` where the file system has it): add the
/// series in sorted order, then [`FileWriter::finish`].
pub fn create(
    path: &Path,
    header: Header,
    options: &SealedOptions,
    files: &Arc<FileCache>,
) -> Result<FileWriter> {
    let io = |e| StorageError::io(path, e);
    let out = DirectWriter::create(path, WRITE_BUFFER_BYTES).map_err(io)?;
    if !out.is_direct() {
        tracing::debug!(path = %path.display(), "no O_DIRECT here: sealed file goes through the page cache");
    }
    let writer = SealedWriter::new(out, header, options.clone()).map_err(io)?;
    Ok(FileWriter {
        path: path.to_path_buf(),
        header,
        files: files.clone(),
        writer,
    })
}

/// A sealed file being written to disk.
pub struct FileWriter {
    path: PathBuf,
    header: Header,
    files: Arc<FileCache>,
    writer: SealedWriter<DirectWriter>,
}

impl FileWriter {
    /// Adds one series' points (timestamps strictly ascending); series come sorted by
    /// (device, measurement).
    pub fn series(
        &mut self,
        device: &str,
        measurement: &str,
        timestamps: &[i64],
        values: &Column,
        codec: SeriesCodec,
    ) -> Result<()> {
        self.writer
            .series(device, measurement, timestamps, values, codec)
            .map_err(|e| StorageError::io(&self.path, e))
    }

    /// Starts a series built page by page (see [`SealedWriter::begin_series`]).
    pub fn begin_series(&mut self, device: &str, measurement: &str, data_type: DataType) {
        self.writer.begin_series(device, measurement, data_type);
    }

    /// Adds points to the open series (see [`SealedWriter::points`]).
    pub fn points(
        &mut self,
        timestamps: &[i64],
        values: &Column,
        codec: SeriesCodec,
    ) -> Result<()> {
        self.writer
            .points(timestamps, values, codec)
            .map_err(|e| StorageError::io(&self.path, e))
    }

    /// Copies a page of another file as it is (see [`SealedWriter::copy_page`]).
    pub fn copy_page(&mut self, page: &StoredPage) -> Result<()> {
        self.writer
            .copy_page(page.bytes, page.entry)
            .map_err(|e| StorageError::io(&self.path, e))
    }

    /// Ends the open series.
    pub fn end_series(&mut self) {
        self.writer.end_series();
    }

    /// Points a page holds at most.
    pub fn page_points(&self) -> usize {
        self.writer.page_points()
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.writer.bytes_written()
    }

    /// Writes the index and footer, fsyncs, and returns the file (not yet live).
    pub fn finish(self) -> Result<SealedFile> {
        let path = self.path;
        let (out, index, bytes) = self
            .writer
            .finish()
            .map_err(|e| StorageError::io(&path, e))?;
        out.finish().map_err(|e| StorageError::io(&path, e))?;
        Ok(SealedFile {
            path,
            id: FileId::next(),
            files: self.files,
            version: v2::VERSION,
            bytes,
            time_slot: self.header.time_slot,
            checkpoint: self.header.checkpoint,
            index,
        })
    }
}

impl SealedFile {
    /// Points the file holds, from its index (no read).
    pub fn point_count(&self) -> u64 {
        self.index.values().map(|c| u64::from(c.count)).sum()
    }

    /// Opens a sealed file of any version, verifying header, footer and index.
    pub fn open(path: &Path, files: &Arc<FileCache>) -> Result<SealedFile> {
        let id = FileId::next();
        let file = files.get(id, path).map_err(|e| StorageError::io(path, e))?;
        let len = file
            .metadata()
            .map_err(|e| StorageError::io(path, e))?
            .len();
        let corrupt = |offset: u64, reason: String| corruption("sealed file", path, offset, reason);
        if len < HEADER_BYTES + FOOTER_BYTES {
            return Err(corrupt(
                0,
                format!("file of {len} bytes is shorter than header + footer"),
            ));
        }
        let header = read_at(&file, path, 0, HEADER_BYTES as usize)?;
        let footer = read_at(&file, path, len - FOOTER_BYTES, FOOTER_BYTES as usize)?;
        let version = match &header[..8] {
            m if m == v1::HEADER_MAGIC => v1::VERSION,
            m if m == v2::HEADER_MAGIC => v2::VERSION,
            _ => return Err(corrupt(0, "bad magic".into())),
        };
        if &footer[12..] != FOOTER_MAGIC {
            return Err(corrupt(0, "bad magic".into()));
        }
        if crc32fast::hash(&header[..28]) != u32::from_le_bytes(header[28..].try_into().unwrap()) {
            return Err(corrupt(0, "header CRC mismatch".into()));
        }
        let mut h = Reader::new(&header[8..28]);
        let decode = |e: DecodeError, base: u64| corrupt(base + e.offset, e.reason);
        let stored_version = h.u32().map_err(|e| decode(e, 8))?;
        if stored_version != version {
            return Err(corrupt(
                8,
                format!("version {stored_version} under the magic of version {version}"),
            ));
        }
        let time_slot = h.i64().map_err(|e| decode(e, 8))?;
        let checkpoint = h.u64().map_err(|e| decode(e, 8))?;
        let mut f = Reader::new(&footer);
        let index_offset = f.u64().map_err(|e| decode(e, len - FOOTER_BYTES))?;
        let index_length = f.u32().map_err(|e| decode(e, len - FOOTER_BYTES))? as u64;
        if index_length < 8
            || index_offset < HEADER_BYTES
            || index_offset + index_length != len - FOOTER_BYTES
        {
            return Err(corrupt(
                len - FOOTER_BYTES,
                "index position out of range".into(),
            ));
        }
        let index_bytes = read_at(&file, path, index_offset, index_length as usize)?;
        let (body, crc) = index_bytes.split_at(index_bytes.len() - 4);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
            return Err(corrupt(index_offset, "index CRC mismatch".into()));
        }
        let index = match version {
            v1::VERSION => v1::parse_index(body, index_offset),
            _ => v2::parse_index(body, index_offset),
        }
        .map_err(|(offset, reason)| corrupt(offset, reason))?;
        Ok(SealedFile {
            path: path.to_path_buf(),
            id,
            files: files.clone(),
            version,
            bytes: len,
            time_slot,
            checkpoint,
            index,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version the file was written in.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Every series in the file with its chunk facts, sorted.
    pub fn series(&self) -> impl Iterator<Item = (&str, &str, &ChunkIndex)> {
        self.index
            .iter()
            .map(|((d, m), e)| (d.as_str(), m.as_str(), e))
    }

    /// The chunk facts of one series, if present.
    pub fn chunk(&self, device: &str, measurement: &str) -> Option<&ChunkIndex> {
        // BTreeMap<(String, String)> cannot be probed with borrowed strs without allocating; a
        // range from the device's first key finds it in O(log n).
        self.index
            .range((device.to_string(), String::new())..)
            .take_while(|((d, _), _)| d == device)
            .find(|((_, m), _)| m == measurement)
            .map(|(_, e)| e)
    }

    /// Reads one series' points (timestamps strictly ascending), verifying every page's CRC.
    pub fn read(&self, device: &str, measurement: &str) -> Result<Option<(Vec<i64>, Column)>> {
        self.read_range(device, measurement, i64::MIN, i64::MAX)
    }

    /// Reads the pages of one series that hold points with `from <= time <= to` (whole pages:
    /// the caller cuts the range). `None` when the file has no such series.
    pub fn read_range(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
    ) -> Result<Option<(Vec<i64>, Column)>> {
        let Some(entry) = self.chunk(device, measurement) else {
            return Ok(None);
        };
        let file = self
            .files
            .get(self.id, &self.path)
            .map_err(|e| StorageError::io(&self.path, e))?;
        let mut timestamps = Vec::new();
        let mut values = Column::with_capacity(entry.data_type, 0);
        for page in &entry.pages {
            if page.max_time < from || page.min_time > to {
                continue;
            }
            let bytes = read_at(&file, &self.path, page.offset, page.length as usize)?;
            let (ts, column) = self.decode_page(&bytes, device, measurement, entry, page)?;
            if timestamps.last().is_some_and(|last| *last >= ts[0]) {
                return Err(corruption(
                    "sealed page",
                    &self.path,
                    page.offset,
                    "pages overlap in time".into(),
                ));
            }
            timestamps.extend_from_slice(&ts);
            append_column(&mut values, column);
        }
        Ok(Some((timestamps, values)))
    }

    /// Reads and decodes one page of a series' chunk (`entry`, from [`chunk`](Self::chunk)),
    /// verifying its CRC.
    pub fn read_page(
        &self,
        device: &str,
        measurement: &str,
        entry: &ChunkIndex,
        page: &PageIndex,
    ) -> Result<(Vec<i64>, Column)> {
        let file = self
            .files
            .get(self.id, &self.path)
            .map_err(|e| StorageError::io(&self.path, e))?;
        let bytes = read_at(&file, &self.path, page.offset, page.length as usize)?;
        self.decode_page(&bytes, device, measurement, entry, page)
    }

    /// A reader of this file's pages in file order, for a merge (see [`PageReader`]).
    pub fn page_reader(&self) -> Result<PageReader> {
        let reader = DirectReader::open(&self.path, READ_WINDOW_BYTES)
            .map_err(|e| StorageError::io(&self.path, e))?;
        Ok(PageReader {
            reader,
            path: self.path.clone(),
        })
    }

    /// [`read_page`](Self::read_page) through `reader` (this file's).
    pub fn read_page_with(
        &self,
        reader: &mut PageReader,
        device: &str,
        measurement: &str,
        entry: &ChunkIndex,
        page: &PageIndex,
    ) -> Result<(Vec<i64>, Column)> {
        debug_assert_eq!(reader.path, self.path, "another file's reader");
        let bytes = reader.bytes(page)?;
        self.decode_page(bytes, device, measurement, entry, page)
    }

    /// One page as it is stored, through `reader` (this file's), for
    /// [`FileWriter::copy_page`]: its CRC verified, nothing decoded. `None` for a version-1
    /// file, whose chunks are not version-2 pages.
    pub fn stored_page<'a>(
        &self,
        reader: &'a mut PageReader,
        page: &'a PageIndex,
    ) -> Result<Option<StoredPage<'a>>> {
        if self.version != v2::VERSION {
            return Ok(None);
        }
        let bytes = reader.bytes(page)?;
        v2::check_page_crc(bytes).map_err(|(offset, reason)| {
            corruption("sealed page", &self.path, page.offset + offset, reason)
        })?;
        Ok(Some(StoredPage { bytes, entry: page }))
    }

    fn decode_page(
        &self,
        bytes: &[u8],
        device: &str,
        measurement: &str,
        entry: &ChunkIndex,
        page: &PageIndex,
    ) -> Result<(Vec<i64>, Column)> {
        match self.version {
            v1::VERSION => v1::decode_chunk(bytes, device, measurement, entry),
            _ => v2::decode_page(bytes, entry.data_type, page),
        }
        .map_err(|(offset, reason)| {
            corruption("sealed page", &self.path, page.offset + offset, reason)
        })
    }
}

/// Bytes a [`PageReader`] reads at a time: a merge holds this much per input.
const READ_WINDOW_BYTES: usize = 1 << 20;

/// Reads one sealed file's pages for a merge, which visits each input's pages in file order:
/// in windows of [`READ_WINDOW_BYTES`] with `O_DIRECT` ([`DirectReader`]), so a merge neither
/// fills the page cache with files about to be deleted nor pays for copying through it. It
/// holds a descriptor of its own (outside the node's descriptor cache) while the merge runs:
/// one per input, at most `compaction_concurrency` × 16.
pub struct PageReader {
    reader: DirectReader,
    path: PathBuf,
}

impl PageReader {
    fn bytes(&mut self, page: &PageIndex) -> Result<&[u8]> {
        self.reader
            .read(page.offset, page.length as usize)
            .map_err(|e| StorageError::io(&self.path, e))
    }
}

/// A version-2 page's stored bytes (CRC verified) with its index entry.
pub struct StoredPage<'a> {
    bytes: &'a [u8],
    entry: &'a PageIndex,
}

impl Drop for SealedFile {
    fn drop(&mut self) {
        // The file is no longer live here (compacted away, replaced by a snapshot, or the region
        // closed): its descriptor need not stay cached.
        self.files.forget(self.id);
    }
}

/// Appends `more` to `column` (same type).
pub(crate) fn append_column(column: &mut Column, more: Column) {
    match (column, more) {
        (Column::Boolean(a), Column::Boolean(b)) => a.extend(b),
        (Column::Int32(a), Column::Int32(b)) => a.extend(b),
        (Column::Int64(a), Column::Int64(b)) => a.extend(b),
        (Column::Float(a), Column::Float(b)) => a.extend(b),
        (Column::Double(a), Column::Double(b)) => a.extend(b),
        (Column::Text(a), Column::Text(b)) => a.extend(b),
        (Column::Timestamp(a), Column::Timestamp(b)) => a.extend(b),
        (Column::Date(a), Column::Date(b)) => a.extend(b),
        (Column::Blob(a), Column::Blob(b)) => a.extend(b),
        (Column::String(a), Column::String(b)) => a.extend(b),
        (a, b) => panic!(
            "appending a {} page to a {} column",
            b.data_type(),
            a.data_type()
        ),
    }
}

/// A decoding failure at a byte offset (relative to what was decoded), with its reason.
type Bad = (u64, String);

fn corruption(what: &'static str, path: &Path, offset: u64, reason: String) -> StorageError {
    StorageError::Corruption {
        what,
        path: path.to_path_buf(),
        offset,
        reason,
    }
}

fn read_at(file: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| StorageError::io(path, e))?;
    Ok(buf)
}
