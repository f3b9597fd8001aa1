//! Golden frames captured from IoTDB's 2.0.11 Python client (`IOTDB_PROTOCOL.md` §14), round
//! trips of every type in both protocols, and malformed input.

use proptest::prelude::*;

use super::*;

/// Bytes from hex, spaces ignored, `"..."` quoted text taken as its bytes.
fn bytes(spec: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut parts = spec.split('"');
    let mut quoted = false;
    for part in parts.by_ref() {
        if quoted {
            out.extend_from_slice(part.as_bytes());
        } else {
            let hex: String = part.chars().filter(|c| !c.is_whitespace()).collect();
            assert!(hex.len().is_multiple_of(2), "odd hex {hex:?}");
            for i in (0..hex.len()).step_by(2) {
                out.push(u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"));
            }
        }
        quoted = !quoted;
    }
    out
}

/// A value tree: what a test writes and reads back.
#[derive(Clone, Debug, PartialEq)]
enum V {
    Bool(bool),
    Byte(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    /// Compared by bits (NaN included).
    Double(u64),
    Str(Vec<u8>),
    Struct(Vec<(i16, V)>),
    List(TType, Vec<V>),
    Map(TType, TType, Vec<(V, V)>),
}

impl V {
    fn ttype(&self) -> TType {
        match self {
            V::Bool(_) => TType::Bool,
            V::Byte(_) => TType::Byte,
            V::I16(_) => TType::I16,
            V::I32(_) => TType::I32,
            V::I64(_) => TType::I64,
            V::Double(_) => TType::Double,
            V::Str(_) => TType::String,
            V::Struct(_) => TType::Struct,
            V::List(..) => TType::List,
            V::Map(..) => TType::Map,
        }
    }

    fn write(&self, w: &mut Writer) {
        match self {
            V::Bool(v) => w.bool(*v),
            V::Byte(v) => w.i8(*v),
            V::I16(v) => w.i16(*v),
            V::I32(v) => w.i32(*v),
            V::I64(v) => w.i64(*v),
            V::Double(bits) => w.double(f64::from_bits(*bits)),
            V::Str(v) => w.binary(v),
            V::Struct(fields) => {
                w.struct_begin();
                for (id, v) in fields {
                    w.field_begin(v.ttype(), *id);
                    v.write(w);
                }
                w.field_stop();
                w.struct_end();
            }
            V::List(element, items) => {
                w.list_begin(*element, items.len());
                for v in items {
                    v.write(w);
                }
            }
            V::Map(key, value, entries) => {
                w.map_begin(*key, *value, entries.len());
                for (k, v) in entries {
                    k.write(w);
                    v.write(w);
                }
            }
        }
    }

    fn read(r: &mut Reader, ttype: TType) -> Result<V> {
        Ok(match ttype {
            TType::Bool => V::Bool(r.bool()?),
            TType::Byte => V::Byte(r.i8()?),
            TType::I16 => V::I16(r.i16()?),
            TType::I32 => V::I32(r.i32()?),
            TType::I64 => V::I64(r.i64()?),
            TType::Double => V::Double(r.double()?.to_bits()),
            TType::String => V::Str(r.binary()?.to_vec()),
            TType::Struct => {
                r.struct_begin()?;
                let mut fields = Vec::new();
                while let Some(field) = r.field_begin()? {
                    fields.push((field.id, V::read(r, field.ttype)?));
                }
                r.struct_end();
                V::Struct(fields)
            }
            TType::List | TType::Set => {
                let (element, n) = r.list_begin()?;
                let items = (0..n).map(|_| V::read(r, element)).collect::<Result<_>>()?;
                r.container_end();
                V::List(element, items)
            }
            TType::Map => {
                let (key, value, n) = r.map_begin()?;
                let mut entries = Vec::new();
                for _ in 0..n {
                    entries.push((V::read(r, key)?, V::read(r, value)?));
                }
                r.container_end();
                V::Map(key, value, entries)
            }
            TType::Stop => unreachable!("no value is STOP"),
        })
    }
}

impl V {
    /// What reading back gives in `protocol`: an empty compact map names no types.
    fn as_read(&self, protocol: Protocol) -> V {
        match self {
            V::Map(..)
                if protocol == Protocol::Compact
                    && matches!(self, V::Map(_, _, e) if e.is_empty()) =>
            {
                V::Map(TType::Stop, TType::Stop, Vec::new())
            }
            V::Map(k, v, entries) => V::Map(
                *k,
                *v,
                entries
                    .iter()
                    .map(|(a, b)| (a.as_read(protocol), b.as_read(protocol)))
                    .collect(),
            ),
            V::Struct(fields) => V::Struct(
                fields
                    .iter()
                    .map(|(id, v)| (*id, v.as_read(protocol)))
                    .collect(),
            ),
            V::List(t, items) => V::List(*t, items.iter().map(|v| v.as_read(protocol)).collect()),
            other => other.clone(),
        }
    }
}

fn s(text: &str) -> V {
    V::Str(text.as_bytes().to_vec())
}

/// A whole message: header, then the arguments or result struct.
fn message(protocol: Protocol, name: &str, kind: MessageType, body: &V) -> Vec<u8> {
    let mut w = Writer::new(protocol);
    w.message_begin(name, kind, 0);
    body.write(&mut w);
    w.into_bytes()
}

fn read_message(protocol: Protocol, bytes: &[u8]) -> Result<(MessageHeader, V)> {
    let mut r = Reader::new(bytes, protocol);
    let header = r.message_begin()?;
    let body = V::read(&mut r, TType::Struct)?;
    r.finish()?;
    Ok((header, body))
}

/// `openSession(TSOpenSessionReq)` as the 2.0.11 client sends it.
fn open_session_args(zone: &str, configuration: &[(&str, &str)]) -> V {
    V::Struct(vec![(
        1,
        V::Struct(vec![
            (1, V::I32(2)),
            (2, s(zone)),
            (3, s("root")),
            (4, s("root")),
            (
                5,
                V::Map(
                    TType::String,
                    TType::String,
                    configuration.iter().map(|(k, v)| (s(k), s(v))).collect(),
                ),
            ),
        ]),
    )])
}

#[test]
fn the_clients_binary_open_session_call_reads_and_writes_byte_for_byte() {
    let captured = bytes(
        r#"80010001 0000000b "openSession" 00000000
        0c 0001 08 0001 00000002 0b 0002 0000000d "Asia/Shanghai" 0b 0003 00000004 "root"
        0b 0004 00000004 "root"
        0d 0005 0b 0b 00000002 00000007 "version" 00000005 "V_1_0"
                               0000000b "sql_dialect" 00000004 "tree" 00 00"#,
    );
    assert_eq!(sniff(captured[0]), Some(Protocol::Binary));
    let (header, args) = read_message(Protocol::Binary, &captured).unwrap();
    assert_eq!(
        header,
        MessageHeader {
            name: "openSession".into(),
            kind: MessageType::Call,
            seqid: 0
        }
    );
    let want = open_session_args(
        "Asia/Shanghai",
        &[("version", "V_1_0"), ("sql_dialect", "tree")],
    );
    assert_eq!(args, want);
    assert_eq!(
        message(Protocol::Binary, "openSession", MessageType::Call, &want),
        captured
    );
}

#[test]
fn the_servers_binary_replies_are_what_the_client_read() {
    let reply = V::Struct(vec![(
        0,
        V::Struct(vec![
            (
                1,
                V::Struct(vec![(1, V::I32(200)), (2, s("Login successfully"))]),
            ),
            (2, V::I32(2)),
            (3, V::I64(7)),
            (
                4,
                V::Map(
                    TType::String,
                    TType::String,
                    vec![(s("timestamp_precision"), s("ms"))],
                ),
            ),
        ]),
    )]);
    assert_eq!(
        message(Protocol::Binary, "openSession", MessageType::Reply, &reply),
        bytes(
            r#"80010002 0000000b "openSession" 00000000 0c 0000 0c 0001 08 0001 000000c8
            0b 0002 00000012 "Login successfully" 00 08 0002 00000002 0a 0003 0000000000000007
            0d 0004 0b 0b 00000001 00000013 "timestamp_precision" 00000002 "ms" 00 00"#
        )
    );
    let statement_id = V::Struct(vec![(0, V::I64(42))]);
    assert_eq!(
        message(
            Protocol::Binary,
            "requestStatementId",
            MessageType::Reply,
            &statement_id
        ),
        bytes(r#"80010002 00000012 "requestStatementId" 00000000 0a 0000 000000000000002a 00"#)
    );
}

#[test]
fn the_clients_compact_open_session_call_reads_and_writes_byte_for_byte() {
    let configuration = [
        ("version", "V_1_0"),
        ("sql_dialect", "tree"),
        ("db", "root.sg"),
    ];
    let args = open_session_args("Etc/UTC", &configuration);
    let written = message(Protocol::Compact, "openSession", MessageType::Call, &args);
    // The captured prefix, up to the map's header (3 entries, string to string).
    let captured_prefix = bytes(
        r#"82 21 00 0b "openSession" 1c 15 04 18 07 "Etc/UTC" 18 04 "root" 18 04 "root" 1b 03 88"#,
    );
    assert_eq!(written[..captured_prefix.len()], captured_prefix[..]);
    assert_eq!(sniff(written[0]), Some(Protocol::Compact));
    let (header, read) = read_message(Protocol::Compact, &written).unwrap();
    assert_eq!(header.name, "openSession");
    assert_eq!(header.kind, MessageType::Call);
    assert_eq!(read, args);
}

#[test]
fn an_old_style_binary_header_reads() {
    let old = bytes(r#"0000000b "openSession" 01 00000005 00"#);
    let mut r = Reader::new(&old, Protocol::Binary);
    let header = r.message_begin().unwrap();
    assert_eq!((header.kind, header.seqid), (MessageType::Call, 5));
    assert_eq!(V::read(&mut r, TType::Struct).unwrap(), V::Struct(vec![]));
}

/// Long field-id gaps, negative ids, booleans in fields and in lists, lists past 14 elements,
/// and the field ids of an outer struct after an inner one: the compact protocol's corners.
#[test]
fn compact_corners_round_trip() {
    let inner = V::Struct(vec![(1, V::Bool(true)), (40, V::I32(-1))]);
    let value = V::Struct(vec![
        (1, V::Bool(false)),
        (2, inner.clone()),
        (3, V::Bool(true)),
        (20, V::I64(i64::MIN)),
        (-5, V::I16(i16::MIN)),
        (
            6,
            V::List(TType::Bool, (0..20).map(|i| V::Bool(i % 3 == 0)).collect()),
        ),
        (7, V::Double(f64::NAN.to_bits())),
        (8, V::Map(TType::I32, TType::String, vec![])),
        (9, V::List(TType::Struct, vec![inner.clone(), inner])),
    ]);
    for protocol in [Protocol::Binary, Protocol::Compact] {
        let written = message(protocol, "m", MessageType::Reply, &value);
        let (_, read) = read_message(protocol, &written).unwrap();
        assert_eq!(read, value.as_read(protocol), "{protocol:?}");
    }
    // The compact double is little-endian.
    let mut w = Writer::new(Protocol::Compact);
    w.double(1.0);
    assert_eq!(w.into_bytes(), 1.0f64.to_le_bytes());
}

#[test]
fn unknown_fields_are_skipped() {
    let value = V::Struct(vec![
        (1, V::I32(7)),
        (
            99,
            V::Map(
                TType::String,
                TType::List,
                vec![(s("k"), V::List(TType::I64, vec![V::I64(1), V::I64(2)]))],
            ),
        ),
        (2, s("kept")),
    ]);
    for protocol in [Protocol::Binary, Protocol::Compact] {
        let written = message(protocol, "m", MessageType::Call, &value);
        let mut r = Reader::new(&written, protocol);
        r.message_begin().unwrap();
        r.struct_begin().unwrap();
        let mut kept = Vec::new();
        while let Some(field) = r.field_begin().unwrap() {
            match (field.id, field.ttype) {
                (1, TType::I32) => kept.push(V::I32(r.i32().unwrap())),
                (2, TType::String) => kept.push(V::Str(r.binary().unwrap().to_vec())),
                (_, other) => r.skip(other).unwrap(),
            }
        }
        r.struct_end();
        r.finish().unwrap();
        assert_eq!(kept, vec![V::I32(7), s("kept")], "{protocol:?}");
    }
}

#[test]
fn malformed_input_is_an_error_with_a_place() {
    // A string longer than the message.
    let mut r = Reader::new(&[0, 0, 0, 9, b'a'], Protocol::Binary);
    assert!(matches!(r.string(), Err(Error::Malformed { at: 0, .. })));
    // A list claiming a billion elements in a few bytes: refused before allocating.
    let mut r = Reader::new(&[8, 0x40, 0, 0, 0, 1], Protocol::Binary);
    assert!(matches!(r.list_begin(), Err(Error::Malformed { .. })));
    // Negative lengths, unknown types, bad UTF-8, overlong varints, truncation.
    let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff], Protocol::Binary);
    assert!(matches!(r.binary(), Err(Error::Malformed { .. })));
    let mut r = Reader::new(&[1, 0, 0], Protocol::Binary);
    assert!(matches!(r.field_begin(), Err(Error::Malformed { .. })));
    let mut r = Reader::new(&[0, 0, 0, 2, 0xc3, 0x28], Protocol::Binary);
    assert!(matches!(r.string(), Err(Error::Malformed { .. })));
    let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], Protocol::Compact);
    assert!(matches!(r.i32(), Err(Error::Malformed { .. })));
    let mut r = Reader::new(&[0, 0, 0], Protocol::Binary);
    assert!(matches!(
        r.i64(),
        Err(Error::Truncated {
            wanted: 8,
            left: 3,
            ..
        })
    ));
    let mut r = Reader::new(&[0x80, 0x02, 0, 1], Protocol::Binary);
    assert!(matches!(r.message_begin(), Err(Error::Malformed { .. })));
    // A compact field header with a delta and type 0 (STOP is the whole byte 0).
    let mut r = Reader::new(&[0x10], Protocol::Compact);
    r.struct_begin().unwrap();
    assert!(matches!(r.field_begin(), Err(Error::Malformed { .. })));
    // Nesting past the limit.
    let deep: Vec<u8> = std::iter::repeat_n([12u8, 0, 1], DEPTH_MAX + 1)
        .flatten()
        .collect();
    let mut r = Reader::new(&deep, Protocol::Binary);
    assert_eq!(r.skip(TType::Struct), Err(Error::TooDeep(DEPTH_MAX)));
    // Trailing bytes.
    let mut r = Reader::new(&[0, 7], Protocol::Binary);
    assert_eq!(r.field_begin(), Ok(None));
    assert!(r.finish().is_err());
}

