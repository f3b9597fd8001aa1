//! The application layer: what a client may ask of a DataNode, whatever protocol carried it.
//! IoTDB's Thrift service (`client_rpc`), the gRPC session service (`session.rs`) and the
//! internal service's relays (`internal.rs`) are adapters over it; it never imports them.
//!
//! - `write.rs` tablets, a table write's device tablets under one pin, relayed tablets,
//!   series-type lookups;
//! - `table.rs` a table-model tablet for a client: derived here, or relayed whole when fenced;
//! - `sql.rs` the `sql` executor's backend, a statement run over it, `deleteData`;
//! - `cluster.rs` schema and user statements and cluster views, forwarded to the ConfigNode.
//!
//! Answers are still wire values (`proto::Status`, the views' replies) in places; typed answers
//! are the next step (issue 39 item 2).

pub(crate) mod cluster;
pub(crate) mod sql;
pub(crate) mod table;
pub(crate) mod write;
