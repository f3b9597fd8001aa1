//! IoTDB's client RPC (`IClientRPCService`, `IOTDB_PROTOCOL.md`) on `dn_rpc_address`, beside the
//! gRPC session service on the same port: the acceptor peeks each connection's first byte
//! ([`runtime::incoming_split`]); the HTTP/2 preface goes to tonic, anything else is a Thrift
//! framed transport and comes here.
//!
//! A connection is served by one task, one request at a time (IoTDB's clients never pipeline):
//! read a frame, sniff its protocol on the first frame (binary or compact; fixed for the
//! connection after that), answer, repeat. Until a login succeeds a connection is in its
//! handshake, with small frames and a deadline; [`connection`] holds those limits and timeouts. The session —
//! login, time zone, statement id, the open queries — belongs to the connection, as in IoTDB,
//! because the 2.0.11 client sends swapped ids in fetches (§8); queries are keyed by the
//! connection's own query ids. Closing the connection drops the session and its queries.
//!
//! An adapter over the application layer (`ops`): every write takes the gRPC session's path
//! (`ops::write::insert_tablets`: the lease gate, the coordinator's relay when fenced and its
//! retries of 536, atomic per region); statements run in the `sql` crate's executor over
//! [`DataNodeBackend`]. A malformed frame gets a
//! `TApplicationException` and the connection goes on when the frame boundary is intact (it is
//! closed otherwise); it never touches another connection.

mod connection;
mod inserts;
mod request;
mod results;

pub(crate) use crate::ops::sql::{delete_data, exec_status, open_statement, DataNodeBackend};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use common::table::Category;
use common::views::SeriesMeta;
use common::{StatusCode, Tablet};
use iotdb_rpc::messages::{
    self, CreateTimeseriesReq, ExecuteStatementReq, ExecuteStatementResp, FetchResultsReq,
    FetchResultsResp, GetTimeZoneResp, InsertTabletReq, OpenSessionResp, Status,
};
use runtime::ThriftConnection;
use sql::exec::ResultCursor;
use sql::{Backend, ExecError, OutcomeKind, TimeRange};
use thrift_codec::{ApplicationError, MessageType, Protocol, Reader, TType, Writer};

use crate::coordinator::Relay;
use crate::ops::deadline::QueryDeadline;
use crate::parts::Shared;
use inserts::BadRequest;
use request::{InsertCall, QueryCall, Request, SchemaCall, SessionCall};
use results::Pending;

/// IoTDB's `IOTDB_SERVICE_PROTOCOL_V3`, the only client protocol version served.
const PROTOCOL_VERSION: i32 = 2;

/// Every method served; any other answers a `TApplicationException` (UNKNOWN_METHOD).
pub(crate) const METHODS: &[&str] = &[
    "openSession",
    "closeSession",
    "requestStatementId",
    "setTimeZone",
    "getTimeZone",
    "setStorageGroup",
    "deleteStorageGroups",
    "createTimeseries",
    "createAlignedTimeseries",
    "createMultiTimeseries",
    "deleteTimeseries",
    "deleteData",
    "insertTablet",
    "insertTablets",
    "insertRecord",
    "insertRecords",
    "insertRecordsOfOneDevice",
    "insertStringRecord",
    "insertStringRecordsOfOneDevice",
    "testInsertTablet",
    "testInsertTablets",
    "testInsertRecord",
    "testInsertRecords",
    "testInsertStringRecord",
    "testInsertStringRecords",
    "executeStatementV2",
    "executeQueryStatementV2",
    "executeUpdateStatementV2",
    "executeStatement",
    "executeQueryStatement",
    "executeUpdateStatement",
    "executeRawDataQueryV2",
    "executeRawDataQuery",
    "executeLastDataQueryV2",
    "executeLastDataQuery",
    "executeAggregationQueryV2",
    "executeAggregationQuery",
    "fetchResultsV2",
    "fetchResults",
    "closeOperation",
    "cancelOperation",
];

