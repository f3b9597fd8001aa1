//! Reading one message of either protocol from a whole frame.

use crate::error::{Error, Result};
use crate::{FieldHeader, MessageHeader, MessageType, Protocol, TType, DEPTH_MAX};

/// The strict binary header's version word (`0x8001` in the high half, the type in the low
/// byte).
const BINARY_VERSION_1: u32 = 0x8001_0000;
const BINARY_VERSION_MASK: u32 = 0xffff_0000;
/// The compact header's protocol id and version.
const COMPACT_PROTOCOL_ID: u8 = 0x82;
const COMPACT_VERSION: u8 = 1;

/// Reads the values of one message, in order. Lengths are checked against the bytes left before
/// anything is allocated; nesting past [`DEPTH_MAX`] is refused.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    protocol: Protocol,
    /// Open structs and containers.
    depth: usize,
    /// Compact: the last field id read in each open struct.
    last_ids: Vec<i16>,
    /// Compact: the value of a bool field, carried in its header.
    pending_bool: Option<bool>,
}

impl<'a> Reader<'a> {
    /// A reader of the message in `buf` (a frame's payload).
    pub fn new(buf: &'a [u8], protocol: Protocol) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            protocol,
            depth: 0,
            last_ids: Vec::new(),
            pending_bool: None,
        }
    }

    /// The protocol read.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn malformed<T>(&self, reason: impl Into<String>) -> Result<T> {
        Err(Error::Malformed {
            at: self.pos,
            reason: reason.into(),
        })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                at: self.pos,
                wanted: n,
                left: self.remaining(),
            });
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes taken"))
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// An unsigned LEB128 varint of at most `bits` bits.
    fn varint(&mut self, bits: u32) -> Result<u64> {
        let start = self.pos;
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let byte = self.u8()?;
            if shift >= bits || (shift > 0 && u64::from(byte & 0x7f) >> (bits - shift) != 0) {
                self.pos = start;
                return self.malformed(format!("varint longer than {bits} bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    fn zigzag(n: u64) -> i64 {
        (n >> 1) as i64 ^ -((n & 1) as i64)
    }

    /// A length (binary: i32; compact: varint), checked to be at most the bytes left divided by
    /// `bytes_each`.
    fn length(&mut self, what: &str, bytes_each: usize) -> Result<usize> {
        let at = self.pos;
        let n: i64 = match self.protocol {
            Protocol::Binary => i64::from(i32::from_be_bytes(self.array()?)),
            Protocol::Compact => self.varint(32)? as i64,
        };
        if n < 0 {
            self.pos = at;
            return self.malformed(format!("{what} of negative length {n}"));
        }
        let n = n as usize;
        if n > self.remaining() / bytes_each.max(1) {
            self.pos = at;
            return self.malformed(format!(
                "{what} of {n} claims more than the {} bytes left",
                self.remaining()
            ));
        }
        Ok(n)
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= DEPTH_MAX {
            return Err(Error::TooDeep(DEPTH_MAX));
        }
        self.depth += 1;
        Ok(())
    }

    /// A message's header, strict or old-style binary, or compact.
    pub fn message_begin(&mut self) -> Result<MessageHeader> {
        match self.protocol {
            Protocol::Binary => {
                let word = u32::from_be_bytes(self.array()?);
                if word & 0x8000_0000 != 0 {
                    if word & BINARY_VERSION_MASK != BINARY_VERSION_1 {
                        return self.malformed(format!("binary protocol version {word:#010x}"));
                    }
                    let kind = self.message_type((word & 0xff) as u8)?;
                    let name = self.string()?;
                    let seqid = i32::from_be_bytes(self.array()?);
                    Ok(MessageHeader { name, kind, seqid })
                } else {
                    // Old-style: the word was the name's length.
                    self.pos -= 4;
                    let name = self.string()?;
                    let kind = self.u8()?;
                    let kind = self.message_type(kind)?;
                    let seqid = i32::from_be_bytes(self.array()?);
                    Ok(MessageHeader { name, kind, seqid })
                }
            }
            Protocol::Compact => {
                let id = self.u8()?;
                if id != COMPACT_PROTOCOL_ID {
                    return self.malformed(format!("compact protocol id {id:#04x}"));
                }
                let byte = self.u8()?;
                if byte & 0x1f != COMPACT_VERSION {
                    return self.malformed(format!("compact protocol version {}", byte & 0x1f));
                }
                let kind = self.message_type(byte >> 5)?;
                let seqid = self.varint(32)? as u32 as i32;
                let name = self.string()?;
                Ok(MessageHeader { name, kind, seqid })
            }
        }
    }

    fn message_type(&self, code: u8) -> Result<MessageType> {
        match MessageType::from_code(code) {
            Some(kind) => Ok(kind),
            None => self.malformed(format!("message type {code}")),
        }
    }

    /// Enters a struct.
    pub fn struct_begin(&mut self) -> Result<()> {
        self.enter()?;
        if self.protocol == Protocol::Compact {
            self.last_ids.push(0);
        }
        Ok(())
    }

    /// Leaves a struct (after [`Reader::field_begin`] answered `None`).
    pub fn struct_end(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.protocol == Protocol::Compact {
            self.last_ids.pop();
        }
    }

    /// The next field's header, or `None` at the struct's end.
    pub fn field_begin(&mut self) -> Result<Option<FieldHeader>> {
        let at = self.pos;
        match self.protocol {
            Protocol::Binary => {
                let code = self.u8()?;
                let Some(ttype) = TType::from_binary(code) else {
                    self.pos = at;
                    return self.malformed(format!("field type {code}"));
                };
                if ttype == TType::Stop {
                    return Ok(None);
                }
                let id = i16::from_be_bytes(self.array()?);
                Ok(Some(FieldHeader { ttype, id }))
            }
            Protocol::Compact => {
                let byte = self.u8()?;
                if byte == 0 {
                    return Ok(None);
                }
                let code = byte & 0x0f;
                // Type 0 is STOP only as the whole byte 0.
                let Some(ttype) = TType::from_compact(code).filter(|t| *t != TType::Stop) else {
                    self.pos = at;
                    return self.malformed(format!("field type {code}"));
                };
                let delta = byte >> 4;
                let last = self.last_ids.last().copied().unwrap_or(0);
                let id = if delta == 0 {
                    let id = Self::zigzag(self.varint(16)?);
                    match i16::try_from(id) {
                        Ok(id) => id,
                        Err(_) => return self.malformed(format!("field id {id}")),
                    }
                } else {
                    match last.checked_add(i16::from(delta)) {
                        Some(id) => id,
                        None => return self.malformed("field id past i16"),
                    }
                };
                if let Some(last) = self.last_ids.last_mut() {
                    *last = id;
                }
                if ttype == TType::Bool {
                    self.pending_bool = Some(code == 1);
                }
                Ok(Some(FieldHeader { ttype, id }))
            }
        }
    }

    /// A `bool`.
    pub fn bool(&mut self) -> Result<bool> {
        if let Some(value) = self.pending_bool.take() {
            return Ok(value);
        }
        let byte = self.u8()?;
        match (self.protocol, byte) {
            (Protocol::Binary, b) => Ok(b != 0),
            (Protocol::Compact, 1) => Ok(true),
            // 2 is the spec's false; some writers put 0.
            (Protocol::Compact, 0 | 2) => Ok(false),
            (Protocol::Compact, b) => {
                self.pos -= 1;
                self.malformed(format!("compact bool {b}"))
            }
        }
    }

    /// A `byte`.
    pub fn i8(&mut self) -> Result<i8> {
        Ok(self.u8()? as i8)
    }

    /// An `i16`.
    pub fn i16(&mut self) -> Result<i16> {
        match self.protocol {
            Protocol::Binary => Ok(i16::from_be_bytes(self.array()?)),
            Protocol::Compact => Ok(Self::zigzag(self.varint(16)?) as i16),
        }
    }

    /// An `i32`.
    pub fn i32(&mut self) -> Result<i32> {
        match self.protocol {
            Protocol::Binary => Ok(i32::from_be_bytes(self.array()?)),
            Protocol::Compact => Ok(Self::zigzag(self.varint(32)?) as i32),
        }
    }

    /// An `i64`.
    pub fn i64(&mut self) -> Result<i64> {
        match self.protocol {
            Protocol::Binary => Ok(i64::from_be_bytes(self.array()?)),
            Protocol::Compact => Ok(Self::zigzag(self.varint(64)?)),
        }
    }

    /// A `double` (compact: little-endian, as the spec says).
    pub fn double(&mut self) -> Result<f64> {
        let bytes = self.array()?;
        Ok(match self.protocol {
            Protocol::Binary => f64::from_be_bytes(bytes),
            Protocol::Compact => f64::from_le_bytes(bytes),
        })
    }

    /// The offset in the message of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// A `binary`: a slice of the message.
    pub fn binary(&mut self) -> Result<&'a [u8]> {
        let n = self.length("binary", 1)?;
        self.take(n)
    }

    /// A `string`: UTF-8.
    pub fn string(&mut self) -> Result<String> {
        let at = self.pos;
        let bytes = self.binary()?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => {
                self.pos = at;
                self.malformed(format!("string is not UTF-8: {e}"))
            }
        }
    }

    /// A list's element type and length; read the elements, then [`Reader::container_end`].
    pub fn list_begin(&mut self) -> Result<(TType, usize)> {
        self.enter()?;
        let at = self.pos;
        match self.protocol {
            Protocol::Binary => {
                let code = self.u8()?;
                let Some(ttype) = TType::from_binary(code).filter(|t| *t != TType::Stop) else {
                    self.pos = at;
                    return self.malformed(format!("element type {code}"));
                };
                Ok((ttype, self.length("list", 1)?))
            }
            Protocol::Compact => {
                let byte = self.u8()?;
                let code = byte & 0x0f;
                let Some(ttype) = TType::from_compact(code).filter(|t| *t != TType::Stop) else {
                    self.pos = at;
                    return self.malformed(format!("element type {code}"));
                };
                let n = match byte >> 4 {
                    15 => self.length("list", 1)?,
                    n => {
                        let n = usize::from(n);
                        if n > self.remaining() {
                            self.pos = at;
                            return self.malformed(format!("list of {n} past the message end"));
                        }
                        n
                    }
                };
                Ok((ttype, n))
            }
        }
    }

    /// A set's element type and length (laid out as a list).
    pub fn set_begin(&mut self) -> Result<(TType, usize)> {
        self.list_begin()
    }

    /// A map's key and value types and length; an empty compact map names no types (both
    /// `Stop`).
    pub fn map_begin(&mut self) -> Result<(TType, TType, usize)> {
        self.enter()?;
        let at = self.pos;
        let (key, value, n) = match self.protocol {
            Protocol::Binary => {
                let (k, v) = (self.u8()?, self.u8()?);
                (
                    TType::from_binary(k),
                    TType::from_binary(v),
                    self.length("map", 2)?,
                )
            }
            Protocol::Compact => {
                let n = self.length("map", 2)?;
                if n == 0 {
                    return Ok((TType::Stop, TType::Stop, 0));
                }
                let types = self.u8()?;
                (
                    TType::from_compact(types >> 4),
                    TType::from_compact(types & 0x0f),
                    n,
                )
            }
        };
        match (key, value) {
            (Some(k), Some(v)) if k != TType::Stop && v != TType::Stop => Ok((k, v, n)),
            _ => {
                self.pos = at;
                self.malformed("map key or value type")
            }
        }
    }

    /// Leaves a list, set or map.
    pub fn container_end(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Reads past a value of `ttype` (a field this reader does not know).
    pub fn skip(&mut self, ttype: TType) -> Result<()> {
        match ttype {
            TType::Stop => self.malformed("a value of type STOP"),
            TType::Bool => self.bool().map(drop),
            TType::Byte => self.i8().map(drop),
            TType::I16 => self.i16().map(drop),
            TType::I32 => self.i32().map(drop),
            TType::I64 => self.i64().map(drop),
            TType::Double => self.double().map(drop),
            TType::String => self.binary().map(drop),
            TType::Struct => {
                self.struct_begin()?;
                while let Some(field) = self.field_begin()? {
                    self.skip(field.ttype)?;
                }
                self.struct_end();
                Ok(())
            }
            TType::List | TType::Set => {
                let (element, n) = self.list_begin()?;
                for _ in 0..n {
                    self.skip(element)?;
                }
                self.container_end();
                Ok(())
            }
            TType::Map => {
                let (key, value, n) = self.map_begin()?;
                for _ in 0..n {
                    self.skip(key)?;
                    self.skip(value)?;
                }
                self.container_end();
                Ok(())
            }
        }
    }

    /// Fails unless the whole message was read.
    pub fn finish(&self) -> Result<()> {
        if self.remaining() > 0 {
            return self.malformed(format!("{} bytes after the message", self.remaining()));
        }
        Ok(())
    }
}
