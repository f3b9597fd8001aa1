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
//! Answers are internal types (issue 39 item 2): `common::Status`, the views of `common::views`
//! (a ConfigNode's reply becomes one in `cluster.rs`, where it arrives), a type lookup's
//! `(name, DataType)` pairs. The adapters convert them into their wire answers
//! (`proto::views`, `convert::reply`). Wire types left here: schema and user statements are
//! forwarded as the wire requests they arrive as, the backend's table lookup reads the
//! ConfigNode's ShowTables reply itself, `table::write_table` answers a `proto::Status`,
//! `write::insert_wire_tablets` decodes a relayed write's tablets, and `sql::exec_status` is the
//! adapters' wire form of an executor's error.

pub(crate) mod cluster;
pub(crate) mod sql;
pub(crate) mod table;
pub(crate) mod write;
