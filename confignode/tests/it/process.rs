//! The real `confignode` binary: starts from command-line flags, serves, survives kill -9 with
//! its registry intact (the raft log is replayed), and exports metrics.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proto::config_node_service_client::ConfigNodeServiceClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        // Killing an already exited child fails harmlessly; reap it either way.
        if self.0.kill().is_ok() {
            drop(self.0.wait());
        }
    }
}

fn start(dir: &std::path::Path, port: u16, metrics_port: u16) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_confignode"))
        .args([
            "--cn-internal-address",
            &format!("127.0.0.1:{port}"),
            "--cn-metrics-address",
            &format!("127.0.0.1:{metrics_port}"),
            "--cn-data-dir",
            dir.to_str().unwrap(),
            "--cn-raft-tick-ms",
            "20",
            "--heartbeat-interval-ms",
            "100",
            "--metadata-lease-fence-ms",
            "3000",
            "--lease-proceed-margin-ms",
            "1000",
            "--cn-snapshot-interval-entries",
            "3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning the confignode binary");
    Process(child)
}

/// Registers DataNode `id` (0: a new one) until the ConfigNode answers 200.
async fn register_until_ok(port: u16, id: u64) -> proto::RegisterDataNodeResp {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .unwrap()
            .timeout(Duration::from_secs(2))
            .connect_lazy();
        let resp = ConfigNodeServiceClient::new(channel)
            .register_data_node(proto::RegisterDataNodeReq {
                data_node_id: id,
                internal_endpoint: proto::parse_endpoint("127.0.0.1:1").ok(),
                rpc_endpoint: proto::parse_endpoint("127.0.0.1:2").ok(),
                ..Default::default()
            })
            .await;
        if let Ok(resp) = resp {
            let resp = resp.into_inner();
            if resp.status.as_ref().is_some_and(|s| s.code == 200) {
                return resp;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the confignode binary never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn scrape(port: u16) -> String {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    socket
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    socket.read_to_string(&mut text).await.unwrap();
    text
}

#[tokio::test]
async fn the_binary_serves_survives_kill_9_and_exports_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics_port) = (free_port(), free_port());
    let process = start(dir.path(), port, metrics_port);
    let first = register_until_ok(port, 0).await;
    assert_eq!((first.data_node_id, first.incarnation_epoch), (1, 1));
    // More entries than the snapshot interval: a snapshot is written and the log compacted.
    for epoch in 2..=6 {
        assert_eq!(register_until_ok(port, 1).await.incarnation_epoch, epoch);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.path().join("snapshot").exists() {
        assert!(Instant::now() < deadline, "no snapshot written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = scrape(metrics_port).await;
    assert!(metrics.contains("confignode_is_leader 1"), "{metrics}");
    assert!(
        metrics.contains("confignode_datanode_holds_lease{data_node_id=\"1\"}"),
        "{metrics}"
    );
    drop(process); // kill -9

    let _restarted = start(dir.path(), port, metrics_port);
    // The registry came back from the snapshot and the log: DataNode 1 gets its next
    // incarnation, and one without an id on the same address is a new node (REVIEW H3).
    let second = register_until_ok(port, 1).await;
    assert_eq!((second.data_node_id, second.incarnation_epoch), (1, 7));
    let wiped = register_until_ok(port, 0).await;
    assert_eq!((wiped.data_node_id, wiped.incarnation_epoch), (2, 1));
}
