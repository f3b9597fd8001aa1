//! Bounds on what `openSession` may carry. It is the one call a client makes before it has
//! logged in, so everything it decodes is paid for by an unauthenticated peer: its
//! `configuration` map is read with a bound on entries and on the bytes of each key and value,
//! and one over them is refused with a message naming the bound ([`thrift_codec::Error::OverLimit`]),
//! before anything of that entry is kept. IoTDB's 2.0.11 clients send three entries (`version`,
//! `sql_dialect`, `db`) of a few bytes each.

use std::collections::BTreeMap;

use thrift_codec::{Error, Reader, Result, TType};

/// Most entries of `openSession`'s `configuration` map.
pub const CONFIGURATION_ENTRIES_MAX: usize = 64;
/// Most bytes of one key of `openSession`'s `configuration` map.
pub const CONFIGURATION_KEY_BYTES_MAX: usize = 256;
/// Most bytes of one value of `openSession`'s `configuration` map (a database name, a version).
pub const CONFIGURATION_VALUE_BYTES_MAX: usize = 1024;

/// `openSession`'s `configuration` (`map<string, string>`) within the bounds above; entries of
/// other types are skipped, as every reader of this crate does, and count against the bound.
pub(crate) fn configuration(r: &mut Reader) -> Result<BTreeMap<String, String>> {
    let (key, value, n) = r.map_begin()?;
    if n > CONFIGURATION_ENTRIES_MAX {
        return Err(Error::OverLimit(format!(
            "openSession's configuration has {n} entries; at most {CONFIGURATION_ENTRIES_MAX} \
             are accepted"
        )));
    }
    let mut map = BTreeMap::new();
    for _ in 0..n {
        if key == TType::String && value == TType::String {
            let k = bounded(r, "key", CONFIGURATION_KEY_BYTES_MAX)?;
            let v = bounded(r, "value", CONFIGURATION_VALUE_BYTES_MAX)?;
            map.insert(k, v);
        } else {
            r.skip(key)?;
            r.skip(value)?;
        }
    }
    r.container_end();
    Ok(map)
}

/// A string of at most `max` bytes, checked before it is copied.
fn bounded(r: &mut Reader, what: &str, max: usize) -> Result<String> {
    let at = r.position();
    let bytes = r.binary()?;
    if bytes.len() > max {
        return Err(Error::OverLimit(format!(
            "a {what} of openSession's configuration has {} bytes; at most {max} are accepted",
            bytes.len()
        )));
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::Malformed {
        at,
        reason: format!("a {what} of openSession's configuration is not UTF-8"),
    })
}

#[cfg(test)]
mod tests {
    use thrift_codec::{Protocol, Writer};

    use super::*;
    use crate::messages::OpenSessionReq;

    fn open_with(protocol: Protocol, configuration: BTreeMap<String, String>) -> Vec<u8> {
        let mut w = Writer::new(protocol);
        OpenSessionReq {
            client_protocol: 2,
            zone_id: "UTC".into(),
            username: "root".into(),
            password: Some("root".into()),
            configuration,
        }
        .write(&mut w);
        w.into_bytes()
    }

    #[test]
    fn the_official_clients_configuration_passes_and_a_flood_of_entries_is_refused() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            // What IoTDB's 2.0.11 Python client sends.
            let official: BTreeMap<String, String> = [
                ("version", "V_1_0"),
                ("sql_dialect", "table"),
                ("db", "sensors"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let bytes = open_with(protocol, official.clone());
            let read = OpenSessionReq::read(&mut Reader::new(&bytes, protocol)).unwrap();
            assert_eq!(read.configuration, official);

            let at_limit: BTreeMap<String, String> = (0..CONFIGURATION_ENTRIES_MAX)
                .map(|i| (format!("k{i}"), "v".repeat(CONFIGURATION_VALUE_BYTES_MAX)))
                .collect();
            let bytes = open_with(protocol, at_limit.clone());
            let read = OpenSessionReq::read(&mut Reader::new(&bytes, protocol)).unwrap();
            assert_eq!(read.configuration, at_limit);

            // One entry more: refused before any entry is kept, saying why.
            let flood: BTreeMap<String, String> = (0..=CONFIGURATION_ENTRIES_MAX)
                .map(|i| (format!("k{i}"), String::new()))
                .collect();
            let bytes = open_with(protocol, flood);
            match OpenSessionReq::read(&mut Reader::new(&bytes, protocol)) {
                Err(Error::OverLimit(message)) => {
                    assert!(message.contains("65 entries"), "{message}");
                    assert!(message.contains("at most 64"), "{message}");
                }
                other => panic!("{protocol:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_long_key_or_value_is_refused() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let long_key = [("k".repeat(CONFIGURATION_KEY_BYTES_MAX + 1), String::new())];
            let bytes = open_with(protocol, long_key.into());
            assert!(matches!(
                OpenSessionReq::read(&mut Reader::new(&bytes, protocol)),
                Err(Error::OverLimit(m)) if m.contains("a key")
            ));
            let long_value = [(
                "db".to_string(),
                "v".repeat(CONFIGURATION_VALUE_BYTES_MAX + 1),
            )];
            let bytes = open_with(protocol, long_value.into());
            assert!(matches!(
                OpenSessionReq::read(&mut Reader::new(&bytes, protocol)),
                Err(Error::OverLimit(m)) if m.contains("a value")
            ));
        }
    }
}
