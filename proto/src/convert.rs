//! Hand-written conversions between wire types and `common`'s vocabulary.

use crate::error::{Error, Result};
use crate::generated as wire;

impl wire::Status {
    /// Whether the status carries `code`.
    pub fn is(&self, code: common::StatusCode) -> bool {
        self.code == code.wire()
    }

    /// 200 SUCCESS.
    pub fn is_success(&self) -> bool {
        self.is(common::StatusCode::Success)
    }

    /// Whether the code is one of [`common::StatusCode::RETRYABLE`].
    pub fn is_retryable(&self) -> bool {
        common::StatusCode::from_wire(self.code).is_some_and(common::StatusCode::is_retryable)
    }
}

/// A wire status from an IoTDB code and a message.
pub fn status(code: common::StatusCode, message: impl Into<String>) -> wire::Status {
    wire::Status {
        code: code.wire(),
        message: message.into(),
        sub_status: Vec::new(),
        redirect: None,
        need_retry: false,
    }
}

impl From<common::Status> for wire::Status {
    fn from(s: common::Status) -> wire::Status {
        wire::Status {
            code: s.code.wire(),
            message: s.message,
            sub_status: s.parts.into_iter().map(wire::Status::from).collect(),
            // An address the node itself produced; one that does not parse is dropped, as a
            // hint the caller can do without.
            redirect: s.redirect.as_deref().and_then(|a| parse_endpoint(a).ok()),
            need_retry: s.need_retry,
        }
    }
}

impl From<wire::Status> for common::Status {
    /// A code outside [`common::StatusCode`] becomes 305 naming it: only a peer of another
    /// version sends one.
    fn from(s: wire::Status) -> common::Status {
        let (code, message) = match common::StatusCode::from_wire(s.code) {
            Some(code) => (code, s.message),
            None => (
                common::StatusCode::InternalServerError,
                format!("unknown status code {}: {}", s.code, s.message),
            ),
        };
        common::Status {
            code,
            message,
            need_retry: s.need_retry,
            redirect: s.redirect.as_ref().map(endpoint),
            parts: s.sub_status.into_iter().map(common::Status::from).collect(),
        }
    }
}

impl From<common::SeriesPath> for wire::SeriesPath {
    fn from(p: common::SeriesPath) -> wire::SeriesPath {
        wire::SeriesPath {
            device: p.device,
            measurement: p.measurement,
        }
    }
}

impl From<wire::SeriesPath> for common::SeriesPath {
    fn from(p: wire::SeriesPath) -> common::SeriesPath {
        common::SeriesPath {
            device: p.device,
            measurement: p.measurement,
        }
    }
}

/// A wire status that points the caller at another node.
pub fn status_with_redirect(
    code: common::StatusCode,
    message: impl Into<String>,
    redirect: Option<wire::Endpoint>,
) -> wire::Status {
    wire::Status {
        redirect,
        need_retry: true,
        ..status(code, message)
    }
}

/// Parses `host:port` into an endpoint. The port must be in 1..=65535.
pub fn parse_endpoint(address: &str) -> Result<wire::Endpoint> {
    let bad = |reason| Error::BadEndpoint {
        address: address.to_string(),
        reason,
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(|| bad("no ':port'"))?;
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| bad("port is not a number in 0..=65535"))?;
    if port == 0 {
        return Err(bad("port 0"));
    }
    Ok(wire::Endpoint {
        host: host.to_string(),
        port: u32::from(port),
    })
}

/// `host:port` of an endpoint.
pub fn endpoint(endpoint: &wire::Endpoint) -> String {
    format!("{}:{}", endpoint.host, endpoint.port)
}

/// The internal data type of a wire code.
pub fn data_type(code: i32) -> Result<common::DataType> {
    u8::try_from(code)
        .ok()
        .and_then(common::DataType::from_code)
        .ok_or(Error::UnknownDataType(code))
}

/// The wire code of an internal data type.
pub fn data_type_to_wire(data_type: common::DataType) -> wire::DataType {
    match data_type {
        common::DataType::Boolean => wire::DataType::Boolean,
        common::DataType::Int32 => wire::DataType::Int32,
        common::DataType::Int64 => wire::DataType::Int64,
        common::DataType::Float => wire::DataType::Float,
        common::DataType::Double => wire::DataType::Double,
        common::DataType::Text => wire::DataType::Text,
        common::DataType::Timestamp => wire::DataType::Timestamp,
        common::DataType::Date => wire::DataType::Date,
        common::DataType::Blob => wire::DataType::Blob,
        common::DataType::String => wire::DataType::String,
    }
}

