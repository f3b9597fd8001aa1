//! A server's bounds ([`runtime::limits`]): a request past `requests_max` is refused at once with
//! `RESOURCE_EXHAUSTED` while exempt raft streams still flow, and a connection past
//! `connections_max` is closed until one closes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::config_node_service_client::ConfigNodeServiceClient;
use proto::config_node_service_server::{ConfigNodeService, ConfigNodeServiceServer};
use runtime::{ChannelConfig, ServerGate, ServerLimits};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

const RAFT_STREAM: &[&str] = &["/fencepost.ConfigNodeService/StreamRaftMessages"];

/// Far more than any bound the tests expect.
const BOUND: Duration = Duration::from_secs(10);

/// `ShowCluster` waits for a permit of `release` (the test decides when calls finish) and
/// counts itself; raft batches are counted (whatever they hold).
#[derive(Clone)]
struct Double {
    release: Arc<Semaphore>,
    started: Arc<AtomicU64>,
    raft_messages: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl ConfigNodeService for Double {
    async fn show_cluster(
        &self,
        _: tonic::Request<proto::ShowClusterReq>,
    ) -> Result<tonic::Response<proto::ShowClusterResp>, tonic::Status> {
        self.started.fetch_add(1, Ordering::SeqCst);
        self.release
            .acquire()
            .await
            .expect("the semaphore is never closed")
            .forget();
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
        runtime::serve_raft_stream(request.into_inner(), std::future::pending(), |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .await
        .map(tonic::Response::new)
    }
}

impl Double {
    fn new() -> Double {
        Double {
            release: Arc::new(Semaphore::new(0)),
            started: Arc::default(),
            raft_messages: Arc::default(),
        }
    }
}

async fn serve(limits: ServerLimits) -> (SocketAddr, Double, Arc<ServerGate>) {
    let config = ChannelConfig::with_keepalive(1000, 1000, 2000);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let double = Double::new();
    let gate = ServerGate::new(limits);
    let service = gate.service(ConfigNodeServiceServer::new(double.clone()), RAFT_STREAM);
    let serving = gate.clone();
    tokio::spawn(async move {
        runtime::server(&config)
            .add_service(service)
            .serve_with_incoming(runtime::incoming(listener, &config, &serving))
            .await
            .unwrap();
    });
    (address, double, gate)
}

async fn client(address: SocketAddr) -> ConfigNodeServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect_lazy();
    ConfigNodeServiceClient::new(channel)
}

/// Calls until one is answered (the client connects again), at most [`BOUND`].
async fn served_again(c: &ConfigNodeServiceClient<tonic::transport::Channel>, what: &str) {
    let deadline = Instant::now() + BOUND;
    loop {
        match c
            .clone()
            .show_cluster(proto::ShowClusterReq::default())
            .await
        {
            Ok(_) => return,
            Err(e) => assert!(Instant::now() < deadline, "{what}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {BOUND:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_request_past_the_limit_is_refused_at_once_while_raft_streams_flow() {
    let (address, double, gate) = serve(ServerLimits {
        connections_max: 16,
        requests_max: 2,
    })
    .await;
    let c = client(address).await;
    let mut running = Vec::new();
    for _ in 0..2 {
        let mut c = c.clone();
        running.push(tokio::spawn(async move {
            c.show_cluster(proto::ShowClusterReq::default()).await
        }));
    }
    until("two calls running", || {
        double.started.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(gate.requests_running(), 2);

    let refused = tokio::time::timeout(
        BOUND,
        c.clone().show_cluster(proto::ShowClusterReq::default()),
    )
    .await
    .expect("a refusal comes at once, not after the running calls")
    .expect_err("a third call is refused");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused}");
    assert!(refused.message().contains("606"), "{refused}");
    assert_eq!(gate.requests_refused.load(Ordering::SeqCst), 1);
    assert_eq!(double.started.load(Ordering::SeqCst), 2, "it never ran");

    // The raft stream is exempt: it is taken though the limit is reached.
    let batch = proto::RaftMessageBatch {
        from_node_id: 1,
        to_node_id: 2,
        messages: Vec::new(),
    };
    let stream = tokio_stream::iter(vec![batch]);
    let mut raft = c.clone();
    let raft_call = tokio::spawn(async move { raft.stream_raft_messages(stream).await });
    until("the raft batch taken while requests are refused", || {
        double.raft_messages.load(Ordering::SeqCst) == 1
    })
    .await;
    raft_call
        .await
        .unwrap()
        .expect("the raft stream is served to its end");

    // Once the running calls finish, calls are taken again.
    double.release.add_permits(3);
    for call in running {
        call.await
            .unwrap()
            .expect("a call within the limit succeeds");
    }
    c.clone()
        .show_cluster(proto::ShowClusterReq::default())
        .await
        .expect("taken once the running calls finished");
    assert_eq!(gate.requests_running(), 0);
}

#[tokio::test]
async fn a_connection_past_the_limit_is_closed_until_one_closes() {
    let (address, double, gate) = serve(ServerLimits {
        connections_max: 1,
        requests_max: 16,
    })
    .await;
    double.release.add_permits(1 << 20);
    let first = client(address).await;
    first
        .clone()
        .show_cluster(proto::ShowClusterReq::default())
        .await
        .expect("the first connection is taken");
    until("one connection open", || gate.connections_open() == 1).await;

    let second = client(address).await;
    let refused = second
        .clone()
        .show_cluster(proto::ShowClusterReq::default())
        .await
        .expect_err("a second connection is closed at accept");
    assert!(
        gate.connections_refused.load(Ordering::SeqCst) >= 1,
        "refused as a connection: {refused}"
    );

    drop(first);
    until("the first connection closed", || {
        gate.connections_open() == 0
    })
    .await;
    served_again(&second, "never taken again").await;
    assert_eq!(gate.connections_open(), 1);
}

/// The session port's gRPC side: a connection that runs no call for the idle timeout is closed
/// (its keepalive PINGs, answered all along, do not count), a call that outlasts the timeout
/// keeps its connection, and the client's next call connects again.
#[tokio::test]
async fn a_grpc_connection_without_calls_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_millis(600);
    let config = ChannelConfig::with_keepalive(100, 1000, 2000);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let double = Double::new();
    let port = runtime::PortGate::new(runtime::PortLimits {
        handshakes_max: 16,
        handshake_timeout: BOUND,
        grpc_connections_max: 16,
        thrift_sessions_max: 1,
        grpc_idle_timeout: Some(idle),
    });
    let (grpc, _thrift) = runtime::incoming_split(listener, &config, &port);
    let gate = ServerGate::new(ServerLimits {
        connections_max: 16,
        requests_max: 16,
    });
    let service = gate.service(ConfigNodeServiceServer::new(double.clone()), &[]);
    tokio::spawn(async move {
        runtime::server(&config)
            .add_service(service)
            .serve_with_incoming(grpc)
            .await
            .unwrap();
    });
    // The client PINGs every 100 ms while idle, so the connection carries bytes throughout.
    let channel = config.connect_lazy(&address.to_string()).unwrap();
    let c = ConfigNodeServiceClient::new(channel);

    // A call three timeouts long keeps its connection.
    let mut slow = c.clone();
    let call =
        tokio::spawn(async move { slow.show_cluster(proto::ShowClusterReq::default()).await });
    until("the call running", || {
        double.started.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(idle * 3).await;
    assert_eq!(
        port.grpc_connections_open(),
        1,
        "closed under a running call"
    );
    double.release.add_permits(1 << 20);
    call.await.unwrap().expect("the long call is answered");

    // Then nothing runs: closed about one timeout after the call's end.
    let ended = Instant::now();
    until("the idle connection closed", || {
        port.grpc_connections_open() == 0
    })
    .await;
    assert!(
        ended.elapsed() >= idle - Duration::from_millis(50),
        "closed early"
    );

    // The next call connects again.
    served_again(&c, "never served again").await;
    assert_eq!(port.grpc_connections_open(), 1);
}
