//! An in-memory [`Backend`] for the executor's tests: series and their points, aliases, tags and
//! attributes, databases and tables, all behind mutexes; it never waits.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use common::aggregate::{Partial, Windows};
use common::table::{TableSchema, TableView};
use common::views::{
    ClusterView, DatabaseView, FragmentView, LeasesView, LocalLeaseView, RegionView, SeriesMeta,
    TimeseriesView,
};
use common::{DataType, StatusCode, Tablet, Value};

use super::*;

/// A series' type and points.
type Points = (DataType, BTreeMap<i64, Value>);

/// Series by (device, measurement), and their declared aliases, tags and attributes.
#[derive(Default)]
pub(super) struct Memory {
    pub(super) series: Mutex<BTreeMap<(String, String), Points>>,
    meta: Mutex<BTreeMap<(String, String), SeriesMeta>>,
    /// Databases created besides root.sg (a tree database that always exists), and whether
    /// each is the table model's.
    databases: Mutex<BTreeMap<String, bool>>,
    /// Tables by (database, name), with their devices' attributes.
    tables: Mutex<BTreeMap<(String, String), TableView>>,
    /// The last metadata version handed out (a table's incarnation).
    version: Mutex<u64>,
    /// A table dropped when the next table write reaches the backend, between its schema
    /// lookup and its rows: a DROP TABLE racing the write.
    pub(super) drop_before_next_write: Mutex<Option<(String, String)>>,
    /// Calls of `query_raw` and of `aggregate` so far.
    pub(super) calls: Mutex<Calls>,
    /// EXPLAIN ANALYZE's fragments, once traced: the whole map is region 0 on "memory".
    fragments: Mutex<Option<Vec<FragmentView>>>,
}

/// How often the executor asked for points and for partials.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Calls {
    /// `query_raw`.
    pub(super) raw: usize,
    /// `aggregate`.
    pub(super) aggregate: usize,
}

impl Memory {
    /// Whether `device` lies in a table-model database.
    fn table_model(&self, device: &str) -> bool {
        let databases = self.databases.lock().unwrap();
        databases
            .iter()
            .any(|(db, table)| *table && device.starts_with(&format!("{db}.")))
    }

    /// 550 unless `table` of `database` exists as incarnation `created_version`.
    fn check_incarnation(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
    ) -> ExecResult<()> {
        let tables = self.tables.lock().unwrap();
        match tables.get(&(database.to_string(), table.to_string())) {
            Some(view) if view.created_version == created_version => Ok(()),
            _ => Err(ExecError::refused(
                StatusCode::TableNotExists,
                format!("table {database}.{table} was dropped since the write read it"),
            )),
        }
    }
}

impl Memory {
    /// Records one read of `series` series answering `rows`, when tracing.
    fn record(&self, kind: &'static str, series: usize, rows: usize) {
        let mut fragments = self.fragments.lock().unwrap();
        let Some(fragments) = fragments.as_mut() else {
            return;
        };
        let read = FragmentView {
            kind,
            region: 0,
            replica: "memory".into(),
            local: true,
            calls: 1,
            series: series as u64,
            rows: rows as u64,
            elapsed_us: 0,
            retries: 0,
        };
        FragmentView::record_into(fragments, read);
    }
}

fn unused<T>() -> ExecResult<T> {
    Err(ExecError::refused(
        StatusCode::InternalServerError,
        "not in this test",
    ))
}

