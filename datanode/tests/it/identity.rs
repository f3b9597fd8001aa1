//! A DataNode's identity across restarts (REVIEW H3): a data directory restored from a backup
//! taken before a later incarnation ran is refused at registration, before its raft log opens,
//! and never counts as its old self; the node's own directory still restarts.

use std::path::Path;

use proto::config_node_service_client::ConfigNodeServiceClient;

use crate::harness::{
    assert_s1_matches, datanode_config, insert, query, tablet, wait_for, Cluster, LONG_FENCE_MS,
};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Replaces `dir` by a copy of `from`.
fn restore(from: &Path, dir: &Path) {
    std::fs::remove_dir_all(dir).unwrap();
    copy_dir(from, dir);
}

/// DataNode `id`'s (incarnation, confirmed incarnation) in the ConfigNode's registry.
async fn registry_epochs(cluster: &Cluster, id: u64) -> (u64, u64) {
    let mut client = ConfigNodeServiceClient::connect(format!("http://{}", cluster.cn_address))
        .await
        .unwrap();
    let resp = client
        .show_cluster(proto::ShowClusterReq::default())
        .await
        .unwrap()
        .into_inner();
    let node = resp
        .data_nodes
        .iter()
        .find(|n| n.location.as_ref().is_some_and(|l| l.data_node_id == id))
        .unwrap_or_else(|| panic!("DataNode {id} in {resp:?}"));
    (node.incarnation_epoch, node.confirmed_incarnation_epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_data_directory_restored_from_an_older_backup_is_refused() {
    let mut cluster = Cluster::start(1, 1, LONG_FENCE_MS).await;
    let device = "root.sg.d7";
    let t = tablet(device, 0, 400, 10);
    let mut c = cluster.client(0).await;
    assert_eq!(insert(&mut c, &t).await.code, 200);
    let node = cluster.nodes.pop().unwrap();
    let id = node.node_id();
    node.stop().await.unwrap();

    // A backup of the stopped node's directory (incarnation 1), then the node runs on: a
    // restart, whose incarnation answers the ConfigNode's heartbeats.
    let dir = cluster.dir.path().join("dn0");
    let backup = cluster.dir.path().join("dn0-backup");
    copy_dir(&dir, &backup);
    let config = datanode_config(cluster.dir.path(), 0, &cluster.cn_address);
    let node = datanode::start(config.clone()).await.unwrap();
    let ran = node.incarnation();
    wait_for(
        "the ConfigNode confirmed the running incarnation",
        || async { registry_epochs(&cluster, id).await == (ran, ran) },
    )
    .await;
    node.stop().await.unwrap();
    let current = cluster.dir.path().join("dn0-current");
    copy_dir(&dir, &current);

    // The directory restored from the backup: refused at once, and nothing of it counts.
    restore(&backup, &dir);
    let refused = datanode::start(config.clone()).await;
    let e = refused.err().expect("a restored directory is refused");
    assert!(
        e.to_string().contains("restored from an older backup"),
        "{e}"
    );
    assert_eq!(
        registry_epochs(&cluster, id).await,
        (ran, ran),
        "the refused registration minted nothing"
    );

    // Its own directory restarts as the same node, with its data.
    restore(&current, &dir);
    let node = datanode::start(config).await.unwrap();
    assert_eq!(node.node_id(), id);
    assert!(node.incarnation() > ran);
    wait_for("the restarted node holds its lease", || async {
        node.lease_is_live()
    })
    .await;
    cluster.nodes.push(node);
    let mut c = cluster.client(0).await;
    assert_s1_matches(&query(&mut c, device, 0, 10_000).await, &t);
    cluster.stop().await;
}
