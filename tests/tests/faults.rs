//! The cluster fault-injection suite: real `confignode` and `datanode` processes, each in its own
//! network namespace, with partitions (nftables drops), SIGSTOP, kill -9 and failpoints, under a
//! recorded workload, then the checker (`fencepost_tests::checker`).
//!
//! Build the binaries first: `cargo build -p confignode -p datanode --features
//! datanode/failpoints`. Scenarios run one at a time (a static lock): a 2-core machine runs one
//! cluster at a time. `FENCEPOST_NEMESIS_SEED` / `FENCEPOST_NEMESIS_SECS` steer the nemesis.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencepost_tests::checker::check;
use fencepost_tests::cluster::{Cluster, ClusterConfig, HEARTBEAT_STALL};
use fencepost_tests::workload::{
    drop_recorded, timestamps, write_recorded, DropTarget, History, Outcome, SchemaChurn, Writers,
    DATABASE,
};
use fencepost_tests::{nemesis, require_namespaces, serial, wait_for};
use session::{Session, SessionConfig, SessionError};

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

/// A cluster with the main workload running.
struct Run {
    name: &'static str,
    cluster: Cluster,
    session: Arc<Session>,
    history: Arc<History>,
    writers: Option<Writers>,
    faults: u64,
    started: Instant,
}

impl Run {
    fn start(name: &'static str, config: ClusterConfig) -> Run {
        let started = Instant::now();
        let cluster = Cluster::start(config).expect("starting the cluster");
        let session = cluster.session().expect("a session");
        if let Err(e) = cluster.runtime.block_on(session.create_database(DATABASE)) {
            panic!("CREATE DATABASE {DATABASE}: {e}");
        }
        let history = History::new();
        let writers = Writers::start(
            &cluster.runtime,
            session.clone(),
            history.clone(),
            3,
            2,
            cluster.config.time_partition_ms,
        );
        let run = Run {
            name,
            cluster,
            session,
            history,
            writers: Some(writers),
            faults: 0,
            started,
        };
        run.wait_acked_since(Instant::now(), 10, "the workload to get going");
        run
    }

    /// Waits until `n` writes were acknowledged after `t`.
    fn wait_acked_since(&self, t: Instant, n: usize, why: &str) {
        wait_for(why, WAIT, POLL, || {
            (self.history.acked_since(t) >= n).then_some(())
        })
        .unwrap_or_else(|e| panic!("{e} ({} acked since)", self.history.acked_since(t)));
    }

    fn fault(&mut self, what: &str) {
        self.faults += 1;
        self.cluster.note(format!(
            "{}: fault {} at t={:.1}s: {what}",
            self.name,
            self.faults,
            self.started.elapsed().as_secs_f64()
        ));
    }

    /// The DataNode leading the most regions (it leads at least one).
    fn busiest_leader(&self) -> usize {
        wait_for("a DataNode that leads a region", WAIT, POLL, || {
            let led: Vec<(usize, usize)> = (0..self.cluster.data_nodes.len())
                .map(|j| {
                    let n = self
                        .cluster
                        .regions_led(&self.session, j)
                        .map_or(0, |r| r.len());
                    (n, j)
                })
                .collect();
            let (n, j) = led.into_iter().max()?;
            (n > 0).then_some(j)
        })
        .expect("some DataNode leads a region")
    }

    fn wait_leads_nothing(&self, j: usize) {
        wait_for(
            &format!("datanode-{} to hand off every region it leads", j + 1),
            WAIT,
            POLL,
            || {
                self.cluster
                    .regions_led(&self.session, j)
                    .filter(|r| r.is_empty())
            },
        )
        .expect("leadership hand-off");
    }

    fn wait_recovered(&self, j: usize) {
        wait_for(
            &format!("datanode-{} to recover its lease", j + 1),
            WAIT,
            POLL,
            || (self.cluster.lease_live(j) == Some(true)).then_some(()),
        )
        .expect("recovery");
    }

    /// A session on DataNode `j` alone, one attempt per call.
    fn single(&self, j: usize) -> Session {
        self.cluster
            .session_on(
                &[j],
                SessionConfig {
                    max_attempts: 1,
                    retry_interval_ms: 100,
                    request_timeout_ms: 3000,
                    ..SessionConfig::default()
                },
            )
            .expect("a session on one DataNode")
    }

