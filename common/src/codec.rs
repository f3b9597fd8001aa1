//! The one little-endian byte codec of every Fencepost encoding (log commands, sealed files, the
//! manifest, region and ConfigNode snapshots). [`Writer`] narrows lengths with a check: a length
//! past its field's width is a bug (inputs are validated against far smaller limits first), so it
//! panics naming the value instead of writing a truncated length that decodes as garbage.
//! [`Reader`] bounds-checks every read and never allocates more than the bytes it holds.

use std::ops::Range;

use crate::{Bitmap, Column, DataType};

/// Why a byte string did not decode; `offset` is relative to the start of the decoded buffer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("decode error at byte {offset}: {reason}")]
pub struct DecodeError {
    /// Byte offset of the problem.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// The result of a decode.
pub type DecodeResult<T> = std::result::Result<T, DecodeError>;

/// `n` as a u32 length or count; past u32 it is a bug, not input (see the module comment).
pub fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| panic!("length {n} exceeds the u32 field"))
}

/// Appends little-endian values to a buffer.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }
    /// An empty writer with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Writer {
        Writer {
            buf: Vec::with_capacity(capacity),
        }
    }
    /// Bytes written so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Nothing written yet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// The bytes written so far.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }
    /// Forgets what was written, keeping the allocation (for writing chunk after chunk).
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
    }
    /// The finished bytes.
    #[inline]
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
    /// One byte.
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// 2 bytes.
    #[inline]
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// 4 bytes.
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// 8 bytes.
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// 8 bytes.
    #[inline]
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// One byte, 0 or 1.
    #[inline]
    pub fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    /// Raw bytes, no length.
    #[inline]
    pub fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// A u32 length or item count (checked narrowing); the caller writes the items.
    #[inline]
    pub fn len32(&mut self, n: usize) {
        self.u32(len32(n));
    }
    /// u32 length, then the bytes.
    #[inline]
    pub fn bytes32(&mut self, v: &[u8]) {
        self.len32(v.len());
        self.bytes(v);
    }
    /// A string of at most 65535 bytes: u16 length, then UTF-8 bytes. Longer strings are a bug:
    /// paths are validated against a smaller limit before they reach an encoder.
    #[inline]
    pub fn str16(&mut self, v: &str) {
        let len = u16::try_from(v.len())
            .unwrap_or_else(|_| panic!("string of {} bytes exceeds the u16 length", v.len()));
        self.u16(len);
        self.bytes(v.as_bytes());
    }
    /// Fixed-width values in one pass over a pre-sized tail, `N` little-endian bytes each:
    /// cheaper than growing the buffer value by value (sealed files and log entries are mostly
    /// timestamps and numeric columns).
    #[inline]
    fn fixed<T: Copy, const N: usize>(&mut self, values: &[T], to_le: impl Fn(T) -> [u8; N]) {
        let start = self.buf.len();
        self.buf.resize(start + N * values.len(), 0);
        for (out, &v) in self.buf[start..].chunks_exact_mut(N).zip(values) {
            out.copy_from_slice(&to_le(v));
        }
    }
    /// Timestamps (or any i64s), 8 bytes each.
    #[inline]
    pub fn i64s(&mut self, values: &[i64]) {
        self.fixed(values, i64::to_le_bytes);
    }
    /// Column values for the given rows, in row order (TEXT, STRING and BLOB: u32 length + bytes
    /// each; TIMESTAMP and DATE as INT64 and INT32).
    #[inline]
    pub fn column_rows(&mut self, column: &Column, rows: Range<usize>) {
        match column {
            Column::Boolean(v) => self.fixed(&v[rows], |b| [b as u8]),
            Column::Int32(v) | Column::Date(v) => self.fixed(&v[rows], i32::to_le_bytes),
            Column::Int64(v) | Column::Timestamp(v) => self.i64s(&v[rows]),
            Column::Float(v) => self.fixed(&v[rows], f32::to_le_bytes),
            Column::Double(v) => self.fixed(&v[rows], f64::to_le_bytes),
            Column::Text(v) | Column::String(v) => {
                v[rows].iter().for_each(|s| self.bytes32(s.as_bytes()))
            }
            Column::Blob(v) => v[rows].iter().for_each(|b| self.bytes32(b)),
        }
    }
    /// A bitmap restricted to `rows` (in order) as `ceil(rows / 64)` u64 words.
    pub fn bitmap_rows(&mut self, bitmap: &Bitmap, rows: &[usize]) {
        let mut word = 0u64;
        for (i, &r) in rows.iter().enumerate() {
            if bitmap.get(r) {
                word |= 1 << (i % 64);
            }
            if i % 64 == 63 {
                self.u64(word);
                word = 0;
            }
        }
        if !rows.len().is_multiple_of(64) {
            self.u64(word);
        }
    }
}

