//! Direct gRPC calls from the test process to the ConfigNodes and to the DataNodes' internal
//! service, for what the session API does not expose and the checker needs exactly:
//! - the partition table ((database, series slot, time slot) → region), through the ConfigNode's
//!   `FetchPartitions` without auto-creation (a pure read);
//! - whether a DELETE TIMESERIES / DROP DATABASE is still pending (`ShowTimeseries`, a
//!   linearizable read on the leader: it passes a raft read barrier);
//! - the points a region replica holds, through `ReadRegion` on its leader, including regions the
//!   ConfigNode no longer knows (a dropped database's regions stay on the DataNodes);
//! - DELETE TIMESERIES / DROP DATABASE sent to the ConfigNode leader itself, so a scenario can
//!   re-send a drop the moment a new leader is elected, without a DataNode's retry backoff.
//!
//! Every call is bounded by [`CALL_TIMEOUT`]; a ConfigNode follower's redirect is followed.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use common::Value;
use proto::config_node_service_client::ConfigNodeServiceClient;
use proto::data_node_internal_service_client::DataNodeInternalServiceClient;
use tonic::transport::{Channel, Endpoint};

use crate::workload::{DropTarget, Outcome};

/// One RPC, connection included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Large enough for every point of every series the suite writes.
const MESSAGE_BYTES_MAX: usize = 64 << 20;

async fn channel(address: &str) -> Result<Channel> {
    channel_with_timeout(address, CALL_TIMEOUT).await
}

/// A channel whose requests may take up to `request_timeout` (a drop legitimately waits out
/// fence + margin; a 3 s request deadline cancelled it).
async fn channel_with_timeout(address: &str, request_timeout: Duration) -> Result<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .with_context(|| format!("endpoint {address}"))?
        .connect_timeout(CALL_TIMEOUT)
        .timeout(request_timeout);
    match tokio::time::timeout(CALL_TIMEOUT, endpoint.connect()).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => bail!("connecting to {address}: {e}"),
        Err(_) => bail!("connecting to {address}: no answer within {CALL_TIMEOUT:?}"),
    }
}

async fn config_node(address: &str) -> Result<ConfigNodeServiceClient<Channel>> {
    Ok(ConfigNodeServiceClient::new(channel(address).await?)
        .max_decoding_message_size(MESSAGE_BYTES_MAX))
}

/// How one ConfigNode answered a metadata request.
enum Answer<T> {
    Done(T),
    /// A follower: where the leader is, when it knows.
    Redirect(Option<String>),
}

fn redirect_of(status: Option<&proto::Status>) -> Option<Option<String>> {
    let s = status?;
    let redirected = s.code == i32::from(common::StatusCode::RedirectionRecommend.code());
    let unknown_leader = s.need_retry && s.code != 200;
    (redirected || unknown_leader).then(|| {
        s.redirect
            .as_ref()
            .map(|e| format!("{}:{}", e.host, e.port))
    })
}

/// Runs `call` on the ConfigNode leader: tries `endpoints` in turn and follows redirects.
async fn on_leader<T, F, Fut>(endpoints: &[String], mut call: F) -> Result<T>
where
    F: FnMut(ConfigNodeServiceClient<Channel>) -> Fut,
    Fut: std::future::Future<Output = Result<Answer<T>>>,
{
    let mut last = String::from("no ConfigNode endpoint");
    let mut queue: Vec<String> = endpoints.to_vec();
    // Each endpoint once, plus a few redirects.
    for _ in 0..endpoints.len() + 3 {
        let Some(address) = queue.first().cloned() else {
            break;
        };
        queue.remove(0);
        let client = match config_node(&address).await {
            Ok(c) => c,
            Err(e) => {
                last = format!("{e:#}");
                continue;
            }
        };
        match tokio::time::timeout(CALL_TIMEOUT, call(client)).await {
            Ok(Ok(Answer::Done(v))) => return Ok(v),
            Ok(Ok(Answer::Redirect(to))) => {
                last = format!("{address} is not the leader (redirect {to:?})");
                if let Some(to) = to {
                    queue.retain(|a| *a != to);
                    queue.insert(0, to);
                }
            }
            Ok(Err(e)) => last = format!("{address}: {e:#}"),
            Err(_) => last = format!("{address}: no answer within {CALL_TIMEOUT:?}"),
        }
    }
    bail!("no ConfigNode leader answered: {last}")
}

