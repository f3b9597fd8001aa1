//! Connections through a partition: a loopback TCP proxy that can black-hole traffic (it keeps
//! every socket open and silently discards what it reads, as a network dropping packets does)
//! and then heal. A connection that was open while the proxy black-holed stays dead after the
//! heal, like one whose TCP retransmissions are still backing off after a long partition; only
//! connections opened after the heal carry traffic.
//!
//! Time bounds are generous (seconds against sub-second keepalive settings): the tests assert
//! what happens, not how fast.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use proto::config_node_service_client::ConfigNodeServiceClient;
use proto::config_node_service_server::{ConfigNodeService, ConfigNodeServiceServer};
use runtime::{ChannelConfig, ChannelPool, ConfigNodeClient, GrpcTransport, PeerService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// Keepalive fast enough for a test: a dead connection is given up within 0.7 s.
fn fast_keepalive() -> ChannelConfig {
    ChannelConfig::with_keepalive(1000, 200, 500)
}

/// Keepalive that never fires during a test, to see the reconnect policy alone.
fn no_keepalive_in_time() -> ChannelConfig {
    ChannelConfig {
        tcp_keepalive_ms: 0,
        tcp_user_timeout_ms: 0,
        ..ChannelConfig::with_keepalive(1000, 60_000, 60_000)
    }
}

/// Far more than any bound the tests expect, far less than the calls' own deadlines.
const BOUND: Duration = Duration::from_secs(10);

#[derive(Default)]
struct ProxyState {
    black_holed: AtomicBool,
    /// The dead flag of every connection so far.
    connections: Mutex<Vec<Arc<AtomicBool>>>,
    accepted: AtomicU64,
    /// Connections the server side closed (EOF or error reading from it).
    closed_by_server: AtomicU64,
}

struct Proxy {
    address: SocketAddr,
    state: Arc<ProxyState>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let state = Arc::new(ProxyState::default());
        let accepting = state.clone();
        tokio::spawn(async move {
            loop {
                let (client, _) = listener.accept().await.unwrap();
                let server = TcpStream::connect(upstream).await.unwrap();
                let dead = Arc::new(AtomicBool::new(
                    accepting.black_holed.load(Ordering::SeqCst),
                ));
                accepting.connections.lock().push(dead.clone());
                accepting.accepted.fetch_add(1, Ordering::SeqCst);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, dead.clone(), None));
                tokio::spawn(pump(
                    server_read,
                    client_write,
                    dead,
                    Some(accepting.clone()),
                ));
            }
        });
        Proxy { address, state }
    }

    /// From now on nothing gets through: open connections die for good, new ones are accepted
    /// but dead too.
    fn black_hole(&self) {
        self.state.black_holed.store(true, Ordering::SeqCst);
        for dead in self.state.connections.lock().iter() {
            dead.store(true, Ordering::SeqCst);
        }
    }

    /// Connections opened from now on carry traffic; the dead ones stay dead.
    fn heal(&self) {
        self.state.black_holed.store(false, Ordering::SeqCst);
    }

    fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }

    fn closed_by_server(&self) -> u64 {
        self.state.closed_by_server.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` while the connection lives; once dead, reads and discards. At EOF a
/// live connection passes the FIN on; a dead one keeps `to` open for ever (a lost FIN).
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    dead: Arc<AtomicBool>,
    server_side: Option<Arc<ProxyState>>,
) {
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if !dead.load(Ordering::SeqCst) && to.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    if let Some(state) = server_side {
        state.closed_by_server.fetch_add(1, Ordering::SeqCst);
    }
    if dead.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    drop(to.shutdown().await);
}

/// A ConfigNode double: `ShowCluster` answers 200, raft batches are counted.
#[derive(Clone, Default)]
struct Double {
    raft_messages: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl ConfigNodeService for Double {
    async fn show_cluster(
        &self,
        _: tonic::Request<proto::ShowClusterReq>,
    ) -> Result<tonic::Response<proto::ShowClusterResp>, tonic::Status> {
        Ok(tonic::Response::new(proto::ShowClusterResp {
            status: Some(proto::status(common::StatusCode::Success, "")),
            ..Default::default()
        }))
    }

    async fn stream_raft_messages(
        &self,
        request: tonic::Request<tonic::Streaming<proto::RaftMessageBatch>>,
    ) -> Result<tonic::Response<proto::RaftMessageResp>, tonic::Status> {
        let counter = self.raft_messages.clone();
        runtime::serve_raft_stream(request.into_inner(), std::future::pending(), |messages| {
            counter.fetch_add(messages.len() as u64, Ordering::SeqCst);
        })
        .await
        .map(tonic::Response::new)
    }
}

/// A gate no test here reaches.
fn unlimited() -> Arc<runtime::ServerGate> {
    runtime::ServerGate::new(runtime::ServerLimits {
        connections_max: 1 << 16,
        requests_max: 1 << 16,
    })
}

/// Serves the double with `config`'s server settings on a free port.
async fn serve(config: ChannelConfig) -> (SocketAddr, Double) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let double = Double::default();
    let service = ConfigNodeServiceServer::new(double.clone());
    tokio::spawn(async move {
        runtime::server(&config)
            .add_service(service)
            .serve_with_incoming(runtime::incoming(listener, &config, &unlimited()))
            .await
            .unwrap();
    });
    (address, double)
}

async fn show_cluster<T>(client: &mut ConfigNodeServiceClient<T>) -> Result<(), tonic::Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let resp = client.show_cluster(proto::ShowClusterReq {}).await?;
    assert_eq!(resp.into_inner().status.unwrap().code, 200);
    Ok(())
}

#[tokio::test]
async fn keepalive_fails_a_call_on_a_black_holed_connection_and_the_first_call_after_heal_succeeds()
{
    let config = fast_keepalive();
    let (server, _) = serve(config).await;
    let proxy = Proxy::start(server).await;
    // A deadline far beyond the test: only keepalive can end a call on the dead connection.
    let pool = ChannelPool::new(config, Duration::from_secs(600));
    let mut client =
        ConfigNodeServiceClient::new(pool.channel(&proxy.address.to_string()).unwrap());
    show_cluster(&mut client).await.unwrap();

    proxy.black_hole();
    let started = Instant::now();
    let outcome = tokio::time::timeout(BOUND, show_cluster(&mut client))
        .await
        .expect("a call on a black-holed connection must fail within the keepalive bound");
    let detected = started.elapsed();
    let status = outcome.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    eprintln!(
        "dead connection detected after {detected:?} (bound {:?})",
        config.dead_connection_bound()
    );

    proxy.heal();
    let healed = Instant::now();
    tokio::time::timeout(BOUND, show_cluster(&mut client))
        .await
        .expect("the first call after the heal must not wait on the dead connection")
        .unwrap();
    eprintln!("first call after heal answered in {:?}", healed.elapsed());
    assert_eq!(
        proxy.accepted(),
        2,
        "the call after the heal used a fresh connection"
    );
}

#[tokio::test]
async fn a_timed_out_call_replaces_the_channel_so_the_next_call_connects_afresh() {
    let config = no_keepalive_in_time();
    let (server, _) = serve(config).await;
    let proxy = Proxy::start(server).await;
    let pool = ChannelPool::new(config, Duration::from_millis(300));
    let mut client =
        ConfigNodeServiceClient::new(pool.channel(&proxy.address.to_string()).unwrap());
    show_cluster(&mut client).await.unwrap();
    assert_eq!(pool.replaced(), 0);

    proxy.black_hole();
    let status = show_cluster(&mut client).await.unwrap_err();
    // What tonic reports for its own timeout.
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    assert_eq!(pool.replaced(), 1);

    proxy.heal();
    // The same client object: the pool hands its next call the fresh channel.
    show_cluster(&mut client).await.unwrap();
    assert_eq!(proxy.accepted(), 2);
    assert_eq!(
        pool.replaced(),
        1,
        "a call that got an answer keeps its channel"
    );
    // An error status from the server is an answer: the channel stays.
    let mut raw = ConfigNodeServiceClient::new(pool.channel(&proxy.address.to_string()).unwrap());
    let unimplemented = raw
        .show_databases(proto::ShowDatabasesReq::default())
        .await
        .unwrap_err();
    assert_eq!(unimplemented.code(), tonic::Code::Unimplemented);
    assert_eq!(pool.replaced(), 1);
    assert_eq!(proxy.accepted(), 2);
}

/// The control for the two tests above: a plain lazily connected tonic channel with a per-call
/// timeout and no keepalive (what every internal client was) keeps sending calls down the dead
/// connection after the heal.
#[tokio::test]
async fn a_plain_tonic_channel_keeps_waiting_on_the_dead_connection_after_heal() {
    let (server, _) = serve(ChannelConfig::default()).await;
    let proxy = Proxy::start(server).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", proxy.address))
        .unwrap()
        .timeout(Duration::from_millis(300))
        .connect_lazy();
    let mut client = ConfigNodeServiceClient::new(channel);
    show_cluster(&mut client).await.unwrap();
    proxy.black_hole();
    assert!(show_cluster(&mut client).await.is_err());
    proxy.heal();
    for _ in 0..3 {
        let status = show_cluster(&mut client).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    }
    assert_eq!(proxy.accepted(), 1, "tonic never left the dead connection");
}

#[tokio::test]
async fn a_server_drops_the_connection_of_a_client_that_stopped_answering() {
    let (server, _) = serve(fast_keepalive()).await;
    let proxy = Proxy::start(server).await;
    // The client side never gives up on its own: no keepalive in time, no deadline in time.
    let pool = ChannelPool::new(no_keepalive_in_time(), Duration::from_secs(600));
    let mut client =
        ConfigNodeServiceClient::new(pool.channel(&proxy.address.to_string()).unwrap());
    show_cluster(&mut client).await.unwrap();
    proxy.black_hole();
    let started = Instant::now();
    while proxy.closed_by_server() == 0 {
        assert!(
            started.elapsed() < BOUND,
            "the server kept a dead client's connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "server dropped the dead client after {:?}",
        started.elapsed()
    );
}

/// The DataNode's lease recovery path: the ConfigNode client gives up on a partitioned
/// ConfigNode within its attempts, and its first call after the heal is answered.
#[tokio::test]
async fn the_confignode_client_fails_fast_behind_a_partition_and_answers_after_heal() {
    let config = fast_keepalive();
    let (server, _) = serve(config).await;
    let proxy = Proxy::start(server).await;
    let client =
        ConfigNodeClient::new(vec![proxy.address.to_string()], Duration::from_secs(600), 3)
            .with_channel_config(config);
    let call =
        || client.call(|mut c| async move { c.show_cluster(proto::ShowClusterReq {}).await });
    call().await.unwrap();

    proxy.black_hole();
    let started = Instant::now();
    let failed = tokio::time::timeout(BOUND, call())
        .await
        .expect("every attempt must fail within the keepalive bound");
    assert_eq!(failed.unwrap_err().attempts, 3);
    eprintln!(
        "3 attempts behind the partition failed in {:?}",
        started.elapsed()
    );

    proxy.heal();
    let healed = Instant::now();
    let answered = tokio::time::timeout(BOUND, call()).await.unwrap().unwrap();
    assert_eq!(answered.status.unwrap().code, 200);
    eprintln!(
        "first ConfigNode call after heal answered in {:?}",
        healed.elapsed()
    );
    assert!(client.channels_replaced() >= 3);
}

/// Raft streams: messages sent behind the partition are lost (raft retransmits), and once it
/// heals a new stream on a fresh connection carries them again.
#[tokio::test]
async fn a_raft_stream_reopens_on_a_fresh_connection_after_heal() {
    let config = fast_keepalive();
    let (server, double) = serve(config).await;
    let proxy = Proxy::start(server).await;
    let addresses: runtime::AddressBook = Arc::default();
    addresses.write().insert(2, proxy.address.to_string());
    let transport = GrpcTransport::new(
        1,
        PeerService::ConfigNode,
        addresses,
        runtime::TransportConfig {
            channel: config,
            ..runtime::TransportConfig::default()
        },
        tokio::runtime::Handle::current(),
    );
    let message = || consensus::RaftMessage {
        group: 1,
        message: Default::default(),
    };
    let delivered = || double.raft_messages.load(Ordering::SeqCst);
    let send_until_delivered = |what: &'static str| {
        let transport = transport.clone();
        let before = delivered();
        async move {
            let started = Instant::now();
            while delivered() == before {
                assert!(started.elapsed() < BOUND, "{what}: no message got through");
                consensus::Transport::send(&transport, 2, vec![message()]);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            started.elapsed()
        }
    };
    send_until_delivered("before the partition").await;
    let sent = &transport.metrics().sent_messages;
    assert!(
        sent.load(Ordering::SeqCst) >= 1,
        "a delivered message is counted as sent"
    );

    proxy.black_hole();
    let before = delivered();
    for _ in 0..10 {
        consensus::Transport::send(&transport, 2, vec![message()]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(delivered(), before, "the black hole let a message through");
    // Let keepalive end the stream on the dead connection.
    tokio::time::sleep(config.dead_connection_bound() * 2).await;

    proxy.heal();
    let took = send_until_delivered("after the heal").await;
    eprintln!("raft messages flowed again {took:?} after heal");
    assert!(proxy.accepted() >= 2);
    // A peer without an address: its messages are dropped, and counted.
    let dropped = &transport.metrics().dropped_messages;
    let before = dropped.load(Ordering::SeqCst);
    consensus::Transport::send(&transport, 3, vec![message()]);
    let started = Instant::now();
    while dropped.load(Ordering::SeqCst) == before {
        assert!(
            started.elapsed() < BOUND,
            "a message without an address is counted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