#[test]
fn frames_have_a_checked_length() {
    assert_eq!(frame(b"abc"), Ok(vec![0, 0, 0, 3, b'a', b'b', b'c']));
    assert_eq!(frame_header(3), Ok([0, 0, 0, 3]));
    assert_eq!(
        frame_header(i32::MAX as usize),
        Ok([0x7f, 0xff, 0xff, 0xff])
    );
    // A page of 2 GiB or more is refused with an error, not a panic (REVIEW N5).
    assert_eq!(
        frame_header(1 << 31),
        Err(Error::FrameTooLarge {
            length: 1 << 31,
            max: i32::MAX as usize
        })
    );
    assert_eq!(frame_length([0, 0, 0, 3], 3), Ok(3));
    assert_eq!(
        frame_length([0, 0, 0, 4], 3),
        Err(Error::FrameTooLarge { length: 4, max: 3 })
    );
    assert!(matches!(
        frame_length([0, 0, 0, 0], 3),
        Err(Error::BadFrame(_))
    ));
    assert!(matches!(
        frame_length([0xff, 0, 0, 0], 3),
        Err(Error::BadFrame(_))
    ));
    assert_eq!(sniff(b'G'), None, "an HTTP/2 preface is no Thrift");
}

#[test]
fn an_application_exception_reads_back() {
    for protocol in [Protocol::Binary, Protocol::Compact] {
        let bytes = application_exception(
            protocol,
            "fetchMetadata",
            3,
            ApplicationError::UnknownMethod,
            "no such method",
        );
        let (header, body) = read_message(protocol, &bytes).unwrap();
        assert_eq!(header.kind, MessageType::Exception);
        assert_eq!((header.name.as_str(), header.seqid), ("fetchMetadata", 3));
        assert_eq!(
            body,
            V::Struct(vec![(1, s("no such method")), (2, V::I32(1))])
        );
    }
}