/// Regions by (device, time slot), as the ConfigNode leader's partition table holds them now.
/// Slots without an entry (never allocated, or their database is gone) are left out.
pub async fn partitions(
    config_nodes: &[String],
    slots: &BTreeMap<String, Vec<i64>>,
    series_slot_num: u32,
) -> Result<BTreeMap<(String, i64), u64>> {
    let requests: Vec<proto::DeviceTimeSlots> = slots
        .iter()
        .map(|(device, time_slots)| proto::DeviceTimeSlots {
            device: device.clone(),
            time_slots: time_slots.clone(),
            every_time_slot: false,
        })
        .collect();
    let resp = on_leader(config_nodes, |mut c| {
        let requests = requests.clone();
        async move {
            let resp = c
                .fetch_partitions(proto::FetchPartitionsReq {
                    requests,
                    auto_create: false,
                    caller: None,
                })
                .await?
                .into_inner();
            if let Some(to) = redirect_of(resp.status.as_ref()) {
                return Ok(Answer::Redirect(to));
            }
            match &resp.status {
                Some(s) if s.code == 200 => Ok(Answer::Done(resp)),
                other => bail!("FetchPartitions: {other:?}"),
            }
        }
    })
    .await?;
    // The answer names (database, series slot, time slot); map back to the devices asked for.
    let by_slot: BTreeMap<(String, u32, i64), u64> = resp
        .partitions
        .iter()
        .map(|p| {
            (
                (p.database.clone(), p.series_slot, p.time_slot),
                p.region_id,
            )
        })
        .collect();
    let mut out = BTreeMap::new();
    for (device, time_slots) in slots {
        let series_slot = common::series_slot(device, series_slot_num);
        for &t in time_slots {
            let hits: Vec<u64> = by_slot
                .iter()
                .filter(|((db, s, ts), _)| {
                    *s == series_slot && *ts == t && device.starts_with(&format!("{db}."))
                })
                .map(|(_, r)| *r)
                .collect();
            match hits.as_slice() {
                [] => {}
                [region] => {
                    out.insert((device.clone(), t), *region);
                }
                more => bail!("{device} slot {t} maps to several regions: {more:?}"),
            }
        }
    }
    // One answer entry per (device, time slot) found: a mismatch means this side computes
    // series slots differently from the ConfigNode (another `series_slot_num`).
    if out.len() != resp.partitions.len() {
        bail!(
            "the ConfigNode answered {} partition entries, {} matched devices with \
             series_slot_num {series_slot_num}",
            resp.partitions.len(),
            out.len()
        );
    }
    Ok(out)
}

/// One series as the ConfigNode leader lists it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeriesInfo {
    /// The device.
    pub device: String,
    /// The measurement.
    pub measurement: String,
    /// A DELETE TIMESERIES or DROP DATABASE of it has begun and not finished.
    pub pending_delete: bool,
}

/// The series whose path starts with `prefix`, on the ConfigNode leader (a linearizable read).
pub async fn show_timeseries(config_nodes: &[String], prefix: &str) -> Result<Vec<SeriesInfo>> {
    on_leader(config_nodes, |mut c| {
        let prefix = prefix.to_string();
        async move {
            let resp = c
                .show_timeseries(proto::ShowTimeseriesReq {
                    prefix: prefix.clone(),
                    declared_codecs_only: false,
                })
                .await?
                .into_inner();
            if let Some(to) = redirect_of(resp.status.as_ref()) {
                return Ok(Answer::Redirect(to));
            }
            match &resp.status {
                Some(s) if s.code == 200 => Ok(Answer::Done(
                    resp.series
                        .into_iter()
                        .map(|s| SeriesInfo {
                            device: s.device,
                            measurement: s.measurement,
                            pending_delete: s.pending_delete,
                        })
                        .collect(),
                )),
                other => bail!("ShowTimeseries: {other:?}"),
            }
        }
    })
    .await
}

