//! The async session: one lazily connected channel per DataNode endpoint, a retry loop that moves
//! to a different DataNode on a retryable failure, and a device → endpoint redirect cache.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use common::views::SeriesMeta;
use common::{DataType, StatusCode, Tablet, TabletLimits, Value};
use proto::session_service_client::SessionServiceClient;
use proto::statements;
use tonic::metadata::{Binary, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::Channel;

use crate::config::SessionConfig;
use crate::convert::{series_points, split_path, tablet_to_wire, value_from_wire, value_to_wire};
use crate::error::{Result, SessionError};
use proto::views::{
    ClusterView, LeasesView, LocalLeaseView, RegionDigestView, RegionView, TimeseriesView,
};

/// Endpoints one session may be given.
pub const ENDPOINTS_MAX: usize = 1024;
/// Tablets in one `insert_tablets` call (the server's limit).
pub const BATCH_TABLETS_MAX: usize = 10_000;
/// Devices remembered by the redirect cache; when full it is cleared (hints are cheap to relearn).
pub const REDIRECT_CACHE_DEVICES_MAX: usize = 100_000;

/// One row of one device for [`Session::insert_records`]; a value's type is its variant's, `None`
/// is a null (left out).
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Device path, e.g. `root.sg.d1`.
    pub device: String,
    /// Timestamp in milliseconds.
    pub timestamp: i64,
    /// Measurement names, one per value.
    pub measurements: Vec<String>,
    /// Values, one per measurement.
    pub values: Vec<Option<Value>>,
}

/// Counters of one session, for callers and load generators.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Retries caused by a server status, by IoTDB code (536, 905, 712, 606, 1007, 302).
    pub retries_by_code: BTreeMap<i32, u64>,
    /// Retries after a connection failure (the transport could not reach the DataNode).
    pub connection_retries: u64,
    /// Retries after `request_timeout_ms` passed without an answer.
    pub timeout_retries: u64,
    /// Calls sent first to the endpoint the redirect cache named for their device.
    pub redirect_hits: u64,
    /// Redirect hints recorded into the cache.
    pub redirects_recorded: u64,
}

impl SessionStats {
    /// All retries, whatever their cause.
    pub fn retries(&self) -> u64 {
        self.retries_by_code.values().sum::<u64>() + self.connection_retries + self.timeout_retries
    }
}

/// Device → endpoint index hints from the servers' redirects.
#[derive(Debug, Default)]
pub(crate) struct RedirectCache {
    devices: HashMap<String, usize>,
}

impl RedirectCache {
    pub(crate) fn get(&self, device: &str) -> Option<usize> {
        self.devices.get(device).copied()
    }

    pub(crate) fn record(&mut self, device: &str, endpoint: usize) {
        if self.devices.len() >= REDIRECT_CACHE_DEVICES_MAX && !self.devices.contains_key(device) {
            self.devices.clear();
        }
        self.devices.insert(device.to_string(), endpoint);
    }

