//! The checker, run after healing. It proves, from the history and what the cluster holds:
//! 1. every acknowledged tablet is fully present with its values, read through the cluster;
//! 2. no tablet is partially present in a region: the rows of one tablet in one time partition
//!    (one region, one raft entry) are all present or all absent, whatever the outcome — this is
//!    what makes unknown-outcome tablets all-or-nothing at the granularity the design promises
//!    ("atomic per region"; a retried tablet is re-sent whole);
//! 3. nothing is present that no operation wrote (no phantom, no wrong value);
//! 4. after an acknowledged DELETE TIMESERIES / DROP DATABASE no point of the target survives;
//!    an unknown-outcome drop removed everything or nothing;
//! 5. the replicas of every region report identical digests at a common applied index.
//!
//! Scenario-specific rules (e.g. no write acknowledged by a fenced DataNode after a drop) are
//! checked by the scenarios on the same history.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Result};
use common::Value;
use session::{Session, SessionError};

use crate::cluster::Cluster;
use crate::wait_for;
use crate::workload::{value_s1, value_s2, DropTarget, History, Outcome, MEASUREMENTS};

/// What the checker looked at.
#[derive(Debug, Default)]
pub struct Report {
    /// Tablet writes acknowledged, failed, unknown.
    pub acked: usize,
    /// Refused with a final status.
    pub failed: usize,
    /// No answer.
    pub unknown: usize,
    /// Points read back.
    pub points: usize,
    /// Schema changes checked.
    pub drops: usize,
    /// Of which acknowledged.
    pub drops_acked: usize,
    /// Regions whose replicas were compared.
    pub regions: usize,
    /// Everything wrong.
    pub violations: Vec<String>,
}

