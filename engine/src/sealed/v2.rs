//! Sealed file format version 2: each series as pages of encoded, compressed columns, with
//! statistics per page and per chunk in the index.
//!
//! ```text
//! header:  magic "FPSEAL02", u32 version = 2, i64 time slot, u64 checkpoint, u32 CRC32
//! pages:   per series (sorted by device, measurement), per page of at most `page_points` points:
//!          stored bytes, u32 CRC32 of the stored bytes
//!          stored = the raw bytes, or them compressed (LZ4 unless the series declared another
//!                   compressor) when that is at least 1/8 smaller
//!          raw    = u32 timestamp bytes, codec::encode_timestamps, codec::encode_column
//! index:   u32 entries, entries × {
//!            str16 device, str16 measurement, u8 type,
//!            u32 count, i64 min time, i64 max time, statistics (stats.rs),
//!            u32 pages, pages × { u64 offset, u32 stored length (with CRC), u32 raw length,
//!                                 u8 compressor (0 none, 1 LZ4, 2 Snappy, 3 gzip, 4 zstd,
//!                                 5 xz/LZMA2: `codec::Compressor::byte`), u32 count, i64 min time,
//!                                 i64 max time, statistics } },
//!          u32 CRC32 of the index bytes before it
//! footer:  u64 index offset, u32 index length, magic "FPSEALND"
//! ```
//!
//! The column codec (the first byte of an encoded column, `codec::CodecId`) is chosen per page,
//! from the series' declared encoding when it has one (`SealedWriter::series`), else by
//! the file's `SealedOptions::encoding`; likewise the compressor.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

use codec::{Choice, Compressor, SeriesCodec};
use common::codec::{len32, DecodeError, Reader, Writer};
use common::{Column, DataType};

use super::{Bad, ChunkIndex, Header, Index, PageIndex, Stats, FOOTER_MAGIC, HEADER_BYTES};

pub(super) const HEADER_MAGIC: &[u8; 8] = b"FPSEAL02";
pub(super) const VERSION: u32 = 2;

/// How sealed files are encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedOptions {
    /// Points per page at most: the unit of decoding and of time-range pruning (IoTDB's
    /// `max_number_of_points_in_page`). Default 10000.
    pub page_points: usize,
    /// The block compressor over each page's encoded columns. Default LZ4 (IoTDB's default).
    pub compressor: Compressor,
    /// The value encoding. Default adaptive: the codec that suits each page's values.
    pub encoding: Choice,
}

impl Default for SealedOptions {
    fn default() -> Self {
        SealedOptions {
            page_points: 10_000,
            compressor: Compressor::Lz4,
            encoding: Choice::Adaptive,
        }
    }
}

/// Encodes a sealed file into any writer, one page at a time.
pub struct SealedWriter<W: Write> {
    out: W,
    options: SealedOptions,
    offset: u64,
    index: Index,
    raw: Vec<u8>,
    stored: Vec<u8>,
    /// The series being added, page by page.
    open: Option<OpenSeries>,
}

/// A series whose pages are being written.
struct OpenSeries {
    device: String,
    measurement: String,
    data_type: DataType,
    pages: Vec<PageIndex>,
}

impl<W: Write> SealedWriter<W> {
    /// Writes the header.
    pub fn new(mut out: W, header: Header, options: SealedOptions) -> io::Result<Self> {
        assert!(
            (1..=codec::COUNT_MAX).contains(&options.page_points),
            "page_points {} out of range",
            options.page_points
        );
        let mut w = Writer::with_capacity(HEADER_BYTES as usize);
        w.bytes(HEADER_MAGIC);
        w.u32(VERSION);
        w.i64(header.time_slot);
        w.u64(header.checkpoint);
        let crc = crc32fast::hash(w.as_slice());
        w.u32(crc);
        out.write_all(w.as_slice())?;
        Ok(SealedWriter {
            out,
            options,
            offset: HEADER_BYTES,
            index: BTreeMap::new(),
            raw: Vec::new(),
            stored: Vec::new(),
            open: None,
        })
    }

    /// Adds one series (timestamps strictly ascending, one value each); series come sorted by
    /// (device, measurement). An empty series writes nothing. The series' declared encoding and
    /// compressor override the file's options where declared.
    pub fn series(
        &mut self,
        device: &str,
        measurement: &str,
        timestamps: &[i64],
        values: &Column,
        codec: SeriesCodec,
    ) -> io::Result<()> {
        self.begin_series(device, measurement, values.data_type());
        self.points(timestamps, values, codec)?;
        self.end_series();
        Ok(())
    }