/// Serves the Thrift connections the acceptor hands over until `stop`.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    mut connections: tokio::sync::mpsc::Receiver<ThriftConnection>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            next = connections.recv() => match next {
                Some(ThriftConnection { stream, handshake }) => {
                    let connection = Connection::new(shared.clone(), handshake);
                    running.spawn(connection.run(stream));
                }
                None => break,
            },
            _ = stop.changed() => break,
        }
        while running.try_join_next().is_some() {}
    }
    running.abort_all();
    while running.join_next().await.is_some() {}
}

/// One client connection and its session.
struct Connection {
    shared: Arc<Shared>,
    /// Fixed by the first frame.
    protocol: Option<Protocol>,
    session: Option<Session>,
    /// The connection's place on the port: a handshake until its first login, a session after.
    place: connection::Place,
}

/// A logged-in session.
struct Session {
    /// Runs statements as the logged-in user.
    backend: DataNodeBackend,
    time_zone: String,
    /// `sql_dialect=table`: statements are the table model's.
    table_model: bool,
    /// The table model's current database (`"db"` at login, then `USE`).
    database: Option<String>,
    statement_id: i64,
    next_query_id: i64,
    /// Open queries by id, oldest first.
    queries: BTreeMap<i64, Pending>,
}

/// What a call answers: its `_result` struct's field 0.
enum Answer {
    Status(Status),
    OpenSession(OpenSessionResp),
    Execute(ExecuteStatementResp),
    Fetch(FetchResultsResp),
    TimeZone(GetTimeZoneResp),
    I64(i64),
}

impl Answer {
    fn write(&self, w: &mut Writer) {
        match self {
            Answer::I64(v) => {
                w.field_begin(TType::I64, 0);
                w.i64(*v);
            }
            Answer::Status(s) => {
                w.field_begin(TType::Struct, 0);
                s.write(w);
            }
            Answer::OpenSession(r) => {
                w.field_begin(TType::Struct, 0);
                r.write(w);
            }
            Answer::Execute(r) => {
                w.field_begin(TType::Struct, 0);
                r.write(w);
            }
            Answer::Fetch(r) => {
                w.field_begin(TType::Struct, 0);
                r.write(w);
            }
            Answer::TimeZone(r) => {
                w.field_begin(TType::Struct, 0);
                r.write(w);
            }
        }
    }
}

/// A call that gets a `TApplicationException` instead of a reply.
struct Refusal {
    kind: ApplicationError,
    message: String,
}

impl From<thrift_codec::Error> for Refusal {
    fn from(e: thrift_codec::Error) -> Refusal {
        Refusal {
            kind: ApplicationError::ProtocolError,
            message: e.to_string(),
        }
    }
}

fn status_of(e: &ExecError) -> Status {
    thrift_status(exec_status(e))
}

fn bad_request(e: BadRequest) -> Status {
    let code = if e.mismatch {
        StatusCode::DataTypeMismatch
    } else {
        StatusCode::IllegalParameter
    };
    Status::new(code.wire(), e.message)
}

/// What the create-timeseries calls declare, one entry per path.
struct CreateSpec {
    paths: Vec<String>,
    types: Vec<i32>,
    encodings: Vec<i32>,
    compressors: Vec<i32>,
    props: Vec<BTreeMap<String, String>>,
    meta: Vec<SeriesMeta>,
}

/// A wire status as IoTDB's: a redirect only to a real endpoint (the client connects there).
fn thrift_status(s: common::Status) -> Status {
    let redirect_node = s
        .redirect
        .as_deref()
        .and_then(|address| proto::parse_endpoint(address).ok())
        .filter(|e| !e.host.is_empty() && e.host != "0.0.0.0" && e.port > 0)
        .map(|e| (e.host, e.port as i32));
    // IoTDB's clients read a 302 through its sub-statuses only (the Python client iterates
    // `subStatus`): a 302 never goes out without them.
    let sub_status = if s.parts.is_empty() && s.is(StatusCode::MultipleError) {
        Some(vec![Status::new(
            StatusCode::InternalServerError.wire(),
            s.message.clone(),
        )])
    } else {
        (!s.parts.is_empty()).then(|| s.parts.into_iter().map(thrift_status).collect())
    };
    Status {
        code: s.code.wire(),
        message: (!s.message.is_empty()).then_some(s.message),
        sub_status,
        redirect_node,
    }
}

