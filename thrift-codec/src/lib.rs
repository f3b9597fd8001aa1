//! Apache Thrift's wire, as IoTDB's clients speak it (`IClientRPCService`): the framed transport
//! and both protocols a server must read, binary (strict and old-style headers) and compact,
//! written by hand after the Thrift specification (`doc/specs/thrift-binary-protocol.md`,
//! `thrift-compact-protocol.md`) and checked against frames the official 2.0.11 Python client
//! sent.
//!
//! - [`frame_length`], [`frame_header`] and [`frame`]: the framed transport, a 4-byte big-endian length before
//!   each message, with a limit on the length.
//! - [`sniff`]: which protocol a connection speaks, from the first byte of its first message.
//! - [`Reader`]: reads one message from a whole frame; every length is checked against the bytes
//!   left (no allocation is sized by the peer), nesting is bounded, and malformed input is an
//!   [`Error`], never a panic.
//! - [`Writer`]: writes one message.
//!
//! Structs are read field by field (`struct_begin`, `field_begin` until `None`, `struct_end`),
//! and a field a reader does not know is passed over with [`Reader::skip`], as generated Thrift
//! code does.
//!
//! Architecture invariant: no networking, no runtime, no code generation; the crate knows Thrift,
//! not IoTDB.

mod error;
mod reader;
mod writer;

pub use error::{Error, Result};
pub use reader::Reader;
pub use writer::Writer;

/// Bytes of a frame's length prefix.
pub const FRAME_HEADER_LEN: usize = 4;

/// Deepest nesting of structs and containers a [`Reader`] accepts.
pub const DEPTH_MAX: usize = 64;

/// The two protocols IoTDB's clients use: binary by default, compact with
/// `enable_rpc_compression`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `TBinaryProtocol`: fixed-width big-endian integers.
    Binary,
    /// `TCompactProtocol`: varints, zigzag, field-id deltas.
    Compact,
}

/// Thrift's value types (the binary protocol's codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TType {
    /// Ends a struct's fields.
    Stop = 0,
    /// `bool`.
    Bool = 2,
    /// `byte` (i8).
    Byte = 3,
    /// `double`.
    Double = 4,
    /// `i16`.
    I16 = 6,
    /// `i32`.
    I32 = 8,
    /// `i64`.
    I64 = 10,
    /// `string` and `binary`.
    String = 11,
    /// A struct.
    Struct = 12,
    /// `map`.
    Map = 13,
    /// `set`.
    Set = 14,
    /// `list`.
    List = 15,
}

impl TType {
    /// The type of a binary-protocol code.
    pub fn from_binary(code: u8) -> Option<TType> {
        Some(match code {
            0 => TType::Stop,
            2 => TType::Bool,
            3 => TType::Byte,
            4 => TType::Double,
            6 => TType::I16,
            8 => TType::I32,
            10 => TType::I64,
            11 => TType::String,
            12 => TType::Struct,
            13 => TType::Map,
            14 => TType::Set,
            15 => TType::List,
            _ => return None,
        })
    }

    /// The type of a compact-protocol code (1 and 2 are both `bool`: true and false).
    fn from_compact(code: u8) -> Option<TType> {
        Some(match code {
            0 => TType::Stop,
            1 | 2 => TType::Bool,
            3 => TType::Byte,
            4 => TType::I16,
            5 => TType::I32,
            6 => TType::I64,
            7 => TType::Double,
            8 => TType::String,
            9 => TType::List,
            10 => TType::Set,
            11 => TType::Map,
            12 => TType::Struct,
            _ => return None,
        })
    }

    /// The compact-protocol code (`bool` as 1, true; a bool field carries its value instead).
    fn compact(self) -> u8 {
        match self {
            TType::Stop => 0,
            TType::Bool => 1,
            TType::Byte => 3,
            TType::I16 => 4,
            TType::I32 => 5,
            TType::I64 => 6,
            TType::Double => 7,
            TType::String => 8,
            TType::List => 9,
            TType::Set => 10,
            TType::Map => 11,
            TType::Struct => 12,
        }
    }
}