impl Report {
    /// Panics with the violations (the first 30), if any.
    pub fn assert_ok(&self) {
        eprintln!(
            "checker: {} acked, {} failed, {} unknown tablets; {} points read; {} drops ({} \
             acknowledged); {} regions with identical replicas; {} violations",
            self.acked,
            self.failed,
            self.unknown,
            self.points,
            self.drops,
            self.drops_acked,
            self.regions,
            self.violations.len()
        );
        if !self.violations.is_empty() {
            let shown: Vec<&String> = self.violations.iter().take(30).collect();
            panic!(
                "checker found {} violations:\n{}",
                self.violations.len(),
                shown
                    .iter()
                    .map(|v| format!("  - {v}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

fn value_ok(measurement: &str, device: &str, ts: i64, v: &Value) -> bool {
    match (measurement, v) {
        ("s1", Value::Double(x)) => *x == value_s1(device, ts),
        ("s2", Value::Int64(x)) => *x == value_s2(device, ts),
        _ => false,
    }
}

/// Reads one series through the cluster, retrying while the cluster settles. A series or
/// database the cluster does not know (507) reads as empty, with the server's message.
fn read_series(
    cluster: &Cluster,
    session: &Session,
    device: &str,
    measurement: &str,
) -> Result<(BTreeMap<i64, Value>, Option<String>)> {
    let mut last = String::new();
    let result = wait_for(
        &format!("a read of {device}.{measurement}"),
        Duration::from_secs(60),
        Duration::from_millis(300),
        || match cluster.runtime.block_on(session.query_raw(
            device,
            measurement,
            i64::MIN / 2,
            i64::MAX / 2,
        )) {
            Ok(points) => Some(Ok((points.into_iter().collect(), None))),
            Err(e @ SessionError::Status { code: 507, .. }) => {
                Some(Ok((BTreeMap::new(), Some(e.to_string()))))
            }
            Err(e @ SessionError::Status { .. }) => Some(Err(e)),
            Err(e) => {
                last = e.to_string();
                None
            }
        },
    );
    match result {
        Ok(Ok(points)) => Ok(points),
        Ok(Err(e)) => bail!("reading {device}.{measurement}: {e}"),
        Err(e) => bail!("{e}; last error: {last}"),
    }
}

/// Waits until no fence operation is pending on the ConfigNode leader (drops finished).
pub fn wait_no_pending_operations(cluster: &Cluster) -> Result<()> {
    wait_for(
        "no pending DELETE TIMESERIES / DROP DATABASE on the ConfigNode",
        Duration::from_secs(120),
        Duration::from_millis(300),
        || {
            let leader = cluster.cn_leader()?;
            let text =
                crate::cluster::http(cluster.cn_metrics_address(leader), "GET", "/metrics", "")
                    .ok()?;
            (crate::cluster::parse_metrics(&text).get("confignode_pending_fence_operations")
                == Some(&0.0))
            .then_some(())
        },
    )
}

/// Runs every check. Call it after healing every fault and stopping the workload.
pub fn check(cluster: &Cluster, session: &Session, history: &History) -> Result<Report> {
    cluster.wait_healthy()?;
    wait_no_pending_operations(cluster)?;
    let tablets = history.tablets.lock().expect("history").clone();
    let drops = history.drops.lock().expect("history").clone();
    let mut report = Report::default();
    let (acked, failed, unknown) = history.counts();
    (report.acked, report.failed, report.unknown) = (acked, failed, unknown);
    report.drops = drops.len();
    report.drops_acked = drops.iter().filter(|d| d.outcome.is_ok()).count();
    for d in drops.iter().filter(|d| !d.outcome.is_ok()) {
        eprintln!(
            "checker: drop {:?} not acknowledged ({:?}); judged all-or-nothing",
            d.target, d.outcome
        );
    }
    let interval = cluster.config.time_partition_ms;

    // Read every series the history touched.
    let devices: BTreeSet<&str> = tablets.iter().map(|o| o.device.as_str()).collect();
    let mut stored: BTreeMap<(&str, &str), BTreeMap<i64, Value>> = BTreeMap::new();
    for &device in &devices {
        for (m, _) in MEASUREMENTS {
            let (points, unknown) = read_series(cluster, session, device, m)?;
            // "Unknown series" is only an answer for a target some drop removed.
            let all_dropped = tablets
                .iter()
                .filter(|o| o.device == device)
                .all(|o| o.dropped_by.is_some_and(|d| d < drops.len()));
            if let Some(message) = unknown.filter(|_| !all_dropped) {
                report.violations.push(format!(
                    "reading {device}.{m} through the cluster: {message}"
                ));
            }
            report.points += points.len();
            stored.insert((device, m), points);
        }
    }

    // Which (device, measurement) a drop removed, and whether it is known to have happened.
    let dropped = |op_drop: Option<usize>, m: &str| -> Option<&Outcome> {
        // A target whose drop never ran (the churn stopped first) is ordinary data.
        let d = drops.get(op_drop?)?;
        let affected = match &d.target {
            DropTarget::Series { measurement, .. } => measurement == m,
            DropTarget::Database { .. } => true,
        };
        affected.then_some(&d.outcome)
    };

    let mut written: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
    for op in &tablets {
        written
            .entry(op.device.as_str())
            .or_default()
            .extend(op.timestamps.iter().copied());
        // Fragments: rows of the same time partition go to one region in one entry.
        let mut fragments: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for &ts in &op.timestamps {
            fragments
                .entry(ts.div_euclid(interval))
                .or_default()
                .push(ts);
        }
        for (slot, rows) in &fragments {
            let mut present = 0;
            let mut cells = 0;
            for (m, _) in MEASUREMENTS {
                let points = &stored[&(op.device.as_str(), m)];
                match dropped(op.dropped_by, m) {
                    Some(Outcome::Ok) => {
                        for ts in rows {
                            if points.contains_key(ts) {
                                report.violations.push(format!(
                                    "{}.{m} at {ts} (tablet {} by {}, {:?}) survived an \
                                     acknowledged drop",
                                    op.device, op.id, op.writer, op.outcome
                                ));
                            }
                        }
                        continue;
                    }
                    // An unknown drop is judged per target below.
                    Some(_) => continue,
                    None => {}
                }
                for ts in rows {
                    cells += 1;
                    if points.contains_key(ts) {
                        present += 1;
                    }
                }
            }
            if op.outcome.is_ok() && present != cells {
                report.violations.push(format!(
                    "acknowledged tablet {} by {} on {} ({:?}): partition {slot} has {present} of \
                     {cells} cells",
                    op.id, op.writer, op.device, op.timestamps
                ));
            } else if present != 0 && present != cells {
                report.violations.push(format!(
                    "tablet {} by {} on {} ({:?}, {:?}) is partially present: partition {slot} \
                     has {present} of {cells} cells",
                    op.id, op.writer, op.device, op.timestamps, op.outcome
                ));
            }
        }
    }

    // Unknown drops: everything acknowledged is there, or nothing is.
    for (i, d) in drops.iter().enumerate() {
        if d.outcome.is_ok() {
            continue;
        }
        let mut present = 0;
        let mut acked_missing = 0;
        for op in tablets.iter().filter(|o| o.dropped_by == Some(i)) {
            for (m, _) in MEASUREMENTS {
                if dropped(Some(i), m).is_none() {
                    continue;
                }
                let points = &stored[&(op.device.as_str(), m)];
                for ts in &op.timestamps {
                    if points.contains_key(ts) {
                        present += 1;
                    } else if op.outcome.is_ok() {
                        acked_missing += 1;
                    }
                }
            }
        }
        if present > 0 && acked_missing > 0 {
            report.violations.push(format!(
                "drop {:?} ({:?}) is partial: {present} points remain and {acked_missing} \
                 acknowledged points are gone",
                d.target, d.outcome
            ));
        }
    }

    // Phantoms and wrong values.
    for ((device, m), points) in &stored {
        let ours = written.get(device);
        for (ts, v) in points {
            if !ours.is_some_and(|w| w.contains(ts)) {
                report
                    .violations
                    .push(format!("{device}.{m} at {ts} = {v:?} was never written"));
            } else if !value_ok(m, device, *ts, v) {
                report
                    .violations
                    .push(format!("{device}.{m} at {ts} has the wrong value {v:?}"));
            }
        }
    }

    match converged_digests(cluster, session) {
        Ok(regions) => report.regions = regions,
        Err(e) => report.violations.push(format!("{e:#}")),
    }
    Ok(report)
}

/// Waits until the replicas of every region report the same applied index, then compares their
/// digests; returns the number of regions compared.
pub fn converged_digests(cluster: &Cluster, session: &Session) -> Result<usize> {
    // The replica sets the ConfigNode assigned: a replica missing on its DataNode is a violation
    // (its writes are on fewer nodes than acknowledged replication promises).
    let expected: BTreeMap<u64, BTreeSet<u64>> = wait_for(
        "SHOW REGIONS",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || cluster.runtime.block_on(session.show_regions()).ok(),
    )?
    .into_iter()
    .map(|r| (r.region_id, r.data_node_ids.into_iter().collect()))
    .collect();
    let mut last = String::new();
    let mut mismatch = None;
    let outcome = wait_for(
        "region replicas at a common applied index",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || {
            let mut regions: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
            for j in 0..cluster.data_nodes.len() {
                match cluster.digests(session, j) {
                    Ok(ds) => {
                        for d in ds {
                            regions.entry(d.region_id).or_default().push((
                                d.data_node_id,
                                d.applied_index,
                                d.digest,
                            ));
                        }
                    }
                    Err(e) => {
                        last = format!("datanode-{}: {e}", j + 1);
                        return None;
                    }
                }
            }
            last = format!("expected replicas {expected:?}; (node, applied, digest) {regions:?}");
            for (region, nodes) in &expected {
                let hosted: BTreeSet<u64> = regions
                    .get(region)
                    .map(|r| r.iter().map(|x| x.0).collect())
                    .unwrap_or_default();
                if hosted != *nodes {
                    last = format!(
                        "region {region}: the ConfigNode assigned replicas on DataNodes \
                         {nodes:?}, hosted on {hosted:?}; {last}"
                    );
                    return None;
                }
            }
            for (region, replicas) in &regions {
                let applied: BTreeSet<u64> = replicas.iter().map(|r| r.1).collect();
                if applied.len() != 1 {
                    return None;
                }
                let digests: BTreeSet<u64> = replicas.iter().map(|r| r.2).collect();
                if digests.len() != 1 {
                    mismatch = Some(format!(
                        "region {region}: replicas (node, applied, digest) {replicas:?} differ at \
                         the same applied index"
                    ));
                    return Some(0);
                }
            }
            eprintln!("checker: replicas agree; (region: node, applied index, digest) {regions:?}");
            Some(regions.len())
        },
    );
    if let Some(m) = mismatch {
        bail!("{m}");
    }
    match outcome {
        Ok(n) => Ok(n),
        Err(e) => bail!("{e}; last digests: {last}"),
    }
}
