//! Scripted `SessionService` doubles: Fencepost's DataNodes never send clients a redirect, so the
//! redirect cache and the connection-failure path are exercised against these.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{DataType, StatusCode, Tablet, Value};
use proto::session_service_server::{SessionService, SessionServiceServer};
use session::{Session, SessionConfig, SessionError};
use tokio::net::TcpListener;
use tonic::{Request, Response};

/// Answers every InsertTablet with `answer` and counts the calls.
struct Double {
    answer: proto::Status,
    inserts: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl SessionService for Double {
    async fn open_session(
        &self,
        _r: Request<proto::OpenSessionReq>,
    ) -> Result<Response<proto::OpenSessionResp>, tonic::Status> {
        Ok(Response::new(proto::OpenSessionResp {
            status: Some(proto::status(StatusCode::Success, "")),
            session_id: 7,
        }))
    }

    async fn insert_tablet(
        &self,
        _r: Request<proto::InsertTabletReq>,
    ) -> Result<Response<proto::Status>, tonic::Status> {
        self.inserts.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(self.answer.clone()))
    }
}

/// Serves a double on `listener`; returns its insert counter.
fn serve(listener: TcpListener, answer: proto::Status) -> Arc<AtomicU64> {
    let inserts = Arc::new(AtomicU64::new(0));
    let double = Double {
        answer,
        inserts: inserts.clone(),
    };
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(SessionServiceServer::new(double))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
        if let Err(e) = served {
            eprintln!("test double stopped: {e}");
        }
    });
    inserts
}

async fn listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = l.local_addr().unwrap().to_string();
    (l, address)
}

fn config() -> SessionConfig {
    SessionConfig {
        max_attempts: 5,
        retry_interval_ms: 10,
        request_timeout_ms: 5000,
        ..SessionConfig::default()
    }
}

fn one_row(device: &str) -> Tablet {
    let mut t = Tablet::new(device, &[("s1", DataType::Int64)]);
    t.push_row(1, vec![Some(Value::Int64(1))]);
    t
}

#[tokio::test]
async fn a_redirect_hint_fills_the_cache_and_the_next_write_to_the_device_follows_it() {
    let (la, a) = listener().await;
    let (lb, b) = listener().await;
    let redirect = proto::status_with_redirect(
        StatusCode::RedirectionRecommend,
        "written; device lives elsewhere",
        Some(proto::parse_endpoint(&b).unwrap()),
    );
    let a_inserts = serve(la, redirect);
    let b_inserts = serve(lb, proto::status(StatusCode::Success, ""));
    let s = Session::connect(&[a.as_str(), b.as_str()], config())
        .await
        .unwrap();

    // 400 is a success: the write is done, the hint is for next time.
    s.insert_tablet(&one_row("root.sg.d1")).await.unwrap();
    assert_eq!(s.cached_endpoint("root.sg.d1"), Some(b.as_str()));
    assert_eq!(s.stats().redirects_recorded, 1);
    assert_eq!(s.stats().redirect_hits, 0);

    s.insert_tablet(&one_row("root.sg.d1")).await.unwrap();
    assert_eq!(s.stats().redirect_hits, 1);
    assert_eq!(b_inserts.load(Ordering::SeqCst), 1, "the hit went to B");
    assert_eq!(a_inserts.load(Ordering::SeqCst), 1);

    // Another device has no hint: it goes to the session's current endpoint.
    s.insert_tablet(&one_row("root.sg.d2")).await.unwrap();
    assert_eq!(a_inserts.load(Ordering::SeqCst), 2);
    assert_eq!(s.stats().redirect_hits, 1);
    assert_eq!(s.stats().retries(), 0);
}

#[tokio::test]
async fn a_536_moves_to_another_endpoint_a_535_is_not_retried_and_attempts_are_bounded() {
    let (la, a) = listener().await;
    let (lb, b) = listener().await;
    let (lc, c) = listener().await;
    let mut fenced = proto::status(StatusCode::MetadataLeaseFencedRetryRequired, "fenced");
    fenced.need_retry = true;
    let a_inserts = serve(la, fenced);
    let b_inserts = serve(lb, proto::status(StatusCode::Success, ""));
    let c_inserts = serve(lc, proto::status(StatusCode::MetadataLeaseFenced, "fenced"));

    let s = Session::connect(&[a.as_str(), b.as_str()], config())
        .await
        .unwrap();
    s.insert_tablet(&one_row("root.sg.d1")).await.unwrap();
    assert_eq!(a_inserts.load(Ordering::SeqCst), 1);
    assert_eq!(b_inserts.load(Ordering::SeqCst), 1);
    assert_eq!(s.stats().retries_by_code.get(&536), Some(&1));
    // The session stays on the endpoint that answered.
    s.insert_tablet(&one_row("root.sg.d1")).await.unwrap();
    assert_eq!(a_inserts.load(Ordering::SeqCst), 1);
    assert_eq!(s.stats().retries(), 1);

    let s = Session::connect(&[c.as_str(), b.as_str()], config())
        .await
        .unwrap();
    let err = s.insert_tablet(&one_row("root.sg.d1")).await.unwrap_err();
    assert!(matches!(err, SessionError::LeaseFenced { .. }), "{err:?}");
    assert_eq!(c_inserts.load(Ordering::SeqCst), 1);
    assert_eq!(s.stats().retries(), 0);

    // Only retryable answers everywhere: bounded attempts, every retry counted.
    let (ld, d) = listener().await;
    let mut again = proto::status(StatusCode::RegionLeaderChangeError, "leader moved");
    again.need_retry = true;
    let d_inserts = serve(ld, again);
    let s = Session::connect(&[d.as_str()], config()).await.unwrap();
    let err = s.insert_tablet(&one_row("root.sg.d1")).await.unwrap_err();
    match &err {
        SessionError::RetriesExhausted { attempts, last } => {
            assert_eq!(*attempts, 5);
            assert_eq!(last.code(), Some(905));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(d_inserts.load(Ordering::SeqCst), 5);
    assert_eq!(s.stats().retries_by_code.get(&905), Some(&4));
}

#[tokio::test]
async fn unreachable_endpoints_are_connection_errors_retried_a_bounded_number_of_times() {
    // A port nobody listens on any more.
    let (l, address) = listener().await;
    drop(l);
    let err = Session::connect(
        &[address.as_str()],
        SessionConfig {
            max_attempts: 3,
            retry_interval_ms: 10,
            request_timeout_ms: 2000,
            ..SessionConfig::default()
        },
    )
    .await
    .unwrap_err();
    match &err {
        SessionError::RetriesExhausted { attempts, last } => {
            assert_eq!(*attempts, 3);
            assert!(
                matches!(**last, SessionError::Connection { .. }),
                "{last:?}"
            );
            assert_eq!(err.code(), Some(1007));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Session::connect(&[], SessionConfig::default()).await,
        Err(SessionError::Config(_))
    ));
    assert!(matches!(
        Session::connect(&["nohost"], SessionConfig::default()).await,
        Err(SessionError::Config(_))
    ));
}
