//! Little-endian byte writing and bounds-checked reading for the ConfigNode's command and snapshot
//! encodings. A reader never allocates more than the bytes it holds.

use crate::error::DecodeError;

#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
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
    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    /// u16 length, then UTF-8 bytes.
    pub(crate) fn str16(&mut self, v: &str) {
        let len = u16::try_from(v.len())
            .unwrap_or_else(|_| panic!("string of {} bytes exceeds the u16 length", v.len()));
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(v.as_bytes());
    }
    /// u32 count; callers then write the items.
    pub(crate) fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or_else(|_| panic!("count {n} exceeds u32")));
    }
}

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub(crate) fn error<T>(&self, reason: impl Into<String>) -> Result<T, DecodeError> {
        Err(DecodeError {
            offset: self.pos as u64,
            reason: reason.into(),
        })
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return self.error(format!(
                "need {n} bytes, {} left",
                self.buf.len() - self.pos
            ));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => self.error(format!("bool byte {b}")),
        }
    }
    pub(crate) fn str16(&mut self) -> Result<String, DecodeError> {
        let len = u16::from_le_bytes(self.array()?) as usize;
        let bytes = self.take(len)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => self.error("string is not UTF-8"),
        }
    }
    /// A u32 count of items each at least `item_bytes_min` long; a count the remaining bytes
    /// cannot hold is refused before anything is allocated.
    pub(crate) fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(item_bytes_min.max(1)) > self.buf.len() - self.pos {
            return self.error(format!("count {n} exceeds the remaining bytes"));
        }
        Ok(n)
    }
    pub(crate) fn data_type(&mut self) -> Result<common::DataType, DecodeError> {
        let code = self.u8()?;
        match common::DataType::from_code(code) {
            Some(t) => Ok(t),
            None => self.error(format!("data type code {code}")),
        }
    }
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.pos != self.buf.len() {
            return self.error(format!("{} trailing bytes", self.buf.len() - self.pos));
        }
        Ok(())
    }
}