/// Reads little-endian values from a buffer, failing with the offset instead of panicking.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Added to reported offsets: where `buf` starts in the whole encoding.
    base: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader::at(buf, 0)
    }
    /// A reader over `buf`, which starts `base` bytes into the whole encoding (errors report
    /// offsets in the whole encoding).
    pub fn at(buf: &'a [u8], base: usize) -> Reader<'a> {
        Reader { buf, pos: 0, base }
    }
    /// Bytes read so far.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// A decode error at the current position.
    pub fn error<T>(&self, reason: impl Into<String>) -> DecodeResult<T> {
        self.error_at(self.pos, reason)
    }
    fn error_at<T>(&self, pos: usize, reason: impl Into<String>) -> DecodeResult<T> {
        Err(DecodeError {
            offset: (self.base + pos) as u64,
            reason: reason.into(),
        })
    }
    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        if self.remaining() < n {
            return self.error(format!("needs {n} bytes, {} remain", self.remaining()));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    #[inline]
    fn array<const N: usize>(&mut self) -> DecodeResult<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("take returned N bytes"))
    }
    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> DecodeResult<u8> {
        Ok(self.array::<1>()?[0])
    }
    /// 2 bytes.
    #[inline]
    pub fn u16(&mut self) -> DecodeResult<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// 4 bytes.
    #[inline]
    pub fn u32(&mut self) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// 8 bytes.
    #[inline]
    pub fn u64(&mut self) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// 8 bytes.
    #[inline]
    pub fn i64(&mut self) -> DecodeResult<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// One byte that must be 0 or 1.
    #[inline]
    pub fn bool(&mut self) -> DecodeResult<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => self.error_at(self.pos - 1, format!("bool byte {b}")),
        }
    }
    /// A u32 count of items each at least `item_bytes_min` long; a count the remaining bytes
    /// cannot hold is refused before anything is allocated.
    pub fn count(&mut self, item_bytes_min: usize) -> DecodeResult<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(item_bytes_min.max(1)) > self.remaining() {
            return self.error(format!(
                "count {n} (at least {item_bytes_min} bytes each) exceeds the {} remaining bytes",
                self.remaining()
            ));
        }
        Ok(n)
    }
    /// u32 length, then that many bytes.
    #[inline]
    pub fn bytes32(&mut self) -> DecodeResult<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    /// `count` i64s; the byte count is checked before anything is allocated.
    #[inline]
    pub fn i64s(&mut self, count: usize) -> DecodeResult<Vec<i64>> {
        if count.saturating_mul(8) > self.remaining() {
            return self.error(format!(
                "{count} i64s cannot fit the remaining bytes ({} needed, {} remain)",
                count.saturating_mul(8),
                self.remaining()
            ));
        }
        self.fixed(count, i64::from_le_bytes)
    }
    /// `count` fixed-width values of `N` little-endian bytes each, the inverse of
    /// `Writer::fixed`. `take` checks the byte count before anything is allocated.
    #[inline]
    fn fixed<T, const N: usize>(
        &mut self,
        count: usize,
        from_le: impl Fn([u8; N]) -> T,
    ) -> DecodeResult<Vec<T>> {
        let Some(len) = N.checked_mul(count) else {
            return self.error(format!("{count} values of {N} bytes overflow"));
        };
        Ok(self
            .take(len)?
            .chunks_exact(N)
            .map(|c| from_le(c.try_into().expect("chunks of N bytes")))
            .collect())
    }
    /// u16 length, then UTF-8 bytes.
    #[inline]
    pub fn str16(&mut self) -> DecodeResult<String> {
        let len = self.u16()? as usize;
        let at = self.pos;
        let bytes = self.take(len)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => self.error_at(at, "string is not UTF-8"),
        }
    }
    /// A data type code.
    pub fn data_type(&mut self) -> DecodeResult<DataType> {
        let code = self.u8()?;
        match DataType::from_code(code) {
            Some(t) => Ok(t),
            None => self.error_at(self.pos - 1, format!("unknown data type code {code}")),
        }
    }
    /// `count` values of a type ([`Writer::column_rows`]); the byte count is checked before
    /// anything is allocated.
    pub fn column(&mut self, data_type: DataType, count: usize) -> DecodeResult<Column> {
        let width = match data_type.physical() {
            DataType::Boolean => 1,
            DataType::Int32 | DataType::Float => 4,
            DataType::Int64 | DataType::Double => 8,
            DataType::Text => 4, // at least the length word per value
            other => unreachable!("{other} is no physical type"),
        };
        if count.saturating_mul(width) > self.remaining() {
            return self.error(format!(
                "{count} {data_type} values need at least {} bytes, {} remain",
                count.saturating_mul(width),
                self.remaining()
            ));
        }
        Ok(match data_type {
            DataType::Boolean => {
                let mut out = Vec::with_capacity(count);
                for _ in 0..count {
                    match self.u8()? {
                        0 => out.push(false),
                        1 => out.push(true),
                        b => return self.error_at(self.pos - 1, format!("boolean byte {b}")),
                    }
                }
                Column::Boolean(out)
            }
            DataType::Int32 => Column::Int32(self.fixed(count, i32::from_le_bytes)?),
            DataType::Int64 => Column::Int64(self.fixed(count, i64::from_le_bytes)?),
            DataType::Float => Column::Float(self.fixed(count, f32::from_le_bytes)?),
            DataType::Double => Column::Double(self.fixed(count, f64::from_le_bytes)?),
            DataType::Timestamp => Column::Timestamp(self.fixed(count, i64::from_le_bytes)?),
            DataType::Date => Column::Date(self.fixed(count, i32::from_le_bytes)?),
            DataType::Text => Column::Text(self.strings(count, data_type)?),
            DataType::String => Column::String(self.strings(count, data_type)?),
            DataType::Blob => {
                let mut out = Vec::with_capacity(count);
                for _ in 0..count {
                    out.push(self.bytes32()?.to_vec());
                }
                Column::Blob(out)
            }
        })
    }
    /// `count` UTF-8 values of `data_type`, each a u32 length and bytes.
    fn strings(&mut self, count: usize, data_type: DataType) -> DecodeResult<Vec<String>> {
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let at = self.pos + 4;
            let bytes = self.bytes32()?;
            match std::str::from_utf8(bytes) {
                Ok(s) => out.push(s.to_string()),
                Err(_) => return self.error_at(at, format!("{data_type} value is not UTF-8")),
            }
        }
        Ok(out)
    }
    /// A bitmap of `len` bits stored as `ceil(len / 64)` u64 words; bits past `len` must be 0.
    pub fn bitmap(&mut self, len: usize) -> DecodeResult<Bitmap> {
        let words = len.div_ceil(64);
        if words.saturating_mul(8) > self.remaining() {
            return self.error("bitmap longer than the remaining bytes");
        }
        let mut bitmap = Bitmap::new(len);
        for w in 0..words {
            let word = self.u64()?;
            for bit in 0..64 {
                if word & (1 << bit) != 0 {
                    let row = w * 64 + bit;
                    if row >= len {
                        return self.error(format!("bitmap bit {row} set past {len} rows"));
                    }
                    bitmap.set(row);
                }
            }
        }
        Ok(bitmap)
    }
    /// Fails unless every byte was read.
    pub fn finish(&self) -> DecodeResult<()> {
        if self.remaining() != 0 {
            return self.error(format!("{} trailing bytes", self.remaining()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips() {
        let mut w = Writer::new();
        w.u8(7);
        w.u16(0xBEEF);
        w.u32(u32::MAX);
        w.u64(1 << 40);
        w.i64(-5);
        w.bool(true);
        w.str16("root.sg.d1");
        w.bytes32(b"abc");
        w.i64s(&[1, -2, 3]);
        w.column_rows(&Column::Text(vec!["x".into(), "yz".into()]), 0..2);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 0xBEEF);
        assert_eq!(r.u32().unwrap(), u32::MAX);
        assert_eq!(r.u64().unwrap(), 1 << 40);
        assert_eq!(r.i64().unwrap(), -5);
        assert!(r.bool().unwrap());
        assert_eq!(r.str16().unwrap(), "root.sg.d1");
        assert_eq!(r.bytes32().unwrap(), b"abc");
        assert_eq!(r.i64s(3).unwrap(), vec![1, -2, 3]);
        assert_eq!(
            r.column(DataType::Text, 2).unwrap(),
            Column::Text(vec!["x".into(), "yz".into()])
        );
        r.finish().unwrap();
    }

    #[test]
    fn iotdb_2_types_share_their_physical_bytes() {
        let columns = [
            Column::Timestamp(vec![-1, 1 << 40]),
            Column::Date(vec![20240105, 19700101]),
            Column::String(vec!["é".into(), String::new()]),
            Column::Blob(vec![vec![0xff, 0], vec![]]),
        ];
        for column in &columns {
            let mut w = Writer::new();
            w.column_rows(column, 0..2);
            let bytes = w.into_bytes();
            let mut physical = Writer::new();
            physical.column_rows(&logical_as_physical(column), 0..2);
            assert_eq!(bytes, physical.into_bytes(), "{:?}", column.data_type());
            let mut r = Reader::new(&bytes);
            assert_eq!(&r.column(column.data_type(), 2).unwrap(), column);
            r.finish().unwrap();
        }
        let mut w = Writer::new();
        w.column_rows(&Column::Blob(vec![vec![0xff]]), 0..1);
        let bytes = w.into_bytes();
        assert!(Reader::new(&bytes).column(DataType::String, 1).is_err());
    }

    /// The same values as the classic type the storage shares (a BLOB as itself).
    fn logical_as_physical(column: &Column) -> Column {
        match column {
            Column::Timestamp(v) => Column::Int64(v.clone()),
            Column::Date(v) => Column::Int32(v.clone()),
            Column::String(v) => Column::Text(v.clone()),
            other => other.clone(),
        }
    }

    #[test]
    fn golden_bytes_are_little_endian() {
        let mut w = Writer::new();
        w.u32(0x0102_0304);
        w.str16("ab");
        w.len32(2);
        assert_eq!(w.as_slice(), &[4, 3, 2, 1, 2, 0, b'a', b'b', 2, 0, 0, 0]);
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let bytes = u32::MAX.to_le_bytes();
        let mut r = Reader::new(&bytes);
        let e = r.count(8).unwrap_err();
        assert_eq!(e.offset, 4, "{e}");
        let mut r = Reader::new(&[]);
        assert!(r.i64s(usize::MAX).is_err());
        assert!(r.column(DataType::Double, usize::MAX / 2).is_err());
    }

    #[test]
    fn errors_name_offsets_in_the_whole_encoding() {
        let bytes = [2u8];
        let mut r = Reader::at(&bytes, 10);
        let e = r.bool().unwrap_err();
        assert_eq!(e.offset, 10, "{e}");
        let mut r = Reader::at(&[], 10);
        assert_eq!(r.u64().unwrap_err().offset, 10);
    }

    #[test]
    fn a_string_past_u16_is_a_bug_that_names_itself() {
        let panic = std::panic::catch_unwind(|| Writer::new().str16(&"x".repeat(70_000)))
            .expect_err("a string past u16 panics");
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("exceeds the u16 length"), "{message}");
        let panic = std::panic::catch_unwind(|| len32(usize::MAX)).expect_err("past u32 panics");
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("exceeds the u32 field"), "{message}");
    }

    #[test]
    fn bitmaps_round_trip_and_refuse_bits_past_the_end() {
        let mut bitmap = Bitmap::new(70);
        bitmap.set(0);
        bitmap.set(69);
        let rows: Vec<usize> = (0..70).collect();
        let mut w = Writer::new();
        w.bitmap_rows(&bitmap, &rows);
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), 16);
        let got = Reader::new(&bytes).bitmap(70).unwrap();
        assert!(got.get(0) && got.get(69) && !got.get(1));
        assert!(Reader::new(&bytes).bitmap(69).is_err());
    }

    proptest::proptest! {
        #[test]
        fn strings_and_numbers_round_trip(s in ".{0,64}", n: u64, v: i64) {
            let mut w = Writer::new();
            w.str16(&s);
            w.u64(n);
            w.i64(v);
            let bytes = w.into_bytes();
            let mut r = Reader::new(&bytes);
            proptest::prop_assert_eq!(r.str16().unwrap(), s);
            proptest::prop_assert_eq!(r.u64().unwrap(), n);
            proptest::prop_assert_eq!(r.i64().unwrap(), v);
            r.finish().unwrap();
        }

        #[test]
        fn a_reader_never_panics_on_garbage(bytes in proptest::collection::vec(0u8..=255, 0..64)) {
            let mut r = Reader::new(&bytes);
            let _ = r.count(1).and_then(|n| r.column(DataType::Text, n));
            let mut r = Reader::new(&bytes);
            let _ = r.str16().and_then(|_| r.bitmap(100));
        }
    }
}
