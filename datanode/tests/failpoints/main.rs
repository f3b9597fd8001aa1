//! Failpoint tests: in the storage engine, a failure injected before fragment k and a crash between
//! writing sealed files and installing the manifest; in the DataNode service, a stalled heartbeat
//! handler (`datanode::heartbeat::stall`); in the region state machine, a delayed apply
//! (`datanode::apply::delay`). Each test holds `fail::FailScenario`, which serialises them.

#[path = "../it/harness.rs"]
mod harness;
#[path = "../it/support.rs"]
mod support;

use datanode::storage::{OpenGate, RegionCommand, StorageError};

use support::{apply_to_model, content, tablet, LoggedRegion, Model};

#[test]
fn failure_before_any_fragment_rolls_back_the_attempt() {
    let scenario = fail::FailScenario::setup();
    // Five fragments: slots 0..=4.
    let attempt = tablet("root.sg.d1", &[1, 11, 21, 31, 41], 5.0);
    for k in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let region = LoggedRegion::open(dir.path());
        let mut model = Model::new();
        let prior = tablet("root.sg.d1", &[1, 2, 22], 0.0);
        region
            .write(&RegionCommand::insert(prior.clone()), &OpenGate)
            .unwrap();
        apply_to_model(&mut model, &prior);
        let digest = region.region.digest().unwrap();

        fail::cfg("storage::before_fragment", &format!("{k}*off->1*return")).unwrap();
        let err = region
            .write(&RegionCommand::insert(attempt.clone()), &OpenGate)
            .unwrap_err();
        fail::remove("storage::before_fragment");
        assert!(matches!(err, StorageError::Injected(_)), "k={k}: {err:?}");
        assert!(err.is_recoverable());
        assert_eq!(region.region.digest().unwrap(), digest, "k={k}");
        assert_eq!(content(&region.region), model, "k={k}");

        region.replay(&OpenGate).unwrap();
        apply_to_model(&mut model, &attempt);
        assert_eq!(content(&region.region), model, "k={k}");
    }
    scenario.teardown();
}

#[test]
fn crash_between_sealed_files_and_manifest_loses_nothing() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    let first = tablet("root.sg.d1", &[1, 12, 23], 0.0);
    region
        .write(&RegionCommand::insert(first.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &first);

    fail::cfg("storage::flush::before_manifest", "return").unwrap();
    let err = region.region.flush().unwrap_err();
    fail::remove("storage::flush::before_manifest");
    assert!(matches!(err, StorageError::Injected(_)), "{err:?}");
    assert_eq!(region.region.checkpoint_index(), 0);
    assert_eq!(content(&region.region), model, "frozen data still served");
    let sealed = dir.path().join("region/sealed");
    assert_eq!(
        std::fs::read_dir(&sealed).unwrap().count(),
        3,
        "orphans on disk"
    );

    // The live region carries on: a later flush writes the left-over frozen memtables too.
    let second = tablet("root.sg.d2", &[5], 1.0);
    region
        .write(&RegionCommand::insert(second.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &second);

    // Crash now: the orphans are removed on open and the log replays everything.
    drop(region);
    let region = LoggedRegion::open(dir.path());
    assert_eq!(
        std::fs::read_dir(&sealed).unwrap().count(),
        0,
        "orphans removed"
    );
    region.replay(&OpenGate).unwrap();
    assert_eq!(content(&region.region), model);

    // A failed flush followed by a good one leaves nothing memory-only.
    fail::cfg("storage::flush::before_manifest", "return").unwrap();
    assert!(region.region.flush().is_err());
    fail::remove("storage::flush::before_manifest");
    region.flush();
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(
        content(&region.region),
        model,
        "after flush, truncation and restart"
    );
    scenario.teardown();
}

/// Seed scenario 3: heartbeats keep arriving but the handler stalls, so none is processed; the
/// DataNode fences itself, refuses writes (536) and reads (535), then recovers (clear + pull) once
/// the handler runs again.
#[test]
fn a_stalled_heartbeat_handler_fences_the_datanode_until_it_recovers() {
    let scenario = fail::FailScenario::setup();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
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
    use datanode::storage::DataRegion;

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
