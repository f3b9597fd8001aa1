//! IoTDB's client RPC on the session port (`client_rpc`), spoken by a test client built on
//! `thrift-codec`: the handshake, writes and paged reads in both protocols beside gRPC on the
//! same port, and misbehaving clients (no login, wrong password, unknown methods, fields of the
//! wrong type, frames that are not Thrift, oversize frames), none of which disturbs another
//! connection. The official Python client's suite (`tests/python`) covers the same calls end to
//! end.

use std::collections::BTreeMap;
use std::time::Duration;

use thrift_codec::{MessageType, Protocol, Reader, TType, Writer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{Cluster, LONG_FENCE_MS};

/// A decoded Thrift value, enough to look into any reply.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum V {
    Int(i64),
    Bool(bool),
    Bytes(Vec<u8>),
    List(Vec<V>),
    Struct(BTreeMap<i16, V>),
    Other,
}

impl V {
    pub(crate) fn field(&self, id: i16) -> &V {
        match self {
            V::Struct(fields) => fields.get(&id).unwrap_or(&V::Other),
            other => panic!("not a struct: {other:?}"),
        }
    }

    pub(crate) fn int(&self) -> i64 {
        match self {
            V::Int(i) => *i,
            other => panic!("not an integer: {other:?}"),
        }
    }

    pub(crate) fn list(&self) -> &[V] {
        match self {
            V::List(items) => items,
            V::Other => &[],
            other => panic!("not a list: {other:?}"),
        }
    }

    pub(crate) fn text(&self) -> String {
        match self {
            V::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("not a string: {other:?}"),
        }
    }
}

fn read_value(r: &mut Reader, ttype: TType) -> V {
    match ttype {
        TType::Bool => V::Bool(r.bool().unwrap()),
        TType::Byte => V::Int(i64::from(r.i8().unwrap())),
        TType::I16 => V::Int(i64::from(r.i16().unwrap())),
        TType::I32 => V::Int(i64::from(r.i32().unwrap())),
        TType::I64 => V::Int(r.i64().unwrap()),
        TType::String => V::Bytes(r.binary().unwrap().to_vec()),
        TType::List | TType::Set => {
            let (element, n) = r.list_begin().unwrap();
            let items = (0..n).map(|_| read_value(r, element)).collect();
            r.container_end();
            V::List(items)
        }
        TType::Struct => {
            let mut fields = BTreeMap::new();
            r.struct_begin().unwrap();
            while let Some(h) = r.field_begin().unwrap() {
                fields.insert(h.id, read_value(r, h.ttype));
            }
            r.struct_end();
            V::Struct(fields)
        }
        other => {
            r.skip(other).unwrap();
            V::Other
        }
    }
}

/// A reply: a result struct, or an exception's (message, kind).
#[derive(Debug)]
pub(crate) enum Reply {
    Result(V),
    Exception(String, i64),
}

impl Reply {
    pub(crate) fn success(&self) -> &V {
        match self {
            Reply::Result(v) => v.field(0),
            Reply::Exception(message, kind) => panic!("exception {kind}: {message}"),
        }
    }

    /// The TSStatus code of a reply that is a status or a struct holding one in field 1.
    pub(crate) fn code(&self) -> i64 {
        let success = self.success();
        match success.field(1) {
            V::Int(code) => *code,
            status @ V::Struct(_) => status.field(1).int(),
            other => panic!("no status: {other:?}"),
        }
    }
}

pub(crate) struct Client {
    pub(crate) stream: TcpStream,
    protocol: Protocol,
}

impl Client {
    pub(crate) async fn connect(address: &str, protocol: Protocol) -> Client {
        Client {
            stream: TcpStream::connect(address).await.unwrap(),
            protocol,
        }
    }

    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// The next reply frame, or `None` when the server closed the connection.
    pub(crate) async fn receive(&mut self) -> Option<Reply> {
        let mut prefix = [0u8; 4];
        let read =
            tokio::time::timeout(Duration::from_secs(30), self.stream.read_exact(&mut prefix))
                .await
                .expect("a reply within 30 s");
        read.ok()?;
        let mut frame = vec![0u8; u32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut frame).await.unwrap();
        let mut r = Reader::new(&frame, self.protocol);
        let header = r.message_begin().unwrap();
        let body = read_value(&mut r, TType::Struct);
        Some(match header.kind {
            MessageType::Reply => Reply::Result(body),
            MessageType::Exception => Reply::Exception(body.field(1).text(), body.field(2).int()),
            other => panic!("a {other:?} from the server"),
        })
    }