/// The status of a request of several devices: a redirect hint is about one device and the
/// client reads hints of such requests only from sub-statuses, so a lone 400 is a plain 200.
fn multi_device_status(s: common::Status) -> Status {
    if s.is(StatusCode::RedirectionRecommend) {
        return Status::ok();
    }
    thrift_status(s)
}

impl Connection {
    fn new(shared: Arc<Shared>, handshake: runtime::Handshake) -> Connection {
        Connection {
            shared,
            protocol: None,
            session: None,
            place: connection::Place::Handshake(handshake),
        }
    }

    /// The reply to one frame (never empty: `frame_length` refuses 0): a reply, or an exception
    /// for a frame that is no call of this connection's protocol. The caller holds a request
    /// permit.
    async fn answer(&mut self, frame: &[u8]) -> Vec<u8> {
        let sniffed = thrift_codec::sniff(frame[0]);
        let protocol = match (self.protocol, sniffed) {
            (None, Some(p)) => {
                self.protocol = Some(p);
                p
            }
            (Some(p), Some(q)) if p == q => p,
            (expected, _) => {
                let protocol = expected.unwrap_or(Protocol::Binary);
                return thrift_codec::application_exception(
                    protocol,
                    "",
                    0,
                    ApplicationError::ProtocolError,
                    "not a Thrift message of this connection's protocol (binary or compact)",
                );
            }
        };
        let mut r = Reader::new(frame, protocol);
        let header = match r.message_begin() {
            Ok(h) => h,
            Err(e) => {
                return thrift_codec::application_exception(
                    protocol,
                    "",
                    0,
                    ApplicationError::ProtocolError,
                    &e.to_string(),
                )
            }
        };
        if header.kind != MessageType::Call && header.kind != MessageType::Oneway {
            return thrift_codec::application_exception(
                protocol,
                &header.name,
                header.seqid,
                ApplicationError::InvalidMessageType,
                "a server takes calls only",
            );
        }
        match self.call(&header.name, &mut r).await {
            Ok(answer) => {
                let mut w = Writer::new(protocol);
                w.message_begin(&header.name, MessageType::Reply, header.seqid);
                w.struct_begin();
                answer.write(&mut w);
                w.field_stop();
                w.struct_end();
                w.into_bytes()
            }
            Err(refusal) => thrift_codec::application_exception(
                protocol,
                &header.name,
                header.seqid,
                refusal.kind,
                &refusal.message,
            ),
        }
    }

    async fn call(&mut self, method: &str, r: &mut Reader<'_>) -> Result<Answer, Refusal> {
        if !METHODS.contains(&method) {
            return Err(request::unknown(method));
        }
        if self.session.is_none() && !Request::before_login(method) {
            return self.not_logged_in(method);
        }
        match Request::read(method, r)? {
            Request::OpenSession(req) => Ok(Answer::OpenSession(self.open_session(req).await)),
            Request::CloseSession => {
                self.session = None;
                Ok(Answer::Status(Status::ok()))
            }
            Request::Session(call) => Ok(self.call_session(call)),
            Request::Schema(call) => Ok(Answer::Status(self.call_schema(call).await)),
            Request::Insert(call) => Ok(Answer::Status(self.call_insert(call).await)),
            Request::Query(call) => Ok(self.call_query(call).await),
        }
    }

    /// A logged-in call about the session itself.
    fn call_session(&mut self, call: SessionCall) -> Answer {
        let session = self.session.as_mut().expect("logged in");
        match call {
            SessionCall::RequestStatementId => {
                session.statement_id += 1;
                Answer::I64(session.statement_id)
            }
            SessionCall::SetTimeZone(req) => {
                session.time_zone = req.time_zone;
                Answer::Status(Status::ok())
            }
            SessionCall::GetTimeZone => Answer::TimeZone(GetTimeZoneResp {
                status: Status::ok(),
                time_zone: session.time_zone.clone(),
            }),
        }
    }

