//! DROP DATABASE removes the database's region replicas from every DataNode (REVIEW L1): the
//! raft groups stop, the region directories and replica files go, a restart does not bring them
//! back, and the regions of another database are untouched.

use std::collections::BTreeSet;

use crate::harness::{
    assert_s1_matches, datanode_config, insert_retrying, query_ok, tablet, wait_for, Cluster,
    LONG_FENCE_MS,
};

/// The region ids of `database` as the ConfigNode reports them through DataNode 0.
async fn regions_of(cluster: &Cluster, database: &str) -> BTreeSet<u64> {
    let mut c = cluster.client(0).await;
    let resp = c
        .show_regions(proto::SessionShowReq { session_id: 1 })
        .await
        .expect("ShowRegions RPC")
        .into_inner();
    resp.regions
        .into_iter()
        .filter_map(|r| r.replica_set)
        .filter(|s| s.database == database)
        .map(|s| s.region_id)
        .collect()
}

fn hosted(node: &datanode::DataNodeHandle) -> BTreeSet<u64> {
    node.region_status().into_keys().collect()
}

fn on_disk(cluster: &Cluster, index: usize, region: u64) -> bool {
    let regions = cluster
        .dir
        .path()
        .join(format!("dn{index}"))
        .join("regions");
    regions.join(region.to_string()).exists() || regions.join(format!("{region}.replicas")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drop_database_removes_its_regions_from_every_datanode_for_good() {
    let mut cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let (kept_device, gone_device) = ("root.kept.d1", "root.gone.d1");
    let kept = tablet(kept_device, 0, 300, 10);
    let gone = tablet(gone_device, 0, 300, 10);
    let mut c0 = cluster.client(0).await;
    assert_eq!(insert_retrying(&mut c0, &kept).await.code, 200);
    assert_eq!(insert_retrying(&mut c0, &gone).await.code, 200);
    let kept_regions = regions_of(&cluster, "root.kept").await;
    let gone_regions = regions_of(&cluster, "root.gone").await;
    assert!(!kept_regions.is_empty() && !gone_regions.is_empty());
    for (i, node) in cluster.nodes.iter().enumerate() {
        wait_for(&format!("DataNode {i} hosts every region"), || async {
            hosted(node).is_superset(&(&kept_regions | &gone_regions))
        })
        .await;
    }

    let s = c0
        .execute_schema_statement(proto::SchemaStatementReq {
            session_id: 1,
            statement: Some(proto::schema_statement_req::Statement::DropDatabase(
                proto::DropDatabaseReq {
                    database: "root.gone".into(),
                },
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.code, 200, "{s:?}");

    for (i, node) in cluster.nodes.iter().enumerate() {
        let cluster = &cluster;
        let gone_regions = &gone_regions;
        wait_for(
            &format!("DataNode {i} no longer hosts root.gone's regions"),
            || async move {
                hosted(node).is_disjoint(gone_regions)
                    && gone_regions.iter().all(|r| !on_disk(cluster, i, *r))
            },
        )
        .await;
        assert!(hosted(node).is_superset(&kept_regions), "node {i}");
        assert!(kept_regions.iter().all(|r| on_disk(cluster, i, *r)));
        assert_eq!(
            crate::harness::metric(&node.metrics_text(), "regions_hosted"),
            kept_regions.len() as u64,
            "node {i}"
        );
    }

    // A restart neither reopens nor recreates them; the other database's data is intact.
    let node = cluster.nodes.remove(0);
    node.stop().await.unwrap();
    let node = datanode::start(datanode_config(cluster.dir.path(), 0, &cluster.cn_address))
        .await
        .unwrap();
    wait_for("the restarted node holds its lease", || async {
        node.lease_is_live()
    })
    .await;
    assert!(hosted(&node).is_disjoint(&gone_regions));
    assert!(hosted(&node).is_superset(&kept_regions));
    cluster.nodes.insert(0, node);
    assert!(gone_regions.iter().all(|r| !on_disk(&cluster, 0, *r)));
    for i in 0..3 {
        let mut c = cluster.client(i).await;
        assert_s1_matches(&query_ok(&mut c, kept_device, 0, 10_000).await, &kept);
    }
    cluster.stop().await;
}