    /// Calls `method` with the arguments `args` writes (the fields of its `_args` struct).
    pub(crate) async fn call(&mut self, method: &str, args: impl FnOnce(&mut Writer)) -> Reply {
        let mut w = Writer::new(self.protocol);
        w.message_begin(method, MessageType::Call, 0);
        w.struct_begin();
        args(&mut w);
        w.field_stop();
        w.struct_end();
        self.send_raw(&thrift_codec::frame(&w.into_bytes()).unwrap())
            .await;
        self.receive().await.expect("a reply")
    }

    pub(crate) async fn open(&mut self, user: &str, password: &str) -> Reply {
        self.call("openSession", |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I32, 1);
            w.i32(2);
            w.field_begin(TType::String, 2);
            w.string("UTC");
            w.field_begin(TType::String, 3);
            w.string(user);
            w.field_begin(TType::String, 4);
            w.string(password);
            w.field_stop();
            w.struct_end();
        })
        .await
    }

    pub(crate) async fn execute(
        &mut self,
        method: &str,
        statement: &str,
        fetch_size: i32,
    ) -> Reply {
        self.call(method, |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(1);
            w.field_begin(TType::String, 2);
            w.string(statement);
            w.field_begin(TType::I64, 3);
            w.i64(1);
            w.field_begin(TType::I32, 4);
            w.i32(fetch_size);
            w.field_stop();
            w.struct_end();
        })
        .await
    }

    /// `fetchResultsV2` with the session and statement ids swapped, as the 2.0.11 client sends
    /// them.
    pub(crate) async fn fetch(&mut self, query_id: i64, fetch_size: i32) -> Reply {
        self.call("fetchResultsV2", |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(4242);
            w.field_begin(TType::String, 2);
            w.string("");
            w.field_begin(TType::I32, 3);
            w.i32(fetch_size);
            w.field_begin(TType::I64, 4);
            w.i64(query_id);
            w.field_begin(TType::Bool, 5);
            w.bool(true);
            w.field_stop();
            w.struct_end();
        })
        .await
    }

    /// `closeOperation` of a query.
    pub(crate) async fn close_operation(&mut self, query_id: i64) -> Reply {
        self.call("closeOperation", |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(4242);
            w.field_begin(TType::I64, 2);
            w.i64(query_id);
            w.field_stop();
            w.struct_end();
        })
        .await
    }

    /// `insertTablet` of one INT64 column `s1` with values `t * 10` (a null at every third row).
    pub(crate) async fn insert_tablet(&mut self, device: &str, times: &[i64]) -> Reply {
        let mut values = Vec::new();
        for t in times {
            values.extend_from_slice(&(t * 10).to_be_bytes());
        }
        let rows = times.len();
        values.push(1);
        let mut bitmap = vec![0u8; rows / 8 + 1];
        for row in (0..rows).filter(|r| r % 3 == 2) {
            bitmap[row / 8] |= 1 << (row % 8);
        }
        values.extend_from_slice(&bitmap);
        let stamps: Vec<u8> = times.iter().flat_map(|t| t.to_be_bytes()).collect();
        self.call("insertTablet", |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(1);
            w.field_begin(TType::String, 2);
            w.string(device);
            w.field_begin(TType::List, 3);
            w.list_begin(TType::String, 1);
            w.string("s1");
            w.field_begin(TType::String, 4);
            w.binary(&values);
            w.field_begin(TType::String, 5);
            w.binary(&stamps);
            w.field_begin(TType::List, 6);
            w.list_begin(TType::I32, 1);
            w.i32(2);
            w.field_begin(TType::I32, 7);
            w.i32(rows as i32);
            w.field_stop();
            w.struct_end();
        })
        .await
    }
}