    /// Starts a series built page by page ([`points`](Self::points),
    /// [`copy_page`](Self::copy_page)) and ended by [`end_series`](Self::end_series); series
    /// come sorted by (device, measurement).
    pub fn begin_series(&mut self, device: &str, measurement: &str, data_type: DataType) {
        assert!(self.open.is_none(), "a series is already open");
        assert!(
            self.index
                .last_key_value()
                .is_none_or(|((d, m), _)| (d.as_str(), m.as_str()) < (device, measurement)),
            "series {device}.{measurement} added out of order"
        );
        self.open = Some(OpenSeries {
            device: device.to_string(),
            measurement: measurement.to_string(),
            data_type,
            pages: Vec::new(),
        });
    }

    /// Adds points to the open series as evenly filled pages of at most `page_points` points;
    /// they follow every point already added (timestamps strictly ascending).
    pub fn points(
        &mut self,
        timestamps: &[i64],
        values: &Column,
        codec: SeriesCodec,
    ) -> io::Result<()> {
        assert_eq!(
            timestamps.len(),
            values.len(),
            "series columns differ in length"
        );
        debug_assert!(timestamps.windows(2).all(|w| w[0] < w[1]));
        let open = self.open.as_ref().expect("no series is open");
        assert_eq!(values.data_type(), open.data_type, "a page of another type");
        if timestamps.is_empty() {
            return Ok(());
        }
        assert!(
            open.pages
                .last()
                .is_none_or(|last| last.max_time < timestamps[0]),
            "points added out of time order"
        );
        // Evenly filled pages, so that every page of a series with at least half a page of
        // points is at least half full: a merge copies such pages as they are
        // (compaction's `SeriesMerge`), where a short tail page would be decoded and re-paged
        // together with its neighbour.
        let n = timestamps.len();
        let pages = n.div_ceil(self.options.page_points);
        for i in 0..pages {
            let (start, end) = (n * i / pages, n * (i + 1) / pages);
            let page_values = rows(values, start..end);
            let page = self.page(&timestamps[start..end], &page_values, codec)?;
            self.open.as_mut().expect("checked above").pages.push(page);
        }
        Ok(())
    }

    /// Copies one page of another version-2 file as it is stored (`stored`: its bytes, CRC
    /// included, already verified; `page`: its index entry, statistics included) into the open
    /// series, after every point already added: no decoding, no encoding.
    pub fn copy_page(&mut self, stored: &[u8], page: &PageIndex) -> io::Result<()> {
        assert_eq!(
            stored.len(),
            page.length as usize,
            "page bytes and entry differ"
        );
        assert!(page.stats.is_some(), "a copied page has statistics");
        let open = self.open.as_mut().expect("no series is open");
        assert!(
            open.pages
                .last()
                .is_none_or(|last| last.max_time < page.min_time),
            "page copied out of time order"
        );
        self.out.write_all(stored)?;
        open.pages.push(PageIndex {
            offset: self.offset,
            ..page.clone()
        });
        self.offset += u64::from(page.length);
        Ok(())
    }

    /// Ends the open series, indexing it with statistics merged from its pages' (a series
    /// with no pages is not indexed).
    pub fn end_series(&mut self) {
        let open = self.open.take().expect("no series is open");
        let (Some(first), Some(last)) = (open.pages.first(), open.pages.last()) else {
            return;
        };
        let chunk = ChunkIndex {
            data_type: open.data_type,
            count: len32(open.pages.iter().map(|p| p.count as usize).sum()),
            min_time: first.min_time,
            max_time: last.max_time,
            stats: open
                .pages
                .iter()
                .map(|p| p.stats.clone().expect("written pages have statistics"))
                .reduce(|a, b| Stats::merge(&a, &b)),
            pages: open.pages,
        };
        self.index.insert((open.device, open.measurement), chunk);
    }

    /// Points a page holds at most.
    pub fn page_points(&self) -> usize {
        self.options.page_points
    }

