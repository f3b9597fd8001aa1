//! Users through the gRPC service of one ConfigNode: root/root, CREATE USER by root, logins,
//! who may run which statement, LIST USER, the lock after failed logins, and the users after a
//! restart from the snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use confignode::client::GrpcDataNodeClient;
use confignode::ConfigNodeConfig;
use proto::config_node_service_client::ConfigNodeServiceClient;
use proto::user_statement_req::Statement;
use tokio::net::TcpListener;

const LOCK_MS: u64 = 1500;

pub fn login(username: &str, password: &str) -> proto::AuthenticateReq {
    proto::AuthenticateReq {
        username: username.into(),
        password: password.into(),
    }
}

pub fn create_user(issuer: &str, username: &str, password: &str) -> proto::UserStatementReq {
    proto::UserStatementReq {
        issuer: issuer.into(),
        statement: Some(Statement::CreateUser(proto::CreateUserReq {
            username: username.into(),
            password: password.into(),
        })),
    }
}

fn drop_user(issuer: &str, username: &str) -> proto::UserStatementReq {
    proto::UserStatementReq {
        issuer: issuer.into(),
        statement: Some(Statement::DropUser(proto::DropUserReq {
            username: username.into(),
        })),
    }
}

fn alter_password(issuer: &str, username: &str, password: &str) -> proto::UserStatementReq {
    proto::UserStatementReq {
        issuer: issuer.into(),
        statement: Some(Statement::AlterPassword(proto::AlterUserPasswordReq {
            username: username.into(),
            password: password.into(),
        })),
    }
}

struct Node {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<confignode::Result<()>>,
}

fn start(config: ConfigNodeConfig, listener: TcpListener) -> Node {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(confignode::run_with_listener(
        config,
        listener,
        Arc::new(GrpcDataNodeClient::new(
            Duration::from_millis(500),
            Duration::from_millis(200),
        )),
        async move {
            drop(stopped.await);
        },
    ));
    Node { stop, task }
}

impl Node {
    async fn stop(self) {
        // An Err means the node already ended; the join reports how.
        if self.stop.send(()).is_err() {
            eprintln!("the ConfigNode had already stopped");
        }
        self.task
            .await
            .expect("node task")
            .expect("node ran cleanly");
    }
}

