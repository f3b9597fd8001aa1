//! Hostile clients on the session port (REVIEW N4, N5), against a real DataNode: oversized,
//! over-full and truncated frames, a flood of connections that send one byte and go quiet, a
//! wide `SELECT *`; meanwhile a Thrift client and a gRPC client, already connected or new, keep
//! writing, and nothing they were acknowledged is lost.
//!
//! The flood opens 2,000 connections (`FENCEPOST_HOSTILE_CONNECTIONS` changes it; the issue's
//! 10,000 by hand: `FENCEPOST_HOSTILE_CONNECTIONS=10000 cargo test -p datanode --test it
//! hostile`). Every assertion is on behaviour: a status, a closed connection, a count; the short
//! timeouts configured here only make the test finish sooner.

use std::collections::BTreeMap;

use common::{DataType, Tablet, Value};
use iotdb_rpc::messages::OpenSessionReq;
use thrift_codec::{Protocol, TType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{insert, metric, query_ok, tablet, wait_for, Cluster, LONG_FENCE_MS};
use crate::thrift::{rows_of, Client, Reply, V};

const HANDSHAKES_MAX: u32 = 64;

/// Connections of the flood: 2,000 unless `FENCEPOST_HOSTILE_CONNECTIONS` says otherwise,
/// within what the test process's open-files limit holds (each is a descriptor here and one in
/// the DataNode, in the same process).
fn flood_size() -> usize {
    let limit = common::process::raise_open_files_limit().expect("the open-files limit");
    let wanted = std::env::var("FENCEPOST_HOSTILE_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    let room = (limit.soft.saturating_sub(1_000) / 2) as usize;
    assert!(
        room >= wanted.min(500),
        "the open-files limit ({limit:?}) leaves room for {room} connections"
    );
    wanted.min(room)
}

/// An `openSession` request carrying `configuration`.
fn open_session(configuration: BTreeMap<String, String>) -> OpenSessionReq {
    OpenSessionReq {
        client_protocol: 2,
        zone_id: "UTC".into(),
        username: "root".into(),
        password: Some("root".into()),
        configuration,
    }
}

/// Whether the server has closed `stream` (end of file or reset), reading what it sent.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return true,
            Ok(_) => continue,
        }
    }
}