    fn page(
        &mut self,
        timestamps: &[i64],
        values: &Column,
        declared: SeriesCodec,
    ) -> io::Result<PageIndex> {
        self.raw.clear();
        self.raw.extend_from_slice(&[0; 4]);
        codec::encode_timestamps(timestamps, &mut self.raw);
        let ts_bytes = len32(self.raw.len() - 4);
        self.raw[..4].copy_from_slice(&ts_bytes.to_le_bytes());
        let encoding = declared
            .encoding
            .map_or(self.options.encoding, Choice::Fixed);
        codec::encode_column(values, encoding, &mut self.raw);

        let mut compressor = Compressor::Uncompressed;
        let wanted = declared.compressor.unwrap_or(self.options.compressor);
        if wanted != Compressor::Uncompressed && self.raw.len() >= 64 {
            self.stored.clear();
            codec::compress(wanted, &self.raw, &mut self.stored);
            if self.stored.len() <= self.raw.len() - self.raw.len() / 8 {
                compressor = wanted;
            }
        }
        let stored: &[u8] = match compressor {
            Compressor::Uncompressed => &self.raw,
            _ => &self.stored,
        };
        let crc = crc32fast::hash(stored);
        self.out.write_all(stored)?;
        self.out.write_all(&crc.to_le_bytes())?;
        let page = PageIndex {
            offset: self.offset,
            length: len32(stored.len() + 4),
            raw_length: len32(self.raw.len()),
            compressor,
            count: len32(timestamps.len()),
            min_time: timestamps[0],
            max_time: timestamps[timestamps.len() - 1],
            stats: Some(Stats::of(values)),
        };
        self.offset += page.length as u64;
        Ok(page)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.offset
    }

    /// Writes the index and footer; returns the writer, the index and the file's length.
    pub fn finish(mut self) -> io::Result<(W, Index, u64)> {
        assert!(self.open.is_none(), "a series is still open");
        let mut w = Writer::new();
        w.len32(self.index.len());
        for ((device, measurement), chunk) in &self.index {
            w.str16(device);
            w.str16(measurement);
            w.u8(chunk.data_type.code());
            w.u32(chunk.count);
            w.i64(chunk.min_time);
            w.i64(chunk.max_time);
            chunk
                .stats
                .as_ref()
                .expect("written chunks have statistics")
                .encode(&mut w);
            w.len32(chunk.pages.len());
            for page in &chunk.pages {
                w.u64(page.offset);
                w.u32(page.length);
                w.u32(page.raw_length);
                w.u8(page.compressor.byte());
                w.u32(page.count);
                w.i64(page.min_time);
                w.i64(page.max_time);
                page.stats
                    .as_ref()
                    .expect("written pages have statistics")
                    .encode(&mut w);
            }
        }
        let crc = crc32fast::hash(w.as_slice());
        w.u32(crc);
        let index_length = w.len();
        w.u64(self.offset);
        w.len32(index_length);
        w.bytes(FOOTER_MAGIC);
        self.out.write_all(w.as_slice())?;
        let length = self.offset + w.len() as u64;
        Ok((self.out, self.index, length))
    }
}

/// Rows `range` of a column, borrowed when that is the whole column.
fn rows(values: &Column, range: std::ops::Range<usize>) -> Cow<'_, Column> {
    if range.start == 0 && range.end == values.len() {
        return Cow::Borrowed(values);
    }
    Cow::Owned(values.slice(range))
}

/// Parses and checks a version-2 index (`body` without its CRC, found at `base`).
pub(super) fn parse_index(body: &[u8], base: u64) -> Result<Index, Bad> {
    let decode = |e: DecodeError| (base + e.offset, e.reason);
    let mut r = Reader::new(body);
    let entries = r.u32().map_err(decode)?;
    let mut index = BTreeMap::new();
    for _ in 0..entries {
        let at = base + r.position() as u64;
        let device = r.str16().map_err(decode)?;
        let measurement = r.str16().map_err(decode)?;
        let data_type = r.data_type().map_err(decode)?;
        let count = r.u32().map_err(decode)?;
        let min_time = r.i64().map_err(decode)?;
        let max_time = r.i64().map_err(decode)?;
        let stats = Stats::decode(&mut r, data_type).map_err(decode)?;
        let page_count = r.count(8 + 4 + 4 + 1 + 4 + 8 + 8 + 1).map_err(decode)?;
        let mut pages = Vec::with_capacity(page_count);
        for _ in 0..page_count {
            let page = PageIndex {
                offset: r.u64().map_err(decode)?,
                length: r.u32().map_err(decode)?,
                raw_length: r.u32().map_err(decode)?,
                compressor: {
                    let byte = r.u8().map_err(decode)?;
                    Compressor::from_byte(byte)
                        .ok_or_else(|| (at, format!("unknown compressor byte {byte}")))?
                },
                count: r.u32().map_err(decode)?,
                min_time: r.i64().map_err(decode)?,
                max_time: r.i64().map_err(decode)?,
                stats: Some(Stats::decode(&mut r, data_type).map_err(decode)?),
            };
            check_page(&page, pages.last(), base).map_err(|reason| (at, reason))?;
            pages.push(page);
        }
        let chunk = ChunkIndex {
            data_type,
            count,
            min_time,
            max_time,
            stats: Some(stats),
            pages,
        };
        check_chunk(&chunk).map_err(|reason| (at, reason))?;
        if index
            .insert((device.clone(), measurement.clone()), chunk)
            .is_some()
        {
            return Err((at, format!("{device}.{measurement} indexed twice")));
        }
    }
    r.finish().map_err(decode)?;
    Ok(index)
}

