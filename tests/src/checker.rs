//! The checker, run after healing. It proves, from the history and what the cluster holds:
//! 1. **acknowledged writes survive**: every cell of an acknowledged tablet is present with its
//!    value (read through the cluster), unless a drop of its series may have removed it — a drop
//!    not acknowledged, or one acknowledged only after the write was;
//! 2. **atomic per region**: the cells of one tablet that one region holds are all present or
//!    all absent, whatever the outcome (a retried tablet is re-sent whole). The region of a cell
//!    is the partition table's entry for (database, series slot of the device, time slot),
//!    asked of the ConfigNode; cells a drop may have removed are judged apart from those it may
//!    not have (a deletion removes every point of its series at one place of the region's log);
//! 3. nothing is present that no operation wrote (no phantom, no wrong value), and every point
//!    sits in the region the partition table maps its slot to;
//! 4. **the fence guarantee**, per acknowledged DELETE TIMESERIES / DROP DATABASE D:
//!    (a) no point of a write that completed before D committed its final state survives — the
//!    test knows D had not committed at [`DropOp::not_final_before`] (it saw the target still
//!    pending then); (b) a write acknowledged after D was acknowledged has every cell present
//!    (rule 1): it must have been validated against the new schema; plus, whatever the
//!    history: no point survives in a region the ConfigNode dropped with its database, and
//!    every series that holds points is one the ConfigNode knows (a stale write that outlived
//!    its drop leaves points of a series nobody re-created);
//! 5. an unknown-outcome drop removed all or none of what was acknowledged before it began;
//! 6. the replicas of every region report identical digests at a common applied index, and
//!    every replica the ConfigNode assigned exists — except those of a DataNode id a scenario
//!    wiped ([`Cluster::wipe_data_node`]): that id never returns, and until a membership change
//!    replaces its replicas its regions run on the rest;
//! 7. a `deleteData` ([`crate::workload::DropTarget::Points`]) is linearizable: it may remove
//!    a cell only if it was not acknowledged before the cell's write was invoked (so a late
//!    redelivery cannot remove what was written after its acknowledgement), and an
//!    acknowledged one leaves no cell of an acknowledged write completed before it began.
//!
//! Timestamps are unique per write op, so every point is attributed to exactly one op.
//! Scenario-specific rules (e.g. no write acknowledged by a fenced DataNode after a drop) are
//! checked by the scenarios on the same history.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Result};
use common::Value;
use session::{Session, SessionError};

use crate::cluster::Cluster;
use crate::wait_for;
use crate::workload::{value_s1, value_s2, DropOp, History, TabletOp, MEASUREMENTS};

/// `series_slot_num` of the test clusters (the ConfigNode's default).
pub const SERIES_SLOT_NUM: u32 = 1000;

/// What kind of rule a violation breaks (counted in the report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// An acknowledged write (rule 1) is missing.
    AckedLost,
    /// Rule 4b: acknowledged after a drop was, yet missing.
    AckedAfterDropLost,
    /// Rule 2.
    Partial,
    /// Rule 4a and the dropped-region / unknown-series checks: a stale write survived a drop.
    StaleSurvived,
    /// Rule 3.
    Phantom,
    /// Rule 5.
    PartialDrop,
    /// Rule 6, and reads that failed.
    Replicas,
}

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
    /// Writes completed before an acknowledged drop committed (rule 4a applied to them).
    pub before_drop: usize,
    /// Writes acknowledged after an acknowledged drop of their series (rule 4b).
    pub after_drop: usize,
    /// (tablet, region) groups judged for atomicity.
    pub groups: usize,
    /// Regions whose replicas were compared.
    pub regions: usize,
    /// Regions dropped with their database whose leftovers were read.
    pub dropped_regions: usize,
    /// Everything wrong.
    pub violations: Vec<(Kind, String)>,
}

impl Report {
    fn violation(&mut self, kind: Kind, message: String) {
        self.violations.push((kind, message));
    }