impl Backend for Memory {
    async fn create_database(&self, database: &str, table_model: bool) -> ExecResult<()> {
        self.databases
            .lock()
            .unwrap()
            .insert(database.to_string(), table_model);
        Ok(())
    }
    async fn drop_database(&self, _: &str) -> ExecResult<()> {
        unused()
    }
    async fn set_ttl(&self, _: &str, _: i64) -> ExecResult<()> {
        unused()
    }
    async fn unset_ttl(&self, _: &str) -> ExecResult<()> {
        unused()
    }
    async fn remove_data_node(&self, _: u64) -> ExecResult<()> {
        unused()
    }
    async fn create_timeseries(
        &self,
        path: &str,
        data_type: DataType,
        _: Option<&str>,
        _: Option<&str>,
        meta: &SeriesMeta,
    ) -> ExecResult<()> {
        let (device, measurement) = path.rsplit_once('.').expect("a series path");
        let key: (String, String) = (device.into(), measurement.into());
        self.series
            .lock()
            .unwrap()
            .insert(key.clone(), (data_type, BTreeMap::new()));
        self.meta.lock().unwrap().insert(key, meta.clone());
        Ok(())
    }
    async fn delete_timeseries(&self, _: &str) -> ExecResult<()> {
        unused()
    }
    async fn delete_data(&self, keys: &[(String, String)], start: i64, end: i64) -> ExecResult<()> {
        let mut series = self.series.lock().unwrap();
        for key in keys {
            if let Some((_, points)) = series.get_mut(key) {
                points.retain(|t, _| !(start..=end).contains(t));
            }
        }
        Ok(())
    }
    async fn insert_tablet(&self, tablet: Tablet) -> ExecResult<()> {
        let mut series = self.series.lock().unwrap();
        for (column, measurement) in tablet.measurements.iter().enumerate() {
            let key = (tablet.device.clone(), measurement.clone());
            let data_type = tablet.data_types[column];
            let entry = series
                .entry(key)
                .or_insert_with(|| (data_type, BTreeMap::new()));
            if entry.0 != data_type {
                return Err(ExecError::refused(StatusCode::DataTypeMismatch, "type"));
            }
            for (row, &time) in tablet.timestamps.iter().enumerate() {
                if !tablet.is_null(row, column) {
                    entry.1.insert(time, tablet.columns[column].value(row));
                }
            }
        }
        Ok(())
    }
    async fn series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> ExecResult<Vec<(String, DataType)>> {
        if self.table_model(device) {
            return Ok(Vec::new());
        }
        let series = self.series.lock().unwrap();
        Ok(measurements
            .iter()
            .filter_map(|m| {
                let (t, _) = series.get(&(device.to_string(), m.clone()))?;
                Some((m.clone(), *t))
            })
            .collect())
    }
    async fn show_timeseries(&self, prefix: &str) -> ExecResult<Vec<TimeseriesView>> {
        let series = self.series.lock().unwrap();
        let meta = self.meta.lock().unwrap();
        let table_model = |device: &str| self.table_model(device);
        Ok(series
            .iter()
            .filter(|((d, m), _)| format!("{d}.{m}").starts_with(prefix))
            .map(|((d, m), (t, _))| TimeseriesView {
                table_model: table_model(d),
                meta: meta
                    .get(&(d.clone(), m.clone()))
                    .cloned()
                    .unwrap_or_default(),
                database: "root.sg".into(),
                device: d.clone(),
                measurement: m.clone(),
                data_type: *t,
                pending_delete: false,
                encoding: String::new(),
                compressor: String::new(),
            })
            .collect())
    }
    async fn query_raw(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
        limit: usize,
    ) -> ExecResult<Vec<(i64, Value)>> {
        self.calls.lock().unwrap().raw += 1;
        let series = self.series.lock().unwrap();
        let points: Vec<(i64, Value)> = series
            .get(&(device.to_string(), measurement.to_string()))
            .map(|(_, points)| {
                points
                    .range(from..to)
                    .take(limit)
                    .map(|(t, v)| (*t, v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        self.record("raw", 1, points.len());
        Ok(points)
    }
    async fn aggregate(
        &self,
        reads: &[(String, Vec<String>)],
        windows: Windows,
    ) -> ExecResult<Vec<Vec<Vec<Partial>>>> {
        self.calls.lock().unwrap().aggregate += 1;
        let series = self.series.lock().unwrap();
        let windows_count = usize::try_from(windows.count()).expect("windows fit in memory");
        let partials = |device: &String, m: &String| {
            let mut partials = vec![Partial::default(); windows_count];
            if let Some((_, points)) = series.get(&(device.clone(), m.clone())) {
                for (t, v) in points.range(windows.range()) {
                    let i = windows.index(*t).expect("a point of the windows' range");
                    partials[i].push(*t, v);
                }
            }
            // As a region answering from page statistics: no second moment unless asked.
            if !windows.moments {
                partials.iter_mut().for_each(|p| p.m2 = 0.0);
            }
            partials
        };
        let asked: usize = reads.iter().map(|(_, m)| m.len()).sum();
        self.record("aggregate", asked, asked * windows_count);
        Ok(reads
            .iter()
            .map(|(device, measurements)| {
                measurements.iter().map(|m| partials(device, m)).collect()
            })
            .collect())
    }
    async fn query_last(
        &self,
        asked: &[(String, String)],
    ) -> ExecResult<Vec<Option<(i64, Value)>>> {
        let series = self.series.lock().unwrap();
        let last: Vec<Option<(i64, Value)>> = asked
            .iter()
            .map(|key| {
                series
                    .get(key)
                    .and_then(|(_, points)| points.last_key_value())
                    .map(|(t, v)| (*t, v.clone()))
            })
            .collect();
        self.record("last", asked.len(), last.iter().flatten().count());
        Ok(last)
    }
    fn trace_fragments(&self) {
        self.fragments.lock().unwrap().get_or_insert_with(Vec::new);
    }
    fn take_fragments(&self) -> Vec<FragmentView> {
        let mut fragments = self.fragments.lock().unwrap();
        fragments.as_mut().map(std::mem::take).unwrap_or_default()
    }
    async fn show_databases(&self) -> ExecResult<Vec<DatabaseView>> {
        let view = |name: &str, ttl_ms, table_model| DatabaseView {
            name: name.into(),
            ttl_ms,
            schema_replication_factor: 1,
            data_replication_factor: 3,
            time_partition_origin_ms: 0,
            time_partition_interval_ms: 604_800_000,
            table_model,
        };
        let mut views = vec![view("root.sg", Some(86_400_000), false)];
        let created = self.databases.lock().unwrap();
        views.extend(
            created
                .iter()
                .filter(|(d, _)| *d != "root.sg")
                .map(|(d, table_model)| view(d, None, *table_model)),
        );
        Ok(views)
    }
    async fn show_cluster(&self) -> ExecResult<ClusterView> {
        unused()
    }
    async fn show_regions(&self) -> ExecResult<Vec<RegionView>> {
        unused()
    }
    async fn show_leases(&self) -> ExecResult<LeasesView> {
        unused()
    }
    async fn local_lease(&self) -> ExecResult<LocalLeaseView> {
        unused()
    }
    async fn show_queries(&self) -> ExecResult<Vec<common::views::QueryView>> {
        Ok(Vec::new())
    }
    async fn kill_query(&self, _: Option<&str>) -> ExecResult<usize> {
        Ok(0)
    }
    async fn flush(&self) -> ExecResult<()> {
        Ok(())
    }
    async fn create_user(&self, _: &str, _: &str) -> ExecResult<()> {
        unused()
    }
    async fn drop_user(&self, _: &str) -> ExecResult<()> {
        unused()
    }
    async fn alter_user_password(&self, _: &str, _: &str) -> ExecResult<()> {
        unused()
    }
    async fn list_users(&self) -> ExecResult<Vec<String>> {
        Ok(vec!["ops".into(), "root".into()])
    }
    async fn insert_table_tablets(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
        tablets: Vec<Tablet>,
    ) -> ExecResult<()> {
        let racing = self.drop_before_next_write.lock().unwrap().take();
        if let Some((db, t)) = racing {
            self.drop_table(&db, &t).await?;
        }
        self.check_incarnation(database, table, created_version)?;
        for tablet in tablets {
            assert!(
                tablet.device.starts_with(&format!("{database}.{table}")),
                "a device of the table"
            );
            self.insert_tablet(tablet).await?;
        }
        Ok(())
    }
    async fn create_table(
        &self,
        database: &str,
        table: &TableSchema,
        if_not_exists: bool,
        extend: bool,
    ) -> ExecResult<()> {
        let mut tables = self.tables.lock().unwrap();
        let key = (database.to_string(), table.name.clone());
        match tables.get_mut(&key) {
            None => {
                let mut version = self.version.lock().unwrap();
                *version += 1;
                tables.insert(
                    key,
                    TableView {
                        schema: table.clone(),
                        created_version: *version,
                        devices: Vec::new(),
                    },
                );
            }
            Some(existing) if extend => {
                for c in &table.columns {
                    match existing.schema.column(&c.name) {
                        Some(have) if have == c => {}
                        Some(_) => {
                            return Err(ExecError::refused(StatusCode::DataTypeMismatch, "column"))
                        }
                        None => existing.schema.columns.push(c.clone()),
                    }
                }
            }
            Some(_) if if_not_exists => {}
            Some(_) => {
                return Err(ExecError::refused(
                    StatusCode::TableAlreadyExists,
                    "table exists",
                ))
            }
        }
        Ok(())
    }
    async fn drop_table(&self, database: &str, table: &str) -> ExecResult<()> {
        let key = (database.to_string(), table.to_string());
        if self.tables.lock().unwrap().remove(&key).is_none() {
            return Err(ExecError::refused(StatusCode::TableNotExists, "no table"));
        }
        let prefix = format!("{database}.{table}.");
        self.series
            .lock()
            .unwrap()
            .retain(|(device, _), _| !device.starts_with(&prefix));
        Ok(())
    }
    async fn tables(
        &self,
        database: &str,
        table: Option<&str>,
        with_devices: bool,
    ) -> ExecResult<Vec<TableView>> {
        let tables = self.tables.lock().unwrap();
        let found: Vec<TableView> = tables
            .iter()
            .filter(|((db, name), _)| db == database && table.is_none_or(|t| t == name))
            .map(|(_, view)| TableView {
                schema: view.schema.clone(),
                created_version: view.created_version,
                devices: if with_devices {
                    view.devices.clone()
                } else {
                    Vec::new()
                },
            })
            .collect();
        if table.is_some() && found.is_empty() {
            return Err(ExecError::refused(StatusCode::TableNotExists, "no table"));
        }
        Ok(found)
    }
    async fn table_for_write(&self, database: &str, table: &str) -> ExecResult<Option<TableView>> {
        let tables = self.tables.lock().unwrap();
        Ok(tables
            .get(&(database.to_string(), table.to_string()))
            .map(|view| TableView {
                devices: Vec::new(),
                ..view.clone()
            }))
    }
    async fn set_device_attributes(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
        devices: &[common::table::DeviceAttributes],
    ) -> ExecResult<()> {
        self.check_incarnation(database, table, created_version)?;
        let mut tables = self.tables.lock().unwrap();
        let view = tables
            .get_mut(&(database.to_string(), table.to_string()))
            .expect("a table");
        for (tags, attributes) in devices {
            match view.devices.iter_mut().find(|(t, _)| t == tags) {
                Some((_, have)) => have.extend(attributes.clone()),
                None => view.devices.push((tags.clone(), attributes.clone())),
            }
        }
        Ok(())
    }
}

/// Runs a future that never waits (the in-memory backend's).
pub(super) fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the in-memory backend never waits"),
    }
}

/// Runs the one statement of `text` over `m`.
pub(super) fn run(m: &Memory, text: &str) -> super::ExecResult<super::Outcome> {
    let mut parsed = crate::parse_script(text, crate::Position::START);
    assert_eq!(parsed.len(), 1, "{text}");
    let statement = parsed.pop().unwrap().result.expect(text);
    ready(super::execute(m, &statement))
}

/// [`run`], which must succeed.
pub(super) fn one(m: &Memory, text: &str) -> super::Outcome {
    run(m, text).expect(text)
}

/// A small deterministic generator (xorshift64*), so the model tests need no crate.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
