//! Failpoint tests of the DataNode: a stalled heartbeat handler (`datanode::heartbeat::stall`),
//! in the region state machine a delayed apply (`datanode::apply::delay`), and a snapshot
//! stream broken mid-file (`datanode::snapshot::chunk`). The engine's own
//! failpoint tests are in `engine/tests/failpoints/`. Each test holds `fail::FailScenario`, which
//! serialises them.

#[path = "../it/harness.rs"]
mod harness;
// Shared with the engine tests; this binary uses only the region helpers, not the command log.
#[allow(dead_code)]
#[path = "../../../engine/tests/it/support.rs"]
mod support;

use engine::{OpenGate, RegionCommand};

use support::{apply_to_model, content, tablet, Model};

/// The runtime an in-process cluster runs on.
fn cluster_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// Seed scenario 3: heartbeats keep arriving but the handler stalls, so none is processed; the
/// DataNode fences itself, refuses writes (536) and reads (535), then recovers (clear + pull) once
/// the handler runs again.
#[test]
fn a_stalled_heartbeat_handler_fences_the_datanode_until_it_recovers() {
    let scenario = fail::FailScenario::setup();
    cluster_runtime().block_on(async {
        let cluster = harness::Cluster::start(1, 1, harness::FENCE_MS).await;
        let device = "root.fp.d1";
        let before = harness::tablet(device, 0, 300, 10);
        let mut client = cluster.client(0).await;
        assert_eq!(
            harness::insert_retrying(&mut client, &before).await.code,
            200
        );
        let node = &cluster.nodes[0];

        // Far longer than the test: the ConfigNode gives up on each stalled call, so none is ever
        // processed while the failpoint is armed.
        fail::cfg("datanode::heartbeat::stall", "return(600000)").unwrap();
        harness::wait_for("the DataNode is fenced", || async { !node.lease_is_live() }).await;
        let s = harness::insert(&mut client, &harness::tablet(device, 5000, 300, 3)).await;
        assert_eq!(s.code, 536, "{s:?}");
        let r = harness::query(&mut client, device, 0, 100_000).await;
        assert_eq!(harness::code(&r.status), 535);

        let recoveries = node.lease_recoveries();
        fail::remove("datanode::heartbeat::stall");
        harness::wait_for("the DataNode recovered", || async {
            node.lease_is_live() && node.lease_recoveries() > recoveries
        })
        .await;
        let after = harness::tablet(device, 20_000, 300, 5);
        assert_eq!(
            harness::insert_retrying(&mut client, &after).await.code,
            200
        );
        harness::assert_s1_matches(
            &harness::query_ok(&mut client, device, 0, 3000).await,
            &before,
        );
        harness::assert_s1_matches(
            &harness::query_ok(&mut client, device, 20_000, 30_000).await,
            &after,
        );
        cluster.stop().await;
    });
    scenario.teardown();
}

#[test]
fn a_delayed_apply_holds_the_index_and_then_applies_whole() {
    use std::sync::Arc;

    use consensus::{ApplyError, ManualClock, StateMachine};
    use datanode::region_state_machine::{DataRegionStateMachine, RegionRetryConfig};
    use engine::DataRegion;

    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let region = Arc::new(DataRegion::open(dir.path(), support::config()).unwrap());
    let mut sm = DataRegionStateMachine::new(
        region.clone(),
        Arc::new(OpenGate),
        Arc::new(ManualClock::default()),
        RegionRetryConfig::default(),
    );
    let t = tablet("root.sg.d1", &[1, 11, 21], 0.0);
    let entry = RegionCommand::insert(t.clone()).encode();

    fail::cfg("datanode::apply::delay", "2*return").unwrap();
    for _ in 0..2 {
        let err = sm.apply(3, &entry).unwrap_err();
        assert!(matches!(err, ApplyError::Recoverable { .. }), "{err:?}");
        assert_eq!(sm.applied_index(), 0, "the index is held");
        assert!(content(&region).is_empty());
    }
    sm.apply(3, &entry).unwrap();
    fail::remove("datanode::apply::delay");
    let mut model = Model::new();
    apply_to_model(&mut model, &t);
    assert_eq!(content(&region), model);
    assert_eq!(sm.applied_index(), 3);
    scenario.teardown();
}

/// A snapshot download whose stream breaks mid-file (issue 18 item 1: resumable after a broken
/// connection) keeps what it staged and, at the leader's next offer, continues the file from
/// there; the replica then converges.
#[test]
fn a_broken_snapshot_download_resumes_where_it_stopped() {
    let scenario = fail::FailScenario::setup();
    cluster_runtime().block_on(async {
        let mut cluster =
            harness::Cluster::start_with(3, 3, harness::LONG_FENCE_MS, harness::truncating_logs)
                .await;
        let mut client = cluster.client(0).await;
        let stopped = cluster.nodes.pop().expect("three nodes");
        let internal_address = stopped.internal_address.to_string();
        stopped.stop().await.expect("DataNode 2 stops");
        for round in 0..6 {
            for d in 0..4 {
                let t = harness::noise_tablet(&format!("root.sg.d{d}"), round * 5_000, 2_000);
                assert_eq!(harness::insert_retrying(&mut client, &t).await.code, 200);
            }
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        }
        // The first chunk past a file's start fails, once.
        fail::cfg("datanode::snapshot::chunk", "1*return->off").unwrap();
        harness::restart_on(&mut cluster, 2, internal_address, harness::truncating_logs).await;
        harness::wait_until_replicas_agree(&cluster, "the restarted replica catches up").await;
        let metrics = cluster.nodes[2].metrics_text();
        assert!(harness::metric(&metrics, "snapshot_download_failures_total") >= 1);
        assert!(harness::metric(&metrics, "snapshot_download_resumed_files_total") >= 1);
        assert!(harness::metric(&metrics, "snapshot_downloads_total") >= 1);
        fail::remove("datanode::snapshot::chunk");
        cluster.stop().await;
    });
    scenario.teardown();
}