    /// Drops a hint that led to a failure.
    pub(crate) fn forget(&mut self, device: &str, endpoint: usize) {
        if self.devices.get(device) == Some(&endpoint) {
            self.devices.remove(device);
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// The endpoint calls without a redirect hint go to; moves on after a retryable failure.
    current: usize,
    redirects: RedirectCache,
    stats: SessionStats,
}

/// What one answer means for the retry loop.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// 200, or 400 REDIRECTION_RECOMMEND (the request succeeded; the hint is for next time).
    Success,
    /// 535: surfaced as [`SessionError::LeaseFenced`], never retried.
    Fenced,
    /// Worth trying on a different DataNode.
    Retry,
    /// Final: 614, 700, 507 and everything else.
    Final,
}

pub(crate) fn verdict(status: &proto::Status) -> Verdict {
    if status.is_success() || status.is(StatusCode::RedirectionRecommend) {
        Verdict::Success
    } else if status.is(StatusCode::MetadataLeaseFenced) {
        Verdict::Fenced
    } else if status.is_retryable() {
        Verdict::Retry
    } else if status.is(StatusCode::MultipleError) {
        // Writes are upserts, so a batch may be sent again whole when every failed part is
        // retryable; one final part (e.g. 614) makes the whole answer final.
        let failed: Vec<&proto::Status> = status
            .sub_status
            .iter()
            .filter(|s| !s.is(StatusCode::Success))
            .collect();
        if failed.iter().any(|s| verdict(s) == Verdict::Fenced) {
            Verdict::Fenced
        } else if !failed.is_empty() && failed.iter().all(|s| verdict(s) == Verdict::Retry) {
            Verdict::Retry
        } else {
            Verdict::Final
        }
    } else {
        Verdict::Final
    }
}

/// Whether a gRPC error means the DataNode was not reached or the connection broke, rather than
/// an answer from it: the codes below, and INTERNAL raised on this side of the wire (tonic maps
/// an HTTP/2 stream reset or GOAWAY, e.g. from a DataNode shutting down mid-request, to
/// INTERNAL with the h2 error as its source; a status the server sent has no source). Writes are
/// upserts, so one sent again elsewhere after a broken connection cannot double anything.
fn connection_failure(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::Unavailable
        | tonic::Code::Unknown
        | tonic::Code::Cancelled
        | tonic::Code::Aborted
        | tonic::Code::DeadlineExceeded => true,
        tonic::Code::Internal => std::error::Error::source(status).is_some(),
        _ => false,
    }
}

/// A DataNode at its request limit answers gRPC `RESOURCE_EXHAUSTED` without running the
/// request: 606 WRITE_PROCESS_REJECT, retried like the 606 of a full memtable budget.
fn overloaded(endpoint: &str, status: &tonic::Status) -> SessionError {
    SessionError::Status {
        code: StatusCode::WriteProcessReject.wire(),
        message: format!("{endpoint}: {}", status.message()),
    }
}

/// A DataNode's refusal of the login (`UNAUTHENTICATED`, the IoTDB code first in the message:
/// "801: Authentication failed.") as a status error.
fn login_refusal(status: &tonic::Status) -> SessionError {
    let message = status.message();
    let parsed = message
        .split_once(": ")
        .and_then(|(code, rest)| Some((code.parse::<i32>().ok()?, rest)));
    let (code, message) = parsed.unwrap_or((StatusCode::WrongLoginPassword.wire(), message));
    SessionError::Status {
        code,
        message: message.to_string(),
    }
}

fn status_error(status: &proto::Status) -> SessionError {
    let mut message = status.message.clone();
    for sub in status.sub_status.iter().filter(|s| !s.is_success()) {
        message.push_str(&format!("; {}: {}", sub.code, sub.message));
    }
    SessionError::Status {
        code: status.code,
        message,
    }
}

pub(crate) fn status_of(status: Option<proto::Status>) -> proto::Status {
    status.unwrap_or_else(|| {
        proto::status(StatusCode::InternalServerError, "answer without a status")
    })
}

pub(crate) type Client = SessionServiceClient<InterceptedService<Channel, Credentials>>;

/// Puts the session's user and password on every call (the DataNode's login check).
#[derive(Clone, Debug)]
pub struct Credentials {
    user: MetadataValue<Binary>,
    password: MetadataValue<Binary>,
}

impl Credentials {
    /// The credentials of `user` with `password`.
    pub fn new(user: &str, password: &str) -> Credentials {
        Credentials {
            user: MetadataValue::from_bytes(user.as_bytes()),
            password: MetadataValue::from_bytes(password.as_bytes()),
        }
    }
}

impl Interceptor for Credentials {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        let metadata = request.metadata_mut();
        metadata.insert_bin(proto::USER_KEY, self.user.clone());
        metadata.insert_bin(proto::PASSWORD_KEY, self.password.clone());
        Ok(request)
    }
}

