//! Three in-process ConfigNodes over loopback and a fake DataNode: leader failover keeps the
//! heartbeats going, the old leader rejoins as a follower, registration mints epochs, the fence
//! protocol runs end to end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use confignode::client::GrpcDataNodeClient;
use confignode::ConfigNodeConfig;
use proto::config_node_service_client::ConfigNodeServiceClient;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::fake::FakeDataNode;

const FENCE_MS: u64 = 5000;

fn config(id: u64, address: &str, members: &str, dir: &std::path::Path) -> ConfigNodeConfig {
    let mut c = ConfigNodeConfig::default();
    c.node.cn_node_id = id;
    c.node.cn_internal_address = address.to_string();
    c.node.cn_initial_members = members.to_string();
    c.node.cn_data_dir = dir.join(format!("cn{id}"));
    c.node.cn_metrics_address = "127.0.0.1:0".into();
    c.raft.cn_raft_tick_ms = 20;
    c.raft.cn_raft_election_ticks = 10;
    c.lease.heartbeat_interval_ms = 100;
    c.lease.metadata_lease_fence_ms = FENCE_MS;
    c.lease.lease_proceed_margin_ms = 1000;
    c.lease.failure_detector_threshold_ms = FENCE_MS;
    c.lease.invalidation_retry_interval_ms = 100;
    c
}

struct Node {
    config: ConfigNodeConfig,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<confignode::Result<()>>>,
}

impl Node {
    async fn start(config: ConfigNodeConfig, listener: TcpListener) -> Node {
        let (stop, stopped) = oneshot::channel::<()>();
        let client = Arc::new(GrpcDataNodeClient::new(
            Duration::from_secs(1),
            Duration::from_millis(500),
        ));
        let task = tokio::spawn(confignode::run_with_listener(
            config.clone(),
            listener,
            client,
            async move {
                // Either a stop request or the test dropping the sender ends the node.
                drop(stopped.await);
            },
        ));
        Node {
            config,
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            // An Err means the node already ended on its own; the join below reports how.
            if stop.send(()).is_err() {
                eprintln!("node {} had already stopped", self.config.node.cn_node_id);
            }
        }
        if let Some(task) = self.task.take() {
            task.await.expect("node task").expect("node ran cleanly");
        }
    }
}

async fn client(address: &str) -> ConfigNodeServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .connect_lazy();
    ConfigNodeServiceClient::new(channel)
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `limit`.
async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The id and address of the node that answers a leader-only request with 200.
async fn find_leader(nodes: &[(u64, String)]) -> (u64, String) {
    eventually(Duration::from_secs(20), "a ConfigNode leader", || async {
        for (id, address) in nodes {
            let mut c = client(address).await;
            if let Ok(resp) = c.show_leases(proto::ShowLeasesReq {}).await {
                if resp.into_inner().status.is_some_and(|s| s.code == 200) {
                    return Some((*id, address.clone()));
                }
            }
        }
        None
    })
    .await
}