    /// Violations of one kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.violations.iter().filter(|(k, _)| *k == kind).count()
    }

    /// Panics with the violations (the first 30), if any.
    pub fn assert_ok(&self) {
        self.assert_ok_or(&[]);
    }

    /// Panics with `failures` (a scenario's own) and the violations (the first 30), if any.
    pub fn assert_ok_or(&self, failures: &[String]) {
        eprintln!(
            "checker: {} acked, {} failed, {} unknown tablets; {} points read; {} drops ({} \
             acknowledged; {} writes judged before and {} after one); {} (tablet, region) \
             groups; {} regions with identical replicas, {} dropped regions read; violations: \
             {} acknowledged lost, {} acknowledged after a drop yet lost, {} partial tablets, \
             {} stale writes surviving a drop, {} phantoms, {} partial drops, {} replica / read",
            self.acked,
            self.failed,
            self.unknown,
            self.points,
            self.drops,
            self.drops_acked,
            self.before_drop,
            self.after_drop,
            self.groups,
            self.regions,
            self.dropped_regions,
            self.count(Kind::AckedLost),
            self.count(Kind::AckedAfterDropLost),
            self.count(Kind::Partial),
            self.count(Kind::StaleSurvived),
            self.count(Kind::Phantom),
            self.count(Kind::PartialDrop),
            self.count(Kind::Replicas),
        );
        if !self.violations.is_empty() {
            // Which targets the violations are about: the first path each names.
            let mut by_subject: BTreeMap<(Kind, String), usize> = BTreeMap::new();
            for (k, v) in &self.violations {
                let subject = v
                    .split(|c: char| c.is_whitespace() || ",:()[]{}\"".contains(c))
                    .find(|w| w.starts_with("root."))
                    .unwrap_or("?")
                    .to_string();
                *by_subject.entry((*k, subject)).or_default() += 1;
            }
            eprintln!("checker: violations by kind and path: {by_subject:?}");
        }
        if !self.violations.is_empty() || !failures.is_empty() {
            let shown: Vec<String> = self
                .violations
                .iter()
                .take(30)
                .map(|(k, v)| format!("  - {k:?}: {v}"))
                .collect();
            let own: Vec<String> = failures.iter().map(|f| format!("  - {f}")).collect();
            panic!(
                "{} scenario checks and {} checker violations failed:\n{}{}{}",
                failures.len(),
                self.violations.len(),
                own.join("\n"),
                if own.is_empty() { "" } else { "\n" },
                shown.join("\n")
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

/// A retrying read of something the ConfigNode leader answers.
fn from_leader<T>(what: &str, mut call: impl FnMut() -> Result<T>) -> Result<T> {
    let mut last = String::new();
    let result = wait_for(
        what,
        Duration::from_secs(60),
        Duration::from_millis(300),
        || match call() {
            Ok(v) => Some(v),
            Err(e) => {
                last = format!("{e:#}");
                None
            }
        },
    );
    result.map_err(|e| anyhow::anyhow!("{e}; last error: {last}"))
}

/// How the drops of the history bear on one cell of one write.
struct Verdict {
    /// Drops that may have removed the cell: they cover it and were not acknowledged before
    /// the write was invoked (so the write's entry may precede their deletion in the log).
    may_remove: Vec<usize>,
    /// An acknowledged drop that had not committed when the write completed: the cell must
    /// be gone (rule 4a).
    must_be_gone: Option<usize>,
    /// Drops that excuse a missing cell: they cover it and were not acknowledged before the
    /// write was (by the fence guarantee, a write acknowledged after a drop survives it).
    excused_by: Vec<usize>,
    /// The write was acknowledged and no drop excuses a missing cell (rules 1 and 4b).
    must_be_there: bool,
    /// An acknowledged covering drop that was acknowledged before the write was (rule 4b).
    after_drop: Option<usize>,
}

fn verdict(op: &TabletOp, measurement: &str, drops: &[DropOp]) -> Verdict {
    let mut v = Verdict {
        may_remove: Vec::new(),
        excused_by: Vec::new(),
        must_be_gone: None,
        must_be_there: op.outcome.is_ok(),
        after_drop: None,
    };
    for (i, d) in drops.iter().enumerate() {
        if !d.target.covers(&op.device, measurement) {
            continue;
        }
        let acked = d.outcome.is_ok();
        if d.target.is_points() {
            points_verdict(&mut v, op, i, d);
            continue;
        }
        if !(acked && d.completed < op.invoked) {
            v.may_remove.push(i);
        }
        if acked && op.completed < d.not_final_before() && v.must_be_gone.is_none() {
            v.must_be_gone = Some(i);
        }
        // The fence guarantee: a write acknowledged after an acknowledged drop was validated
        // against the new schema, so that drop cannot excuse its absence. Any other covering
        // drop (unknown, or acknowledged later) can.
        if acked && d.completed < op.completed {
            v.after_drop = Some(i);
        } else {
            v.excused_by.push(i);
            v.must_be_there = false;
        }
    }
    v
}

/// A `deleteData` of the cell's series (rule 7): linearizable, no fence. Unless it was
/// acknowledged before the write was invoked it may have come after it, so it excuses the
/// cell; once acknowledged, every acknowledged write that completed before it was invoked is
/// gone. A late second delivery (a retry of an attempt that already applied) would remove the
/// cells of writes invoked after its acknowledgement: those must be there.
fn points_verdict(v: &mut Verdict, op: &TabletOp, i: usize, d: &DropOp) {
    let acked = d.outcome.is_ok();
    if !(acked && d.completed < op.invoked) {
        v.may_remove.push(i);
        v.excused_by.push(i);
        v.must_be_there = false;
    }
    if acked && op.outcome.is_ok() && op.completed < d.invoked && v.must_be_gone.is_none() {
        v.must_be_gone = Some(i);
    }
}

fn time_slot(ts: i64, interval_ms: i64) -> i64 {
    common::time_slot(ts, 0, interval_ms)
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
            "checker: drop {:?} via {} not acknowledged ({:?}); judged all-or-nothing",
            d.target, d.via, d.outcome
        );
    }
    let interval = cluster.config.time_partition_ms;
    let config_nodes = cluster.cn_endpoints();

    // Read every series the history touched, through the cluster.
    let devices: BTreeSet<&str> = tablets.iter().map(|o| o.device.as_str()).collect();
    let mut stored: BTreeMap<(&str, &str), BTreeMap<i64, Value>> = BTreeMap::new();
    let mut unknown_series: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for &device in &devices {
        for (m, _) in MEASUREMENTS {
            let (points, unknown) = read_series(cluster, session, device, m)?;
            if let Some(message) = unknown {
                unknown_series.insert((device, m), message);
            }
            report.points += points.len();
            stored.insert((device, m), points);
        }
    }

    // The partition table: the region of every (device, time slot) the history wrote. An entry
    // is never replaced while its database lives, so it is where every surviving point of the
    // slot was written (points written under a dropped database's table are judged below).
    let mut slots: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for op in &tablets {
        let s = slots.entry(op.device.clone()).or_default();
        s.extend(op.timestamps.iter().map(|&t| time_slot(t, interval)));
    }
    for s in slots.values_mut() {
        s.sort_unstable();
        s.dedup();
    }
    let regions_of = from_leader("the partition table", || {
        cluster.runtime.block_on(crate::admin::partitions(
            &config_nodes,
            &slots,
            SERIES_SLOT_NUM,
        ))
    })?;
    let known_series: BTreeSet<(String, String)> =
        from_leader("SHOW TIMESERIES on the ConfigNode", || {
            cluster
                .runtime
                .block_on(crate::admin::show_timeseries(&config_nodes, ""))
        })?
        .into_iter()
        .map(|s| (s.device, s.measurement))
        .collect();

    // What every region holds, read on its leader, whatever the ConfigNode's schema says:
    // atomicity is judged on it (a region applies a tablet's part whole or not at all, whether
    // or not a client can see it), and survival of stale writes on it too.
    let paths: Vec<(String, String)> = devices
        .iter()
        .flat_map(|d| {
            MEASUREMENTS
                .iter()
                .map(|(m, _)| (d.to_string(), m.to_string()))
        })
        .collect();
    let regions = match region_contents(cluster, session, &paths) {
        Ok(r) => r,
        Err(e) => {
            report.violation(Kind::Replicas, format!("{e:#}"));
            BTreeMap::new()
        }
    };
    let in_region = |region: u64, device: &str, m: &str, ts: i64| -> bool {
        regions.get(&region).is_some_and(|(_, c)| {
            c.get(&(device.to_string(), m.to_string()))
                .is_some_and(|p| p.contains_key(&ts))
        })
    };
    let in_any_region = |device: &str, m: &str, ts: i64| -> bool {
        regions.keys().any(|&r| in_region(r, device, m, ts))
    };

    let mut written: BTreeMap<&str, BTreeMap<i64, u64>> = BTreeMap::new();
    let mut seen_before = BTreeSet::new();
    let mut seen_after = BTreeSet::new();
    for op in &tablets {
        let w = written.entry(op.device.as_str()).or_default();
        for &ts in &op.timestamps {
            if let Some(other) = w.insert(ts, op.id) {
                panic!(
                    "{} at {ts} written by ops {other} and {}: timestamps must be unique per op",
                    op.device, op.id
                );
            }
        }
        // (region, drops that may have removed the cell) → (present, cells).
        let mut groups: BTreeMap<(Option<u64>, Vec<usize>), (usize, usize)> = BTreeMap::new();
        let mut gone_but_there: Vec<String> = Vec::new();
        let mut lost: Vec<String> = Vec::new();
        let mut lost_after: Option<usize> = None;
        for (m, _) in MEASUREMENTS {
            let points = &stored[&(op.device.as_str(), m)];
            let v = verdict(op, m, &drops);
            if v.must_be_gone.is_some() {
                seen_before.insert(op.id);
            }
            if v.after_drop.is_some() && v.must_be_there {
                seen_after.insert(op.id);
            }
            for &ts in &op.timestamps {
                // Visible to clients; held by the region its slot maps to; held anywhere.
                let present = points.contains_key(&ts);
                let region = regions_of
                    .get(&(op.device.clone(), time_slot(ts, interval)))
                    .copied();
                let held = region.map_or(present, |r| in_region(r, &op.device, m, ts));
                let g = groups.entry((region, v.may_remove.clone())).or_default();
                g.1 += 1;
                g.0 += usize::from(held);
                if present || in_any_region(&op.device, m, ts) {
                    if let Some(d) = v.must_be_gone {
                        gone_but_there.push(format!("{m}@{ts} (drop {d})"));
                    }
                }
                if present {
                    if region.is_none() {
                        report.violation(
                            Kind::Phantom,
                            format!(
                                "{}.{m} at {ts} (tablet {}) is readable, but the partition \
                                 table has no region for its slot",
                                op.device, op.id
                            ),
                        );
                    }
                } else if v.must_be_there {
                    lost.push(format!("{m}@{ts}"));
                    lost_after = lost_after.or(v.after_drop);
                }
            }
        }
        if !gone_but_there.is_empty() {
            report.violation(
                Kind::StaleSurvived,
                format!(
                    "tablet {} by {} on {} ({:?}, completed before an acknowledged drop \
                     committed) survived it: {}",
                    op.id,
                    op.writer,
                    op.device,
                    op.outcome,
                    gone_but_there.join(", ")
                ),
            );
        }
        if !lost.is_empty() {
            let unknown = MEASUREMENTS
                .iter()
                .filter_map(|(m, _)| unknown_series.get(&(op.device.as_str(), *m)))
                .next()
                .map(|e| format!("; the read answered: {e}"))
                .unwrap_or_default();
            // Where the cells are, if anywhere: a region other than the partition table's means
            // the write was routed where no read looks.
            let slot_regions: BTreeSet<Option<u64>> = op
                .timestamps
                .iter()
                .map(|&ts| {
                    regions_of
                        .get(&(op.device.clone(), time_slot(ts, interval)))
                        .copied()
                })
                .collect();
            let held_by: BTreeSet<u64> = regions
                .keys()
                .copied()
                .filter(|&r| {
                    op.timestamps.iter().any(|&ts| {
                        MEASUREMENTS
                            .iter()
                            .any(|(m, _)| in_region(r, &op.device, m, ts))
                    })
                })
                .collect();
            let unknown = format!(
                "{unknown} (partition table: regions {slot_regions:?}; held by regions \
                 {held_by:?})"
            );
            match lost_after {
                Some(d) => report.violation(
                    Kind::AckedAfterDropLost,
                    format!(
                        "tablet {} by {} on {} was acknowledged after drop {d} ({:?}) was, so \
                         it was validated against the new schema, yet {} of its cells are \
                         gone: {}{unknown}",
                        op.id,
                        op.writer,
                        op.device,
                        drops[d].target,
                        lost.len(),
                        lost.join(", ")
                    ),
                ),
                None => report.violation(
                    Kind::AckedLost,
                    format!(
                        "acknowledged tablet {} by {} on {} ({:?}) lost {} cells: {}{unknown}",
                        op.id,
                        op.writer,
                        op.device,
                        op.timestamps,
                        lost.len(),
                        lost.join(", ")
                    ),
                ),
            }
        }
        for ((region, may_remove), (present, cells)) in &groups {
            report.groups += 1;
            if *present != 0 && present != cells {
                report.violation(
                    Kind::Partial,
                    format!(
                        "tablet {} by {} on {} ({:?}, {:?}) is partially present in region \
                         {region:?}: {present} of {cells} cells (drops that may have removed \
                         them: {may_remove:?})",
                        op.id, op.writer, op.device, op.timestamps, op.outcome
                    ),
                );
            }
        }
    }
    report.before_drop = seen_before.len();
    report.after_drop = seen_after.len();

    // Unknown drops: of what was acknowledged before one began, and that only it could have
    // removed, everything is there or nothing is. A `deleteData` is one command per region, not
    // one fence operation: it may apply on some regions only.
    for (i, d) in drops.iter().enumerate() {
        if d.outcome.is_ok() || d.target.is_points() {
            continue;
        }
        let (mut present, mut missing) = (0, 0);
        for op in tablets
            .iter()
            .filter(|o| o.outcome.is_ok() && o.completed < d.invoked)
        {
            for (m, _) in MEASUREMENTS {
                // Only cells this drop covers and no other drop could excuse.
                if verdict(op, m, &drops).excused_by != [i] {
                    continue;
                }
                let points = &stored[&(op.device.as_str(), m)];
                for ts in &op.timestamps {
                    if points.contains_key(ts) {
                        present += 1;
                    } else {
                        missing += 1;
                    }
                }
            }
        }
        if present > 0 && missing > 0 {
            report.violation(
                Kind::PartialDrop,
                format!(
                    "drop {i} {:?} ({:?}) is partial: {present} points acknowledged before it \
                     remain and {missing} are gone",
                    d.target, d.outcome
                ),
            );
        }
    }

    // Phantoms and wrong values.
    for ((device, m), points) in &stored {
        let ours = written.get(device);
        for (ts, v) in points {
            if !ours.is_some_and(|w| w.contains_key(ts)) {
                report.violation(
                    Kind::Phantom,
                    format!("{device}.{m} at {ts} = {v:?} was never written"),
                );
            } else if !value_ok(m, device, *ts, v) {
                report.violation(
                    Kind::Phantom,
                    format!("{device}.{m} at {ts} has the wrong value {v:?}"),
                );
            }
        }
    }

    // A region the ConfigNode dropped with its database stays on the DataNodes (REVIEW L1):
    // whatever it still shows was written under the dropped metadata and survived the drop. In
    // a live region, points of a series the ConfigNode does not know survived its deletion too
    // (a write validated against the new schema re-creates the series); and a point must sit
    // in the region the partition table names for its slot.
    let tablets_of = |device: &str, points: &BTreeMap<i64, Value>| -> BTreeSet<u64> {
        points
            .keys()
            .filter_map(|ts| written.get(device).and_then(|w| w.get(ts)))
            .copied()
            .collect()
    };
    for (&region, (listed, contents)) in &regions {
        let listed = *listed;
        if !listed {
            report.dropped_regions += 1;
        }
        for ((device, m), points) in contents {
            let tablets = tablets_of(device, points);
            if !listed {
                report.violation(
                    Kind::StaleSurvived,
                    format!(
                        "region {region}, dropped with its database, still holds {} \
                         points of {device}.{m} (tablets {tablets:?}): written under the \
                         dropped metadata, they survived the drop",
                        points.len()
                    ),
                );
                continue;
            }
            if !known_series.contains(&(device.clone(), m.clone())) {
                report.violation(
                    Kind::StaleSurvived,
                    format!(
                        "region {region} holds {} points of {device}.{m} (tablets \
                         {tablets:?}) but the ConfigNode does not know the series: \
                         writes validated against a deleted schema survived",
                        points.len()
                    ),
                );
            }
            let misplaced: Vec<i64> = points
                .keys()
                .filter(|&&ts| {
                    regions_of.get(&(device.clone(), time_slot(ts, interval))) != Some(&region)
                })
                .copied()
                .collect();
            if !misplaced.is_empty() {
                report.violation(
                    Kind::Phantom,
                    format!(
                        "region {region} holds {device}.{m} at {misplaced:?}, slots the \
                         partition table maps elsewhere"
                    ),
                );
            }
        }
    }

    match converged_digests(cluster, session) {
        Ok(regions) => report.regions = regions,
        Err(e) => report.violation(Kind::Replicas, format!("{e:#}")),
    }
    Ok(report)
}

/// Region → (whether the ConfigNode lists it, the points of `paths` it holds, read on its
/// leader), for every region some DataNode hosts.
#[allow(clippy::type_complexity)]
fn region_contents(
    cluster: &Cluster,
    session: &Session,
    paths: &[(String, String)],
) -> Result<BTreeMap<u64, (bool, BTreeMap<(String, String), BTreeMap<i64, Value>>)>> {
    let listed: BTreeSet<u64> = wait_for(
        "SHOW REGIONS",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || cluster.runtime.block_on(session.show_regions()).ok(),
    )?
    .into_iter()
    .map(|r| r.region_id)
    .collect();
    let mut leaders: BTreeMap<u64, Option<usize>> = BTreeMap::new();
    for j in 0..cluster.data_nodes.len() {
        for d in cluster.replicas(session, j)? {
            let l = leaders.entry(d.region_id).or_default();
            if d.is_leader {
                *l = Some(j);
            }
        }
    }
    let mut out = BTreeMap::new();
    for (&region, leader) in &leaders {
        let mut last = String::new();
        let found = wait_for(
            &format!("a read of region {region} on its leader"),
            Duration::from_secs(30),
            Duration::from_millis(300),
            || {
                // A leader may move; ask every replica until one leads.
                let order: Vec<usize> = leader
                    .iter()
                    .copied()
                    .chain(0..cluster.data_nodes.len())
                    .collect();
                for j in order {
                    match cluster.runtime.block_on(crate::admin::read_region(
                        &cluster.dn_internal_endpoint(j),
                        region,
                        paths,
                    )) {
                        Ok(points) => return Some(points),
                        Err(e) => last = format!("{e:#}"),
                    }
                }
                None
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}; last error: {last}"))?;
        let found = found.into_iter().filter(|(_, p)| !p.is_empty()).collect();
        out.insert(region, (listed.contains(&region), found));
    }
    Ok(out)
}

/// How long one DataNode may take to digest all its replicas.
const DIGEST_WITHIN: Duration = Duration::from_secs(120);

/// Ok when every region's replicas report one applied index (no digest is computed), else what
/// differs.
fn applied_indexes_agree(cluster: &Cluster, session: &Session) -> std::result::Result<(), String> {
    let mut applied: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for j in 0..cluster.data_nodes.len() {
        let replicas = cluster
            .replicas(session, j)
            .map_err(|e| format!("datanode-{}: {e}", j + 1))?;
        for r in replicas {
            applied
                .entry(r.region_id)
                .or_default()
                .insert(r.applied_index);
        }
    }
    match applied.iter().find(|(_, a)| a.len() != 1) {
        Some((region, indexes)) => Err(format!(
            "region {region}: replicas at applied indexes {indexes:?}"
        )),
        None => Ok(()),
    }
}

/// Waits until every region's replicas share an applied index (a replica that fell behind has
/// caught up), without digests.
pub fn wait_common_applied_index(
    cluster: &Cluster,
    session: &Session,
    within: Duration,
) -> Result<()> {
    let mut last = String::new();
    wait_for(
        "region replicas at a common applied index",
        within,
        Duration::from_millis(200),
        || match applied_indexes_agree(cluster, session) {
            Ok(()) => Some(()),
            Err(e) => {
                last = e;
                None
            }
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}; last: {last}"))
}

/// The outputs of `futures`, run concurrently on the caller's task.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *output = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

/// Waits until the replicas of every region report the same applied index, then compares their
/// digests; returns the number of regions compared.
pub fn converged_digests(cluster: &Cluster, session: &Session) -> Result<usize> {
    // The replica sets the ConfigNode assigned: a replica missing on its DataNode is a violation
    // (its writes are on fewer nodes than acknowledged replication promises). A wiped DataNode's
    // replicas are gone for good (no membership change replaces them yet): left out.
    let retired = cluster.retired();
    let expected: BTreeMap<u64, BTreeSet<u64>> = wait_for(
        "SHOW REGIONS",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || cluster.runtime.block_on(session.show_regions()).ok(),
    )?
    .into_iter()
    .map(|r| {
        let nodes = r.data_node_ids.into_iter();
        (
            r.region_id,
            nodes.filter(|id| !retired.contains(id)).collect(),
        )
    })
    .collect();
    let mut last = String::new();
    let mut mismatch = None;
    let outcome = wait_for(
        "region replicas at a common applied index",
        Duration::from_secs(60),
        Duration::from_millis(300),
        || {
            // First the cheap view (no digests) until every region's replicas share an applied
            // index; only then the digests, which read every point.
            if let Err(e) = applied_indexes_agree(cluster, session) {
                last = e;
                return None;
            }
            let mut regions: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
            // Every DataNode digests its replicas at once: each reads every point it holds.
            let endpoints: Vec<String> = (0..cluster.data_nodes.len())
                .map(|j| cluster.dn_endpoint(j))
                .collect();
            let all = cluster.runtime.block_on(join_all(
                endpoints
                    .iter()
                    .map(|e| session.region_digests_within(e, DIGEST_WITHIN))
                    .collect(),
            ));
            for (j, answer) in all.into_iter().enumerate() {
                match answer {
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::workload::{DropTarget, Outcome};

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    fn write(base: Instant, invoked: u64, completed: u64, outcome: Outcome) -> TabletOp {
        TabletOp {
            id: 0,
            writer: "w".into(),
            device: "root.fp.vic1".into(),
            timestamps: vec![1],
            invoked: at(base, invoked),
            completed: at(base, completed),
            outcome,
        }
    }

    fn delete(base: Instant, invoked: u64, completed: u64, outcome: Outcome) -> DropOp {
        DropOp {
            target: DropTarget::Points {
                device: "root.fp.vic1".into(),
                measurement: "s1".into(),
            },
            via: "session".into(),
            invoked: at(base, invoked),
            pending_seen: None,
            completed: at(base, completed),
            outcome,
        }
    }

    #[test]
    fn a_delete_of_points_is_judged_as_linearizable() {
        let base = Instant::now();
        let unknown = || Outcome::Unknown("timeout".into());
        // Acknowledged before the write began: the cell must be there (a late redelivery of
        // the deletion would remove it).
        let v = verdict(
            &write(base, 20, 30, Outcome::Ok),
            "s1",
            &[delete(base, 0, 10, Outcome::Ok)],
        );
        assert!(v.must_be_there && v.may_remove.is_empty() && v.must_be_gone.is_none());
        // The other measurement is untouched.
        let v = verdict(
            &write(base, 0, 5, Outcome::Ok),
            "s2",
            &[delete(base, 10, 20, Outcome::Ok)],
        );
        assert!(v.must_be_there && v.must_be_gone.is_none());
        // An acknowledged write completed before an acknowledged deletion began: gone.
        let v = verdict(
            &write(base, 0, 5, Outcome::Ok),
            "s1",
            &[delete(base, 10, 20, Outcome::Ok)],
        );
        assert_eq!(v.must_be_gone, Some(0));
        assert!(!v.must_be_there);
        // Concurrent, or a deletion of unknown outcome: either way is right.
        for (w, d) in [
            (
                write(base, 0, 15, Outcome::Ok),
                delete(base, 10, 20, Outcome::Ok),
            ),
            (
                write(base, 20, 30, Outcome::Ok),
                delete(base, 0, 10, unknown()),
            ),
            (
                write(base, 0, 5, Outcome::Ok),
                delete(base, 10, 20, unknown()),
            ),
            (
                write(base, 0, 5, unknown()),
                delete(base, 10, 20, Outcome::Ok),
            ),
        ] {
            let v = verdict(&w, "s1", &[d]);
            assert!(!v.must_be_there && v.must_be_gone.is_none(), "{w:?}");
            assert_eq!(v.may_remove, [0]);
        }
    }
}