/// A page's index entry is consistent in itself and follows `previous`; `index_offset` is where
/// pages end.
fn check_page(
    page: &PageIndex,
    previous: Option<&PageIndex>,
    index_offset: u64,
) -> Result<(), String> {
    if page.offset < HEADER_BYTES
        || page.length < 4
        || page.offset + page.length as u64 > index_offset
    {
        return Err("page position out of range".into());
    }
    if page.count == 0 || page.count as usize > codec::COUNT_MAX || page.min_time > page.max_time {
        return Err("page count or time range is invalid".into());
    }
    if page.compressor == Compressor::Uncompressed && page.raw_length + 4 != page.length {
        return Err("uncompressed page length differs from its raw length".into());
    }
    if previous.is_some_and(|p| p.max_time >= page.min_time || p.offset >= page.offset) {
        return Err("pages out of order".into());
    }
    Ok(())
}

fn check_chunk(chunk: &ChunkIndex) -> Result<(), String> {
    let (Some(first), Some(last)) = (chunk.pages.first(), chunk.pages.last()) else {
        return Err("chunk without pages".into());
    };
    let points: u64 = chunk.pages.iter().map(|p| p.count as u64).sum();
    if points != chunk.count as u64
        || first.min_time != chunk.min_time
        || last.max_time != chunk.max_time
    {
        return Err("chunk facts do not match its pages".into());
    }
    Ok(())
}