    /// A logged-in call about the schema.
    async fn call_schema(&mut self, call: SchemaCall) -> Status {
        match call {
            SchemaCall::SetStorageGroup(database) => {
                self.done(self.backend().create_database(&database, false).await)
            }
            SchemaCall::DeleteStorageGroups(databases) => {
                let mut statuses = Vec::new();
                for database in &databases {
                    let dropped = sql::exec::drop_tree_database(self.backend(), database).await;
                    statuses.push(self.done(dropped));
                }
                combined(statuses)
            }
            SchemaCall::CreateTimeseries(req) => self.create_timeseries(req).await,
            SchemaCall::CreateAlignedTimeseries(req) => {
                let paths = req
                    .measurements
                    .iter()
                    .map(|m| format!("{}.{m}", req.prefix_path))
                    .collect();
                let spec = CreateSpec {
                    paths,
                    types: req.data_types,
                    encodings: req.encodings,
                    compressors: req.compressors,
                    props: Vec::new(),
                    meta: Vec::new(),
                };
                self.create_many(spec).await
            }
            SchemaCall::CreateMultiTimeseries(req) => {
                let n = req.paths.len();
                let mut meta: Vec<SeriesMeta> = vec![SeriesMeta::default(); n];
                for (i, m) in meta.iter_mut().enumerate() {
                    m.alias = req.alias_list.get(i).filter(|a| !a.is_empty()).cloned();
                    m.tags = req.tags_list.get(i).cloned().unwrap_or_default();
                    m.attributes = req.attributes_list.get(i).cloned().unwrap_or_default();
                }
                let spec = CreateSpec {
                    paths: req.paths,
                    types: req.data_types,
                    encodings: req.encodings,
                    compressors: req.compressors,
                    props: req.props_list,
                    meta,
                };
                self.create_many(spec).await
            }
            SchemaCall::DeleteTimeseries(paths) => {
                let mut statuses = Vec::new();
                for path in &paths {
                    statuses.push(self.done(self.backend().delete_timeseries(path).await));
                }
                combined(statuses)
            }
            SchemaCall::DeleteData(req) => self.delete_data(req).await,
        }
    }

    /// A logged-in insert.
    async fn call_insert(&mut self, call: InsertCall) -> Status {
        match call {
            InsertCall::Tablet(req) if req.write_to_table => self.insert_table(req).await,
            InsertCall::Tablet(req) => match inserts::from_tablet(req) {
                Ok(tablet) => thrift_status(self.write(vec![tablet]).await),
                Err(e) => bad_request(e),
            },
            InsertCall::Tablets(req) => match inserts::from_tablets(req) {
                Ok(tablets) => multi_device_status(self.write(tablets).await),
                Err(e) => bad_request(e),
            },
            InsertCall::Record(req) => match inserts::from_record(req) {
                Ok(tablet) => thrift_status(self.write(vec![tablet]).await),
                Err(e) => bad_request(e),
            },
            InsertCall::Records(req) => match inserts::from_records(req) {
                Ok(tablets) => multi_device_status(self.write(tablets).await),
                Err(e) => bad_request(e),
            },
            InsertCall::RecordsOfOneDevice(req) => match inserts::from_records_of_one_device(req) {
                Ok(tablet) => thrift_status(self.write(vec![tablet]).await),
                Err(e) => bad_request(e),
            },
            InsertCall::StringRecord(req) => {
                let (device, rows) = inserts::string_record_rows(req);
                self.write_strings(device, rows).await
            }
            InsertCall::StringRecordsOfOneDevice(req) => {
                match inserts::string_records_of_one_device_rows(req) {
                    Ok((device, rows)) => self.write_strings(device, rows).await,
                    Err(e) => bad_request(e),
                }
            }
            InsertCall::Test => Status::ok(),
        }
    }

