//! What the executor needs from the cluster ([`Backend`]): the session service's calls, in the
//! node's own types. The DataNode implements it over its coordinator, the tests over an
//! in-memory map (`memory_backend.rs`).

use std::future::Future;

use common::aggregate::{Partial, Windows};
use common::table::{DeviceAttributes, TableSchema, TableView};
use common::views::{
    ClusterView, DatabaseView, FragmentView, LeasesView, LocalLeaseView, QueryView, RegionView,
    SeriesMeta, TimeseriesView,
};
use common::{DataType, Tablet, Value};

use super::ExecResult;

/// What the executor needs from the cluster: the session service's calls. Every error is an
/// [`ExecError`] with the status code the answer carried.
pub trait Backend: Sync {
    /// `CREATE DATABASE`.
    fn create_database(
        &self,
        database: &str,
        table_model: bool,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// `DROP DATABASE`.
    fn drop_database(&self, database: &str) -> impl Future<Output = ExecResult<()>> + Send;
    /// `SET TTL`.
    fn set_ttl(&self, database: &str, ttl_ms: i64) -> impl Future<Output = ExecResult<()>> + Send;
    /// `UNSET TTL`.
    fn unset_ttl(&self, database: &str) -> impl Future<Output = ExecResult<()>> + Send;
    /// `REMOVE DATANODE`.
    fn remove_data_node(&self, data_node_id: u64) -> impl Future<Output = ExecResult<()>> + Send;
    /// `CREATE TIMESERIES`, with the declared encoding and compressor if any, and its alias,
    /// tags and attributes.
    fn create_timeseries(
        &self,
        path: &str,
        data_type: DataType,
        encoding: Option<&str>,
        compressor: Option<&str>,
        meta: &SeriesMeta,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// `DELETE TIMESERIES`.
    fn delete_timeseries(&self, path: &str) -> impl Future<Output = ExecResult<()>> + Send;
    /// Deletes the points of `series` (device, measurement) with `start <= time <= end`.
    fn delete_data(
        &self,
        series: &[(String, String)],
        start: i64,
        end: i64,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// Writes one tablet (atomically per region, as every write).
    fn insert_tablet(&self, tablet: Tablet) -> impl Future<Output = ExecResult<()>> + Send;
    /// The types of those of `measurements` of `device` that exist in the tree model, in the
    /// order named: a device of a table-model database has none here (the models keep their
    /// namespaces apart).
    fn series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> impl Future<Output = ExecResult<Vec<(String, DataType)>>> + Send;
    /// The series under `prefix` (whole path nodes; `""` is every series).
    fn show_timeseries(
        &self,
        prefix: &str,
    ) -> impl Future<Output = ExecResult<Vec<TimeseriesView>>> + Send;
    /// The points of one series in `[from, to)`, in time order: the first `limit` of them.
    fn query_raw(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
        limit: usize,
    ) -> impl Future<Output = ExecResult<Vec<(i64, Value)>>> + Send;
    /// The partial aggregates of each read's measurements — `(device, measurements)` — in each
    /// of `windows`' windows: `[read][measurement][window]`, in the order asked; a series without
    /// points in a window has a default partial. The whole computation happens where the data
    /// is: no raw point is fetched. Many devices in one call, so each region is asked once.
    fn aggregate(
        &self,
        reads: &[(String, Vec<String>)],
        windows: Windows,
    ) -> impl Future<Output = ExecResult<Vec<Vec<Vec<Partial>>>>> + Send;
    /// The last point of each `(device, measurement)` series, in the order asked (`None`: no
    /// point). Many series in one call, so each region is asked once.
    fn query_last(
        &self,
        series: &[(String, String)],
    ) -> impl Future<Output = ExecResult<Vec<Option<(i64, Value)>>>> + Send;
    /// EXPLAIN ANALYZE: from now on, records the reads of regions this backend makes (the
    /// statement's fragments: raw, last and aggregate reads, each on the replica that
    /// answered), for [`Backend::take_fragments`].
    fn trace_fragments(&self);
    /// The fragments recorded since [`Backend::trace_fragments`], one per kind of read, region
    /// and replica with its calls summed, in the order each was first read; none when not
    /// tracing.
    fn take_fragments(&self) -> Vec<FragmentView>;
    /// Every database, with its TTL, replication and time partitions.
    fn show_databases(&self) -> impl Future<Output = ExecResult<Vec<DatabaseView>>> + Send;
    /// `SHOW CLUSTER`.
    fn show_cluster(&self) -> impl Future<Output = ExecResult<ClusterView>> + Send;
    /// `SHOW REGIONS`.
    fn show_regions(&self) -> impl Future<Output = ExecResult<Vec<RegionView>>> + Send;
    /// `SHOW LEASES`.
    fn show_leases(&self) -> impl Future<Output = ExecResult<LeasesView>> + Send;
    /// `SHOW LOCAL LEASE`.
    fn local_lease(&self) -> impl Future<Output = ExecResult<LocalLeaseView>> + Send;
    /// `SHOW QUERIES`: the statements every DataNode runs that the user may see, oldest first.
    fn show_queries(&self) -> impl Future<Output = ExecResult<Vec<QueryView>>> + Send;
    /// `KILL QUERY`: kills the statement `id` (every one the user may manage when `None`);
    /// how many were.
    fn kill_query(&self, id: Option<&str>) -> impl Future<Output = ExecResult<usize>> + Send;
    /// `FLUSH`.
    fn flush(&self) -> impl Future<Output = ExecResult<()>> + Send;
    /// `CREATE USER`, as the logged-in user.
    fn create_user(
        &self,
        name: &str,
        password: &str,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// `DROP USER`, as the logged-in user.
    fn drop_user(&self, name: &str) -> impl Future<Output = ExecResult<()>> + Send;
    /// `ALTER USER ... SET PASSWORD`, as the logged-in user.
    fn alter_user_password(
        &self,
        name: &str,
        password: &str,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// Every user, sorted.
    fn list_users(&self) -> impl Future<Output = ExecResult<Vec<String>>> + Send;
    /// Writes the device tablets of one table write (each atomically per region, as every
    /// write), derived from the table `table` of the tree database `database` created at
    /// `created_version` (its incarnation, [`TableView::created_version`]): a write derived from
    /// a table that was dropped since creates nothing and is refused. The backend may stop at
    /// the first tablet refused; the write is then retried whole (writes are upserts).
    fn insert_table_tablets(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
        tablets: Vec<Tablet>,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// `CREATE TABLE` in the tree database `database`, or (`extend`) an insert's creation of
    /// the table and of the columns it lacks.
    fn create_table(
        &self,
        database: &str,
        table: &TableSchema,
        if_not_exists: bool,
        extend: bool,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// `DROP TABLE`: the table leaves the schema, and the series of its devices are deleted
    /// (a fence operation, as DELETE TIMESERIES); 550 when it does not exist.
    fn drop_table(
        &self,
        database: &str,
        table: &str,
    ) -> impl Future<Output = ExecResult<()>> + Send;
    /// The tables of the tree database `database` (or the one named), with their devices'
    /// attributes when asked.
    fn tables(
        &self,
        database: &str,
        table: Option<&str>,
        with_devices: bool,
    ) -> impl Future<Output = ExecResult<Vec<TableView>>> + Send;
    /// A table's schema and incarnation for a write (its devices not read): from a cache when
    /// the backend keeps one (a table only gains columns while it lives), else as
    /// [`Backend::tables`] reads it; `None` when the table does not exist.
    fn table_for_write(
        &self,
        database: &str,
        table: &str,
    ) -> impl Future<Output = ExecResult<Option<TableView>>> + Send;
    /// Sets attributes of devices of a table (each value replaces the device's last), derived
    /// from its incarnation `created_version`: refused (550) when the table was dropped since.
    fn set_device_attributes(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
        devices: &[DeviceAttributes],
    ) -> impl Future<Output = ExecResult<()>> + Send;
}
