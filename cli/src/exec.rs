//! Runs parsed statements over a [`Session`] and turns every answer into an [`Outcome`]: a
//! table of columns and rows that `output` renders as a box or as JSON.
//!
//! INSERT type rules (one tablet per statement, so the server's per-tablet atomicity holds):
//! - a series that exists (its type looked up once per statement with `Session::series_types`,
//!   which the DataNode answers from its schema cache): every
//!   literal of its column is converted to the series' type when that is lossless (an integer to
//!   INT32 / INT64 when it fits, to FLOAT up to 2^24 and to DOUBLE up to 2^53 in magnitude; a
//!   float to FLOAT, rounded to single precision, or to DOUBLE); otherwise the column is sent with
//!   the literals' natural type and the server answers 614 DATA_TYPE_MISMATCH, writing nothing;
//! - a new series: integer and float literals → DOUBLE (IoTDB's `integer_string_infer_type` and
//!   `floating_string_infer_type` defaults), `true`/`false` → BOOLEAN, strings → TEXT;
//! - a column mixing literals of different natural types (e.g. `1` and `'a'`) that cannot all
//!   convert is refused here with 614 and nothing is sent;
//! - NULL leaves the cell empty; a column of NULLs only is left out of the tablet.

use std::collections::{BTreeMap, HashMap};

use common::{DataType, StatusCode, Tablet, Value};
use session::{Session, SessionConfig, SessionError};

use crate::sql::{Insert, Literal, ParseError, Projection, Statement, TimeRange};

mod show;

use show::names;

/// Most rows one query may return (a raw SELECT's joined rows, or one series' points); past it
/// the statement fails with 700 and asks for a narrower time range.
pub const RESULT_ROWS_MAX: usize = 1_000_000;

/// Largest integer magnitude a FLOAT holds exactly (2^24).
const FLOAT_EXACT_INTEGER_MAX: i64 = 1 << 24;
/// Largest integer magnitude a DOUBLE holds exactly (2^53).
const DOUBLE_EXACT_INTEGER_MAX: i64 = 1 << 53;

/// One cell of a result; `None` is SQL NULL.
pub type Cell = Option<Value>;

/// What a statement produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// A query (rows to show, even none) or a statement that only succeeded.
    pub kind: OutcomeKind,
    /// Column names; empty for a non-query.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<Cell>>,
}

/// Whether an [`Outcome`] is a result set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// SELECT and SHOW.
    Query,
    /// Every other statement.
    Done,
}