/// A table column of the wire.
pub fn table_column(c: &wire::TableColumn) -> Result<common::table::TableColumn> {
    let category =
        common::table::Category::from_wire(c.category).ok_or(Error::UnknownCategory(c.category))?;
    Ok(common::table::TableColumn {
        name: c.name.clone(),
        category,
        data_type: data_type(c.data_type)?,
    })
}

/// The wire form of a table column.
pub fn table_column_to_wire(c: &common::table::TableColumn) -> wire::TableColumn {
    wire::TableColumn {
        name: c.name.clone(),
        category: u32::from(c.category.wire()),
        data_type: data_type_to_wire(c.data_type) as i32,
    }
}

/// The tag values of a wire device (an unset value is a null tag).
pub fn tag_values(device: &wire::TableDevice) -> Vec<Option<String>> {
    device.tags.iter().map(|t| t.value.clone()).collect()
}

/// The wire form of a device's tag values and attributes.
pub fn table_device_to_wire(
    tags: &[Option<String>],
    attributes: &std::collections::BTreeMap<String, String>,
) -> wire::TableDevice {
    wire::TableDevice {
        tags: tags
            .iter()
            .map(|t| wire::TagValue { value: t.clone() })
            .collect(),
        attributes: attributes.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn data_types_are_iotdb_codes_both_ways() {
        for t in common::DataType::ALL {
            assert_eq!(data_type_to_wire(t) as i32, i32::from(t.code()));
            assert_eq!(data_type(data_type_to_wire(t) as i32), Ok(t));
        }
        for code in [6, 7, 12] {
            assert_eq!(data_type(code), Err(Error::UnknownDataType(code)));
        }
        assert_eq!(data_type(-1), Err(Error::UnknownDataType(-1)));
    }

    #[test]
    fn statuses_cross_the_wire_whole() {
        let mut part = common::Status::new(common::StatusCode::RegionLeaderChangeError, "moved");
        part.redirect = Some("10.0.0.2:6667".into());
        let mut s = common::Status::new(common::StatusCode::MultipleError, "1 of 2").retry();
        s.parts = vec![common::Status::ok(), part.retry()];
        let wire = wire::Status::from(s.clone());
        assert_eq!(wire.sub_status.len(), 2);
        assert_eq!(
            wire.sub_status[1].redirect.as_ref().map(endpoint).unwrap(),
            "10.0.0.2:6667"
        );
        assert_eq!(common::Status::from(wire), s);
        let odd = wire::Status {
            code: 4242,
            ..status(common::StatusCode::Success, "new")
        };
        let back = common::Status::from(odd);
        assert_eq!(back.code, common::StatusCode::InternalServerError);
        assert_eq!(back.message, "unknown status code 4242: new");
    }

    #[test]
    fn endpoints_parse_and_print() {
        let e = parse_endpoint("127.0.0.1:10710").unwrap();
        assert_eq!(endpoint(&e), "127.0.0.1:10710");
        assert!(parse_endpoint("127.0.0.1").is_err());
        assert!(parse_endpoint(":1").is_err());
        assert!(parse_endpoint("h:0").is_err());
        assert!(parse_endpoint("h:70000").is_err());
    }

    #[test]
    fn status_golden_bytes() {
        // The protobuf encoding of a 536 status with a redirect: fixes field numbers on the wire.
        let s = status_with_redirect(
            common::StatusCode::MetadataLeaseFencedRetryRequired,
            "f",
            Some(wire::Endpoint {
                host: "h".into(),
                port: 1,
            }),
        );
        let bytes = s.encode_to_vec();
        assert_eq!(
            bytes,
            vec![
                0x08, 0x98, 0x04, // code = 536
                0x12, 0x01, b'f', // message
                0x22, 0x05, 0x0a, 0x01, b'h', 0x10, 0x01, // redirect { host, port }
                0x28, 0x01, // need_retry
            ]
        );
        assert_eq!(wire::Status::decode(bytes.as_slice()).unwrap(), s);
    }
}