    /// A logged-in statement, raw or last data query, fetch or close.
    async fn call_query(&mut self, call: QueryCall) -> Answer {
        match call {
            QueryCall::Statement(req) => Answer::Execute(self.execute(req).await),
            QueryCall::RawData(req) => {
                let range = TimeRange {
                    from: req.start_time,
                    to: req.end_time,
                };
                let charge = self.shared.clients.results.charge();
                let deadline =
                    self.query(0, &format!("executeRawDataQuery {}", req.paths.join(", ")));
                let open = sql::exec::open_raw_paths(self.backend(), &req.paths, range);
                let cursor = deadline.run(open).await;
                Answer::Execute(self.result(cursor, charge, req.fetch_size, deadline).await)
            }
            QueryCall::LastData(req) => {
                let mut charge = self.shared.clients.results.charge();
                let deadline =
                    self.query(0, &format!("executeLastDataQuery {}", req.paths.join(", ")));
                let last = sql::exec::last_paths(self.backend(), &req.paths, req.time, &mut charge);
                let outcome = deadline.run(last).await;
                Answer::Execute(self.built(outcome, charge, req.fetch_size, deadline).await)
            }
            QueryCall::Aggregation(req) => {
                let mut charge = self.shared.clients.results.charge();
                let deadline = self.query(
                    0,
                    &format!("executeAggregationQuery {}", req.paths.join(", ")),
                );
                let outcome = match request::aggregation_query(&req) {
                    Ok(query) => {
                        let run = sql::exec::aggregate_paths(self.backend(), &query, &mut charge);
                        deadline.run(run).await
                    }
                    Err(e) => Err(e),
                };
                Answer::Execute(self.built(outcome, charge, req.fetch_size, deadline).await)
            }
            QueryCall::Fetch(req) => Answer::Fetch(self.fetch(req).await),
            QueryCall::CloseOperation(req) => {
                if let Some(query_id) = req.query_id {
                    let session = self.session.as_mut().expect("logged in");
                    session.queries.remove(&query_id);
                }
                Answer::Status(Status::ok())
            }
            QueryCall::CancelOperation(req) => {
                // The connection runs one call at a time: a query of its own is at rest between
                // fetches here. Dropping it deregisters it and gives back its memory.
                let session = self.session.as_mut().expect("logged in");
                session.queries.remove(&req.query_id);
                Answer::Status(Status::ok())
            }
        }
    }

    /// A statement's deadline from now (`query_timeout_ms`, or the client's `timeout_ms` when
    /// smaller; 0: none sent), registered as running `statement` (`SHOW QUERIES`).
    fn query(&self, client_ms: i64, statement: &str) -> QueryDeadline {
        let ticket = self
            .shared
            .queries
            .register(statement, self.backend().user());
        QueryDeadline::new(self.shared.config.query.query_timeout_ms, client_ms).registered(ticket)
    }

    /// The logged-in user's backend (every call past the login check has a session).
    fn backend(&self) -> &DataNodeBackend {
        &self.session.as_ref().expect("logged in").backend
    }

    /// A statement's outcome as a status.
    fn done(&self, outcome: Result<(), ExecError>) -> Status {
        match outcome {
            Ok(()) => Status::ok(),
            Err(e) => status_of(&e),
        }
    }

    /// `deleteData` (see [`delete_data`]).
    async fn delete_data(&self, req: messages::DeleteDataReq) -> Status {
        self.done(delete_data(self.backend(), &req.paths, req.start_time, req.end_time).await)
    }

    async fn write(&self, tablets: Vec<Tablet>) -> common::Status {
        crate::ops::write::insert_tablets(&self.shared, tablets, Relay::WhenFenced).await
    }

    /// String rows of one device, typed by the series that exist (one lookup), then written.
    async fn write_strings(&self, device: String, rows: Vec<inserts::StringRow>) -> Status {
        let named = inserts::string_measurements(rows.iter().map(|(_, m, _)| m.as_slice()));
        let existing: HashMap<_, _> = match self.backend().series_types(&device, &named).await {
            Ok(types) => types.into_iter().collect(),
            Err(e) => return status_of(&e),
        };
        match inserts::string_rows(device, rows, &existing) {
            Ok(tablet) => thrift_status(self.write(vec![tablet]).await),
            Err(e) => bad_request(e),
        }
    }