/// A client for `address` (`host:port`) that connects on first use.
fn lazy_client(address: &str, config: &SessionConfig) -> Result<Client> {
    proto::parse_endpoint(address).map_err(|e| SessionError::Config(e.to_string()))?;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| SessionError::Config(format!("{address}: {e}")))?
        .connect_timeout(Duration::from_millis(config.request_timeout_ms))
        .connect_lazy();
    let credentials = Credentials::new(&config.username, &config.password);
    Ok(SessionServiceClient::with_interceptor(channel, credentials)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes))
}
pub(crate) type RpcResult<T> = std::result::Result<(proto::Status, T), tonic::Status>;

/// What a statement run by [`Session::execute_statement`] answered.
#[derive(Clone, Debug, PartialEq)]
pub struct StatementResult {
    /// A query (a table, even of no rows) rather than a statement that only succeeded.
    pub query: bool,
    /// Column names; a first column `Time` is the rows' time.
    pub columns: Vec<String>,
    /// Parallel to `columns`.
    pub types: Vec<DataType>,
    /// Rows of one cell per column; `None` is null.
    pub rows: Vec<Vec<Option<Value>>>,
}

/// An async session over a list of DataNode endpoints. Methods take `&self`: share one session
/// between tasks with an `Arc`.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    endpoints: Vec<String>,
    clients: Vec<Client>,
    session_id: u64,
    state: Mutex<State>,
}

impl Session {
    /// Validates `config` and the endpoints (`host:port`, at least one), then opens a session on
    /// the first DataNode that answers (retrying like any call).
    pub async fn connect(endpoints: &[&str], config: SessionConfig) -> Result<Session> {
        config.validate()?;
        if endpoints.is_empty() || endpoints.len() > ENDPOINTS_MAX {
            return Err(SessionError::Config(format!(
                "{} endpoints; give 1..={ENDPOINTS_MAX}",
                endpoints.len()
            )));
        }
        let mut clients = Vec::with_capacity(endpoints.len());
        for address in endpoints {
            clients.push(lazy_client(address, &config)?);
        }
        let mut session = Session {
            config,
            endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
            clients,
            session_id: 0,
            state: Mutex::new(State::default()),
        };
        let username = session.config.username.clone();
        session.session_id = session
            .call(None, |mut c, _| {
                let username = username.clone();
                async move {
                    let r = c
                        .open_session(proto::OpenSessionReq {
                            username,
                            client_version: env!("CARGO_PKG_VERSION").into(),
                        })
                        .await?
                        .into_inner();
                    Ok((status_of(r.status), r.session_id))
                }
            })
            .await?;
        Ok(session)
    }

