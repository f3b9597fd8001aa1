//! A blocking wrapper for callers without a runtime (scripts, the CLI's REPL).

use common::{DataType, Tablet, Value};

use crate::config::SessionConfig;
use crate::error::{Result, SessionError};
use crate::session::{Record, Session, SessionStats};
use proto::views::{
    ClusterView, LeasesView, LocalLeaseView, RegionDigestView, RegionView, TimeseriesView,
};

/// A [`Session`] driven by its own current-thread runtime. Do not call it from inside another
/// tokio runtime (blocking there panics, as tokio's `block_on` does).
#[derive(Debug)]
pub struct BlockingSession {
    runtime: tokio::runtime::Runtime,
    session: Session,
}

impl BlockingSession {
    /// See [`Session::connect`].
    pub fn connect(endpoints: &[&str], config: SessionConfig) -> Result<BlockingSession> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SessionError::Runtime(e.to_string()))?;
        let session = runtime.block_on(Session::connect(endpoints, config))?;
        Ok(BlockingSession { runtime, session })
    }

    /// See [`Session::stats`].
    pub fn stats(&self) -> SessionStats {
        self.session.stats()
    }

    /// See [`Session::insert_tablet`].
    pub fn insert_tablet(&self, tablet: &Tablet) -> Result<()> {
        self.runtime.block_on(self.session.insert_tablet(tablet))
    }

    /// See [`Session::insert_tablets`].
    pub fn insert_tablets(&self, tablets: &[Tablet]) -> Result<()> {
        self.runtime.block_on(self.session.insert_tablets(tablets))
    }

    /// See [`Session::query_raw`].
    pub fn query_raw(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, Value)>> {
        self.runtime
            .block_on(self.session.query_raw(device, measurement, from, to))
    }

    /// See [`Session::query_last`].
    pub fn query_last(&self, device: &str, measurement: &str) -> Result<Option<(i64, Value)>> {
        self.runtime
            .block_on(self.session.query_last(device, measurement))
    }

    /// See [`Session::create_database`].
    pub fn create_database(&self, database: &str) -> Result<()> {
        self.runtime
            .block_on(self.session.create_database(database))
    }

    /// See [`Session::drop_database`].
    pub fn drop_database(&self, database: &str) -> Result<()> {
        self.runtime.block_on(self.session.drop_database(database))
    }

    /// See [`Session::create_timeseries`].
    pub fn create_timeseries(&self, path: &str, data_type: DataType) -> Result<()> {
        self.runtime
            .block_on(self.session.create_timeseries(path, data_type))
    }

    /// See [`Session::create_timeseries_with`].
    pub fn create_timeseries_with(
        &self,
        path: &str,
        data_type: DataType,
        encoding: Option<&str>,
        compressor: Option<&str>,
    ) -> Result<()> {
        self.runtime.block_on(
            self.session
                .create_timeseries_with(path, data_type, encoding, compressor),
        )
    }

    /// See [`Session::delete_timeseries`].
    pub fn delete_timeseries(&self, path: &str) -> Result<()> {
        self.runtime.block_on(self.session.delete_timeseries(path))
    }

    /// See [`Session::insert_records`].
    pub fn insert_records(&self, records: &[Record]) -> Result<()> {
        self.runtime.block_on(self.session.insert_records(records))
    }

    /// See [`Session::series_types`].
    pub fn series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> Result<Vec<(String, common::DataType)>> {
        self.runtime
            .block_on(self.session.series_types(device, measurements))
    }

    /// See [`Session::show_timeseries`].
    pub fn show_timeseries(&self, prefix: &str) -> Result<Vec<TimeseriesView>> {
        self.runtime.block_on(self.session.show_timeseries(prefix))
    }

    /// See [`Session::set_ttl`].
    pub fn set_ttl(&self, database: &str, ttl_ms: i64) -> Result<()> {
        self.runtime
            .block_on(self.session.set_ttl(database, ttl_ms))
    }

    /// See [`Session::unset_ttl`].
    pub fn unset_ttl(&self, database: &str) -> Result<()> {
        self.runtime.block_on(self.session.unset_ttl(database))
    }

    /// See [`Session::show_databases_with_ttl`].
    pub fn show_databases_with_ttl(&self) -> Result<Vec<(String, Option<i64>)>> {
        self.runtime
            .block_on(self.session.show_databases_with_ttl())
    }

    /// See [`Session::show_databases`].
    pub fn show_databases(&self) -> Result<Vec<String>> {
        self.runtime.block_on(self.session.show_databases())
    }

    /// See [`Session::show_cluster`].
    pub fn show_cluster(&self) -> Result<ClusterView> {
        self.runtime.block_on(self.session.show_cluster())
    }

    /// See [`Session::show_regions`].
    pub fn show_regions(&self) -> Result<Vec<RegionView>> {
        self.runtime.block_on(self.session.show_regions())
    }

    /// See [`Session::show_leases`].
    pub fn show_leases(&self) -> Result<LeasesView> {
        self.runtime.block_on(self.session.show_leases())
    }

    /// See [`Session::local_lease`].
    pub fn local_lease(&self) -> Result<LocalLeaseView> {
        self.runtime.block_on(self.session.local_lease())
    }

    /// See [`Session::region_digests_at`].
    pub fn region_digests_at(&self, endpoint: &str) -> Result<Vec<RegionDigestView>> {
        self.runtime
            .block_on(self.session.region_digests_at(endpoint))
    }
}