/// Thrift's message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum MessageType {
    /// A request.
    Call = 1,
    /// A reply: the method's `_result` struct, field 0 the return value.
    Reply = 2,
    /// A `TApplicationException` instead of a reply.
    Exception = 3,
    /// A request without reply.
    Oneway = 4,
}

impl MessageType {
    fn from_code(code: u8) -> Option<MessageType> {
        Some(match code {
            1 => MessageType::Call,
            2 => MessageType::Reply,
            3 => MessageType::Exception,
            4 => MessageType::Oneway,
            _ => return None,
        })
    }
}

/// A message's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageHeader {
    /// The method.
    pub name: String,
    /// Call, reply, exception or oneway.
    pub kind: MessageType,
    /// Echoed in the reply (IoTDB's Python client always sends 0 and never checks it).
    pub seqid: i32,
}

/// A field's header: its type and id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldHeader {
    /// The value's type.
    pub ttype: TType,
    /// The field id.
    pub id: i16,
}

/// `TApplicationException`'s kinds (its field 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum ApplicationError {
    /// Anything else.
    Unknown = 0,
    /// The server has no such method.
    UnknownMethod = 1,
    /// A message that is not a call.
    InvalidMessageType = 2,
    /// The server failed while handling the call.
    InternalError = 6,
    /// The call's arguments did not decode.
    ProtocolError = 7,
}

/// The payload length a frame's 4-byte prefix announces, if it is positive and at most
/// `max_bytes`.
pub fn frame_length(prefix: [u8; FRAME_HEADER_LEN], max_bytes: usize) -> Result<usize> {
    let length = i32::from_be_bytes(prefix);
    if length <= 0 {
        return Err(Error::BadFrame(format!("frame length {length}")));
    }
    let length = length as usize;
    if length > max_bytes {
        return Err(Error::FrameTooLarge {
            length,
            max: max_bytes,
        });
    }
    Ok(length)
}

/// The 4-byte prefix of a frame of `length` bytes; a frame of 2 GiB or more cannot be framed
/// (the prefix is a signed 32-bit length), which is an error, not a panic: a server answering
/// with such a page refuses it instead of going down.
pub fn frame_header(length: usize) -> Result<[u8; FRAME_HEADER_LEN]> {
    let length = i32::try_from(length).map_err(|_| Error::FrameTooLarge {
        length,
        max: i32::MAX as usize,
    })?;
    Ok(length.to_be_bytes())
}

/// `payload` behind its length prefix, ready to send in one write (see [`frame_header`]).
pub fn frame(payload: &[u8]) -> Result<Vec<u8>> {
    let header = frame_header(payload.len())?;
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
    Ok(out)
}

/// The protocol of a message from its first byte: 0x80 starts a strict binary header, 0x82 a
/// compact one, 0x00 an old-style binary header (the method name's length, under 16 MiB).
pub fn sniff(first: u8) -> Option<Protocol> {
    match first {
        0x80 | 0x00 => Some(Protocol::Binary),
        0x82 => Some(Protocol::Compact),
        _ => None,
    }
}

/// A whole `TApplicationException` message answering the call `name`/`seqid`, unframed.
pub fn application_exception(
    protocol: Protocol,
    name: &str,
    seqid: i32,
    kind: ApplicationError,
    message: &str,
) -> Vec<u8> {
    let mut w = Writer::new(protocol);
    w.message_begin(name, MessageType::Exception, seqid);
    w.struct_begin();
    w.field_begin(TType::String, 1);
    w.string(message);
    w.field_begin(TType::I32, 2);
    w.i32(kind as i32);
    w.field_stop();
    w.struct_end();
    w.into_bytes()
}

#[cfg(test)]
mod tests;