fn leaf() -> impl Strategy<Value = V> {
    prop_oneof![
        any::<bool>().prop_map(V::Bool),
        any::<i8>().prop_map(V::Byte),
        any::<i16>().prop_map(V::I16),
        any::<i32>().prop_map(V::I32),
        any::<i64>().prop_map(V::I64),
        any::<u64>().prop_map(V::Double),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(V::Str),
    ]
}

fn value() -> impl Strategy<Value = V> {
    leaf().prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            // Ascending ids with gaps (some past 15, some negative), any values.
            proptest::collection::vec((-3i16..40, inner.clone()), 0..6).prop_map(|fields| {
                let mut id = -10i16;
                V::Struct(
                    fields
                        .into_iter()
                        .map(|(gap, v)| {
                            id += gap.max(1);
                            (id, v)
                        })
                        .collect(),
                )
            }),
            // Lists of one type: the first element's.
            proptest::collection::vec(leaf(), 0..20).prop_map(|items| {
                let element = items.first().map_or(TType::I32, V::ttype);
                V::List(
                    element,
                    items.into_iter().filter(|v| v.ttype() == element).collect(),
                )
            }),
            proptest::collection::vec((any::<i32>(), inner), 0..4).prop_map(|entries| {
                let value_type = entries.first().map_or(TType::Bool, |(_, v)| v.ttype());
                V::Map(
                    TType::I32,
                    value_type,
                    entries
                        .into_iter()
                        .filter(|(_, v)| v.ttype() == value_type)
                        .map(|(k, v)| (V::I32(k), v))
                        .collect(),
                )
            }),
        ]
    })
}

