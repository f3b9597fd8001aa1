//! Every call of IoTDB's client this server takes, read whole from its frame into one typed
//! [`Request`] before anything runs, grouped by the area that answers it: the session, the
//! schema, inserts and queries (as mini-redis reads a frame into a `Command` and applies it).
//! A method outside [`super::METHODS`] is refused here with UNKNOWN_METHOD.

use common::StatusCode;
use iotdb_rpc::messages::{
    self, AggregationQueryReq, CloseOperationReq, CreateAlignedTimeseriesReq,
    CreateMultiTimeseriesReq, CreateTimeseriesReq, ExecuteStatementReq, FetchResultsReq,
    InsertRecordReq, InsertRecordsOfOneDeviceReq, InsertRecordsReq, InsertStringRecordReq,
    InsertStringRecordsOfOneDeviceReq, InsertTabletReq, InsertTabletsReq, LastDataQueryReq,
    OpenSessionReq, RawDataQueryReq, SessionArgs, SetTimeZoneReq,
};
use sql::ExecError;
use thrift_codec::{ApplicationError, Reader, TType};

use super::Refusal;

/// One call, its arguments read.
pub(super) enum Request {
    OpenSession(OpenSessionReq),
    CloseSession,
    Session(SessionCall),
    Schema(SchemaCall),
    Insert(InsertCall),
    Query(QueryCall),
}

/// A logged-in call about the session itself.
pub(super) enum SessionCall {
    RequestStatementId,
    SetTimeZone(SetTimeZoneReq),
    GetTimeZone,
}

/// A logged-in call about the schema.
pub(super) enum SchemaCall {
    SetStorageGroup(String),
    DeleteStorageGroups(Vec<String>),
    CreateTimeseries(CreateTimeseriesReq),
    CreateAlignedTimeseries(CreateAlignedTimeseriesReq),
    CreateMultiTimeseries(CreateMultiTimeseriesReq),
    DeleteTimeseries(Vec<String>),
    DeleteData(messages::DeleteDataReq),
}

/// A logged-in insert.
pub(super) enum InsertCall {
    Tablet(InsertTabletReq),
    Tablets(InsertTabletsReq),
    Record(InsertRecordReq),
    Records(InsertRecordsReq),
    RecordsOfOneDevice(InsertRecordsOfOneDeviceReq),
    StringRecord(InsertStringRecordReq),
    StringRecordsOfOneDevice(InsertStringRecordsOfOneDeviceReq),
    /// `testInsert*`: the client's connectivity probes, answered 200 unread.
    Test,
}

/// A logged-in statement, data query, fetch or close.
pub(super) enum QueryCall {
    /// `executeStatement`, `executeQueryStatement`, `executeUpdateStatement` (V1 and V2).
    Statement(ExecuteStatementReq),
    RawData(RawDataQueryReq),
    LastData(LastDataQueryReq),
    Aggregation(AggregationQueryReq),
    Fetch(FetchResultsReq),
    CloseOperation(CloseOperationReq),
    /// `cancelOperation`: the query closed, as by `closeOperation`, and no longer listed.
    CancelOperation(messages::CancelOperationReq),
}

impl Request {
    /// Whether `method` may be called before `openSession`.
    pub(super) fn before_login(method: &str) -> bool {
        matches!(method, "openSession" | "closeSession")
    }

    /// The call `method` with its arguments read from `r`.
    pub(super) fn read(method: &str, r: &mut Reader<'_>) -> Result<Request, Refusal> {
        Ok(match method {
            "openSession" => Request::OpenSession(request(r, OpenSessionReq::read)?),
            "closeSession" => Request::CloseSession,
            "requestStatementId" | "setTimeZone" | "getTimeZone" => {
                Request::Session(read_session(method, r)?)
            }
            m if m.starts_with("insert") || m.starts_with("testInsert") => {
                Request::Insert(read_insert(m, r)?)
            }
            m if [
                "execute",
                "fetchResults",
                "closeOperation",
                "cancelOperation",
            ]
            .iter()
            .any(|prefix| m.starts_with(prefix)) =>
            {
                Request::Query(read_query(m, r)?)
            }
            m => Request::Schema(read_schema(m, r)?),
        })
    }
}

fn read_session(method: &str, r: &mut Reader<'_>) -> Result<SessionCall, Refusal> {
    Ok(match method {
        "requestStatementId" => {
            SessionArgs::read(r)?;
            SessionCall::RequestStatementId
        }
        "setTimeZone" => SessionCall::SetTimeZone(request(r, SetTimeZoneReq::read)?),
        "getTimeZone" => {
            SessionArgs::read(r)?;
            SessionCall::GetTimeZone
        }
        other => return Err(unknown(other)),
    })
}