    /// Asserts that DataNode `j` refuses writes with 536 and reads with 535.
    fn assert_fenced_answers(&self, j: usize) {
        let single = self.single(j);
        let device = format!("{DATABASE}.fenced{j}");
        let outcome = self.cluster.runtime.block_on(write_recorded(
            &single,
            &self.history,
            "fenced-probe",
            &device,
            timestamps(0, self.cluster.config.time_partition_ms),
            None,
        ));
        assert!(
            matches!(&outcome, Outcome::Unknown(m) | Outcome::Failed(m) if m.contains("536")),
            "a fenced DataNode must answer a write with 536: {outcome:?}"
        );
        let read = self.cluster.runtime.block_on(single.query_raw(
            &format!("{DATABASE}.w0d0"),
            "s1",
            0,
            i64::MAX / 2,
        ));
        assert!(
            matches!(read, Err(SessionError::LeaseFenced { .. })),
            "a fenced DataNode must answer a read with 535: {read:?}"
        );
    }

    /// Heals everything, stops the workload and runs the checker.
    fn finish(mut self) {
        self.cluster.heal_network().expect("healing");
        if let Some(w) = self.writers.take() {
            w.stop(&self.cluster.runtime);
        }
        let report = check(&self.cluster, &self.session, &self.history).expect("checker");
        report.assert_ok();
        eprintln!(
            "SCENARIO {}: passed; {} faults injected; {} acked / {} failed / {} unknown tablets; \
             {:.1} s",
            self.name,
            self.faults,
            report.acked,
            report.failed,
            report.unknown,
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// Scenario 1: a DataNode that leads regions is cut off from the ConfigNode but not from its
/// peers while writes flow: it fences, hands off leadership, writes keep succeeding through
/// sessions; after healing it recovers.
#[test]
fn partitioned_leader_fences_hands_off_and_recovers() {
    let _serial = serial();
    if !require_namespaces("partitioned_leader_fences_hands_off_and_recovers") {
        return;
    }
    let mut run = Run::start("1-partitioned-leader", ClusterConfig::default());
    let target = run.busiest_leader();
    let recoveries = run
        .cluster
        .dn_metric(target, "metadata_lease_recoveries_total")
        .expect("metrics");
    run.fault(&format!("cut datanode-{} from the ConfigNode", target + 1));
    run.cluster.cut_from_config_nodes(target).expect("cut");
    run.cluster.wait_fenced(target).expect("fenced");
    run.wait_leads_nothing(target);
    run.assert_fenced_answers(target);
    run.wait_acked_since(
        Instant::now(),
        20,
        "writes to keep succeeding while one DataNode is fenced",
    );
    run.cluster.heal_network().expect("heal");
    run.wait_recovered(target);
    wait_for("a completed recovery", WAIT, POLL, || {
        (run.cluster
            .dn_metric(target, "metadata_lease_recoveries_total")?
            > recoveries)
            .then_some(())
    })
    .expect("recovery counted");
    run.wait_acked_since(Instant::now(), 10, "writes after healing");
    run.finish();
}

/// Scenario 2: the ConfigNode leader (of 3) is killed and restarted during writes: no healthy
/// DataNode fences.
#[test]
fn config_node_leader_restart_fences_no_healthy_data_node() {
    let _serial = serial();
    if !require_namespaces("config_node_leader_restart_fences_no_healthy_data_node") {
        return;
    }
    let config = ClusterConfig {
        config_nodes: 3,
        ..ClusterConfig::default()
    };
    let mut run = Run::start("2-confignode-leader-restart", config);
    let fences = |run: &Run| -> Vec<f64> {
        (0..run.cluster.data_nodes.len())
            .map(|j| {
                run.cluster
                    .dn_metric(j, "metadata_lease_fence_transitions_total")
                    .expect("metrics")
            })
            .collect()
    };
    let before = fences(&run);
    for _ in 0..2 {
        let leader = wait_for("a ConfigNode leader", WAIT, POLL, || {
            run.cluster.cn_leader()
        })
        .expect("leader");
        run.fault(&format!("kill -9 confignode-{}", leader + 1));
        run.cluster.config_nodes[leader].kill9().expect("kill");
        let next = wait_for("a new ConfigNode leader", WAIT, POLL, || {
            run.cluster.cn_leader().filter(|&l| l != leader)
        })
        .expect("new leader");
        run.cluster
            .note(format!("confignode-{} leads now", next + 1));
        run.wait_acked_since(Instant::now(), 10, "writes under the new ConfigNode leader");
        run.cluster.config_nodes[leader].start().expect("restart");
        run.wait_acked_since(Instant::now(), 10, "writes after the restart");
    }
    let after = fences(&run);
    assert_eq!(
        before, after,
        "a healthy DataNode fenced while the ConfigNode leader changed \
         (metadata_lease_fence_transitions_total per DataNode)"
    );
    run.finish();
}

/// Scenario 3: the heartbeat handler of a leading DataNode is stalled by failpoint (a GC pause):
/// it fences although the ConfigNode keeps sending, and recovers when released.
#[test]
fn stalled_heartbeat_handler_fences_and_recovers() {
    let _serial = serial();
    if !require_namespaces("stalled_heartbeat_handler_fences_and_recovers") {
        return;
    }
    let mut run = Run::start("3-stalled-heartbeats", ClusterConfig::default());
    let target = run.busiest_leader();
    run.fault(&format!(
        "failpoint {HEARTBEAT_STALL} on datanode-{}",
        target + 1
    ));
    run.cluster
        .arm_failpoint(target, HEARTBEAT_STALL, "return(600000)")
        .expect("arm");
    run.cluster.wait_fenced(target).expect("fenced");
    run.wait_leads_nothing(target);
    run.assert_fenced_answers(target);
    run.wait_acked_since(
        Instant::now(),
        20,
        "writes to keep succeeding while one DataNode is fenced",
    );
    run.cluster
        .disarm_failpoint(target, HEARTBEAT_STALL)
        .expect("disarm");
    run.wait_recovered(target);
    run.wait_acked_since(Instant::now(), 10, "writes after the release");
    run.finish();
}

/// Scenario 4: kill -9 of a DataNode mid-write, then a restart on the same data directory:
/// acknowledged data intact, no partial tablet, replicas converge.
#[test]
fn killed_data_node_restarts_with_acknowledged_data_intact() {
    let _serial = serial();
    if !require_namespaces("killed_data_node_restarts_with_acknowledged_data_intact") {
        return;
    }
    let mut run = Run::start("4-kill-9-datanode", ClusterConfig::default());
    for round in 0..2 {
        let target = if round == 0 {
            run.busiest_leader()
        } else {
            (run.busiest_leader() + 1) % 3
        };
        run.fault(&format!("kill -9 datanode-{}", target + 1));
        run.cluster.data_nodes[target].kill9().expect("kill");
        run.wait_acked_since(
            Instant::now(),
            20,
            "writes to keep succeeding with a DataNode down",
        );
        run.cluster.data_nodes[target].start().expect("restart");
        run.wait_recovered(target);
        run.wait_acked_since(Instant::now(), 10, "writes after the restart");
    }
    run.finish();
}

/// Scenario 5: DELETE TIMESERIES while a DataNode holding the series in its cache is cut from the
/// ConfigNode: the drop waits fence + margin, the cut DataNode acknowledges no write to the
/// series once the drop is acknowledged, and no data of the series survives.
#[test]
fn delete_timeseries_waits_out_a_partitioned_stale_data_node() {
    let _serial = serial();
    if !require_namespaces("delete_timeseries_waits_out_a_partitioned_stale_data_node") {
        return;
    }
    let mut run = Run::start("5-drop-with-stale-cache", ClusterConfig::default());
    let interval = run.cluster.config.time_partition_ms;
    let victim = format!("{DATABASE}.vic");
    let stale_node = run.busiest_leader();
    let stale = Arc::new(run.single(stale_node));
    // The stale node caches the victim's schema and every partition the stale writes will use
    // (tablets 0..4 cover all eight), and every replica holds some of its data.
    for k in 0..4 {
        let outcome = run.cluster.runtime.block_on(write_recorded(
            &stale,
            &run.history,
            "prime",
            &victim,
            timestamps(k, interval),
            Some(0),
        ));
        assert_eq!(outcome, Outcome::Ok, "priming the victim series");
    }
    let others: Vec<usize> = (0..run.cluster.data_nodes.len())
        .filter(|&j| j != stale_node)
        .collect();
    let healthy = Arc::new(
        run.cluster
            .session_on(&others, Cluster::ddl_session_config())
            .expect("session"),
    );
    run.fault(&format!(
        "cut datanode-{} from the ConfigNode",
        stale_node + 1
    ));
    run.cluster.cut_from_config_nodes(stale_node).expect("cut");
    let cut_at = Instant::now();
    let drop_task = run.cluster.runtime.spawn({
        let (healthy, history) = (healthy.clone(), run.history.clone());
        let victim = victim.clone();
        async move {
            drop_recorded(
                &healthy,
                &history,
                DropTarget::Series {
                    device: victim,
                    measurement: "s1".into(),
                },
            )
            .await
        }
    });
    // Writes to the victim through the stale node, during the drop and for 2 s after its ack.
    let drop_done: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let stale_writer = run.cluster.runtime.spawn({
        let (stale, history) = (stale.clone(), run.history.clone());
        let drop_done = drop_done.clone();
        let victim = victim.clone();
        async move {
            let mut k = 4;
            loop {
                let done = *drop_done.lock().expect("flag");
                if done.is_some_and(|at| at.elapsed() > Duration::from_secs(2)) {
                    break;
                }
                write_recorded(
                    &stale,
                    &history,
                    "stale",
                    &victim,
                    timestamps(k, interval),
                    Some(0),
                )
                .await;
                k += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let index = run.cluster.runtime.block_on(drop_task).expect("drop task");
    assert_eq!(index, 0);
    let dropped = run.history.drops.lock().expect("history")[0].clone();
    // Known server bug (see the suite's report): the DataNode forwards the statement with its
    // `dn_rpc_timeout_ms` and re-sends it on timeout; the ConfigNode answers the re-sent one
    // 507 "is being deleted" while the first runs on. The other checks still run, against the
    // moment the operation was seen finished; the outcome is asserted last.
    let being_deleted_bug =
        matches!(&dropped.outcome, Outcome::Failed(m) if m.contains("is being deleted"));
    let acked_at = if being_deleted_bug {
        run.cluster.note(format!(
            "BUG: DELETE TIMESERIES answered {:?} although it runs on",
            dropped.outcome
        ));
        fencepost_tests::checker::wait_no_pending_operations(&run.cluster).expect("drop finished");
        Instant::now()
    } else {
        assert_eq!(
            dropped.outcome,
            Outcome::Ok,
            "DELETE TIMESERIES {victim}.s1"
        );
        dropped.completed
    };
    let fenced_at_ack = run.cluster.lease_live(stale_node);
    *drop_done.lock().expect("flag") = Some(acked_at);
    assert_eq!(
        fenced_at_ack,
        Some(false),
        "the stale DataNode must be fenced when the drop is acknowledged"
    );
    let cfg = &run.cluster.config;
    let waited = acked_at.duration_since(cut_at);
    // A lower bound only (it cannot be faster; slowness is not asserted): the ConfigNode may
    // proceed only after fence + margin from its last contact, at most one heartbeat before the
    // cut.
    let floor = Duration::from_millis(cfg.fence_ms + cfg.margin_ms - 2 * cfg.heartbeat_ms);
    assert!(
        waited >= floor,
        "the drop was acknowledged {waited:?} after the cut, before fence + margin ({floor:?})"
    );
    run.cluster
        .note(format!("drop finished {waited:?} after the cut"));
    run.cluster
        .runtime
        .block_on(stale_writer)
        .expect("stale writer");
    {
        let tablets = run.history.tablets.lock().expect("history");
        let late: Vec<_> = tablets
            .iter()
            .filter(|o| o.writer == "stale" && o.invoked > acked_at && o.outcome.is_ok())
            .collect();
        assert!(
            late.is_empty(),
            "the stale DataNode acknowledged writes to the dropped series after the drop: {late:?}"
        );
        let stale_ops = tablets.iter().filter(|o| o.writer == "stale").count();
        assert!(stale_ops > 0, "the stale writer wrote nothing");
        let outcomes: std::collections::BTreeSet<String> = tablets
            .iter()
            .filter(|o| o.writer == "stale")
            .map(|o| format!("{:?}", o.outcome))
            .collect();
        run.cluster.note(format!(
            "stale writes' outcomes: {:?}",
            outcomes.iter().take(4).collect::<Vec<_>>()
        ));
        run.cluster.note(format!(
            "{stale_ops} writes through the stale DataNode, {} acknowledged",
            tablets
                .iter()
                .filter(|o| o.writer == "stale" && o.outcome.is_ok())
                .count()
        ));
    }
    run.cluster.heal_network().expect("heal");
    run.wait_recovered(stale_node);
    let series = run
        .cluster
        .runtime
        .block_on(run.session.show_timeseries(&victim))
        .expect("SHOW TIMESERIES");
    assert!(
        !series.iter().any(|s| s.measurement == "s1"),
        "{victim}.s1 still listed: {series:?}"
    );
    // The checker judges the drop by its recorded outcome; with the bug above it is not Ok, so
    // make sure here that no point survived whatever the outcome says.
    let left = run
        .cluster
        .runtime
        .block_on(
            run.session
                .query_raw(&victim, "s1", i64::MIN / 2, i64::MAX / 2),
        )
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "{} points of the dropped {victim}.s1 survive: {left:?}",
        left.len()
    );
    run.finish();
    assert!(
        !being_deleted_bug,
        "DELETE TIMESERIES with a partitioned DataNode answered 507 'is being deleted' although \
         it completed: the DataNode re-sent the statement to the ConfigNode after \
         dn_rpc_timeout_ms (runtime::ConfigNodeClient::call) — server bug, see the report"
    );
}

/// Scenario 6: a seeded random nemesis mixing every fault above (3 ConfigNodes), with schema
/// churn, for `FENCEPOST_NEMESIS_SECS` (default 30); prints the seed and the fault count.
#[test]
fn random_nemesis() {
    let _serial = serial();
    if !require_namespaces("random_nemesis") {
        return;
    }
    let seed = nemesis::seed_from_env();
    let duration = nemesis::duration_from_env();
    eprintln!("NEMESIS SEED {seed} (re-run with FENCEPOST_NEMESIS_SEED={seed}), {duration:?}");
    let config = ClusterConfig {
        config_nodes: 3,
        ..ClusterConfig::default()
    };
    // Databases dropped by the churn are created before the faults unless
    // FENCEPOST_NEMESIS_FRESH_DATABASES=1: region creation during a fault is the known bug
    // "a replica whose CreateRegion failed is never created" (see the suite's report).
    let precreated = if std::env::var("FENCEPOST_NEMESIS_FRESH_DATABASES").is_ok_and(|v| v == "1") {
        0
    } else {
        12
    };
    let mut run = Run::start("6-random-nemesis", config);
    run.cluster.note(format!("NEMESIS SEED {seed}"));
    let all: Vec<usize> = (0..run.cluster.data_nodes.len()).collect();
    let ddl = Arc::new(
        run.cluster
            .session_on(&all, Cluster::ddl_session_config())
            .expect("session"),
    );
    let churn = SchemaChurn::start(
        &run.cluster.runtime,
        run.session.clone(),
        ddl,
        run.history.clone(),
        run.cluster.config.time_partition_ms,
        precreated,
    );
    let faults = nemesis::run(&mut run.cluster, seed, duration).expect("nemesis");
    run.faults += faults;
    churn.stop(&run.cluster.runtime);
    eprintln!("NEMESIS SEED {seed}: {faults} faults injected");
    run.finish();
}

/// Regression for a bug the nemesis found (seed 411110069 with
/// FENCEPOST_NEMESIS_FRESH_DATABASES=1): a region allocated while one of its DataNodes is cut off
/// from the ConfigNode must still get that replica once the network heals.
#[test]
fn region_allocated_during_a_partition_gets_every_replica() {
    let _serial = serial();
    if !require_namespaces("region_allocated_during_a_partition_gets_every_replica") {
        return;
    }
    let mut run = Run::start(
        "7-region-allocated-during-partition",
        ClusterConfig::default(),
    );
    let target = 0;
    run.fault(&format!("cut datanode-{} from the ConfigNode", target + 1));
    run.cluster.cut_from_config_nodes(target).expect("cut");
    let others: Vec<usize> = (1..run.cluster.data_nodes.len()).collect();
    let healthy = run
        .cluster
        .session_on(&others, Cluster::ddl_session_config())
        .expect("session");
    let database = "root.fpnew";
    run.cluster
        .runtime
        .block_on(healthy.create_database(database))
        .expect("CREATE DATABASE");
    for k in 0..4 {
        let outcome = run.cluster.runtime.block_on(write_recorded(
            &healthy,
            &run.history,
            "new-database",
            &format!("{database}.d0"),
            timestamps(k, run.cluster.config.time_partition_ms),
            None,
        ));
        assert_eq!(
            outcome,
            Outcome::Ok,
            "a write allocating {database}'s regions"
        );
    }
    run.cluster.heal_network().expect("heal");
    run.wait_recovered(target);
    run.finish();
}