/// Whether any series under `prefix` is pending delete on the ConfigNode leader (a DELETE
/// TIMESERIES or DROP DATABASE of it has begun and not finished).
pub async fn pending_delete(config_nodes: &[String], prefix: &str) -> Result<bool> {
    Ok(show_timeseries(config_nodes, prefix)
        .await?
        .iter()
        .any(|s| s.pending_delete))
}

/// The drop of `target` (DELETE TIMESERIES, DROP DATABASE or DROP TABLE), sent to the
/// ConfigNode at `address` alone: no redirect, no retry, so the caller decides whom it asks and
/// when. The outcome as the workload records it.
pub async fn drop_on(address: &str, target: &DropTarget) -> Outcome {
    let call = async {
        let mut c = ConfigNodeServiceClient::new(
            channel_with_timeout(address, Duration::from_secs(90)).await?,
        );
        let status = match target {
            DropTarget::Series {
                device,
                measurement,
            } => c
                .delete_timeseries(proto::DeleteTimeseriesReq {
                    series: vec![proto::SeriesPath {
                        device: device.clone(),
                        measurement: measurement.clone(),
                    }],
                })
                .await?
                .into_inner(),
            DropTarget::Database { database, .. } => c
                .drop_database(proto::DropDatabaseReq {
                    database: database.clone(),
                })
                .await?
                .into_inner(),
            DropTarget::Table { table, .. } => c
                .drop_table(proto::DropTableReq {
                    database: crate::tables::table_tree_database(),
                    table: table.clone(),
                })
                .await?
                .into_inner(),
            DropTarget::Points { .. } => {
                anyhow::bail!("deleteData goes through a session, not to the ConfigNode")
            }
        };
        anyhow::Ok(status)
    };
    // A drop legitimately waits fence + margin (and up to a minute more before the server
    // answers 712): wait as long as the workload's own drops do.
    match tokio::time::timeout(Duration::from_secs(90), call).await {
        Ok(Ok(s)) if s.code == 200 => Outcome::Ok,
        Ok(Ok(s)) => Outcome::Failed(format!("status {}: {}", s.code, s.message)),
        Ok(Err(e)) => Outcome::Unknown(format!("{e:#}")),
        Err(_) => Outcome::Unknown("no answer within 90 s".into()),
    }
}

/// The points of `paths` in region `region_id`, read on its leader at `internal_address` (a
/// DataNode's internal endpoint): `(device, measurement)` → points. Series the region does not
/// hold are absent.
pub async fn read_region(
    internal_address: &str,
    region_id: u64,
    paths: &[(String, String)],
) -> Result<BTreeMap<(String, String), BTreeMap<i64, Value>>> {
    let mut c = DataNodeInternalServiceClient::new(channel(internal_address).await?)
        .max_decoding_message_size(MESSAGE_BYTES_MAX);
    let req = proto::RegionReadReq {
        region_id,
        paths: paths
            .iter()
            .map(|(d, m)| proto::SeriesPath {
                device: d.clone(),
                measurement: m.clone(),
            })
            .collect(),
        start_time: i64::MIN,
        end_time: i64::MAX,
        points_limit: 0,
        last: false,
    };
    let resp = match tokio::time::timeout(CALL_TIMEOUT, c.read_region(req)).await {
        Ok(r) => r?.into_inner(),
        Err(_) => bail!("ReadRegion {region_id} on {internal_address}: no answer"),
    };
    match &resp.status {
        Some(s) if s.code == 200 => {}
        other => bail!("ReadRegion {region_id} on {internal_address}: {other:?}"),
    }
    let mut out = BTreeMap::new();
    for s in resp.series {
        let path = s.path.context("a RegionSeries without a path")?;
        let what = || format!("region {region_id}: {}.{}", path.device, path.measurement);
        let data_type = proto::data_type(s.data_type).with_context(what)?;
        let column = s.values.with_context(|| format!("{}: no values", what()))?;
        let (values, _) = proto::column_from_wire(column, data_type, s.timestamps.len())
            .map_err(|e| anyhow::anyhow!("{}: {e}", what()))?;
        let points = s
            .timestamps
            .iter()
            .enumerate()
            .map(|(row, t)| (*t, values.value(row)))
            .collect();
        out.insert((path.device, path.measurement), points);
    }
    Ok(out)
}
