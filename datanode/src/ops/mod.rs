//! The application layer: what a client may ask of a DataNode, whatever protocol carried it.
//! IoTDB's Thrift service (`client_rpc`), the gRPC session service (`session.rs`) and the
//! internal service's relays (`internal.rs`) are adapters over it; it never imports them.
//!
//! - `write.rs` tablets, a table write's device tablets under one pin, relayed tablets,
//!   series-type lookups;
//! - `table.rs` a table-model tablet for a client: derived here, or relayed whole when fenced;
//! - `sql.rs` the `sql` executor's backend, a statement run over it, `deleteData`;
//! - `cluster.rs` schema and user statements and cluster views, forwarded to the ConfigNode;
//! - `deadline.rs` a query's deadline (`query_timeout_ms`), from its statement to its last page;
//! - `queries.rs` the running statements (`SHOW QUERIES`, `KILL QUERY`, `cancelOperation`).
//!
//! Answers are internal types: `common::Status` (a 302 with its parts), the views of
//! `common::views` (a ConfigNode's reply becomes one in `cluster.rs`, where it arrives), a type
//! lookup's `(name, DataType)` pairs; requests arrive as `common::Tablet`s and paths. The
//! adapters convert at their edge (`proto::views`, `convert`, `client_rpc::thrift_status`).
//! Two wire types remain, on purpose: a schema or user statement is the ConfigNode's own
//! request (`proto::statements` builds it, this layer forwards it unread but for the user it
//! names), and the backend's table lookup reads the ConfigNode's ShowTables reply.

pub(crate) mod cluster;
pub(crate) mod deadline;
pub(crate) mod paged;
pub(crate) mod queries;
pub(crate) mod sql;
pub(crate) mod table;
pub(crate) mod write;