    async fn create_timeseries(&self, req: CreateTimeseriesReq) -> Status {
        let spec = CreateSpec {
            paths: vec![req.path],
            types: vec![req.data_type],
            encodings: vec![req.encoding],
            compressors: vec![req.compressor],
            props: vec![req.props],
            meta: vec![SeriesMeta {
                alias: req.alias.filter(|a| !a.is_empty()),
                tags: req.tags,
                attributes: req.attributes,
            }],
        };
        self.create_many(spec).await
    }

    /// Creates each of `spec.paths` with its type, encoding and compressor codes, and its alias,
    /// tags and attributes. Props (IoTDB's deadband settings) are refused: Fencepost has no
    /// deadband filter, and storing them unused would pretend it has.
    async fn create_many(&self, spec: CreateSpec) -> Status {
        let CreateSpec {
            paths,
            types,
            encodings,
            compressors,
            props,
            meta,
        } = spec;
        if types.len() != paths.len()
            || [props.len(), meta.len()]
                .iter()
                .any(|&n| n != 0 && n != paths.len())
        {
            return Status::new(
                StatusCode::IllegalParameter.wire(),
                format!(
                    "{} paths but {} data types, {} props and {} aliases, tags and attributes",
                    paths.len(),
                    types.len(),
                    props.len(),
                    meta.len()
                ),
            );
        }
        let mut statuses = Vec::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            let data_type = match iotdb_rpc::data_type(types[i]) {
                Ok(t) => t,
                Err(e) => {
                    statuses.push(Status::new(StatusCode::IllegalParameter.wire(), e.0));
                    continue;
                }
            };
            let encoding = encodings.get(i).and_then(|&c| iotdb_rpc::encoding_name(c));
            let compressor = compressors
                .get(i)
                .and_then(|&c| iotdb_rpc::compressor_name(c));
            if props.get(i).is_some_and(|p| !p.is_empty()) {
                statuses.push(Status::new(
                    sql::exec::UNSUPPORTED_OPERATION,
                    format!("{path}: props (deadband settings) are not supported"),
                ));
                continue;
            }
            let empty = SeriesMeta::default();
            let created = self
                .backend()
                .create_timeseries(
                    path,
                    data_type,
                    encoding,
                    compressor,
                    meta.get(i).unwrap_or(&empty),
                )
                .await;
            statuses.push(self.done(created));
        }
        combined(statuses)
    }

    async fn execute(&mut self, req: ExecuteStatementReq) -> ExecuteStatementResp {
        let deadline = self.query(req.timeout_ms, &req.statement);
        let session = self.session.as_ref().expect("logged in");
        let mut charge = self.shared.clients.results.charge();
        if !session.table_model {
            let cursor =
                open_statement(self.backend(), &req.statement, &mut charge, &deadline).await;
            return self.result(cursor, charge, req.fetch_size, deadline).await;
        }
        let outcome = match sql::parse_table_statement(&req.statement) {
            Ok(statement) => {
                let database = session.database.as_deref();
                let run =
                    sql::execute_table_charged(&session.backend, database, &statement, &mut charge);
                let query = crate::ops::sql::is_table_query(&statement);
                deadline.run_if(query, run).await
            }
            Err(e) => Err(e.into()),
        };
        match outcome {
            Ok(sql::TableOutcome {
                outcome,
                database: Some(database),
            }) => {
                self.session.as_mut().expect("logged in").database = Some(database.clone());
                ExecuteStatementResp {
                    database: Some(database),
                    ..self
                        .built(Ok(outcome), charge, req.fetch_size, deadline)
                        .await
                }
            }
            Ok(sql::TableOutcome { outcome, .. }) => {
                self.built(Ok(outcome), charge, req.fetch_size, deadline)
                    .await
            }
            Err(e) => self.built(Err(e), charge, req.fetch_size, deadline).await,
        }
    }

    /// A table-model tablet (`writeToTable`): written to the session's current database.
    async fn insert_table(&self, req: InsertTabletReq) -> Status {
        let session = self.session.as_ref().expect("logged in");
        let Some(database) = session.database.clone() else {
            return Status::new(
                StatusCode::IllegalParameter.wire(),
                "no database selected: USE one, or open the session with a database",
            );
        };
        let mut categories = Vec::with_capacity(req.column_categories.len());
        for byte in &req.column_categories {
            match Category::from_wire(*byte) {
                Some(c) => categories.push(c),
                None => {
                    return Status::new(
                        StatusCode::IllegalParameter.wire(),
                        format!("unknown column category {byte}: TAG 0, FIELD 1 or ATTRIBUTE 2"),
                    )
                }
            }
        }
        // Decoded from the request's bytes for each attempt, so the local one needs no copy kept
        // for a relay.
        let decode = || inserts::tablet_of(&req);
        let written = crate::ops::table::write_table(
            &self.shared,
            &session.backend,
            &database,
            &categories,
            decode,
        )
        .await;
        match written {
            Ok(status) => thrift_status(status),
            Err(e) => bad_request(e),
        }
    }

    /// A result built whole as an execute reply (see [`Connection::result`]).
    async fn built(
        &mut self,
        outcome: Result<sql::Outcome, ExecError>,
        charge: sql::ResultCharge,
        fetch_size: i32,
        deadline: QueryDeadline,
    ) -> ExecuteStatementResp {
        let cursor = outcome.map(ResultCursor::built);
        self.result(cursor, charge, fetch_size, deadline).await
    }

    /// A statement's result as an execute reply: a non-query's status, or a query's header and
    /// first page, the rest kept for fetches (a streamed result reads them as they are fetched).
    async fn result(
        &mut self,
        cursor: Result<ResultCursor, ExecError>,
        charge: sql::ResultCharge,
        fetch_size: i32,
        deadline: QueryDeadline,
    ) -> ExecuteStatementResp {
        let cursor = match cursor {
            Ok(c) => c,
            Err(e) => return failed(status_of(&e)),
        };
        if cursor.kind == OutcomeKind::Done {
            return ExecuteStatementResp {
                status: Status::ok(),
                ..ExecuteStatementResp::default()
            };
        }
        let queries_max = self
            .shared
            .config
            .query
            .dn_client_queries_per_connection_max
            .max(1) as usize;
        let page_bytes_max = self.shared.config.page_bytes_max();
        let session = self.session.as_mut().expect("logged in");
        let (header, mut pending) = Pending::new(cursor, charge, deadline);
        let rows = results::page_rows(fetch_size);
        let first = match pending
            .next_page(&session.backend, rows, page_bytes_max)
            .await
        {
            Ok(page) => page,
            Err(e) => return failed(status_of(&e)),
        };
        let query_id = session.next_query_id;
        session.next_query_id += 1;
        let more_data = !pending.is_done();
        if more_data {
            // A client that never reads its results to the end nor closes them cannot grow the
            // server's memory: past the limit the oldest open query goes.
            if session.queries.len() >= queries_max {
                session.queries.pop_first();
            }
            session.queries.insert(query_id, pending);
        }
        ExecuteStatementResp {
            status: Status::ok(),
            query_id: Some(query_id),
            columns: header.columns,
            ignore_time_stamp: header.ignore_time_stamp,
            data_types: header.data_types,
            query_result: first.into_iter().collect(),
            more_data,
            database: None,
        }
    }

    /// The next page of a query; an unknown or finished one answers no rows and no more data. A
    /// streamed query that fails reading its next page answers the failure and is closed.
    async fn fetch(&mut self, req: FetchResultsReq) -> FetchResultsResp {
        let page_bytes_max = self.shared.config.page_bytes_max();
        let session = self.session.as_mut().expect("logged in");
        let Some(pending) = session.queries.get_mut(&req.query_id) else {
            return FetchResultsResp {
                status: Status::ok(),
                ..FetchResultsResp::default()
            };
        };
        let rows = results::page_rows(req.fetch_size);
        let page = pending
            .next_page(&session.backend, rows, page_bytes_max)
            .await;
        let more_data = page.is_ok() && !pending.is_done();
        if !more_data {
            session.queries.remove(&req.query_id);
        }
        match page {
            Ok(page) => FetchResultsResp {
                status: Status::ok(),
                query_result: page.into_iter().collect(),
                more_data,
            },
            Err(e) => FetchResultsResp {
                status: status_of(&e),
                ..FetchResultsResp::default()
            },
        }
    }
}