async fn register(leader: &str, dn_internal: &str, id: u64) -> proto::RegisterDataNodeResp {
    client(leader)
        .await
        .register_data_node(proto::RegisterDataNodeReq {
            data_node_id: id,
            internal_endpoint: proto::parse_endpoint(dn_internal).ok(),
            rpc_endpoint: proto::parse_endpoint("127.0.0.1:6667").ok(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_failover_resumes_heartbeats_and_the_old_leader_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    // The fake DataNode.
    let fake = FakeDataNode::default();
    let dn_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dn_address = dn_listener.local_addr().unwrap().to_string();
    let dn_server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(fake.server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(dn_listener)),
    );

    // Three ConfigNodes on loopback ports chosen by the kernel.
    let mut listeners = Vec::new();
    for _ in 0..3 {
        listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let addresses: Vec<(u64, String)> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.local_addr().unwrap().to_string()))
        .collect();
    let members = addresses
        .iter()
        .map(|(id, a)| format!("{id}@{a}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    for ((id, address), listener) in addresses.iter().zip(listeners) {
        nodes.push(Node::start(config(*id, address, &members, dir.path()), listener).await);
    }

    let (leader_id, leader_address) = find_leader(&addresses).await;

    // Registration twice: the second incarnation gets a higher epoch.
    let first = register(&leader_address, &dn_address, 0).await;
    assert_eq!(first.status.as_ref().unwrap().code, 200, "{first:?}");
    let second = register(&leader_address, &dn_address, first.data_node_id).await;
    assert_eq!(second.data_node_id, first.data_node_id);
    assert!(second.incarnation_epoch > first.incarnation_epoch);
    assert_eq!(
        second.parameters.as_ref().unwrap().metadata_lease_fence_ms,
        FENCE_MS
    );
    *fake.epoch.lock() = second.incarnation_epoch;

    // A request from the replaced incarnation is refused; the current one is served.
    let fetch = |epoch: u64| proto::FetchPartitionsReq {
        requests: Vec::new(),
        auto_create: false,
        caller: Some(proto::Caller {
            data_node_id: first.data_node_id,
            incarnation_epoch: epoch,
        }),
    };
    let mut leader_client = client(&leader_address).await;
    let stale = leader_client
        .fetch_partitions(fetch(first.incarnation_epoch))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stale.status.unwrap().code, 507);
    let current = leader_client
        .fetch_partitions(fetch(second.incarnation_epoch))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(current.status.unwrap().code, 200);

    // A follower redirects to the leader.
    let (_, follower_address) = addresses.iter().find(|(id, _)| *id != leader_id).unwrap();
    let redirected = register(follower_address, &dn_address, first.data_node_id).await;
    let status = redirected.status.unwrap();
    assert_eq!(status.code, 400, "{status:?}");
    assert_eq!(proto::endpoint(&status.redirect.unwrap()), leader_address);

    // The user RPCs too (the leader alone hashes and counts failed logins); a user created on
    // the leader is in the replicated state.
    let created = leader_client
        .user_statement(crate::users::create_user("root", "carol", "carol_pw"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.code, 200, "{created:?}");
    let mut follower = client(follower_address).await;
    let statuses = [
        follower
            .authenticate(crate::users::login("carol", "carol_pw"))
            .await
            .unwrap()
            .into_inner(),
        follower
            .user_statement(crate::users::create_user("root", "dave", "dave_pw"))
            .await
            .unwrap()
            .into_inner(),
        follower
            .list_users(proto::ListUsersReq {})
            .await
            .unwrap()
            .into_inner()
            .status
            .unwrap(),
    ];
    for status in statuses {
        assert_eq!(status.code, 400, "{status:?}");
        assert_eq!(proto::endpoint(&status.redirect.unwrap()), leader_address);
    }

    // Heartbeats from the leader with the current epoch arrive.
    eventually(
        Duration::from_secs(10),
        "heartbeats from the leader",
        || async {
            let hb = fake.heartbeats.lock();
            (hb.iter()
                .filter(|h| h.config_node_id == leader_id && h.epoch == second.incarnation_epoch)
                .count()
                >= 3)
                .then_some(())
        },
    )
    .await;

    {
        // The heartbeat names this DataNode among the lease holders and carries the version.
        let hb = fake.heartbeats.lock();
        let last = hb.last().unwrap();
        assert!(last.lease_holders.contains(&first.data_node_id), "{last:?}");
        assert!(last.metadata_version >= second.metadata_version);
    }

    // Auto-created schema and partitions put a region on the DataNode, and the fence protocol
    // for DELETE TIMESERIES completes: the DataNode acknowledges, the deletion goes to its region.
    let mut leader = client(&leader_address).await;
    let schema = leader
        .fetch_schema(proto::FetchSchemaReq {
            devices: vec![proto::DeviceSchemaRequest {
                device: "root.sg.d1".into(),
                measurements: vec![proto::MeasurementSchema {
                    name: "s1".into(),
                    data_type: proto::DataType::Double as i32,
                }],
            }],
            auto_create: true,
            caller: None,
            table: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(schema.devices[0].database, "root.sg");
    assert_eq!(schema.devices[0].measurements.len(), 1);
    let partitions = leader
        .fetch_partitions(proto::FetchPartitionsReq {
            requests: vec![proto::DeviceTimeSlots {
                device: "root.sg.d1".into(),
                time_slots: vec![0, 1],
                every_time_slot: false,
            }],
            auto_create: true,
            caller: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(partitions.partitions.len(), 2, "{partitions:?}");
    assert_eq!(
        partitions.regions[0].data_node_ids,
        vec![first.data_node_id]
    );
    assert!(!fake.created_regions.lock().is_empty());
    // A read's lookup: the group holding d1's series slot in every time slot, nothing created
    // for d2, which has none.
    let placed = leader
        .fetch_partitions(proto::FetchPartitionsReq {
            requests: ["root.sg.d1", "root.sg.d2", "root.other.d1"]
                .iter()
                .map(|d| proto::DeviceTimeSlots {
                    device: d.to_string(),
                    time_slots: Vec::new(),
                    every_time_slot: true,
                })
                .collect(),
            auto_create: false,
            caller: None,
        })
        .await
        .unwrap()
        .into_inner();
    let region = partitions.partitions[0].region_id;
    let held: Vec<(&str, Vec<u64>)> = placed
        .device_regions
        .iter()
        .map(|d| (d.device.as_str(), d.region_ids.clone()))
        .collect();
    let d2_slot_held = partitions.partitions[0].series_slot
        == common::PartitionConfig::default().series_slot("root.sg.d2");
    assert_eq!(
        held,
        [
            ("root.sg.d1", vec![region]),
            (
                "root.sg.d2",
                if d2_slot_held { vec![region] } else { vec![] }
            )
        ],
        "{placed:?}"
    );
    assert!(placed.partitions.is_empty(), "{placed:?}");
    assert_eq!(placed.regions.len(), 1, "{placed:?}");
    let deleted = leader
        .delete_timeseries(proto::DeleteTimeseriesReq {
            series: vec![proto::SeriesPath {
                device: "root.sg.d1".into(),
                measurement: "s1".into(),
            }],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.code, 200, "{deleted:?}");
    assert_eq!(fake.invalidations.lock().len(), 1);
    assert_eq!(fake.region_writes.lock().len(), 1);

    // Kill the leader.
    let leader_index = nodes
        .iter()
        .position(|n| n.config.node.cn_node_id == leader_id)
        .unwrap();
    let old_term = fake.heartbeats.lock().last().unwrap().term;
    nodes[leader_index].kill().await;
    let last_old = fake
        .heartbeats
        .lock()
        .iter()
        .filter(|h| h.config_node_id == leader_id)
        .map(|h| h.at)
        .max()
        .unwrap();

    // A new leader is elected and resumes heartbeats before the DataNode's lease runs out.
    let survivors: Vec<(u64, String)> = addresses
        .iter()
        .filter(|(id, _)| *id != leader_id)
        .cloned()
        .collect();
    let (new_leader_id, new_leader_address) = find_leader(&survivors).await;
    let first_new = eventually(
        Duration::from_secs(10),
        "heartbeats from the new leader",
        || async {
            fake.heartbeats
                .lock()
                .iter()
                .find(|h| h.config_node_id == new_leader_id && h.term > old_term)
                .map(|h| h.at)
        },
    )
    .await;
    let gap = first_new.duration_since(last_old);
    assert!(
        gap < Duration::from_millis(FENCE_MS),
        "heartbeat gap {gap:?} reached metadata_lease_fence_ms: the DataNode would have fenced"
    );
    // The new leader knows the user created under the old one.
    let login = client(&new_leader_address)
        .await
        .authenticate(crate::users::login("carol", "carol_pw"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(login.code, 200, "{login:?}");

    // The old leader restarts on its port with its log, and rejoins as a follower.
    let (_, old_address) = &addresses[leader_index];
    let listener = eventually(Duration::from_secs(5), "the old port", || async {
        TcpListener::bind(old_address.as_str()).await.ok()
    })
    .await;
    let restarted_config = nodes[leader_index].config.clone();
    nodes[leader_index] = Node::start(restarted_config, listener).await;
    eventually(
        Duration::from_secs(20),
        "the old leader following",
        || async {
            let resp = client(old_address)
                .await
                .show_cluster(proto::ShowClusterReq {})
                .await
                .ok()?
                .into_inner();
            let leader_role = resp
                .config_nodes
                .iter()
                .find(|c| {
                    c.location
                        .as_ref()
                        .is_some_and(|l| l.config_node_id == new_leader_id)
                })?
                .role
                .clone();
            // It has the registry back (replayed from its log and caught up from the leader).
            let epoch = resp.data_nodes.first().map(|d| d.incarnation_epoch);
            (leader_role == "Leader" && epoch == Some(second.incarnation_epoch)).then_some(())
        },
    )
    .await;
    // And it redirects to the new leader instead of leading.
    let redirected = register(old_address, &dn_address, first.data_node_id).await;
    assert_eq!(
        redirected
            .status
            .unwrap()
            .redirect
            .map(|e| proto::endpoint(&e)),
        Some(new_leader_address.clone())
    );

    // A client seeded with every ConfigNode finds the leader by itself (redirects, dead or
    // following members) and registers the next incarnation.
    let seeds: Vec<String> = addresses.iter().map(|(_, a)| a.clone()).collect();
    let finder = runtime::ConfigNodeClient::new(seeds, Duration::from_secs(2), 50);
    // With the incarnation its directory holds: the latest, so not a restored one.
    let request = proto::RegisterDataNodeReq {
        data_node_id: first.data_node_id,
        internal_endpoint: proto::parse_endpoint(&dn_address).ok(),
        rpc_endpoint: proto::parse_endpoint("127.0.0.1:6667").ok(),
        stored_incarnation_epoch: second.incarnation_epoch,
    };
    let third = finder
        .call(|mut c| {
            let request = request.clone();
            async move { c.register_data_node(request).await }
        })
        .await
        .unwrap();
    assert_eq!(third.status.unwrap().code, 200);
    assert_eq!(third.incarnation_epoch, second.incarnation_epoch + 1);
    assert_eq!(finder.leader(), Some(new_leader_address.clone()));

    for node in &mut nodes {
        node.kill().await;
    }
    dn_server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_leader_resumes_a_drop_and_waits_fence_plus_margin_from_its_election() {
    const FENCE: u64 = 1000;
    const MARGIN: u64 = 600;
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeDataNode::default();
    let dn_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dn_address = dn_listener.local_addr().unwrap().to_string();
    let dn_server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(fake.server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(dn_listener)),
    );
    let dead_address = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut listeners = Vec::new();
    for _ in 0..3 {
        listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let addresses: Vec<(u64, String)> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.local_addr().unwrap().to_string()))
        .collect();
    let members = addresses
        .iter()
        .map(|(id, a)| format!("{id}@{a}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    for ((id, address), listener) in addresses.iter().zip(listeners) {
        let mut c = config(*id, address, &members, dir.path());
        c.lease.metadata_lease_fence_ms = FENCE;
        c.lease.lease_proceed_margin_ms = MARGIN;
        c.lease.failure_detector_threshold_ms = FENCE;
        nodes.push(Node::start(c, listener).await);
    }
    let (leader_id, leader_address) = find_leader(&addresses).await;
    let live = register(&leader_address, &dn_address, 0).await;
    *fake.epoch.lock() = live.incarnation_epoch;
    let mut leader = client(&leader_address).await;
    let partitions = leader
        .fetch_partitions(proto::FetchPartitionsReq {
            requests: vec![proto::DeviceTimeSlots {
                device: "root.sg.d1".into(),
                time_slots: vec![0],
                every_time_slot: false,
            }],
            auto_create: true,
            caller: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(partitions.partitions.len(), 1);
    let dead = register(&leader_address, &dead_address, 0).await;
    assert_eq!(dead.status.unwrap().code, 200);

    // The drop starts on the old leader, which then dies while waiting for the dead DataNode.
    let drop_call = tokio::spawn(async move {
        leader
            .drop_database(proto::DropDatabaseReq {
                database: "root.sg".into(),
            })
            .await
    });
    eventually(Duration::from_secs(5), "the first invalidation", || async {
        (!fake.invalidations.lock().is_empty()).then_some(())
    })
    .await;
    let leader_index = nodes
        .iter()
        .position(|n| n.config.node.cn_node_id == leader_id)
        .unwrap();
    let old_term = fake.invalidations.lock()[0].config_node_term;
    let killed = Instant::now();
    nodes[leader_index].kill().await;
    // The client of the dead leader sees its connection end; the operation is not lost.
    assert!(drop_call.await.unwrap().is_err_or_not_final());

    let survivors: Vec<(u64, String)> = addresses
        .iter()
        .filter(|(id, _)| *id != leader_id)
        .cloned()
        .collect();
    let (_, new_leader_address) = find_leader(&survivors).await;
    let mut new_leader = client(&new_leader_address).await;
    eventually(
        Duration::from_secs(20),
        "the drop to finish on the new leader",
        || {
            let mut c = new_leader.clone();
            async move {
                // A database being dropped is hidden at once; its regions go only with the
                // final commit.
                let resp = c
                    .show_regions(proto::ShowRegionsReq::default())
                    .await
                    .ok()?
                    .into_inner();
                (resp.status?.code == 200 && resp.regions.is_empty()).then_some(())
            }
        },
    )
    .await;
    let finished = killed.elapsed();
    assert!(
        finished > Duration::from_millis(FENCE + MARGIN),
        "the new leader proceeded {finished:?} after the old one died"
    );
    // The new leader broadcast the invalidation again in its own term, and ordered the deletion.
    assert!(fake
        .invalidations
        .lock()
        .iter()
        .any(|r| r.config_node_term > old_term));
    assert!(fake.region_writes.lock().iter().any(|w| matches!(
        w.command,
        Some(proto::region_write_req::Command::DeleteDatabase(_))
    )));
    let leases = new_leader
        .show_leases(proto::ShowLeasesReq {})
        .await
        .unwrap()
        .into_inner();
    assert!(leases
        .leases
        .iter()
        .any(|l| l.data_node_id == dead.data_node_id && l.fenced));

    for node in &mut nodes {
        node.kill().await;
    }
    dn_server.abort();
}

trait DropOutcome {
    fn is_err_or_not_final(&self) -> bool;
}

impl DropOutcome for Result<tonic::Response<proto::Status>, tonic::Status> {
    /// The dying leader either drops the connection or answers without finishing: never 200.
    fn is_err_or_not_final(&self) -> bool {
        match self {
            Err(_) => true,
            Ok(resp) => resp.get_ref().code != 200,
        }
    }
}
