//! Little-endian byte writing and bounds-checked reading shared by every engine encoding (log
//! entries, sealed files, the manifest). A reader never allocates more than the bytes it holds.

use std::ops::Range;

use common::{Bitmap, Column, DataType};

/// Why a byte string did not decode; `offset` is relative to the start of the decoded buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset of the problem.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

pub(crate) type DecodeResult<T> = std::result::Result<T, DecodeError>;

/// Appends little-endian values to a buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn with_capacity(capacity: usize) -> Writer {
        Writer {
            buf: Vec::with_capacity(capacity),
        }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// A string of at most 65535 bytes: u16 length, then UTF-8 bytes. Longer strings are a bug:
    /// paths are validated against a smaller limit before they reach an encoder.
    pub(crate) fn str16(&mut self, v: &str) {
        let len = u16::try_from(v.len())
            .unwrap_or_else(|_| panic!("string of {} bytes exceeds the u16 length", v.len()));
        self.u16(len);
        self.bytes(v.as_bytes());
    }
    /// Fixed-width values in one pass over a pre-sized tail, `N` little-endian bytes each:
    /// cheaper than growing the buffer value by value (sealed files and log entries are mostly
    /// timestamps and numeric columns).
    fn fixed<T: Copy, const N: usize>(&mut self, values: &[T], to_le: impl Fn(T) -> [u8; N]) {
        let start = self.buf.len();
        self.buf.resize(start + N * values.len(), 0);
        for (out, &v) in self.buf[start..].chunks_exact_mut(N).zip(values) {
            out.copy_from_slice(&to_le(v));
        }
    }
    /// Timestamps (or any i64s), 8 bytes each.
    pub(crate) fn i64s(&mut self, values: &[i64]) {
        self.fixed(values, i64::to_le_bytes);
    }
    /// Column values for the given rows, in row order.
    pub(crate) fn column_rows(&mut self, column: &Column, rows: Range<usize>) {
        match column {
            Column::Boolean(v) => self.fixed(&v[rows], |b| [b as u8]),
            Column::Int32(v) => self.fixed(&v[rows], i32::to_le_bytes),
            Column::Int64(v) => self.i64s(&v[rows]),
            Column::Float(v) => self.fixed(&v[rows], f32::to_le_bytes),
            Column::Double(v) => self.fixed(&v[rows], f64::to_le_bytes),
            Column::Text(v) => v[rows].iter().for_each(|s| {
                self.u32(s.len() as u32);
                self.bytes(s.as_bytes());
            }),
        }
    }
}

/// Reads little-endian values from a buffer, failing with the offset instead of panicking.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub(crate) fn position(&self) -> usize {
        self.pos
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(crate) fn error<T>(&self, reason: impl Into<String>) -> DecodeResult<T> {
        Err(DecodeError {
            offset: self.pos as u64,
            reason: reason.into(),
        })
    }
    pub(crate) fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        if self.remaining() < n {
            return self.error(format!("needs {n} bytes, {} remain", self.remaining()));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> DecodeResult<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("take returned N bytes"))
    }
    pub(crate) fn u8(&mut self) -> DecodeResult<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> DecodeResult<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn i64(&mut self) -> DecodeResult<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    /// `count` i64s; the byte count is checked before anything is allocated.
    pub(crate) fn i64s(&mut self, count: usize) -> DecodeResult<Vec<i64>> {
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
    fn fixed<T, const N: usize>(
        &mut self,
        count: usize,
        from_le: impl Fn([u8; N]) -> T,
    ) -> DecodeResult<Vec<T>> {
        Ok(self
            .take(N.saturating_mul(count))?
            .chunks_exact(N)
            .map(|c| from_le(c.try_into().expect("chunks of N bytes")))
            .collect())
    }
    pub(crate) fn str16(&mut self) -> DecodeResult<String> {
        let len = self.u16()? as usize;
        let at = self.pos;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError {
            offset: at as u64,
            reason: "string is not UTF-8".into(),
        })
    }
    pub(crate) fn data_type(&mut self) -> DecodeResult<DataType> {
        let code = self.u8()?;
        match DataType::from_code(code) {
            Some(t) => Ok(t),
            None => self.error(format!("unknown data type code {code}")),
        }
    }
    /// `count` values of a type; the byte count is checked before anything is allocated.
    pub(crate) fn column(&mut self, data_type: DataType, count: usize) -> DecodeResult<Column> {
        let width = match data_type {
            DataType::Boolean => 1,
            DataType::Int32 | DataType::Float => 4,
            DataType::Int64 | DataType::Double => 8,
            DataType::Text => 4, // at least the length word per value
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
                        b => return self.error(format!("boolean byte {b}")),
                    }
                }
                Column::Boolean(out)
            }
            DataType::Int32 => Column::Int32(self.fixed(count, i32::from_le_bytes)?),
            DataType::Int64 => Column::Int64(self.fixed(count, i64::from_le_bytes)?),
            DataType::Float => Column::Float(self.fixed(count, f32::from_le_bytes)?),
            DataType::Double => Column::Double(self.fixed(count, f64::from_le_bytes)?),
            DataType::Text => {
                let mut out = Vec::with_capacity(count);
                for _ in 0..count {
                    let len = self.u32()? as usize;
                    let at = self.pos;
                    let bytes = self.take(len)?;
                    out.push(String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError {
                        offset: at as u64,
                        reason: "TEXT value is not UTF-8".into(),
                    })?);
                }
                Column::Text(out)
            }
        })
    }
    /// A bitmap of `len` bits stored as `ceil(len / 64)` u64 words; bits past `len` must be 0.
    pub(crate) fn bitmap(&mut self, len: usize) -> DecodeResult<Bitmap> {
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
    pub(crate) fn finish(&self) -> DecodeResult<()> {
        if self.remaining() != 0 {
            return self.error(format!("{} trailing bytes", self.remaining()));
        }
        Ok(())
    }
}

/// Writes a bitmap restricted to `rows` (in order) as u64 words.
pub(crate) fn write_bitmap_rows(w: &mut Writer, bitmap: &Bitmap, rows: &[usize]) {
    let mut word = 0u64;
    for (i, &r) in rows.iter().enumerate() {
        if bitmap.get(r) {
            word |= 1 << (i % 64);
        }
        if i % 64 == 63 {
            w.u64(word);
            word = 0;
        }
    }
    if !rows.len().is_multiple_of(64) {
        w.u64(word);
    }
}
