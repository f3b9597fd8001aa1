//! Fencepost's wire: the protobuf messages and gRPC services of the whole cluster, generated at
//! build time from `proto/*.proto` (protox + tonic-prost-build; no system `protoc`).
//!
//! - [`config_node_service_server`] / [`config_node_service_client`]: `ConfigNodeService`.
//! - [`data_node_internal_service_server`] / [`data_node_internal_service_client`]:
//!   `DataNodeInternalService` (heartbeats, invalidation, raft messages, region writes).
//! - [`session_service_server`] / [`session_service_client`]: `SessionService`.
//!
//! Wire types stay at the edge: servers convert them by hand into their internal types with the
//! helpers here ([`status`], [`endpoint`], [`data_type`]).
//!
//! Architecture invariant: this crate knows no server; it depends on `common` only for the
//! status-code and data-type vocabulary.
#![allow(clippy::doc_lazy_continuation, clippy::large_enum_variant)]

mod convert;
mod error;
pub mod statements;

#[allow(missing_docs)]
mod tablet;
pub mod views;

mod generated {
    tonic::include_proto!("fencepost");
}

pub use convert::{
    data_type, data_type_to_wire, endpoint, parse_endpoint, status, status_with_redirect,
    table_column, table_column_to_wire, table_device_to_wire, tag_values,
};
pub use error::{Error, Result};

/// gRPC metadata key of the user name on every session call (binary metadata: any UTF-8).
pub const USER_KEY: &str = "fencepost-user-bin";
/// gRPC metadata key of the password on every session call (binary metadata: any UTF-8).
pub const PASSWORD_KEY: &str = "fencepost-password-bin";
pub use generated::*;
pub use tablet::{
    bitmap_to_words, column_from_wire, column_to_wire, tablet_to_wire, timestamps_from_wire,
    value_from_wire, value_to_wire,
};