    /// The counters and the cache. A panic while holding the lock cannot leave them
    /// inconsistent (no invariant spans their fields), so a poisoned lock is used as is.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The endpoints, in the order given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> SessionStats {
        self.state().stats.clone()
    }

    /// The endpoint the redirect cache names for `device`, if any.
    pub fn cached_endpoint(&self, device: &str) -> Option<&str> {
        let index = self.state().redirects.get(device)?;
        Some(&self.endpoints[index])
    }

    /// Writes one tablet, validated first.
    pub async fn insert_tablet(&self, tablet: &Tablet) -> Result<()> {
        tablet.validate(&TabletLimits::default())?;
        let wire = tablet_to_wire(tablet);
        self.call(Some(&tablet.device), |mut c, session_id| {
            let req = proto::InsertTabletReq {
                session_id,
                tablet: Some(wire.clone()),
            };
            async move { Ok((c.insert_tablet(req).await?.into_inner(), ())) }
        })
        .await
    }

    /// Writes several tablets in one request, each validated first (1..=[`BATCH_TABLETS_MAX`]).
    /// A retry sends the whole batch again (writes are upserts).
    pub async fn insert_tablets(&self, tablets: &[Tablet]) -> Result<()> {
        if tablets.is_empty() || tablets.len() > BATCH_TABLETS_MAX {
            return Err(SessionError::InvalidArgument(format!(
                "{} tablets in one batch; give 1..={BATCH_TABLETS_MAX}",
                tablets.len()
            )));
        }
        let limits = TabletLimits::default();
        for t in tablets {
            t.validate(&limits)?;
        }
        let wire: Vec<proto::Tablet> = tablets.iter().map(tablet_to_wire).collect();
        // The cache steers a batch only when it holds a single device.
        let device = tablets[0].device.as_str();
        let single = tablets.iter().all(|t| t.device == device);
        self.call(single.then_some(device), |mut c, session_id| {
            let req = proto::InsertTabletsReq {
                session_id,
                tablets: wire.clone(),
            };
            async move { Ok((c.insert_tablets(req).await?.into_inner(), ())) }
        })
        .await
    }

    /// Writes rows of possibly different devices, one [`Record`] per row
    /// (1..=[`BATCH_TABLETS_MAX`] records). A retry sends them all again (writes are upserts).
    pub async fn insert_records(&self, records: &[Record]) -> Result<()> {
        if records.is_empty() || records.len() > BATCH_TABLETS_MAX {
            return Err(SessionError::InvalidArgument(format!(
                "{} records in one batch; give 1..={BATCH_TABLETS_MAX}",
                records.len()
            )));
        }
        let mut wire = Vec::with_capacity(records.len());
        for r in records {
            if !r.device.starts_with("root.") || r.measurements.is_empty() {
                return Err(SessionError::InvalidArgument(format!(
                    "record for {:?} at {}: a device path root.<...> and at least one measurement",
                    r.device, r.timestamp
                )));
            }
            if r.measurements.len() != r.values.len() {
                return Err(SessionError::InvalidArgument(format!(
                    "record for {} at {} has {} measurements and {} values",
                    r.device,
                    r.timestamp,
                    r.measurements.len(),
                    r.values.len()
                )));
            }
            wire.push(proto::Record {
                device: r.device.clone(),
                timestamp: r.timestamp,
                measurements: r.measurements.clone(),
                values: r.values.iter().map(|v| value_to_wire(v.as_ref())).collect(),
            });
        }
        let device = records[0].device.as_str();
        let single = records.iter().all(|r| r.device == device);
        self.call(single.then_some(device), |mut c, session_id| {
            let req = proto::InsertRecordsReq {
                session_id,
                records: wire.clone(),
            };
            async move { Ok((c.insert_records(req).await?.into_inner(), ())) }
        })
        .await
    }

    /// The points of `device.measurement` with `from <= time < to`, in time order. Pages of
    /// `query_page_points` (each a linearizable read) until the DataNode reports no more.
    pub async fn query_raw(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, Value)>> {
        let path = proto::SeriesPath {
            device: device.into(),
            measurement: measurement.into(),
        };
        let mut points = Vec::new();
        let mut start = from;
        loop {
            let series = self
                .call(None, |mut c, session_id| {
                    let req = proto::QueryRawReq {
                        session_id,
                        paths: vec![path.clone()],
                        start_time: start,
                        end_time: to,
                        points_limit: self.config.query_page_points,
                    };
                    async move {
                        let r = c.query_raw(req).await?.into_inner();
                        Ok((status_of(r.status), r.series))
                    }
                })
                .await?;
            let Some(page) = series
                .into_iter()
                .find(|s| s.path.as_ref() == Some(&path) || s.path.is_none())
            else {
                return Ok(points);
            };
            let truncated = page.truncated;
            let page_points = series_points(page)?;
            let last = page_points.last().map(|(t, _)| *t);
            points.extend(page_points);
            match last {
                Some(t) if truncated && t < i64::MAX => start = t + 1,
                _ => return Ok(points),
            }
        }
    }

    /// The latest point of `device.measurement`, `None` when it has none.
    pub async fn query_last(
        &self,
        device: &str,
        measurement: &str,
    ) -> Result<Option<(i64, Value)>> {
        let path = proto::SeriesPath {
            device: device.into(),
            measurement: measurement.into(),
        };
        let points = self
            .call(None, |mut c, session_id| {
                let req = proto::QueryLastReq {
                    session_id,
                    paths: vec![path.clone()],
                };
                async move {
                    let r = c.query_last(req).await?.into_inner();
                    Ok((status_of(r.status), r.points))
                }
            })
            .await?;
        let Some(point) = points.into_iter().find(|p| p.path.as_ref() == Some(&path)) else {
            return Ok(None);
        };
        let value = point
            .value
            .as_ref()
            .and_then(value_from_wire)
            .ok_or_else(|| SessionError::Protocol("last point without a value".into()))?;
        Ok(Some((point.timestamp, value)))
    }

    /// `CREATE DATABASE root.sg`.
    pub async fn create_database(&self, database: &str) -> Result<()> {
        self.schema(statements::create_database(database, false))
            .await
    }

    /// `DROP DATABASE root.sg`.
    pub async fn drop_database(&self, database: &str) -> Result<()> {
        self.schema(statements::drop_database(database)).await
    }

    /// `SET TTL TO root.sg <ttl_ms>`: points older than now - ttl become invisible to every
    /// read once this returns. A TTL that is not positive is refused (700).
    pub async fn set_ttl(&self, database: &str, ttl_ms: i64) -> Result<()> {
        if ttl_ms <= 0 {
            return Err(SessionError::Status {
                code: common::StatusCode::IllegalParameter as i32,
                message: format!("TTL {ttl_ms} ms: a TTL must be positive"),
            });
        }
        self.schema(statements::set_ttl(database, ttl_ms)).await
    }

    /// `REMOVE DATANODE <id>`: the DataNode's region replicas migrate to other Running
    /// DataNodes (learner, catch-up by snapshot, joint replace), after which it removes them.
    /// Answers once the removal is recorded; `show_regions` shows the migrations
    /// ([`crate::RegionView::migration`]) until they finished.
    pub async fn remove_data_node(&self, data_node_id: u64) -> Result<()> {
        self.schema(statements::remove_data_node(data_node_id))
            .await
    }

    /// `UNSET TTL TO root.sg`: the database keeps its data forever again.
    pub async fn unset_ttl(&self, database: &str) -> Result<()> {
        self.schema(statements::set_ttl(database, 0)).await
    }

    /// `CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=...`.
    pub async fn create_timeseries(&self, path: &str, data_type: DataType) -> Result<()> {
        self.create_timeseries_with(path, data_type, None, None)
            .await
    }

    /// `CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=..., ENCODING=..., COMPRESSOR=...`:
    /// IoTDB's names (`PLAIN`, `TS_2DIFF`, `RLE`, `GORILLA`, `CHIMP`, `ZIGZAG`, `DICTIONARY`;
    /// `UNCOMPRESSED`, `LZ4`), which sealed files honour; `None` leaves the choice to the
    /// storage engine. A name the type does not take is refused with 700 ILLEGAL_PARAMETER.
    pub async fn create_timeseries_with(
        &self,
        path: &str,
        data_type: DataType,
        encoding: Option<&str>,
        compressor: Option<&str>,
    ) -> Result<()> {
        let (device, measurement) = split_path(path)?;
        self.schema(statements::create_timeseries(
            device,
            measurement,
            data_type,
            encoding,
            compressor,
            &SeriesMeta::default(),
        ))
        .await
    }

    /// `DELETE TIMESERIES root.sg.d1.s1`.
    pub async fn delete_timeseries(&self, path: &str) -> Result<()> {
        let (device, measurement) = split_path(path)?;
        self.schema(statements::delete_timeseries(device, measurement))
            .await
    }

    async fn schema(&self, statement: proto::schema_statement_req::Statement) -> Result<()> {
        self.call(None, |mut c, session_id| {
            let req = proto::SchemaStatementReq {
                session_id,
                statement: Some(statement.clone()),
            };
            async move { Ok((c.execute_schema_statement(req).await?.into_inner(), ())) }
        })
        .await
    }

    /// `SHOW DATABASES`.
    pub async fn show_databases(&self) -> Result<Vec<String>> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .show_databases(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            Ok((status_of(r.status), r.databases))
        })
        .await
    }

    /// `SHOW DATABASES` with each database's TTL in ms (`None` = INF).
    pub async fn show_databases_with_ttl(&self) -> Result<Vec<(String, Option<i64>)>> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .show_databases(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            let ttls = r.ttl_ms;
            let databases = r
                .databases
                .into_iter()
                .enumerate()
                .map(|(i, d)| (d, ttls.get(i).copied().filter(|t| *t > 0)))
                .collect();
            Ok((status_of(r.status), databases))
        })
        .await
    }

    /// `SHOW TIMESERIES prefix` (`""` = all).
    pub async fn show_timeseries(&self, prefix: &str) -> Result<Vec<TimeseriesView>> {
        self.call(None, |mut c, session_id| {
            let req = proto::SessionShowTimeseriesReq {
                session_id,
                prefix: prefix.to_string(),
            };
            async move {
                let r = c.show_timeseries(req).await?.into_inner();
                Ok((status_of(r.status), r.series))
            }
        })
        .await?
        .into_iter()
        .map(|s| {
            let series = format!("{}.{}", s.device, s.measurement);
            TimeseriesView::try_from(s)
                .map_err(|e| SessionError::Protocol(format!("series {series}: {e}")))
        })
        .collect()
    }

    /// The types of those of `measurements` of `device` that exist, in the order named (what
    /// the CLI's INSERT types its literals by). The DataNode answers from its schema cache when
    /// it can, and a fenced one relays the lookup to a peer holding its lease.
    pub async fn series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> Result<Vec<(String, DataType)>> {
        self.call(Some(device), |mut c, session_id| {
            let req = proto::SeriesTypesReq {
                session_id,
                device: device.to_string(),
                measurements: measurements.to_vec(),
            };
            async move {
                let r = c.series_types(req).await?.into_inner();
                Ok((status_of(r.status), r.series))
            }
        })
        .await?
        .into_iter()
        .map(|m| {
            let t = proto::data_type(m.data_type)
                .map_err(|e| SessionError::Protocol(format!("series {device}.{}: {e}", m.name)))?;
            Ok((m.name, t))
        })
        .collect()
    }

    /// `SHOW CLUSTER`.
    pub async fn show_cluster(&self) -> Result<ClusterView> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .show_cluster(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            Ok((status_of(r.status.clone()), ClusterView::from(r)))
        })
        .await
    }

    /// `SHOW REGIONS`.
    pub async fn show_regions(&self) -> Result<Vec<RegionView>> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .show_regions(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            let regions = r.regions.into_iter().map(RegionView::from).collect();
            Ok((status_of(r.status), regions))
        })
        .await
    }

    /// `SHOW LEASES`: the ConfigNode's view of every DataNode's lease.
    pub async fn show_leases(&self) -> Result<LeasesView> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .show_leases(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            Ok((status_of(r.status.clone()), LeasesView::from(r)))
        })
        .await
    }

    /// `SHOW LOCAL LEASE`: the lease of the DataNode that answers (the current endpoint, or the
    /// next reachable one). Answered from the DataNode's local state, so it works while the
    /// DataNode is fenced or cut off from the ConfigNode.
    pub async fn local_lease(&self) -> Result<LocalLeaseView> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .show_local_lease(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            Ok((status_of(r.status.clone()), LocalLeaseView::from(r)))
        })
        .await
    }

    /// `CREATE USER`: only root may (803 otherwise); 805 when it exists.
    pub async fn create_user(&self, name: &str, password: &str) -> Result<()> {
        use proto::user_statement_req::Statement;
        self.user_statement(Statement::CreateUser(proto::CreateUserReq {
            username: name.into(),
            password: password.into(),
        }))
        .await
    }

    /// `DROP USER`: only root may, and root cannot be dropped (803); 804 when it does not exist.
    pub async fn drop_user(&self, name: &str) -> Result<()> {
        use proto::user_statement_req::Statement;
        self.user_statement(Statement::DropUser(proto::DropUserReq {
            username: name.into(),
        }))
        .await
    }

    /// `ALTER USER name SET PASSWORD`: root, or the user itself.
    pub async fn alter_user_password(&self, name: &str, password: &str) -> Result<()> {
        use proto::user_statement_req::Statement;
        self.user_statement(Statement::AlterPassword(proto::AlterUserPasswordReq {
            username: name.into(),
            password: password.into(),
        }))
        .await
    }

    async fn user_statement(&self, statement: proto::user_statement_req::Statement) -> Result<()> {
        self.call(None, |mut c, _| {
            let req = proto::UserStatementReq {
                issuer: String::new(),
                statement: Some(statement.clone()),
            };
            async move { Ok((c.user_statement(req).await?.into_inner(), ())) }
        })
        .await
    }

    /// Runs one SQL statement on a DataNode (as IoTDB's CLI does): a query's whole result, or
    /// an empty one for a statement that only succeeded. Retried like any call, so a statement
    /// that timed out may run twice (CREATE then answers that it exists).
    pub async fn execute_statement(&self, statement: &str) -> Result<StatementResult> {
        self.execute(statement, None).await
    }

    /// Runs one statement, of the table model with that current database when `table` is
    /// `Some`.
    pub(crate) async fn execute(
        &self,
        statement: &str,
        table: Option<Option<&str>>,
    ) -> Result<StatementResult> {
        let reply = self
            .call(None, |mut c, session_id| {
                let req = proto::ExecuteStatementReq {
                    session_id,
                    statement: statement.to_string(),
                    table_model: table.is_some(),
                    database: table.flatten().unwrap_or_default().to_string(),
                };
                async move {
                    let r = c.execute_statement(req).await?.into_inner();
                    Ok((status_of(r.status.clone()), r))
                }
            })
            .await?;
        let types = paged::decode_types(reply.columns.len(), &reply.types)?;
        let rows = paged::decode_rows(reply.columns.len(), reply.rows)?;
        Ok(StatementResult {
            query: reply.query,
            columns: reply.columns,
            types,
            rows,
        })
    }

    /// `LIST USER`: every user, sorted.
    pub async fn list_users(&self) -> Result<Vec<String>> {
        self.call(None, |mut c, _| async move {
            let r = c.list_users(proto::ListUsersReq {}).await?.into_inner();
            Ok((status_of(r.status), r.users))
        })
        .await
    }

    /// Deletes the points with `start <= time <= end` of the series `paths` name (series paths
    /// or path patterns such as `root.sg.d1.*`); the series stay (IoTDB's `deleteData`).
    pub async fn delete_data(&self, paths: &[&str], start: i64, end: i64) -> Result<()> {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        self.call(None, |mut c, session_id| {
            let req = proto::DeleteDataReq {
                session_id,
                paths: paths.clone(),
                start_time: start,
                end_time: end,
            };
            async move {
                let r = c.delete_data(req).await?.into_inner();
                Ok((r, ()))
            }
        })
        .await
    }

    /// `FLUSH`: the answering DataNode writes its replicas' memtables to files.
    pub async fn flush(&self) -> Result<()> {
        self.call(None, |mut c, session_id| async move {
            let r = c
                .flush(proto::SessionShowReq { session_id })
                .await?
                .into_inner();
            Ok((r, ()))
        })
        .await
    }

    /// The digests of the region replicas held by the DataNode at `endpoint` (its session
    /// address; need not be one of this session's endpoints). One attempt, no retry elsewhere:
    /// the answer is about that DataNode only.
    pub async fn region_digests_at(&self, endpoint: &str) -> Result<Vec<RegionDigestView>> {
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        self.region_replicas_at(endpoint, false, timeout, BTreeMap::new())
            .await
    }

    /// [`Session::region_digests_at`] over the points at or after `visible_from[database]` of
    /// each region's database (every point of a database absent): with a TTL's read cutoff,
    /// fixed once for every replica asked, replicas agree whether or not their compactions
    /// removed the expired points yet.
    pub async fn region_digests_visible_from(
        &self,
        endpoint: &str,
        visible_from: &BTreeMap<String, i64>,
    ) -> Result<Vec<RegionDigestView>> {
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        self.region_replicas_at(endpoint, false, timeout, visible_from.clone())
            .await
    }

    /// [`Session::region_digests_at`] waiting up to `timeout` instead of the request timeout: a
    /// digest reads every point of a region, which takes seconds for tens of millions.
    pub async fn region_digests_within(
        &self,
        endpoint: &str,
        timeout: Duration,
    ) -> Result<Vec<RegionDigestView>> {
        self.region_replicas_at(endpoint, false, timeout, BTreeMap::new())
            .await
    }

    /// The digest of region `region_id`'s replica on the DataNode at `endpoint` over the points
    /// at or after `visible_from[database]`, waiting up to `timeout` (a digest reads every point
    /// of the region: minutes for a billion); `None` when that DataNode holds no replica of it.
    pub async fn region_digest_of(
        &self,
        endpoint: &str,
        region_id: u64,
        visible_from: &BTreeMap<String, i64>,
        timeout: Duration,
    ) -> Result<Option<RegionDigestView>> {
        let mut digests = self
            .region_replicas_of(endpoint, region_id, false, timeout, visible_from.clone())
            .await?;
        digests.retain(|d| d.region_id == region_id);
        Ok(digests.pop())
    }

    /// Like [`Session::region_digests_at`] without the digests (each `digest` is 0): which
    /// regions the DataNode holds, their applied indexes and which it leads, cheaply however
    /// much data they hold.
    pub async fn region_leaders_at(&self, endpoint: &str) -> Result<Vec<RegionDigestView>> {
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        self.region_replicas_at(endpoint, true, timeout, BTreeMap::new())
            .await
    }

    async fn region_replicas_at(
        &self,
        endpoint: &str,
        leaders_only: bool,
        timeout: Duration,
        visible_from_ms: BTreeMap<String, i64>,
    ) -> Result<Vec<RegionDigestView>> {
        self.region_replicas_of(endpoint, 0, leaders_only, timeout, visible_from_ms)
            .await
    }

    /// The replicas of region `region_id` (0: every region) on the DataNode at `endpoint`.
    async fn region_replicas_of(
        &self,
        endpoint: &str,
        region_id: u64,
        leaders_only: bool,
        timeout: Duration,
        visible_from_ms: BTreeMap<String, i64>,
    ) -> Result<Vec<RegionDigestView>> {
        let mut client = match self.endpoints.iter().position(|e| e == endpoint) {
            Some(i) => self.clients[i].clone(),
            None => lazy_client(endpoint, &self.config)?,
        };
        let request = proto::RegionDigestReq {
            session_id: self.session_id,
            region_id,
            leaders_only,
            visible_from_ms,
        };
        let answer = match tokio::time::timeout(timeout, client.region_digest(request)).await {
            Err(_elapsed) => {
                return Err(SessionError::Timeout {
                    endpoint: endpoint.to_string(),
                    timeout_ms: timeout.as_millis() as u64,
                })
            }
            Ok(Err(status)) if connection_failure(&status) => {
                return Err(SessionError::Connection {
                    endpoint: endpoint.to_string(),
                    message: status.message().to_string(),
                })
            }
            Ok(Err(status)) => {
                return Err(SessionError::Rpc {
                    endpoint: endpoint.to_string(),
                    code: status.code(),
                    message: status.message().to_string(),
                })
            }
            Ok(Ok(r)) => r.into_inner(),
        };
        let status = status_of(answer.status);
        match verdict(&status) {
            Verdict::Success => Ok(answer
                .digests
                .into_iter()
                .map(RegionDigestView::from)
                .collect()),
            Verdict::Fenced => Err(SessionError::LeaseFenced {
                endpoint: endpoint.to_string(),
                message: status_error(&status).to_string(),
            }),
            Verdict::Retry | Verdict::Final => Err(status_error(&status)),
        }
    }
}

mod paged;
mod retry;

pub use paged::StatementPages;
#[cfg(test)]
mod tests;