proptest! {
    #[test]
    fn every_value_round_trips_in_both_protocols(fields in proptest::collection::vec(value(), 0..6)) {
        let body = V::Struct(fields.into_iter().enumerate().map(|(i, v)| (i as i16 + 1, v)).collect());
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let written = message(protocol, "insertTablet", MessageType::Call, &body);
            let (header, read) = read_message(protocol, &written).unwrap();
            prop_assert_eq!(header.name, "insertTablet");
            prop_assert_eq!(read, body.as_read(protocol));
        }
    }

    /// The frame decoder's fuzz target: any bytes give a value or an error, never a panic, and
    /// skipping reads no further than the message.
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut r = Reader::new(&data, protocol);
            let _ = r.message_begin().and_then(|_| r.skip(TType::Struct));
            prop_assert!(r.remaining() <= data.len());
            let mut r = Reader::new(&data, protocol);
            let _ = r.skip(TType::Struct);
        }
    }

    /// Corrupting a written message anywhere gives a value or an error, never a panic.
    #[test]
    fn flipped_bytes_never_panic(body in value(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut written = message(protocol, "m", MessageType::Call, &V::Struct(vec![(1, body.clone())]));
            let i = at.index(written.len());
            written[i] ^= 1 << bit;
            let _ = read_message(protocol, &written);
        }
    }
}