/// Rows in a list of TsBlocks (each block: i32 columns, a type byte each, i32 rows).
pub(crate) fn rows_of(blocks: &[V]) -> i64 {
    blocks
        .iter()
        .map(|b| match b {
            V::Bytes(bytes) => {
                let columns = i32::from_be_bytes(bytes[0..4].try_into().unwrap()) as usize;
                let at = 4 + columns;
                i64::from(i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()))
            }
            other => panic!("not a TsBlock: {other:?}"),
        })
        .sum()
}

/// Writes, then reads back 17 rows four at a time: every page but the last says more data, and
/// the fetches carry swapped ids.
async fn write_and_page(address: &str, protocol: Protocol, device: &str) {
    let mut c = Client::connect(address, protocol).await;
    let open = c.open("root", "root").await;
    assert_eq!(open.code(), 200);
    assert!(open.success().field(3).int() > 0, "a session id");
    assert_eq!(
        c.call("requestStatementId", |w| {
            w.field_begin(TType::I64, 1);
            w.i64(1);
        })
        .await
        .success()
        .int(),
        1
    );
    let times: Vec<i64> = (1..=25).collect();
    assert_eq!(c.insert_tablet(device, &times).await.code(), 200);
    let first = c
        .execute(
            "executeQueryStatementV2",
            &format!("select s1 from {device}"),
            4,
        )
        .await;
    let resp = first.success();
    assert_eq!(first.code(), 200);
    assert_eq!(
        resp.field(3).list(),
        &[V::Bytes(format!("{device}.s1").into_bytes())]
    );
    assert_eq!(resp.field(5), &V::Bool(false), "the time column is kept");
    assert_eq!(resp.field(6).list(), &[V::Bytes(b"INT64".to_vec())]);
    let mut rows = rows_of(resp.field(13).list());
    assert_eq!(rows, 4);
    let query_id = resp.field(2).int();
    let mut more = resp.field(14) == &V::Bool(true);
    while more {
        let page = c.fetch(query_id, 4).await;
        assert_eq!(page.code(), 200);
        let fetched = rows_of(page.success().field(6).list());
        assert!(fetched > 0, "a page with more data has rows");
        rows += fetched;
        more = page.success().field(7) == &V::Bool(true);
    }
    // Every third row's only cell is null: no row.
    assert_eq!(rows, 25 - 8);
    // Finished: the query is gone, and a fetch answers no rows and no more data.
    let after = c.fetch(query_id, 4).await;
    assert_eq!(after.success().field(2), &V::Bool(false));
    let count = c
        .execute(
            "executeStatementV2",
            &format!("select count(s1) from {device}"),
            0,
        )
        .await;
    assert_eq!(
        count.success().field(5),
        &V::Bool(true),
        "aggregations ignore time"
    );
    assert_eq!(
        count.success().field(3).list(),
        &[V::Bytes(format!("count({device}.s1)").into_bytes())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn iotdb_clients_write_and_page_beside_grpc_on_one_port() {
    let cluster = Cluster::start(2, 1, LONG_FENCE_MS).await;
    let address = cluster.endpoints()[0].clone();
    let mut c = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(c.open("root", "root").await.code(), 200);
    let created = c
        .execute("executeUpdateStatementV2", "CREATE DATABASE root.thrift", 0)
        .await;
    assert_eq!(created.code(), 200);
    assert_eq!(
        created.success().field(3).list(),
        &[] as &[V],
        "a non-query has no columns"
    );
    write_and_page(&address, Protocol::Binary, "root.thrift.binary").await;
    write_and_page(
        &cluster.endpoints()[1],
        Protocol::Compact,
        "root.thrift.compact",
    )
    .await;
    // gRPC on the same port sees the Thrift writes (nulls left out).
    let mut grpc = cluster.client(0).await;
    let points = crate::harness::query_ok(&mut grpc, "root.thrift.binary", 0, i64::MAX).await;
    assert_eq!(points.series[0].timestamps.len(), 25 - 8);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn misbehaving_clients_get_errors_and_disturb_no_other_connection() {
    let cluster = Cluster::start(1, 1, LONG_FENCE_MS).await;
    let address = cluster.endpoints()[0].clone();
    let mut good = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(good.open("root", "root").await.code(), 200);

    // Not logged in: 802 in the call's own reply shape.
    let mut anonymous = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(
        anonymous
            .execute("executeStatementV2", "SHOW DATABASES", 0)
            .await
            .code(),
        802
    );
    assert_eq!(anonymous.insert_tablet("root.x.d", &[1]).await.code(), 802);
    // Wrong password, unknown user, a username of the wrong wire type (skipped, so absent): 801.
    assert_eq!(anonymous.open("root", "wrong").await.code(), 801);
    assert_eq!(anonymous.open("nobody", "root").await.code(), 801);
    let typed_wrong = anonymous
        .call("openSession", |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I32, 1);
            w.i32(2);
            w.field_begin(TType::I32, 3);
            w.i32(7);
            w.field_stop();
            w.struct_end();
        })
        .await;
    assert_eq!(typed_wrong.code(), 801);
    // An unknown method: a TApplicationException (UNKNOWN_METHOD), and the connection goes on.
    match anonymous.call("noSuchMethod", |_| {}).await {
        Reply::Exception(message, kind) => {
            assert_eq!(kind, 1, "{message}");
            assert!(message.contains("noSuchMethod"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A call whose request struct is cut short: a protocol error, the connection goes on.
    anonymous
        .send_raw(
            &thrift_codec::frame(&[
                0x80, 0x01, 0x00, 0x01, 0, 0, 0, 11, b'o', b'p', b'e', b'n', b'S', b'e', b's',
                b's', b'i', b'o', b'n', 0, 0, 0, 0, 12, 0, 1,
            ])
            .unwrap(),
        )
        .await;
    match anonymous.receive().await {
        Some(Reply::Exception(_, kind)) => assert_eq!(kind, 7),
        other => panic!("{other:?}"),
    }
    assert_eq!(anonymous.open("root", "root").await.code(), 200);

    // Bytes that are no Thrift message in a well-formed frame: an exception, no crash.
    let mut garbage = Client::connect(&address, Protocol::Binary).await;
    garbage
        .send_raw(&thrift_codec::frame(b"\x05hello").unwrap())
        .await;
    assert!(matches!(
        garbage.receive().await,
        Some(Reply::Exception(_, 7))
    ));
    // A frame over the limit (before a login, dn_rpc_unauthenticated_frame_bytes_max; after
    // one, dn_rpc_max_message_bytes): an exception, then the connection is closed.
    for (login, key) in [
        (false, "dn_rpc_unauthenticated_frame_bytes_max"),
        (true, "dn_rpc_max_message_bytes"),
    ] {
        let mut oversize = Client::connect(&address, Protocol::Binary).await;
        if login {
            assert_eq!(oversize.open("root", "root").await.code(), 200);
        }
        oversize.send_raw(&(i32::MAX).to_be_bytes()).await;
        match oversize.receive().await {
            Some(Reply::Exception(message, 7)) => assert!(message.contains(key), "{message}"),
            other => panic!("{other:?}"),
        }
        assert!(
            oversize.receive().await.is_none(),
            "closed after an oversize frame"
        );
    }

    // The first connection never noticed.
    let created = good
        .execute("executeUpdateStatementV2", "CREATE DATABASE root.calm", 0)
        .await;
    assert_eq!(created.code(), 200);
    assert_eq!(
        good.insert_tablet("root.calm.d", &[1, 2, 3]).await.code(),
        200
    );
    let unparsable = good.execute("executeStatementV2", "SELEC nothing", 0).await;
    assert_eq!(unparsable.code(), 700);
    cluster.stop().await;
}

/// gRPC calls carry their credentials: none is 802, a wrong password 801, both as
/// `UNAUTHENTICATED` with the code first; a user created over Thrift logs in over gRPC, and a
/// changed password stops working on another DataNode within a few heartbeats.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_calls_are_checked_like_thrift_logins() {
    use proto::session_service_client::SessionServiceClient;
    let cluster = Cluster::start(2, 1, LONG_FENCE_MS).await;
    let address = cluster.endpoints()[0].clone();
    let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let show = || proto::SessionShowReq { session_id: 1 };
    let refusal = |e: tonic::Status| (e.code(), e.message().split(':').next().unwrap().to_string());

    let mut anonymous = SessionServiceClient::new(channel.clone());
    let e = anonymous.show_databases(show()).await.unwrap_err();
    assert_eq!(
        refusal(e),
        (tonic::Code::Unauthenticated, "802".to_string())
    );
    let mut wrong = SessionServiceClient::with_interceptor(
        channel.clone(),
        session::Credentials::new("root", "nope"),
    );
    let e = wrong.show_databases(show()).await.unwrap_err();
    assert_eq!(
        refusal(e),
        (tonic::Code::Unauthenticated, "801".to_string())
    );

    let mut c = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(c.open("root", "root").await.code(), 200);
    let created = c
        .execute("executeUpdateStatementV2", "CREATE USER reader 'r34der'", 0)
        .await;
    assert_eq!(created.code(), 200);
    let mut reader = SessionServiceClient::with_interceptor(
        channel,
        session::Credentials::new("reader", "r34der"),
    );
    let answer = reader.show_databases(show()).await.unwrap().into_inner();
    assert_eq!(answer.status.unwrap().code, 200);
    // Not root: creating a user is refused (803) over gRPC too.
    let refused = reader
        .user_statement(proto::UserStatementReq {
            issuer: "root".into(), // ignored: the call's own user counts
            statement: Some(proto::user_statement_req::Statement::CreateUser(
                proto::CreateUserReq {
                    username: "other".into(),
                    password: "0th3rpw".into(),
                },
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(refused.code, 803, "{refused:?}");

    // DataNode 2 remembers the reader's password from a gRPC call; root changes it through
    // DataNode 1; the next heartbeats carry the users' new fingerprint and DataNode 2 forgets it.
    let channel_2 =
        tonic::transport::Channel::from_shared(format!("http://{}", cluster.endpoints()[1]))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut reader_2 = SessionServiceClient::with_interceptor(
        channel_2,
        session::Credentials::new("reader", "r34der"),
    );
    assert!(reader_2.show_databases(show()).await.is_ok());
    let altered = c
        .execute(
            "executeUpdateStatementV2",
            "ALTER USER reader SET PASSWORD 'n3w-pass'",
            0,
        )
        .await;
    assert_eq!(altered.code(), 200);
    crate::harness::wait_for("DataNode 2 forgets the old password", || {
        let mut reader_2 = reader_2.clone();
        async move {
            reader_2
                .show_databases(proto::SessionShowReq { session_id: 1 })
                .await
                .is_err_and(|e| e.message().starts_with("801"))
        }
    })
    .await;
    cluster.stop().await;
}

/// gRPC `ExecuteStatement` answers a whole result in one message: a result over
/// `dn_rpc_max_message_bytes` is refused with 700 saying so (not a transport error), while the
/// same rows page through IoTDB's protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grpc_result_over_the_message_limit_is_refused_with_a_reason() {
    let cluster = Cluster::start_with(1, 1, LONG_FENCE_MS, |c| {
        c.rpc.dn_rpc_max_message_bytes = 1 << 20;
        c.snapshot.dn_snapshot_chunk_bytes = 256 << 10;
    })
    .await;
    let address = cluster.endpoints()[0].clone();
    let mut c = Client::connect(&address, Protocol::Binary).await;
    assert_eq!(c.open("root", "root").await.code(), 200);
    // 120,000 rows in two tablets (one INT64 column, every third null): 80,000 rows over 1 MiB
    // as gRPC result rows.
    for part in 0..2 {
        let times: Vec<i64> = (1 + part * 60_000..=(part + 1) * 60_000).collect();
        assert_eq!(c.insert_tablet("root.big.d", &times).await.code(), 200);
    }
    let mut grpc = cluster.client(0).await;
    let answer = grpc
        .execute_statement(proto::ExecuteStatementReq {
            session_id: 1,
            statement: "SELECT s1 FROM root.big.d".into(),
            ..Default::default()
        })
        .await
        .expect("an answer, not a transport error")
        .into_inner();
    let status = answer.status.expect("a status");
    assert_eq!(status.code, 700, "{status:?}");
    assert!(
        status.message.contains("dn_rpc_max_message_bytes"),
        "{status:?}"
    );
    // A narrower range fits.
    let narrow = grpc
        .execute_statement(proto::ExecuteStatementReq {
            session_id: 1,
            statement: "SELECT s1 FROM root.big.d WHERE time < 1000".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(narrow.status.unwrap().code, 200);
    assert_eq!(narrow.rows.len(), 999 - 333);
    // IoTDB's protocol pages the whole result.
    let first = c
        .execute(
            "executeQueryStatementV2",
            "SELECT s1 FROM root.big.d",
            10_000,
        )
        .await;
    assert_eq!(first.code(), 200);
    let mut rows = rows_of(first.success().field(13).list());
    let query_id = first.success().field(2).int();
    let mut more = first.success().field(14) == &V::Bool(true);
    while more {
        let page = c.fetch(query_id, 10_000).await;
        rows += rows_of(page.success().field(6).list());
        more = page.success().field(7) == &V::Bool(true);
    }
    assert_eq!(rows, 80_000);
    cluster.stop().await;
}

/// Issue 40's governance: a query whose result is open is listed by SHOW QUERIES on any
/// DataNode, killed from another DataNode (its next fetch answers 715 QUERY_WAS_KILLED), and a
/// client's cancelOperation closes its own query, which is then listed no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn running_queries_are_listed_killed_and_cancelled_across_data_nodes() {
    let cluster = Cluster::start(2, 1, LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let mut a = Client::connect(&endpoints[0], Protocol::Binary).await;
    assert_eq!(a.open("root", "root").await.code(), 200);
    let times: Vec<i64> = (1..=40).collect();
    assert_eq!(a.insert_tablet("root.q.d1", &times).await.code(), 200);
    let first = a
        .execute("executeQueryStatementV2", "select s1 from root.q.d1", 4)
        .await;
    assert_eq!(first.code(), 200);
    assert_eq!(first.success().field(14), &V::Bool(true), "more data");
    let query_id = first.success().field(2).int();

    let mut b = Client::connect(&endpoints[1], Protocol::Binary).await;
    assert_eq!(b.open("root", "root").await.code(), 200);
    let shown = b
        .execute("executeQueryStatementV2", "show queries", 100)
        .await;
    assert_eq!(shown.code(), 200);
    let columns: Vec<String> = shown
        .success()
        .field(3)
        .list()
        .iter()
        .map(V::text)
        .collect();
    assert_eq!(
        columns,
        ["QueryId", "DataNodeId", "ElapsedTime", "Statement", "User"]
    );
    assert_eq!(
        rows_of(shown.success().field(13).list()),
        2,
        "a's open query on the first DataNode, and this SHOW QUERIES"
    );
    let unknown = b
        .execute(
            "executeStatementV2",
            "kill query '20240101_000000_00001_99'",
            0,
        )
        .await;
    assert_eq!(unknown.code(), 714);
    let killed = b.execute("executeStatementV2", "kill all queries", 0).await;
    assert_eq!(killed.code(), 200);
    let page = a.fetch(query_id, 4).await;
    assert_eq!(page.code(), 715, "{page:?}");

    // cancelOperation: a's own query goes, as by closeOperation, and is listed no more.
    let second = a
        .execute("executeQueryStatementV2", "select s1 from root.q.d1", 4)
        .await;
    let second_id = second.success().field(2).int();
    let cancelled = a
        .call("cancelOperation", |w| {
            w.field_begin(TType::Struct, 1);
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(1);
            w.field_begin(TType::I64, 2);
            w.i64(second_id);
            w.field_stop();
            w.struct_end();
        })
        .await;
    assert_eq!(cancelled.code(), 200);
    let after = a.fetch(second_id, 4).await;
    assert_eq!(after.success().field(7), &V::Bool(false), "no more data");
    let shown = b
        .execute("executeQueryStatementV2", "show queries", 100)
        .await;
    assert_eq!(
        rows_of(shown.success().field(13).list()),
        1,
        "SHOW QUERIES alone"
    );
    cluster.stop().await;
}
