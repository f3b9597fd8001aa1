//! Writing one message of either protocol.

use crate::{MessageType, Protocol, TType};

/// Writes the values of one message, in order, into a byte vector.
pub struct Writer {
    out: Vec<u8>,
    protocol: Protocol,
    /// Compact: the last field id written in each open struct.
    last_ids: Vec<i16>,
    /// Compact: a bool field whose header waits for its value.
    pending_bool: Option<i16>,
}

impl Writer {
    /// An empty message of `protocol`.
    pub fn new(protocol: Protocol) -> Writer {
        Writer {
            out: Vec::new(),
            protocol,
            last_ids: Vec::new(),
            pending_bool: None,
        }
    }

    /// The message's bytes (unframed: see [`crate::frame`]).
    pub fn into_bytes(self) -> Vec<u8> {
        debug_assert!(self.last_ids.is_empty(), "a struct left open");
        self.out
    }

    fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.out.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.out.push(n as u8);
    }

    fn zigzag(&mut self, n: i64) {
        self.varint(((n << 1) ^ (n >> 63)) as u64);
    }

    fn length(&mut self, n: usize) {
        let n = i32::try_from(n).expect("a Thrift length fits i32");
        match self.protocol {
            Protocol::Binary => self.out.extend_from_slice(&n.to_be_bytes()),
            Protocol::Compact => self.varint(n as u64),
        }
    }

    /// A message header: strict binary (`0x8001`, type, name, seqid) or compact.
    pub fn message_begin(&mut self, name: &str, kind: MessageType, seqid: i32) {
        match self.protocol {
            Protocol::Binary => {
                let word = 0x8001_0000u32 | kind as u32;
                self.out.extend_from_slice(&word.to_be_bytes());
                self.string(name);
                self.out.extend_from_slice(&seqid.to_be_bytes());
            }
            Protocol::Compact => {
                self.out.push(0x82);
                self.out.push(((kind as u8) << 5) | 1);
                self.varint(u64::from(seqid as u32));
                self.string(name);
            }
        }
    }

    /// Opens a struct.
    pub fn struct_begin(&mut self) {
        if self.protocol == Protocol::Compact {
            self.last_ids.push(0);
        }
    }

    /// Closes a struct (after [`Writer::field_stop`]).
    pub fn struct_end(&mut self) {
        if self.protocol == Protocol::Compact {
            self.last_ids.pop();
        }
    }

    /// A field's header; its value follows.
    pub fn field_begin(&mut self, ttype: TType, id: i16) {
        match self.protocol {
            Protocol::Binary => {
                self.out.push(ttype as u8);
                self.out.extend_from_slice(&id.to_be_bytes());
            }
            Protocol::Compact if ttype == TType::Bool => self.pending_bool = Some(id),
            Protocol::Compact => self.compact_field_header(ttype.compact(), id),
        }
    }

    fn compact_field_header(&mut self, code: u8, id: i16) {
        let last = self.last_ids.last_mut().expect("a field outside a struct");
        let delta = i32::from(id) - i32::from(*last);
        *last = id;
        if (1..=15).contains(&delta) {
            self.out.push(((delta as u8) << 4) | code);
        } else {
            self.out.push(code);
            self.zigzag(i64::from(id));
        }
    }

    /// Ends a struct's fields.
    pub fn field_stop(&mut self) {
        self.out.push(0);
    }

    /// A `bool` (compact: in its field's header when it is a field's value).
    pub fn bool(&mut self, value: bool) {
        match (self.protocol, self.pending_bool.take()) {
            (Protocol::Binary, _) => self.out.push(u8::from(value)),
            (Protocol::Compact, Some(id)) => {
                self.compact_field_header(if value { 1 } else { 2 }, id)
            }
            (Protocol::Compact, None) => self.out.push(if value { 1 } else { 2 }),
        }
    }

    /// A `byte`.
    pub fn i8(&mut self, value: i8) {
        self.out.push(value as u8);
    }

    /// An `i16`.
    pub fn i16(&mut self, value: i16) {
        match self.protocol {
            Protocol::Binary => self.out.extend_from_slice(&value.to_be_bytes()),
            Protocol::Compact => self.zigzag(i64::from(value)),
        }
    }

    /// An `i32`.
    pub fn i32(&mut self, value: i32) {
        match self.protocol {
            Protocol::Binary => self.out.extend_from_slice(&value.to_be_bytes()),
            Protocol::Compact => self.zigzag(i64::from(value)),
        }
    }

    /// An `i64`.
    pub fn i64(&mut self, value: i64) {
        match self.protocol {
            Protocol::Binary => self.out.extend_from_slice(&value.to_be_bytes()),
            Protocol::Compact => self.zigzag(value),
        }
    }

    /// A `double`.
    pub fn double(&mut self, value: f64) {
        match self.protocol {
            Protocol::Binary => self.out.extend_from_slice(&value.to_be_bytes()),
            Protocol::Compact => self.out.extend_from_slice(&value.to_le_bytes()),
        }
    }

    /// A `binary`.
    pub fn binary(&mut self, value: &[u8]) {
        self.length(value.len());
        self.out.extend_from_slice(value);
    }

    /// A `string`.
    pub fn string(&mut self, value: &str) {
        self.binary(value.as_bytes());
    }

    /// A list header; `n` elements of `element` follow.
    pub fn list_begin(&mut self, element: TType, n: usize) {
        match self.protocol {
            Protocol::Binary => {
                self.out.push(element as u8);
                self.length(n);
            }
            Protocol::Compact if n < 15 => self.out.push(((n as u8) << 4) | element.compact()),
            Protocol::Compact => {
                self.out.push(0xf0 | element.compact());
                self.length(n);
            }
        }
    }

    /// A set header (laid out as a list).
    pub fn set_begin(&mut self, element: TType, n: usize) {
        self.list_begin(element, n);
    }

    /// A map header; `n` key-value pairs follow.
    pub fn map_begin(&mut self, key: TType, value: TType, n: usize) {
        match self.protocol {
            Protocol::Binary => {
                self.out.push(key as u8);
                self.out.push(value as u8);
                self.length(n);
            }
            Protocol::Compact if n == 0 => self.out.push(0),
            Protocol::Compact => {
                self.length(n);
                self.out.push((key.compact() << 4) | value.compact());
            }
        }
    }
}
