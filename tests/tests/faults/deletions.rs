//! Scenario 8d (issue 38, REVIEW N6): a `deleteData` resolved before a DELETE TIMESERIES and
//! delivered after the drop and the series' re-creation must not remove the new series' points.

use super::*;

/// How late the failpoint delivers the deletion: after the drop (fence + margin, the cut-off
/// coordinator's lease waited out) and the re-creating writes.
const LATE: Duration = Duration::from_secs(15);

/// The points a late deletion would remove: every timestamp the workload writes.
const RANGE: (i64, i64) = (0, 1 << 50);

/// A coordinator DataNode resolves `deleteData` of a series from its cache (its token: the
/// metadata version the series was read at), is cut from the ConfigNode, and its region
/// writes reach the region leaders `LATE` after it sent them (failpoint
/// `datanode::write::deliver_late`, a message held in the network). Meanwhile DELETE
/// TIMESERIES goes through the other DataNodes (waiting out the cut-off one's lease) and
/// writes re-create the series. The late deletion reaches the leaders after both: each region
/// must refuse it (536), and the checker finds every point of the re-creating writes. Without
/// the deletion's token a region applies it and those acknowledged points are gone.
#[test]
fn a_late_delete_data_spares_a_series_created_again() {
    let _serial = serial();
    if !require_namespaces("a_late_delete_data_spares_a_series_created_again") {
        return;
    }
    let mut run = Run::start("8d-late-delete-data", ClusterConfig::default());
    let interval = run.cluster.config.time_partition_ms;
    let device = format!("{DATABASE}.late_dd");
    let path = format!("{device}.s1");
    // The coordinator: the DataNode leading the fewest regions, so that most of the
    // deletion's parts travel to another DataNode (a part it leads itself is refused by its
    // own fenced raft node instead, which proves less).
    let coordinator = quietest_leader(&run);
    let others: Vec<usize> = (0..run.cluster.data_nodes.len())
        .filter(|&j| j != coordinator)
        .collect();
    let stale = Arc::new(
        run.cluster
            .session_on(
                &[coordinator],
                SessionConfig {
                    max_attempts: 1,
                    request_timeout_ms: (LATE + Duration::from_secs(20)).as_millis() as u64,
                    ..SessionConfig::default()
                },
            )
            .expect("a session on the coordinator"),
    );
    let healthy = Arc::new(
        run.cluster
            .session_on(&others, Cluster::session_config())
            .expect("a session on the others"),
    );
    // The old series, written and deleted from once through the coordinator: its schema and
    // its regions are in the coordinator's cache, so the late deletion needs no ConfigNode.
    for _ in 0..4 {
        let outcome = run.cluster.runtime.block_on(write_recorded(
            &stale,
            &run.history,
            "8d-old",
            &device,
            interval,
        ));
        assert_eq!(outcome, Outcome::Ok, "writing {device}");
    }
    run.cluster
        .runtime
        .block_on(stale.delete_data(&[&path], -2, -1))
        .expect("a deletion of no point, priming the coordinator's cache");

    run.fault(&format!(
        "deleteData {path} through datanode-{} delivered {LATE:?} late; the coordinator cut \
         from the ConfigNode",
        coordinator + 1
    ));
    run.cluster
        .arm_failpoint(
            coordinator,
            "datanode::write::deliver_late",
            &format!("return({})", LATE.as_millis()),
        )
        .expect("arming the late delivery");
    let forwarded_before = run
        .cluster
        .dn_metric(coordinator, "forwarded_writes_total")
        .unwrap_or(0.0);
    let sent = Instant::now();
    let deletion = {
        let stale = stale.clone();
        let path = path.clone();
        run.cluster
            .runtime
            .spawn(async move { stale.delete_data(&[&path], RANGE.0, RANGE.1).await })
    };
    // The coordinator resolves the deletion while it holds its lease, then loses the
    // ConfigNode: it never hears of the drop, and the drop waits its lease out instead.
    std::thread::sleep(Duration::from_millis(300));
    run.cluster
        .cut_from_config_nodes(coordinator)
        .expect("cutting the coordinator");

    let ddl = run.ddl_on(&others);
    let target = DropTarget::Series {
        device: device.clone(),
        measurement: "s1".into(),
    };
    let index = run.cluster.runtime.block_on(drop_recorded(
        &DropVia::Session(ddl),
        &run.cluster.cn_endpoints(),
        &run.history,
        target,
    ));
    let dropped = run.history.drops.lock().expect("history")[index].clone();
    assert!(
        dropped.outcome.is_ok(),
        "DELETE TIMESERIES {path}: {:?}",
        dropped.outcome
    );
    // The series created again, its points acknowledged before the late deletion arrives.
    for _ in 0..4 {
        let outcome = run.cluster.runtime.block_on(write_recorded(
            &healthy,
            &run.history,
            "8d-new",
            &device,
            interval,
        ));
        assert_eq!(outcome, Outcome::Ok, "re-creating {device}");
    }
    let recreated = sent.elapsed();
    assert!(
        recreated + Duration::from_secs(1) < LATE,
        "the drop and the re-creation took {recreated:?}: the deletion was not late"
    );
    let answer = run
        .cluster
        .runtime
        .block_on(deletion)
        .expect("the deletion task");
    let forwarded = run
        .cluster
        .dn_metric(coordinator, "forwarded_writes_total")
        .unwrap_or(0.0)
        - forwarded_before;
    run.cluster.note(format!(
        "late deleteData answered after {:.1} s: {answer:?}; {forwarded} parts forwarded late; \
         drop and re-creation done {:.1} s after it was sent",
        sent.elapsed().as_secs_f64(),
        recreated.as_secs_f64()
    ));
    run.cluster
        .disarm_failpoint(coordinator, "datanode::write::deliver_late")
        .expect("disarming");
    let mut failures = Vec::new();
    if answer.is_ok() {
        failures.push(format!(
            "the late deleteData of {path} was acknowledged after the drop and the re-creation"
        ));
    }
    if forwarded < 1.0 {
        failures.push(format!(
            "no part of the late deletion reached another DataNode (datanode-{} led them all)",
            coordinator + 1
        ));
    }
    run.cluster.heal_network().expect("heal");
    run.wait_recovered(coordinator);
    run.finish_with(failures);
}