fn failed(status: Status) -> ExecuteStatementResp {
    ExecuteStatementResp {
        status,
        ..ExecuteStatementResp::default()
    }
}

/// The statuses of a call's parts as one: 200 when all succeeded, the failure when one part
/// failed, else 302 with every part's status.
fn combined(mut statuses: Vec<Status>) -> Status {
    let failed = statuses.iter().filter(|s| s.code != 200).count();
    match (failed, statuses.len()) {
        (0, _) => Status::ok(),
        (_, 1) => statuses.pop().expect("one status"),
        (failed, n) => Status {
            code: StatusCode::MultipleError.wire(),
            message: Some(format!("{failed} of {n} parts failed")),
            sub_status: Some(statuses),
            redirect_node: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_redirect_is_dropped_from_multi_device_calls_and_kept_real() {
        let elsewhere = |address: &str| common::Status {
            redirect: Some(address.to_string()),
            ..common::Status::new(StatusCode::RedirectionRecommend, "elsewhere")
        };
        let redirect = elsewhere("10.0.0.2:6667");
        assert_eq!(multi_device_status(redirect.clone()), Status::ok());
        let single = thrift_status(redirect);
        assert_eq!(single.code, 400);
        assert_eq!(single.redirect_node, Some(("10.0.0.2".to_string(), 6667)));
        // An endpoint no client can reach is never sent.
        let unspecified = elsewhere("0.0.0.0:6667");
        assert_eq!(thrift_status(unspecified).redirect_node, None);
    }

    /// The official Python client reads a 302 through `subStatus` only: a 302 without it made
    /// `TypeError: 'NoneType' object is not iterable` (issue 38). Every 302 carries them.
    #[test]
    fn every_302_carries_its_sub_statuses() {
        let parts = ExecError::Parts {
            message: "1 of 2 parts failed".into(),
            parts: vec![(200, String::new()), (536, "fenced".into())],
        };
        let s = status_of(&parts);
        assert_eq!(s.code, 302);
        let sub = s.sub_status.expect("sub-statuses");
        assert_eq!(
            sub.iter().map(|s| s.code).collect::<Vec<_>>(),
            [200, 536],
            "in request order"
        );
        // A 302 from anywhere else, even without parts, still has one.
        let bare = ExecError::Status {
            code: 302,
            message: "parts failed".into(),
        };
        let s = status_of(&bare);
        assert_eq!(s.code, 302);
        assert_eq!(s.sub_status.map(|v| v.len()), Some(1));
        // And a wire status of a coordinator's aggregate keeps its parts through the backend.
        let aggregated = crate::coordinator::aggregate(vec![
            common::Status::ok(),
            common::Status::new(StatusCode::DataTypeMismatch, "type"),
        ]);
        let e = crate::ops::sql::status_result(&aggregated).unwrap_err();
        let s = status_of(&e);
        assert_eq!(s.code, 302);
        assert_eq!(s.sub_status.map(|v| v.len()), Some(2));
    }

    #[test]
    fn statuses_of_parts_combine_as_iotdb_does() {
        assert_eq!(combined(vec![Status::ok(), Status::ok()]), Status::ok());
        let failed = Status::new(614, "type");
        assert_eq!(combined(vec![failed.clone()]), failed);
        let both = combined(vec![Status::ok(), failed.clone()]);
        assert_eq!(both.code, 302);
        assert_eq!(both.sub_status, Some(vec![Status::ok(), failed]));
    }
}