fn read_schema(method: &str, r: &mut Reader<'_>) -> Result<SchemaCall, Refusal> {
    Ok(match method {
        "setStorageGroup" => SchemaCall::SetStorageGroup(SessionArgs::read(r)?.name),
        "deleteStorageGroups" => SchemaCall::DeleteStorageGroups(SessionArgs::read(r)?.names),
        "createTimeseries" => SchemaCall::CreateTimeseries(request(r, CreateTimeseriesReq::read)?),
        "createAlignedTimeseries" => {
            SchemaCall::CreateAlignedTimeseries(request(r, CreateAlignedTimeseriesReq::read)?)
        }
        "createMultiTimeseries" => {
            SchemaCall::CreateMultiTimeseries(request(r, CreateMultiTimeseriesReq::read)?)
        }
        "deleteTimeseries" => SchemaCall::DeleteTimeseries(SessionArgs::read(r)?.names),
        "deleteData" => SchemaCall::DeleteData(request(r, messages::DeleteDataReq::read)?),
        other => return Err(unknown(other)),
    })
}

fn read_insert(method: &str, r: &mut Reader<'_>) -> Result<InsertCall, Refusal> {
    Ok(match method {
        "insertTablet" => InsertCall::Tablet(request(r, InsertTabletReq::read)?),
        "insertTablets" => InsertCall::Tablets(request(r, InsertTabletsReq::read)?),
        "insertRecord" => InsertCall::Record(request(r, InsertRecordReq::read)?),
        "insertRecords" => InsertCall::Records(request(r, InsertRecordsReq::read)?),
        "insertRecordsOfOneDevice" => {
            InsertCall::RecordsOfOneDevice(request(r, InsertRecordsOfOneDeviceReq::read)?)
        }
        "insertStringRecord" => InsertCall::StringRecord(request(r, InsertStringRecordReq::read)?),
        "insertStringRecordsOfOneDevice" => InsertCall::StringRecordsOfOneDevice(request(
            r,
            InsertStringRecordsOfOneDeviceReq::read,
        )?),
        "testInsertTablet"
        | "testInsertTablets"
        | "testInsertRecord"
        | "testInsertRecords"
        | "testInsertStringRecord"
        | "testInsertStringRecords" => InsertCall::Test,
        other => return Err(unknown(other)),
    })
}

fn read_query(method: &str, r: &mut Reader<'_>) -> Result<QueryCall, Refusal> {
    Ok(match method {
        "executeStatementV2"
        | "executeQueryStatementV2"
        | "executeUpdateStatementV2"
        | "executeStatement"
        | "executeQueryStatement"
        | "executeUpdateStatement" => QueryCall::Statement(request(r, ExecuteStatementReq::read)?),
        "executeRawDataQueryV2" | "executeRawDataQuery" => {
            QueryCall::RawData(request(r, RawDataQueryReq::read)?)
        }
        "executeLastDataQueryV2" | "executeLastDataQuery" => {
            QueryCall::LastData(request(r, LastDataQueryReq::read)?)
        }
        "executeAggregationQueryV2" | "executeAggregationQuery" => {
            QueryCall::Aggregation(request(r, AggregationQueryReq::read)?)
        }
        "fetchResultsV2" | "fetchResults" => QueryCall::Fetch(request(r, FetchResultsReq::read)?),
        "closeOperation" => QueryCall::CloseOperation(request(r, CloseOperationReq::read)?),
        "cancelOperation" => {
            QueryCall::CancelOperation(request(r, messages::CancelOperationReq::read)?)
        }
        other => return Err(unknown(other)),
    })
}

/// UNKNOWN_METHOD.
pub(super) fn unknown(method: &str) -> Refusal {
    Refusal {
        kind: ApplicationError::UnknownMethod,
        message: format!("Fencepost does not serve the method {method}"),
    }
}

/// Reads `_args { 1: Req req }` with `read`.
fn request<T>(
    r: &mut Reader,
    read: impl FnOnce(&mut Reader) -> thrift_codec::Result<T>,
) -> Result<T, Refusal> {
    let mut read = Some(read);
    let mut out = None;
    messages::read_struct(r, |r, header| {
        if header.id == 1 && header.ttype == TType::Struct {
            if let Some(read) = read.take() {
                out = Some(read(r)?);
                return Ok(true);
            }
        }
        Ok(false)
    })?;
    out.ok_or_else(|| Refusal {
        kind: ApplicationError::ProtocolError,
        message: "the call's request (field 1) is missing".into(),
    })
}