impl Outcome {
    fn done() -> Outcome {
        Outcome {
            kind: OutcomeKind::Done,
            columns: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn query(columns: Vec<String>, rows: Vec<Vec<Cell>>) -> Outcome {
        debug_assert!(rows.iter().all(|r| r.len() == columns.len()));
        Outcome {
            kind: OutcomeKind::Query,
            columns,
            rows,
        }
    }
}

/// Why a statement failed; each carries an IoTDB status code.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The statement does not parse (700, IoTDB's SQL_PARSE_ERROR number).
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The session or the server refused it.
    #[error("{}", session_message(.0))]
    Session(#[from] SessionError),
    /// Refused here before anything was sent.
    #[error("{message}")]
    Refused {
        /// The status code.
        code: StatusCode,
        /// Why.
        message: String,
    },
}

impl ExecError {
    /// The IoTDB status code; 305 (INTERNAL_SERVER_ERROR) when the session has none (a
    /// malformed answer, an RPC failure that is no status).
    pub fn code(&self) -> i32 {
        let internal = StatusCode::InternalServerError.wire();
        match self {
            ExecError::Parse(_) => StatusCode::IllegalParameter.wire(),
            ExecError::Session(e) => e.code().unwrap_or(internal),
            ExecError::Refused { code, .. } => i32::from(code.code()),
        }
    }

    fn refused(code: StatusCode, message: String) -> ExecError {
        ExecError::Refused { code, message }
    }
}

/// The server's own message for a final status (the code is printed next to it anyway), the
/// whole description otherwise.
fn session_message(e: &SessionError) -> String {
    match e {
        SessionError::Status { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Why no session could be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to {endpoints}: {source}")]
pub struct ConnectError {
    /// The endpoints tried, comma separated.
    pub endpoints: String,
    /// The last failure.
    #[source]
    pub source: SessionError,
}

/// Opens a session on `endpoints`. A first session with one attempt per endpoint finds out
/// quickly whether any DataNode answers (the configured retries could wait minutes for an
/// endpoint that does not exist); only then is the session with `config` opened. DataNode
/// sessions hold no server-side state, so the probe costs one round trip.
pub async fn connect(endpoints: &[String], config: SessionConfig) -> Result<Session, ConnectError> {
    let addresses: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let failed = |source| ConnectError {
        endpoints: endpoints.join(","),
        source,
    };
    let attempts = u32::try_from(endpoints.len())
        .unwrap_or(u32::MAX)
        .clamp(1, session::MAX_ATTEMPTS_LIMIT);
    let probe = SessionConfig {
        max_attempts: attempts.min(config.max_attempts),
        retry_interval_ms: config.retry_interval_ms.min(100),
        ..config.clone()
    };
    Session::connect(&addresses, probe).await.map_err(failed)?;
    Session::connect(&addresses, config).await.map_err(failed)
}

/// Runs one statement. [`Statement::Quit`] is the caller's business and succeeds here.
pub async fn execute(session: &Session, statement: &Statement) -> Result<Outcome, ExecError> {
    match statement {
        Statement::CreateDatabase { database } => {
            session.create_database(database).await?;
            Ok(Outcome::done())
        }
        Statement::DropDatabase { database } => {
            session.drop_database(database).await?;
            Ok(Outcome::done())
        }
        Statement::SetTtl { database, ttl_ms } => {
            session.set_ttl(database, *ttl_ms).await?;
            Ok(Outcome::done())
        }
        Statement::UnsetTtl { database } => {
            session.unset_ttl(database).await?;
            Ok(Outcome::done())
        }
        Statement::RemoveDataNode { data_node_id } => {
            session.remove_data_node(*data_node_id).await?;
            Ok(Outcome::done())
        }
        Statement::CreateTimeseries {
            path,
            data_type,
            encoding,
            compressor,
        } => {
            session
                .create_timeseries_with(
                    path,
                    *data_type,
                    encoding.as_deref(),
                    compressor.as_deref(),
                )
                .await?;
            Ok(Outcome::done())
        }
        Statement::DeleteTimeseries { path } => {
            session.delete_timeseries(path).await?;
            Ok(Outcome::done())
        }
        Statement::Insert(insert) => {
            let tablet = build_tablet(insert, &series_types(session, insert).await?)?;
            session.insert_tablet(&tablet).await?;
            Ok(Outcome::done())
        }
        Statement::Select {
            device,
            measurements,
            range,
        } => select_raw(session, device, measurements, *range).await,
        Statement::SelectLast {
            device,
            measurements,
        } => select_last(session, device, measurements).await,
        Statement::SelectCount {
            device,
            measurements,
            range,
        } => select_count(session, device, measurements, *range).await,
        Statement::ShowDatabases => show::databases(session).await,
        Statement::ShowTimeseries { prefix } => show::timeseries(session, prefix.as_deref()).await,
        Statement::ShowCluster => show::cluster(session).await,
        Statement::ShowRegions => show::regions(session).await,
        Statement::ShowLeases => show::leases(session).await,
        Statement::ShowLocalLease => show::local_lease(session).await,
        Statement::Quit => Ok(Outcome::done()),
    }
}

/// The series of `device` (exactly that device) and their types, in the server's order; series
/// being deleted are left out.
async fn device_series(
    session: &Session,
    device: &str,
) -> Result<Vec<(String, DataType)>, ExecError> {
    Ok(session
        .show_timeseries(&format!("{device}."))
        .await?
        .into_iter()
        .filter(|s| s.device == device && !s.pending_delete)
        .map(|s| (s.measurement, s.data_type))
        .collect())
}

/// The types of those of the INSERT's series that exist. The DataNode answers this from its
/// schema cache, or relays it when it is fenced: an INSERT needs no ConfigNode round trip on a
/// DataNode that cannot make one.
async fn series_types(
    session: &Session,
    insert: &Insert,
) -> Result<HashMap<String, DataType>, ExecError> {
    Ok(session
        .series_types(&insert.device, &insert.measurements)
        .await?
        .into_iter()
        .collect())
}

/// The measurements a projection names: `*` is every series of the device.
async fn resolve(
    session: &Session,
    device: &str,
    projection: &Projection,
) -> Result<Vec<String>, ExecError> {
    match projection {
        Projection::All => Ok(device_series(session, device)
            .await?
            .into_iter()
            .map(|(m, _)| m)
            .collect()),
        Projection::Measurements(names) => Ok(names.clone()),
    }
}

/// One tablet holding every row of `insert`, typed by the rules in the module comment.
pub fn build_tablet(
    insert: &Insert,
    existing: &HashMap<String, DataType>,
) -> Result<Tablet, ExecError> {
    let mut schema: Vec<(&str, DataType)> = Vec::new();
    let mut columns: Vec<Vec<Option<Value>>> = Vec::new();
    for (index, measurement) in insert.measurements.iter().enumerate() {
        let literals: Vec<&Literal> = insert.rows.iter().map(|r| &r.values[index]).collect();
        let path = format!("{}.{measurement}", insert.device);
        if let Some((data_type, values)) = type_column(&path, &literals, existing.get(measurement))?
        {
            schema.push((measurement, data_type));
            columns.push(values);
        }
    }
    if schema.is_empty() {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            format!(
                "every value for {} is NULL: nothing to insert",
                insert.device
            ),
        ));
    }
    let mut tablet = Tablet::new(insert.device.clone(), &schema);
    for (row_index, row) in insert.rows.iter().enumerate() {
        let values = columns.iter().map(|c| c[row_index].clone()).collect();
        tablet.push_row(row.timestamp, values);
    }
    Ok(tablet)
}

/// A column's type and its cells, one per row (`None` is NULL).
type TypedColumn = (DataType, Vec<Option<Value>>);

/// A column's type and values, `None` when it holds only NULLs.
fn type_column(
    path: &str,
    literals: &[&Literal],
    existing: Option<&DataType>,
) -> Result<Option<TypedColumn>, ExecError> {
    if literals.iter().all(|l| **l == Literal::Null) {
        return Ok(None);
    }
    if let Some(&data_type) = existing {
        let converted: Option<Vec<Option<Value>>> = literals
            .iter()
            .map(|l| match l {
                Literal::Null => Some(None),
                l => convert(l, data_type).map(Some),
            })
            .collect();
        if let Some(values) = converted {
            return Ok(Some((data_type, values)));
        }
    }
    let values: Vec<Option<Value>> = literals.iter().map(|l| natural(l)).collect();
    let mut types = values.iter().flatten().map(Value::data_type);
    let first = types.next().expect("a column with a non-NULL literal");
    if let Some(other) = types.find(|t| *t != first) {
        return Err(ExecError::refused(
            StatusCode::DataTypeMismatch,
            format!("values for {path} are of different types ({first} and {other})"),
        ));
    }
    Ok(Some((first, values)))
}

/// `literal` as a value of `data_type`, if the conversion loses nothing (FLOAT rounds a float
/// literal to single precision, as IoTDB does).
pub fn convert(literal: &Literal, data_type: DataType) -> Option<Value> {
    match (literal, data_type) {
        (Literal::Integer(i), DataType::Int32) => i32::try_from(*i).ok().map(Value::Int32),
        (Literal::Integer(i), DataType::Int64) => Some(Value::Int64(*i)),
        (Literal::Integer(i), DataType::Float) => {
            (i.unsigned_abs() <= FLOAT_EXACT_INTEGER_MAX as u64).then_some(Value::Float(*i as f32))
        }
        (Literal::Integer(i), DataType::Double) => (i.unsigned_abs()
            <= DOUBLE_EXACT_INTEGER_MAX as u64)
            .then_some(Value::Double(*i as f64)),
        (Literal::Float(f), DataType::Float) => {
            let single = *f as f32;
            single.is_finite().then_some(Value::Float(single))
        }
        (Literal::Float(f), DataType::Double) => Some(Value::Double(*f)),
        (Literal::Boolean(b), DataType::Boolean) => Some(Value::Boolean(*b)),
        (Literal::Text(s), DataType::Text) => Some(Value::Text(s.clone())),
        _ => None,
    }
}

/// The type a literal gets for a new series: numbers DOUBLE, booleans BOOLEAN, strings TEXT.
pub fn natural(literal: &Literal) -> Option<Value> {
    match literal {
        Literal::Integer(i) => Some(Value::Double(*i as f64)),
        Literal::Float(f) => Some(Value::Double(*f)),
        Literal::Boolean(b) => Some(Value::Boolean(*b)),
        Literal::Text(s) => Some(Value::Text(s.clone())),
        Literal::Null => None,
    }
}

fn too_many_rows() -> ExecError {
    ExecError::refused(
        StatusCode::IllegalParameter,
        format!("the result has more than {RESULT_ROWS_MAX} rows; narrow the time range"),
    )
}

/// Points of one series in `range`, checked against [`RESULT_ROWS_MAX`].
async fn points(
    session: &Session,
    device: &str,
    measurement: &str,
    range: TimeRange,
) -> Result<Vec<(i64, Value)>, ExecError> {
    if range.is_empty() {
        return Ok(Vec::new());
    }
    let points = session
        .query_raw(device, measurement, range.from, range.to)
        .await?;
    if points.len() > RESULT_ROWS_MAX {
        return Err(too_many_rows());
    }
    Ok(points)
}

/// `Time` and one column per series, outer-joined on time.
async fn select_raw(
    session: &Session,
    device: &str,
    projection: &Projection,
    range: TimeRange,
) -> Result<Outcome, ExecError> {
    let measurements = resolve(session, device, projection).await?;
    let width = measurements.len();
    let mut joined: BTreeMap<i64, Vec<Cell>> = BTreeMap::new();
    for (column, measurement) in measurements.iter().enumerate() {
        for (time, value) in points(session, device, measurement, range).await? {
            joined.entry(time).or_insert_with(|| vec![None; width])[column] = Some(value);
            if joined.len() > RESULT_ROWS_MAX {
                return Err(too_many_rows());
            }
        }
    }
    let mut columns = vec!["Time".to_string()];
    columns.extend(measurements.iter().map(|m| format!("{device}.{m}")));
    let rows = joined
        .into_iter()
        .map(|(time, cells)| {
            let mut row = vec![Some(Value::Int64(time))];
            row.extend(cells);
            row
        })
        .collect();
    Ok(Outcome::query(columns, rows))
}

/// IoTDB's last query: `Time`, `Timeseries`, `Value`, `DataType`, one row per series with a
/// point.
async fn select_last(
    session: &Session,
    device: &str,
    projection: &Projection,
) -> Result<Outcome, ExecError> {
    let mut rows = Vec::new();
    for measurement in resolve(session, device, projection).await? {
        if let Some((time, value)) = session.query_last(device, &measurement).await? {
            let data_type = value.data_type().name().to_string();
            rows.push(vec![
                Some(Value::Int64(time)),
                Some(Value::Text(format!("{device}.{measurement}"))),
                Some(value),
                Some(Value::Text(data_type)),
            ]);
        }
    }
    Ok(Outcome::query(
        names(&["Time", "Timeseries", "Value", "DataType"]),
        rows,
    ))
}

/// One row of `COUNT(<series>)` columns.
async fn select_count(
    session: &Session,
    device: &str,
    projection: &Projection,
    range: TimeRange,
) -> Result<Outcome, ExecError> {
    let measurements = resolve(session, device, projection).await?;
    if measurements.is_empty() {
        return Ok(Outcome::query(Vec::new(), Vec::new()));
    }
    let mut columns = Vec::with_capacity(measurements.len());
    let mut row = Vec::with_capacity(measurements.len());
    for measurement in &measurements {
        let count = points(session, device, measurement, range).await?.len();
        columns.push(format!("COUNT({device}.{measurement})"));
        row.push(Some(Value::Int64(
            i64::try_from(count).expect("a count bounded by RESULT_ROWS_MAX"),
        )));
    }
    Ok(Outcome::query(columns, vec![row]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::ast::InsertRow;

    fn insert(measurements: &[&str], rows: Vec<(i64, Vec<Literal>)>) -> Insert {
        Insert {
            device: "root.sg.d1".into(),
            measurements: measurements.iter().map(|m| m.to_string()).collect(),
            rows: rows
                .into_iter()
                .map(|(timestamp, values)| InsertRow { timestamp, values })
                .collect(),
        }
    }

    #[test]
    fn new_series_infer_double_boolean_and_text() {
        let tablet = build_tablet(
            &insert(
                &["a", "b", "c", "d"],
                vec![
                    (
                        1,
                        vec![
                            Literal::Integer(2),
                            Literal::Float(1.5),
                            Literal::Boolean(true),
                            Literal::Text("x".into()),
                        ],
                    ),
                    (
                        2,
                        vec![
                            Literal::Float(0.5),
                            Literal::Null,
                            Literal::Boolean(false),
                            Literal::Null,
                        ],
                    ),
                ],
            ),
            &HashMap::new(),
        )
        .expect("builds");
        assert_eq!(
            tablet.data_types,
            vec![
                DataType::Double,
                DataType::Double,
                DataType::Boolean,
                DataType::Text
            ]
        );
        assert_eq!(tablet.timestamps, vec![1, 2]);
        assert!(tablet.is_null(1, 1) && tablet.is_null(1, 3) && !tablet.is_null(0, 0));
        assert_eq!(tablet.point_count(), 6);
        tablet.validate(&Default::default()).expect("valid");
    }

    #[test]
    fn existing_series_convert_when_lossless() {
        let existing: HashMap<String, DataType> = [
            ("i32", DataType::Int32),
            ("i64", DataType::Int64),
            ("f", DataType::Float),
        ]
        .into_iter()
        .map(|(m, t)| (m.to_string(), t))
        .collect();
        let tablet = build_tablet(
            &insert(
                &["i32", "i64", "f"],
                vec![(
                    1,
                    vec![
                        Literal::Integer(7),
                        Literal::Integer(-8),
                        Literal::Float(0.25),
                    ],
                )],
            ),
            &existing,
        )
        .expect("builds");
        assert_eq!(
            tablet.data_types,
            vec![DataType::Int32, DataType::Int64, DataType::Float]
        );
        // Lossy or impossible conversions keep the natural type, for the server to refuse.
        let tablet = build_tablet(
            &insert(
                &["i32", "f"],
                vec![(
                    1,
                    vec![Literal::Integer(1 << 40), Literal::Text("x".into())],
                )],
            ),
            &existing,
        )
        .expect("builds");
        assert_eq!(tablet.data_types, vec![DataType::Double, DataType::Text]);
    }

    #[test]
    fn conversions() {
        assert_eq!(
            convert(&Literal::Integer(1 << 24), DataType::Float),
            Some(Value::Float(16_777_216.0))
        );
        assert_eq!(
            convert(&Literal::Integer((1 << 24) + 1), DataType::Float),
            None
        );
        assert_eq!(
            convert(&Literal::Integer(i64::from(i32::MAX) + 1), DataType::Int32),
            None
        );
        assert_eq!(convert(&Literal::Float(1.5), DataType::Int64), None);
        assert_eq!(convert(&Literal::Float(1e300), DataType::Float), None);
        assert_eq!(convert(&Literal::Boolean(true), DataType::Text), None);
        assert_eq!(convert(&Literal::Text("1".into()), DataType::Int32), None);
    }

    #[test]
    fn mixed_columns_and_all_null_statements_are_refused() {
        let mixed = build_tablet(
            &insert(
                &["a"],
                vec![
                    (1, vec![Literal::Integer(1)]),
                    (2, vec![Literal::Text("x".into())]),
                ],
            ),
            &HashMap::new(),
        );
        assert!(
            matches!(
                mixed,
                Err(ExecError::Refused {
                    code: StatusCode::DataTypeMismatch,
                    ..
                })
            ),
            "{mixed:?}"
        );
        let nulls = build_tablet(
            &insert(&["a"], vec![(1, vec![Literal::Null])]),
            &HashMap::new(),
        );
        assert!(
            matches!(
                nulls,
                Err(ExecError::Refused {
                    code: StatusCode::IllegalParameter,
                    ..
                })
            ),
            "{nulls:?}"
        );
    }

    #[test]
    fn error_codes() {
        let parse = ExecError::Parse(ParseError {
            position: crate::sql::Position::START,
            message: "x".into(),
        });
        assert_eq!(parse.code(), 700);
        let status = ExecError::Session(SessionError::Status {
            code: 614,
            message: "m".into(),
        });
        assert_eq!((status.code(), status.to_string()), (614, "m".to_string()));
        let fenced = ExecError::Session(SessionError::LeaseFenced {
            endpoint: "e".into(),
            message: "m".into(),
        });
        assert_eq!(fenced.code(), 535);
        assert_eq!(
            ExecError::Session(SessionError::Protocol("p".into())).code(),
            305
        );
    }
}
