//! A small session client for `scripts/quickstart.sh` (until the `session` crate and the
//! `fencepost` CLI exist): writes tablets through one DataNode, reads them back through another,
//! and prints the cluster, region, lease and digest views.
//!
//! `cargo run --release -p datanode --example quickstart_client -- 127.0.0.1:6667,127.0.0.1:6668`

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use common::{DataType, Tablet, Value};
use proto::session_service_client::SessionServiceClient;
use tonic::transport::Channel;

async fn connect(endpoint: &str) -> anyhow::Result<SessionServiceClient<Channel>> {
    SessionServiceClient::connect(format!("http://{endpoint}"))
        .await
        .with_context(|| format!("connecting to {endpoint}"))
}

/// Retries writes the server marks as retryable (536, leader changes), as a session does.
async fn insert(client: &mut SessionServiceClient<Channel>, t: &Tablet) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = client
            .insert_tablet(proto::InsertTabletReq {
                session_id: 1,
                tablet: Some(datanode::convert::tablet_to_wire(t)),
            })
            .await?
            .into_inner();
        // 400 REDIRECTION_RECOMMEND: written; another DataNode leads the device's region.
        if s.code == 200 || s.code == 400 {
            return Ok(());
        }
        if !s.need_retry || Instant::now() > deadline {
            bail!("insert into {} failed: {} {}", t.device, s.code, s.message);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let endpoints: Vec<String> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:6667".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let mut writer = connect(&endpoints[0]).await?;
    let mut reader = connect(endpoints.last().expect("one endpoint")).await?;

    // 3 devices × 1000 rows one minute apart: about 17 hours, so several time partitions when
    // the cluster runs with a small `time_partition_interval_ms`.
    let start_ms = 1_700_000_000_000i64;
    let mut tablets = Vec::new();
    for d in 1..=3 {
        let mut t = Tablet::new(
            format!("root.quickstart.d{d}"),
            &[
                ("temperature", DataType::Double),
                ("status", DataType::Boolean),
            ],
        );
        for i in 0..1000i64 {
            t.push_row(
                start_ms + i * 60_000,
                vec![
                    Some(Value::Double(20.0 + (i % 50) as f64 / 10.0)),
                    Some(Value::Boolean(i % 7 != 0)),
                ],
            );
        }
        tablets.push(t);
    }
    let started = Instant::now();
    for t in &tablets {
        insert(&mut writer, t).await?;
    }
    println!(
        "wrote {} tablets ({} points) through {} in {:?}",
        tablets.len(),
        tablets.iter().map(Tablet::point_count).sum::<usize>(),
        endpoints[0],
        started.elapsed()
    );

    for t in &tablets {
        let resp = reader
            .query_raw(proto::QueryRawReq {
                session_id: 1,
                paths: vec![proto::SeriesPath {
                    device: t.device.clone(),
                    measurement: "temperature".into(),
                }],
                start_time: start_ms,
                end_time: start_ms + 1000 * 60_000,
                points_limit: 0,
            })
            .await?
            .into_inner();
        let status = resp.status.unwrap_or_default();
        if status.code != 200 {
            bail!(
                "query of {} failed: {} {}",
                t.device,
                status.code,
                status.message
            );
        }
        let points = resp.series.first().map_or(0, |s| s.timestamps.len());
        if points != t.row_count() {
            bail!(
                "{}: read {points} points, wrote {}",
                t.device,
                t.row_count()
            );
        }
        println!(
            "read back {points} points of {}.temperature through {}",
            t.device,
            endpoints.last().expect("one endpoint")
        );
    }

    let cluster = reader
        .show_cluster(proto::SessionShowReq { session_id: 1 })
        .await?
        .into_inner();
    println!("\ncluster (ConfigNode term {}):", cluster.config_node_term);
    for c in &cluster.config_nodes {
        let l = c.location.clone().unwrap_or_default();
        println!(
            "  ConfigNode {} {} {}",
            l.config_node_id,
            l.endpoint.as_ref().map(proto::endpoint).unwrap_or_default(),
            c.role
        );
    }
    for d in &cluster.data_nodes {
        let l = d.location.clone().unwrap_or_default();
        println!(
            "  DataNode {} rpc {} {} incarnation {}",
            l.data_node_id,
            l.rpc_endpoint
                .as_ref()
                .map(proto::endpoint)
                .unwrap_or_default(),
            d.status,
            d.incarnation_epoch
        );
    }
    let leases = reader
        .show_leases(proto::SessionShowReq { session_id: 1 })
        .await?
        .into_inner();
    println!("\nleases (fence {} ms):", leases.metadata_lease_fence_ms);
    for l in &leases.leases {
        println!(
            "  DataNode {} holds_lease={} fenced={} last contact {} ms ago",
            l.data_node_id, l.holds_lease, l.fenced, l.last_contact_age_ms
        );
    }
    let regions = reader
        .show_regions(proto::SessionShowReq { session_id: 1 })
        .await?
        .into_inner();
    println!("\nregions:");
    for r in &regions.regions {
        let set = r.replica_set.clone().unwrap_or_default();
        println!(
            "  region {} {} replicas {:?} leader {}",
            set.region_id, set.database, set.data_node_ids, r.leader_id
        );
    }
    println!("\nreplica digests:");
    for endpoint in &endpoints {
        let digests = connect(endpoint)
            .await?
            .region_digest(proto::RegionDigestReq {
                session_id: 1,
                region_id: 0,
            })
            .await?
            .into_inner();
        for d in digests.digests {
            println!(
                "  {endpoint} region {} applied {} digest {:016x}{}",
                d.region_id,
                d.applied_index,
                d.digest,
                if d.is_leader { " (leader)" } else { "" }
            );
        }
    }
    Ok(())
}