/// `executeAggregationQueryV2`'s request as the SQL executor takes it: IoTDB's `TAggregationType`
/// numbers (COUNT 0, AVG 1, SUM 2, FIRST_VALUE 3, LAST_VALUE 4, MAX_TIME 5, MIN_TIME 6,
/// MAX_VALUE 7, MIN_VALUE 8, EXTREME 9, TIME_DURATION 11, STDDEV 14, STDDEV_POP 15,
/// STDDEV_SAMP 16, VARIANCE 17, VAR_POP 18, VAR_SAMP 19, MODE 12; the others 300), the range
/// `[start, end)`, and windows of `interval` when it is set, `slidingStep` apart when that is set
/// too.
pub(super) fn aggregation_query(
    req: &AggregationQueryReq,
) -> Result<sql::exec::PathAggregation, ExecError> {
    use sql::AggregateFunction as F;
    // `None`: COUNT_IF 10 (its predicate cannot travel here) and COUNT_TIME 13.
    const TYPES: [Option<F>; 20] = [
        Some(F::Count),
        Some(F::Avg),
        Some(F::Sum),
        Some(F::FirstValue),
        Some(F::LastValue),
        Some(F::MaxTime),
        Some(F::MinTime),
        Some(F::MaxValue),
        Some(F::MinValue),
        Some(F::Extreme),
        None,
        Some(F::TimeDuration),
        Some(F::Mode),
        None,
        Some(F::Stddev),
        Some(F::StddevPop),
        Some(F::StddevSamp),
        Some(F::Variance),
        Some(F::VarPop),
        Some(F::VarSamp),
    ];
    let unsupported = |what: String| ExecError::refused(StatusCode::UnsupportedOperation, what);
    let functions = req
        .aggregations
        .iter()
        .map(|&t| {
            usize::try_from(t)
                .ok()
                .and_then(|i| TYPES.get(i).copied().flatten())
                .ok_or_else(|| {
                    unsupported(format!("the aggregation type {t} is not supported yet"))
                })
        })
        .collect::<Result<Vec<F>, ExecError>>()?;
    let range = sql::TimeRange {
        from: req.start_time.unwrap_or(i64::MIN),
        to: req.end_time.unwrap_or(i64::MAX),
    };
    let group_by = match req.interval {
        None => None,
        Some(interval) => {
            let positive = |what: &str, ms: i64| {
                u64::try_from(ms).ok().filter(|ms| *ms > 0).ok_or_else(|| {
                    ExecError::refused(
                        StatusCode::IllegalParameter,
                        format!("the {what} {ms} must be positive"),
                    )
                })
            };
            let interval_ms = positive("interval", interval)?;
            let step_ms = match req.sliding_step {
                Some(step) => positive("sliding step", step)?,
                None => interval_ms,
            };
            Some(sql::GroupByTime {
                start: range.from,
                end: range.to,
                interval_ms,
                step_ms,
                interval_months: 0,
                step_months: 0,
                left_open: false,
            })
        }
    };
    Ok(sql::exec::PathAggregation {
        paths: req.paths.clone(),
        functions,
        range,
        group_by,
    })
}

#[cfg(test)]
mod tests {
    use thrift_codec::{Protocol, Writer};

    use super::*;

    /// Every method served reads into a request of its own (an empty argument struct is a
    /// protocol error or a request, never UNKNOWN_METHOD), and no other method does.
    #[test]
    fn every_served_method_reads_and_no_other() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut w = Writer::new(protocol);
            w.struct_begin();
            w.field_stop();
            w.struct_end();
            let empty = w.into_bytes();
            for method in super::super::METHODS {
                let mut r = Reader::new(&empty, protocol);
                if let Err(refusal) = Request::read(method, &mut r) {
                    assert_ne!(refusal.kind, ApplicationError::UnknownMethod, "{method}");
                }
            }
            for method in [
                "insertTabletX",
                "executeBatchStatement",
                "fetchMetadata",
                "",
            ] {
                let mut r = Reader::new(&empty, protocol);
                let refused = Request::read(method, &mut r).err().map(|e| e.kind);
                assert_eq!(refused, Some(ApplicationError::UnknownMethod), "{method}");
            }
        }
    }
}