/// The DataNode leading the fewest regions.
fn quietest_leader(run: &Run) -> usize {
    (0..run.cluster.data_nodes.len())
        .min_by_key(|&j| {
            run.cluster
                .regions_led(&run.session, j)
                .map_or(usize::MAX, |r| r.len())
        })
        .expect("a DataNode")
}

/// Scenario 8e (REVIEW N9): series deleted one by one leave no deletion behind in any region
/// once a fence-floor round passes them. Twenty new series are written and deleted (DELETE
/// TIMESERIES each, while the workload writes on); the ConfigNode then raises every region's
/// floor past the deletions, and a flush on every DataNode drops them (the series were never in
/// a sealed file). Before the floor every region kept every deletion for good. One deleted
/// series is written again afterwards; the checker finds every acknowledged point.
#[test]
fn series_deleted_below_the_fence_floor_leave_every_region() {
    const SERIES: usize = 20;
    let _serial = serial();
    if !require_namespaces("series_deleted_below_the_fence_floor_leave_every_region") {
        return;
    }
    let mut run = Run::start("8e-fence-floor", ClusterConfig::default());
    let interval = run.cluster.config.time_partition_ms;
    let all: Vec<usize> = (0..run.cluster.data_nodes.len()).collect();
    let kept = |run: &Run| -> f64 {
        all.iter()
            .map(|&j| {
                run.cluster
                    .dn_metric(j, "region_deletions_kept")
                    .unwrap_or(0.0)
            })
            .sum()
    };
    let kept_before = kept(&run);
    let devices: Vec<String> = (0..SERIES)
        .map(|i| format!("{DATABASE}.floor{i}"))
        .collect();
    for device in &devices {
        let outcome = run.cluster.runtime.block_on(write_recorded(
            &run.session,
            &run.history,
            "8e",
            device,
            interval,
        ));
        assert_eq!(outcome, Outcome::Ok, "writing {device}");
    }
    run.fault(&format!("DELETE TIMESERIES of {SERIES} series, one by one"));
    let ddl = run.ddl_on(&all);
    for device in &devices {
        let target = DropTarget::Series {
            device: device.clone(),
            measurement: "s1".into(),
        };
        let index = run.cluster.runtime.block_on(drop_recorded(
            &DropVia::Session(ddl.clone()),
            &run.cluster.cn_endpoints(),
            &run.history,
            target,
        ));
        let dropped = run.history.drops.lock().expect("history")[index].clone();
        assert!(
            dropped.outcome.is_ok(),
            "DELETE TIMESERIES {device}.s1: {dropped:?}"
        );
    }
    let kept_after_drops = kept(&run);
    let leader = run.cluster.cn_leader().expect("a ConfigNode leader");
    let version = run
        .cluster
        .cn_metric(leader, "confignode_metadata_version")
        .expect("the metadata version");
    let deleted_at = Instant::now();
    wait_for("a fence floor past the deletions", WAIT, POLL, || {
        let floor = run.cluster.cn_metric(leader, "confignode_fence_floor")?;
        (floor >= version).then_some(())
    })
    .expect("a fence-floor round");
    let raised_after = deleted_at.elapsed();
    // Followers apply the floor a moment after the leaders confirmed it: flush until every
    // replica's manifest holds it (a flush before that keeps the deletions, harmlessly).
    let mut flushes = 0;
    loop {
        flushes += 1;
        for &j in &all {
            run.cluster
                .runtime
                .block_on(run.single(j).flush())
                .unwrap_or_else(|e| panic!("FLUSH on datanode-{}: {e}", j + 1));
        }
        if kept(&run) <= kept_before || flushes == 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let kept_after_floor = kept(&run);
    run.cluster.note(format!(
        "deletions kept: {kept_before} before, {kept_after_drops} after {SERIES} deletions, \
         {kept_after_floor} after the floor ({version} raised {:.1} s after the last deletion) \
         and {flushes} flush rounds",
        raised_after.as_secs_f64()
    ));
    let mut failures = Vec::new();
    if kept_after_drops < kept_before + SERIES as f64 {
        failures.push(format!(
            "{SERIES} deletions did not show in region_deletions_kept ({kept_before} → \
             {kept_after_drops})"
        ));
    }
    if kept_after_floor > kept_before {
        failures.push(format!(
            "the regions keep {kept_after_floor} deletions after the floor passed them (before \
             the deletions: {kept_before})"
        ));
    }
    // A deleted series written again after the floor: acknowledged, and the checker reads it.
    let outcome = run.cluster.runtime.block_on(write_recorded(
        &run.session,
        &run.history,
        "8e-again",
        &devices[0],
        interval,
    ));
    if outcome != Outcome::Ok {
        failures.push(format!("writing {} again: {outcome:?}", devices[0]));
    }
    run.finish_with(failures);
}