/// This process's resident memory in KiB (the DataNode runs in it), for the log.
fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// A `/proc/self/status` line in KiB (`VmRSS:`, `VmHWM:`), 0 where there is none.
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn port_metric(cluster: &Cluster, name: &str) -> u64 {
    metric(&cluster.nodes[0].metrics_text(), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_handshakes_are_bounded_and_other_clients_keep_writing() {
    let flood = flood_size();
    let cluster = Cluster::start_with(1, 1, LONG_FENCE_MS, |c| {
        c.rpc.dn_rpc_handshake_connections_max = HANDSHAKES_MAX;
        c.rpc.dn_rpc_handshake_timeout_ms = 2_000;
    })
    .await;
    let address = cluster.endpoints()[0].clone();
    // Clients connected before anything hostile happens.
    let mut thrift = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(thrift.open("root", "root").await.code(), 200);
    assert_eq!(
        thrift
            .insert_tablet("root.h.thrift", &[1, 2, 3])
            .await
            .code(),
        200
    );
    let mut grpc = cluster.client(0).await;
    assert_eq!(
        insert(&mut grpc, &tablet("root.h.grpc", 0, 1, 10))
            .await
            .code,
        200
    );

    // A 64 MiB openSession frame: refused from its length prefix, naming the limit, and closed.
    let mut big = Client::connect(&address, Protocol::Binary).await;
    big.send_raw(&(64i32 << 20).to_be_bytes()).await;
    match big.receive().await {
        Some(Reply::Exception(message, 7)) => assert!(
            message.contains("dn_rpc_unauthenticated_frame_bytes_max"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        big.receive().await.is_none(),
        "closed after the oversize frame"
    );

    // An openSession whose configuration has 1,000 entries (13 KB, under the frame limit):
    // refused before the map is built, and the connection goes on to log in properly.
    let mut full = Client::connect(&address, Protocol::Compact).await;
    let flood_map = (0..1_000)
        .map(|i| (format!("k{i}"), String::new()))
        .collect();
    let refused = full
        .call("openSession", |w| {
            w.field_begin(TType::Struct, 1);
            open_session(flood_map).write(w);
        })
        .await;
    match refused {
        Reply::Exception(message, 7) => assert!(message.contains("at most 64"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(full.open("root", "root").await.code(), 200);

    // A frame that stops halfway, before a login: closed at the handshake's deadline.
    let mut truncated = Client::connect(&address, Protocol::Binary).await;
    truncated.send_raw(&100i32.to_be_bytes()).await;
    truncated.send_raw(&[0x80, 1, 0, 1]).await;
    assert!(
        truncated.receive().await.is_none(),
        "a stalled handshake is closed"
    );

    // The flood: connections that send one byte and hold.
    let rss_before = rss_kib();
    let mut hostile = Vec::with_capacity(flood);
    for _ in 0..flood {
        let mut s = TcpStream::connect(&address).await.expect("connect");
        s.write_all(&[0]).await.expect("one byte");
        hostile.push(s);
    }
    // A new Thrift client and a new gRPC client get in and write while the flood holds; so do
    // the clients connected before it.
    let mut newcomer = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(newcomer.open("root", "root").await.code(), 200);
    assert_eq!(
        newcomer
            .insert_tablet("root.h.thrift", &[4, 5, 6])
            .await
            .code(),
        200
    );
    let mut new_grpc = cluster.client(0).await;
    let during = tablet("root.h.grpc", 10, 1, 10);
    assert_eq!(insert(&mut new_grpc, &during).await.code, 200);
    assert_eq!(
        thrift
            .insert_tablet("root.h.thrift", &[7, 8, 9])
            .await
            .code(),
        200
    );
    assert_eq!(
        insert(&mut grpc, &tablet("root.h.grpc", 20, 1, 10))
            .await
            .code,
        200
    );
    let rss_during = rss_kib();
    // The DataNode never held more than its handshake budget of them.
    assert!(port_metric(&cluster, "session_handshakes_open") <= u64::from(HANDSHAKES_MAX));
    let evicted = port_metric(&cluster, "session_handshakes_evicted_total");
    assert!(
        evicted >= (flood - HANDSHAKES_MAX as usize) as u64,
        "{evicted} of {flood} evicted"
    );
    // Each hostile connection is closed: evicted, or past its deadline.
    for s in hostile.iter_mut() {
        assert!(closed_by_server(s).await);
    }
    wait_for("no handshake left", || async {
        port_metric(&cluster, "session_handshakes_open") == 0
    })
    .await;
    assert_eq!(
        port_metric(&cluster, "session_grpc_connections_refused_total"),
        0
    );
    assert_eq!(
        port_metric(&cluster, "session_thrift_logins_refused_total"),
        0
    );

    // Nothing acknowledged is lost: 9 Thrift rows (their every third s1 is null) and 30 gRPC
    // rows.
    let thrift_rows = query_ok(&mut grpc, "root.h.thrift", 0, i64::MAX).await;
    assert_eq!(thrift_rows.series[0].timestamps, vec![1, 2, 4, 5, 7, 8]);
    let grpc_rows = query_ok(&mut grpc, "root.h.grpc", 0, i64::MAX).await;
    assert_eq!(
        grpc_rows.series[0].timestamps,
        (0..30).collect::<Vec<i64>>()
    );
    eprintln!(
        "hostile flood: {flood} one-byte connections, {evicted} evicted; test process RSS \
         {rss_before} KiB before, {rss_during} KiB while held, {} KiB after",
        rss_kib()
    );
    cluster.stop().await;
}

/// A device of `width` DOUBLE series with a row at each of `times`.
fn wide_tablet(device: &str, width: usize, times: std::ops::Range<i64>) -> Tablet {
    let names: Vec<String> = (0..width).map(|i| format!("m{i:04}")).collect();
    let schema: Vec<(&str, DataType)> = names
        .iter()
        .map(|n| (n.as_str(), DataType::Double))
        .collect();
    let mut t = Tablet::new(device, &schema);
    for ts in times {
        t.push_row(
            ts,
            (0..width).map(|i| Some(Value::Double(i as f64))).collect(),
        );
    }
    t
}

/// Every page of a Thrift query: the rows it returned and the most result memory the node held
/// after any page.
async fn read_all(c: &mut Client, cluster: &Cluster, first: &Reply) -> (i64, u64) {
    assert_eq!(first.code(), 200);
    let mut rows = rows_of(first.success().field(13).list());
    let mut peak = port_metric(cluster, "query_results_bytes");
    let query_id = first.success().field(2).int();
    let mut more = first.success().field(14) == &V::Bool(true);
    while more {
        let page = c.fetch(query_id, 5_000).await;
        assert_eq!(page.code(), 200);
        rows += rows_of(page.success().field(6).list());
        more = page.success().field(7) == &V::Bool(true);
        peak = peak.max(port_metric(cluster, "query_results_bytes"));
    }
    (rows, peak)
}

/// REVIEW N5 and issue 40's cursor: a `SELECT *` far larger than a result's memory is streamed
/// to a Thrift client a page at a time within it; built whole (gRPC's one-message answer) it is
/// refused with a status naming the bound, never an OOM.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wide_select_streams_within_its_bound_and_slow_or_idle_sessions_are_closed() {
    const RESULT_BYTES_MAX: u64 = 32 << 20;
    let cluster = Cluster::start_with(1, 1, LONG_FENCE_MS, |c| {
        c.query.query_result_bytes_max = RESULT_BYTES_MAX;
        c.query.query_results_bytes_max_per_node = 2 * RESULT_BYTES_MAX;
        c.query.query_page_bytes_max = 1 << 20;
        c.rpc.dn_rpc_frame_timeout_ms = 2_000;
        c.rpc.dn_rpc_idle_timeout_ms = 5_000;
    })
    .await;
    let address = cluster.endpoints()[0].clone();
    let mut grpc = cluster.client(0).await;
    // 2,000 measurements × 1,000 rows: a row is about 64 KB as results are counted, so the
    // whole device is about 64 MB, twice the 32 MiB a result may hold.
    for part in 0..10 {
        let wide = wide_tablet("root.h.wide", 2_000, part * 100..(part + 1) * 100);
        assert_eq!(insert(&mut grpc, &wide).await.code, 200);
    }

    let answer = grpc
        .execute_statement(proto::ExecuteStatementReq {
            session_id: 1,
            statement: "SELECT * FROM root.h.wide".into(),
            ..Default::default()
        })
        .await
        .expect("an answer")
        .into_inner();
    let status = answer.status.expect("a status");
    assert_eq!(status.code, 700, "{status:?}");
    assert!(
        status.message.contains("query_result_bytes_max"),
        "{status:?}"
    );
    assert_eq!(
        port_metric(&cluster, "query_results_bytes"),
        0,
        "all given back"
    );

    let mut c = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(c.open("root", "root").await.code(), 200);
    let peak_before = status_kib("VmHWM:");
    let first = c
        .execute(
            "executeQueryStatementV2",
            "SELECT * FROM root.h.wide",
            5_000,
        )
        .await;
    let (rows, held) = read_all(&mut c, &cluster, &first).await;
    assert_eq!(rows, 1_000, "every row, a page at a time");
    assert!(
        held > 0 && held <= RESULT_BYTES_MAX,
        "the open result held {held} bytes"
    );
    assert_eq!(port_metric(&cluster, "query_results_bytes"), 0);
    eprintln!(
        "wide SELECT streamed: the result held at most {held} bytes; peak RSS of the test \
         process {peak_before} KiB before, {} KiB after",
        status_kib("VmHWM:")
    );

    // A page holds one row of a narrow device's thousand when the client asks for one.
    let first = c
        .execute(
            "executeQueryStatementV2",
            "SELECT m0000 FROM root.h.wide WHERE time < 10",
            1,
        )
        .await;
    assert_eq!(rows_of(first.success().field(13).list()), 1);
    assert_eq!(read_all(&mut c, &cluster, &first).await.0, 10);
    // A result closed halfway gives back what it held.
    let open = c
        .execute("executeQueryStatementV2", "SELECT * FROM root.h.wide", 5)
        .await;
    assert_eq!(open.code(), 200);
    assert!(port_metric(&cluster, "query_results_bytes") > 0);
    assert_eq!(
        c.close_operation(open.success().field(2).int())
            .await
            .code(),
        200
    );
    assert_eq!(port_metric(&cluster, "query_results_bytes"), 0);
    // The node goes on serving.
    assert_eq!(c.insert_tablet("root.h.after", &[1, 2]).await.code(), 200);

    // A logged-in client that stops halfway through a frame is closed.
    let mut stalled = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(stalled.open("root", "root").await.code(), 200);
    stalled.send_raw(&100i32.to_be_bytes()).await;
    stalled.send_raw(&[0x80, 1]).await;
    assert!(
        stalled.receive().await.is_none(),
        "a stalled frame is closed"
    );
    // So is one that stays silent past the idle timeout (within the reply wait of 30 s).
    let mut idle = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(idle.open("root", "root").await.code(), 200);
    assert!(idle.receive().await.is_none(), "an idle session is closed");
    cluster.stop().await;
}