/// Verifies a stored page's CRC (its last 4 bytes); returns the bytes before it.
pub(super) fn check_page_crc(bytes: &[u8]) -> Result<&[u8], Bad> {
    if bytes.len() < 4 {
        return Err((0, "page shorter than its CRC".into()));
    }
    let (stored, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(stored) != u32::from_le_bytes(crc.try_into().unwrap()) {
        return Err((0, "page CRC mismatch".into()));
    }
    Ok(stored)
}

/// Decodes one stored page (CRC included) of a `data_type` series.
pub(super) fn decode_page(
    bytes: &[u8],
    data_type: DataType,
    page: &PageIndex,
) -> Result<(Vec<i64>, Column), Bad> {
    let stored = check_page_crc(bytes)?;
    let mut decompressed = Vec::new();
    let raw = match page.compressor {
        Compressor::Uncompressed => stored,
        compressor => {
            codec::decompress(
                compressor,
                stored,
                page.raw_length as usize,
                &mut decompressed,
            )
            .map_err(|e| (0, format!("page does not decompress: {e}")))?;
            &decompressed
        }
    };
    if raw.len() != page.raw_length as usize || raw.len() < 4 {
        return Err((0, "page's raw length differs from its index entry".into()));
    }
    let ts_bytes = u32::from_le_bytes(raw[..4].try_into().unwrap()) as usize;
    if ts_bytes > raw.len() - 4 {
        return Err((0, "timestamps overrun the page".into()));
    }
    let count = page.count as usize;
    let bad = |e: codec::CodecError| (0, format!("page does not decode: {e}"));
    let timestamps = codec::decode_timestamps(&raw[4..4 + ts_bytes], count).map_err(bad)?;
    let values = codec::decode_column(&raw[4 + ts_bytes..], data_type, count).map_err(bad)?;
    if timestamps.windows(2).any(|w| w[0] >= w[1])
        || timestamps.first() != Some(&page.min_time)
        || timestamps.last() != Some(&page.max_time)
    {
        return Err((0, "page timestamps disagree with its index entry".into()));
    }
    Ok((timestamps, values))
}

#[cfg(test)]
mod tests {
    use super::super::{FileCache, SealedFile};
    use super::*;
    use crate::error::StorageError;

    fn encode(series: &[(&str, &str, Vec<i64>, Column)], options: SealedOptions) -> Vec<u8> {
        let header = Header {
            time_slot: 2,
            checkpoint: 9,
        };
        let mut writer = SealedWriter::new(Vec::new(), header, options).unwrap();
        for (d, m, ts, values) in series {
            writer
                .series(d, m, ts, values, SeriesCodec::default())
                .unwrap();
        }
        writer.finish().unwrap().0
    }

    fn sample() -> Vec<(&'static str, &'static str, Vec<i64>, Column)> {
        vec![
            ("root.sg.d1", "s1", vec![3, 5], Column::Int64(vec![30, 50])),
            (
                "root.sg.d1",
                "s2",
                (0..25).map(|i| i * 1000).collect(),
                Column::Double((0..25).map(|i| 20.0 + i as f64 / 100.0).collect()),
            ),
        ]
    }

    /// Pins the version-2 bytes: header, the first page, and the shape of the index.
    #[test]
    fn golden_sealed_file_v2() {
        let bytes = encode(&sample(), SealedOptions::default());
        #[rustfmt::skip]
        let header: Vec<u8> = [
            &b"FPSEAL02"[..], &[2, 0, 0, 0], &[2, 0, 0, 0, 0, 0, 0, 0], &[9, 0, 0, 0, 0, 0, 0, 0],
        ].concat();
        assert_eq!(&bytes[..28], &header[..]);
        assert_eq!(&bytes[28..32], &crc32fast::hash(&header).to_le_bytes());
        // The first page: raw (too small to compress), the timestamps then the column.
        let mut raw = Vec::new();
        codec::encode_timestamps(&[3, 5], &mut raw);
        let ts_len = raw.len() as u32;
        codec::encode_column(&Column::Int64(vec![30, 50]), Choice::Adaptive, &mut raw);
        let page = [&ts_len.to_le_bytes()[..], &raw].concat();
        assert_eq!(&bytes[32..32 + page.len()], &page[..]);
        assert_eq!(
            &bytes[32 + page.len()..36 + page.len()],
            &crc32fast::hash(&page).to_le_bytes()
        );
        assert_eq!(&bytes[bytes.len() - 8..], b"FPSEALND");
        // The exact bytes of this file, to notice any change of the format.
        assert_eq!(
            crc32fast::hash(&bytes),
            GOLDEN_CRC,
            "the v2 encoding of the sample changed: {} bytes",
            bytes.len()
        );
    }

    /// CRC32 of the sample's 419 bytes in version 2 (written when the format was fixed).
    const GOLDEN_CRC: u32 = 0x115f_9017;

    #[test]
    fn pages_split_prune_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.fps");
        let options = SealedOptions {
            page_points: 10,
            ..SealedOptions::default()
        };
        std::fs::write(&path, encode(&sample(), options)).unwrap();
        let file = SealedFile::open(&path, &FileCache::new(2)).unwrap();
        assert_eq!(file.version(), 2);
        let chunk = file.chunk("root.sg.d1", "s2").unwrap();
        assert_eq!(chunk.pages.len(), 3);
        assert_eq!(chunk.count, 25);
        let stats = chunk.stats.as_ref().unwrap();
        assert_eq!(stats.first, Some(common::Value::Double(20.0)));
        assert_eq!(stats.last, Some(common::Value::Double(20.24)));
        let (ts, values) = file.read("root.sg.d1", "s2").unwrap().unwrap();
        assert_eq!(ts, sample()[1].2);
        assert_eq!(values, sample()[1].3);
        // Evenly filled pages of 8, 8 and 9 points: only the middle one holds 12000..=15000.
        let counts: Vec<u32> = chunk.pages.iter().map(|p| p.count).collect();
        assert_eq!(counts, vec![8, 8, 9]);
        let (ts, _) = file
            .read_range("root.sg.d1", "s2", 12_000, 15_000)
            .unwrap()
            .unwrap();
        assert_eq!(ts, (8..16).map(|i| i * 1000).collect::<Vec<_>>());
        assert!(file.read("root.sg.d1", "s3").unwrap().is_none());
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.fps");
        let clean = encode(
            &sample(),
            SealedOptions {
                page_points: 10,
                ..SealedOptions::default()
            },
        );
        for i in 0..clean.len() {
            let mut bytes = clean.clone();
            bytes[i] ^= 0x10;
            std::fs::write(&path, &bytes).unwrap();
            let outcome = SealedFile::open(&path, &FileCache::new(1)).and_then(|f| {
                f.read("root.sg.d1", "s1")?;
                f.read("root.sg.d1", "s2")
            });
            match outcome {
                Err(StorageError::Corruption { .. }) => {}
                other => panic!("flip at byte {i} not detected: {other:?}"),
            }
        }
    }
}