/// The users LIST USER shows, once the node leads.
async fn list_users(cn: &mut ConfigNodeServiceClient<tonic::transport::Channel>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(resp) = cn.list_users(proto::ListUsersReq {}).await {
            let resp = resp.into_inner();
            if resp.status.as_ref().is_some_and(|s| s.code == 200) {
                return resp.users;
            }
        }
        assert!(Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_created_authenticated_refused_locked_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut config = ConfigNodeConfig::default();
    config.node.cn_internal_address = address.clone();
    config.node.cn_data_dir = dir.path().to_path_buf();
    config.node.cn_metrics_address = "127.0.0.1:0".into();
    config.raft.cn_raft_tick_ms = 20;
    config.lease.heartbeat_interval_ms = 100;
    // A snapshot after every entry, so the restart below loads the users from one.
    config.raft.cn_snapshot_interval_entries = 1;
    config.login.login_failures_max = 3;
    config.login.login_lock_ms = LOCK_MS;
    let node = start(config.clone(), listener);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .timeout(Duration::from_secs(10))
        .connect_lazy();
    let mut cn = ConfigNodeServiceClient::new(channel);
    assert_eq!(list_users(&mut cn).await, ["root"]);

    macro_rules! code {
        ($call:ident, $req:expr) => {{
            let status = cn.$call($req).await.unwrap().into_inner();
            (status.code, status.message)
        }};
    }
    let ok = (200, String::new());
    let failed = (801, "Authentication failed.".to_string());

    // root exists from the start with password root.
    assert_eq!(code!(authenticate, login("root", "root")), ok);
    assert_eq!(code!(authenticate, login("root", "wrong")), failed);

    // root creates a user, who logs in; a wrong password and an unknown user answer alike.
    assert_eq!(
        code!(user_statement, create_user("root", "alice", "alice_pw")),
        ok
    );
    assert_eq!(code!(authenticate, login("alice", "alice_pw")), ok);
    assert_eq!(code!(authenticate, login("alice", "Alice_pw")), failed);
    assert_eq!(code!(authenticate, login("nobody", "alice_pw")), failed);

    // A non-root issuer may not manage users, but may change its own password.
    let (code, message) = code!(user_statement, create_user("alice", "bob", "bob_pw"));
    assert_eq!(code, 803, "{message}");
    assert!(message.contains("only root may create users"), "{message}");
    assert_eq!(code!(user_statement, drop_user("alice", "alice")).0, 803);
    assert_eq!(
        code!(user_statement, alter_password("alice", "root", "x1234")).0,
        803
    );
    assert_eq!(
        code!(user_statement, create_user("ghost", "bob", "bob_pw")).0,
        803
    );
    assert_eq!(
        code!(
            user_statement,
            alter_password("alice", "alice", "alice_pw2")
        ),
        ok
    );
    assert_eq!(code!(authenticate, login("alice", "alice_pw")), failed);
    assert_eq!(code!(authenticate, login("alice", "alice_pw2")), ok);

    // The rules and existence.
    let (code, message) = code!(user_statement, create_user("root", "a-b", "pw_1234"));
    assert_eq!(code, 700, "{message}");
    assert!(message.contains("illegal user name"), "{message}");
    assert_eq!(
        code!(user_statement, create_user("root", "bob", "abc")).0,
        700
    );
    assert_eq!(
        code!(user_statement, create_user("root", "bob", "     ")).0,
        700
    );
    assert_eq!(
        code!(user_statement, create_user("root", "alice", "pw_1234")),
        (805, "user alice already exists".to_string())
    );
    assert_eq!(
        code!(user_statement, drop_user("root", "ghost")),
        (804, "user ghost does not exist".to_string())
    );
    assert_eq!(
        code!(user_statement, alter_password("root", "ghost", "pw_1234")).0,
        804
    );
    assert_eq!(
        code!(user_statement, drop_user("root", "root")),
        (
            803,
            "No permission: the root user cannot be dropped".to_string()
        )
    );
    let no_statement = proto::UserStatementReq {
        issuer: "root".into(),
        statement: None,
    };
    assert_eq!(code!(user_statement, no_statement).0, 700);

    assert_eq!(
        code!(user_statement, create_user("root", "bob", "bob_pw")),
        ok
    );
    assert_eq!(
        code!(user_statement, create_user("root", "carol", "carol_pw")),
        ok
    );
    assert_eq!(code!(user_statement, drop_user("root", "carol")), ok);
    assert_eq!(code!(authenticate, login("carol", "carol_pw")), failed);
    assert_eq!(list_users(&mut cn).await, ["alice", "bob", "root"]);

    // root's own password changes; root/root then fails.
    assert_eq!(
        code!(user_statement, alter_password("root", "root", "n3w_root")),
        ok
    );
    assert_eq!(code!(authenticate, login("root", "root")), failed);
    assert_eq!(code!(authenticate, login("root", "n3w_root")), ok);

    // Three failures of bob lock him (the right password too) until the lock ends.
    for _ in 0..3 {
        assert_eq!(code!(authenticate, login("bob", "wrong")), failed);
    }
    let locked_at = Instant::now();
    let (code, message) = code!(authenticate, login("bob", "bob_pw"));
    assert_eq!(code, 822, "{message}");
    assert!(message.contains("User bob is locked"), "{message}");
    assert_eq!(code!(authenticate, login("alice", "alice_pw2")), ok);
    tokio::time::sleep(Duration::from_millis(LOCK_MS + 100).saturating_sub(locked_at.elapsed()))
        .await;
    assert_eq!(code!(authenticate, login("bob", "bob_pw")), ok);

    // A restart keeps the users (from the snapshot, the log replayed on it), root's stored
    // hash included.
    let snapshot = dir.path().join("snapshot");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read(&snapshot)
        .is_ok_and(|b| b.starts_with(confignode::state::MetadataState::SNAPSHOT_MAGIC))
    {
        assert!(Instant::now() < deadline, "no snapshot written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    node.stop().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let listener = loop {
        if let Ok(l) = TcpListener::bind(address.as_str()).await {
            break l;
        }
        assert!(Instant::now() < deadline, "the port stayed taken");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let node = start(config, listener);
    assert_eq!(list_users(&mut cn).await, ["alice", "bob", "root"]);
    assert_eq!(code!(authenticate, login("root", "n3w_root")), ok);
    assert_eq!(code!(authenticate, login("alice", "alice_pw2")), ok);
    node.stop().await;
}
