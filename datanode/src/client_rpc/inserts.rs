//! IoTDB's insert requests as tablets. A tablet request is one tablet; a record is a one-row
//! tablet; the rows of one device (`insertRecordsOfOneDevice` and its string form) are one
//! tablet over the union of their measurements, so they are written atomically per region like
//! any tablet. String values take the type of the series when it exists, else IoTDB's inference.

use std::collections::HashMap;

use common::{DataType, Tablet, Value};
use iotdb_rpc::messages::{
    InsertRecordReq, InsertRecordsOfOneDeviceReq, InsertRecordsReq, InsertStringRecordReq,
    InsertStringRecordsOfOneDeviceReq, InsertTabletReq, InsertTabletsReq,
};
use iotdb_rpc::values;

/// Why a request makes no tablet: a message for 700 ILLEGAL_PARAMETER (or, with `mismatch`,
/// 614 DATA_TYPE_MISMATCH).
#[derive(Debug)]
pub(crate) struct BadRequest {
    pub message: String,
    pub mismatch: bool,
}

impl BadRequest {
    fn new(message: impl Into<String>) -> BadRequest {
        BadRequest {
            message: message.into(),
            mismatch: false,
        }
    }
}

impl From<iotdb_rpc::LayoutError> for BadRequest {
    fn from(e: iotdb_rpc::LayoutError) -> BadRequest {
        BadRequest::new(e.0)
    }
}

type Result<T> = std::result::Result<T, BadRequest>;

fn types(codes: &[i32]) -> Result<Vec<DataType>> {
    codes
        .iter()
        .map(|&c| iotdb_rpc::data_type(c).map_err(BadRequest::from))
        .collect()
}

fn tablet(
    device: String,
    measurements: Vec<String>,
    type_codes: &[i32],
    size: i32,
    value_bytes: &[u8],
    time_bytes: &[u8],
) -> Result<Tablet> {
    let data_types = types(type_codes)?;
    if measurements.len() != data_types.len() {
        return Err(BadRequest::new(format!(
            "tablet for {device}: {} measurements but {} types",
            measurements.len(),
            data_types.len()
        )));
    }
    let rows = usize::try_from(size)
        .map_err(|_| BadRequest::new(format!("tablet for {device}: size {size}")))?;
    let timestamps = values::timestamps(time_bytes, rows)?;
    let (columns, bitmaps) = values::tablet_columns(&data_types, rows, value_bytes)?
        .into_iter()
        .unzip();
    Ok(Tablet {
        device,
        measurements,
        data_types,
        timestamps,
        columns,
        bitmaps,
    })
}

/// `insertTablet`.
pub(crate) fn from_tablet(req: InsertTabletReq) -> Result<Tablet> {
    tablet(
        req.prefix_path,
        req.measurements,
        &req.types,
        req.size,
        &req.values,
        &req.timestamps,
    )
}

/// `insertTablet`'s tablet, decoded from the request it leaves whole (a table write may decode it
/// twice: to write, then to relay).
pub(crate) fn tablet_of(req: &InsertTabletReq) -> Result<Tablet> {
    tablet(
        req.prefix_path.clone(),
        req.measurements.clone(),
        &req.types,
        req.size,
        &req.values,
        &req.timestamps,
    )
}

/// `insertTablets`.
pub(crate) fn from_tablets(req: InsertTabletsReq) -> Result<Vec<Tablet>> {
    let n = req.prefix_paths.len();
    if [
        req.measurements_list.len(),
        req.values_list.len(),
        req.timestamps_list.len(),
        req.types_list.len(),
        req.size_list.len(),
    ]
    .iter()
    .any(|&len| len != n)
    {
        return Err(BadRequest::new(format!(
            "insertTablets: the lists of {n} devices differ in length"
        )));
    }
    let mut tablets = Vec::with_capacity(n);
    let parts = req
        .prefix_paths
        .into_iter()
        .zip(req.measurements_list)
        .zip(req.values_list)
        .zip(req.timestamps_list)
        .zip(req.types_list)
        .zip(req.size_list);
    for (((((device, measurements), values), times), types), size) in parts {
        tablets.push(tablet(device, measurements, &types, size, &values, &times)?);
    }
    Ok(tablets)
}

/// A one-row tablet of typed values.
fn row_tablet(device: String, measurements: &[String], time: i64, row: Vec<Value>) -> Tablet {
    let schema: Vec<(&str, DataType)> = measurements
        .iter()
        .zip(&row)
        .map(|(m, v)| (m.as_str(), v.data_type()))
        .collect();
    let mut tablet = Tablet::new(device, &schema);
    tablet.push_row(time, row.into_iter().map(Some).collect());
    tablet
}

fn record_values(device: &str, measurements: &[String], bytes: &[u8]) -> Result<Vec<Value>> {
    values::record(bytes, measurements.len())
        .map_err(|e| BadRequest::new(format!("record for {device}: {}", e.0)))
}

/// `insertRecord`.
pub(crate) fn from_record(req: InsertRecordReq) -> Result<Tablet> {
    let row = record_values(&req.prefix_path, &req.measurements, &req.values)?;
    Ok(row_tablet(
        req.prefix_path,
        &req.measurements,
        req.timestamp,
        row,
    ))
}

/// `insertRecords`: one tablet per record.
pub(crate) fn from_records(req: InsertRecordsReq) -> Result<Vec<Tablet>> {
    let n = req.prefix_paths.len();
    if req.measurements_list.len() != n || req.values_list.len() != n || req.timestamps.len() != n {
        return Err(BadRequest::new(format!(
            "insertRecords: the lists of {n} records differ in length"
        )));
    }
    let mut tablets = Vec::with_capacity(n);
    for (((device, measurements), bytes), time) in req
        .prefix_paths
        .into_iter()
        .zip(req.measurements_list)
        .zip(req.values_list)
        .zip(req.timestamps)
    {
        let row = record_values(&device, &measurements, &bytes)?;
        tablets.push(row_tablet(device, &measurements, time, row));
    }
    Ok(tablets)
}

/// Rows of one device, possibly of different measurements, as one tablet over their union
/// (absent cells null). A measurement given values of two types is refused (614).
fn union_tablet(device: String, rows: Vec<(i64, Vec<(String, Value)>)>) -> Result<Tablet> {
    let mut order: Vec<(String, DataType)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (_, cells) in &rows {
        for (m, v) in cells {
            match index.get(m) {
                Some(&i) if order[i].1 != v.data_type() => {
                    return Err(BadRequest {
                        message: format!(
                            "{device}.{m} is given values of two types ({} and {})",
                            order[i].1,
                            v.data_type()
                        ),
                        mismatch: true,
                    })
                }
                Some(_) => {}
                None => {
                    index.insert(m.clone(), order.len());
                    order.push((m.clone(), v.data_type()));
                }
            }
        }
    }
    let schema: Vec<(&str, DataType)> = order.iter().map(|(m, t)| (m.as_str(), *t)).collect();
    let mut tablet = Tablet::new(device, &schema);
    for (time, cells) in rows {
        let mut row = vec![None; order.len()];
        for (m, v) in cells {
            row[index[&m]] = Some(v);
        }
        tablet.push_row(time, row);
    }
    Ok(tablet)
}

/// `insertRecordsOfOneDevice`.
pub(crate) fn from_records_of_one_device(req: InsertRecordsOfOneDeviceReq) -> Result<Tablet> {
    let n = req.timestamps.len();
    if req.measurements_list.len() != n || req.values_list.len() != n {
        return Err(BadRequest::new(format!(
            "insertRecordsOfOneDevice: the lists of {n} rows differ in length"
        )));
    }
    let mut rows = Vec::with_capacity(n);
    for ((measurements, bytes), time) in req
        .measurements_list
        .into_iter()
        .zip(req.values_list)
        .zip(req.timestamps)
    {
        let values = record_values(&req.prefix_path, &measurements, &bytes)?;
        rows.push((time, measurements.into_iter().zip(values).collect()));
    }
    union_tablet(req.prefix_path, rows)
}

/// The measurements string values name, for the type lookup before [`string_rows`].
pub(crate) fn string_measurements<'a>(rows: impl Iterator<Item = &'a [String]>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for measurements in rows {
        for m in measurements {
            if seen.insert(m.as_str()) {
                out.push(m.clone());
            }
        }
    }
    out
}

/// A string value as a value of the series' type when it exists (614 when it does not parse as
/// one), else by IoTDB's inference: `true`/`false` BOOLEAN, a number DOUBLE (IoTDB's
/// `integer_string_infer_type` and `floating_string_infer_type` defaults), anything else TEXT.
fn string_value(path: &str, text: &str, existing: Option<DataType>) -> Result<Value> {
    let mismatch = |t: DataType| BadRequest {
        message: format!("{path} is {t}; '{text}' is not a {t} value"),
        mismatch: true,
    };
    let trimmed = text.trim();
    Ok(match existing {
        Some(DataType::Text) => Value::Text(text.to_string()),
        Some(t @ DataType::Boolean) => match trimmed.to_ascii_lowercase().as_str() {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => return Err(mismatch(t)),
        },
        Some(t @ DataType::Int32) => Value::Int32(trimmed.parse().map_err(|_| mismatch(t))?),
        Some(t @ DataType::Int64) => Value::Int64(trimmed.parse().map_err(|_| mismatch(t))?),
        Some(t @ DataType::Float) => Value::Float(trimmed.parse().map_err(|_| mismatch(t))?),
        Some(t @ DataType::Double) => Value::Double(trimmed.parse().map_err(|_| mismatch(t))?),
        Some(DataType::String) => Value::String(text.to_string()),
        Some(t @ DataType::Timestamp) => {
            Value::Timestamp(trimmed.parse().map_err(|_| mismatch(t))?)
        }
        Some(t @ DataType::Date) => {
            Value::Date(common::date::parse(trimmed).ok_or_else(|| mismatch(t))?)
        }
        Some(t @ DataType::Blob) => Value::Blob(blob_text(trimmed).ok_or_else(|| mismatch(t))?),
        None => {
            if trimmed.eq_ignore_ascii_case("true") || trimmed.eq_ignore_ascii_case("false") {
                Value::Boolean(trimmed.eq_ignore_ascii_case("true"))
            } else if let Some(d) = number(trimmed) {
                Value::Double(d)
            } else {
                Value::Text(text.to_string())
            }
        }
    })
}

/// The bytes of a BLOB written as text: `0x0a1b` or `X'0a1b'`.
fn blob_text(text: &str) -> Option<Vec<u8>> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .or_else(|| {
            let quoted = text
                .strip_prefix("X'")
                .or_else(|| text.strip_prefix("x'"))?;
            quoted.strip_suffix('\'')
        })?;
    common::blob_from_hex(digits)
}

/// A decimal number as IoTDB's inference reads one (`1`, `-2.5`, `1e3`, `NaN`); not `inf` or
/// hexadecimal.
fn number(text: &str) -> Option<f64> {
    if text == "NaN" {
        return Some(f64::NAN);
    }
    let plausible = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'))
        && text.chars().any(|c| c.is_ascii_digit());
    plausible.then(|| text.parse().ok()).flatten()
}

/// A row of string values: its time, measurements and values (parallel lists).
pub(crate) type StringRow = (i64, Vec<String>, Vec<String>);

/// Rows of string values of one device as one tablet, typed by `existing` (the series that
/// exist) and inference for the rest.
pub(crate) fn string_rows(
    device: String,
    rows: Vec<StringRow>,
    existing: &HashMap<String, DataType>,
) -> Result<Tablet> {
    let mut typed = Vec::with_capacity(rows.len());
    for (time, measurements, texts) in rows {
        if measurements.len() != texts.len() {
            return Err(BadRequest::new(format!(
                "a row of {device} has {} measurements and {} values",
                measurements.len(),
                texts.len()
            )));
        }
        let mut cells = Vec::with_capacity(measurements.len());
        for (m, text) in measurements.into_iter().zip(texts) {
            let path = format!("{device}.{m}");
            let value = string_value(&path, &text, existing.get(&m).copied())?;
            cells.push((m, value));
        }
        typed.push((time, cells));
    }
    union_tablet(device, typed)
}

/// `insertStringRecord`'s one row.
pub(crate) fn string_record_rows(req: InsertStringRecordReq) -> (String, Vec<StringRow>) {
    (
        req.prefix_path,
        vec![(req.timestamp, req.measurements, req.values)],
    )
}

/// `insertStringRecordsOfOneDevice`'s rows.
pub(crate) fn string_records_of_one_device_rows(
    req: InsertStringRecordsOfOneDeviceReq,
) -> Result<(String, Vec<StringRow>)> {
    let n = req.timestamps.len();
    if req.measurements_list.len() != n || req.values_list.len() != n {
        return Err(BadRequest::new(format!(
            "insertStringRecordsOfOneDevice: the lists of {n} rows differ in length"
        )));
    }
    let rows = req
        .timestamps
        .into_iter()
        .zip(req.measurements_list)
        .zip(req.values_list)
        .map(|((t, m), v)| (t, m, v))
        .collect();
    Ok((req.prefix_path, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_values_follow_the_series_type_or_inference() {
        let v = |text: &str, t: Option<DataType>| string_value("root.sg.d.s", text, t);
        assert_eq!(
            v("12", Some(DataType::Text)).unwrap(),
            Value::Text("12".into())
        );
        assert_eq!(v("12", Some(DataType::Int32)).unwrap(), Value::Int32(12));
        assert_eq!(v(" 1.5", Some(DataType::Float)).unwrap(), Value::Float(1.5));
        assert_eq!(
            v("TRUE", Some(DataType::Boolean)).unwrap(),
            Value::Boolean(true)
        );
        assert!(v("x", Some(DataType::Int64)).unwrap_err().mismatch);
        assert_eq!(
            v("12", Some(DataType::String)).unwrap(),
            Value::String("12".into())
        );
        assert_eq!(
            v("-7", Some(DataType::Timestamp)).unwrap(),
            Value::Timestamp(-7)
        );
        assert_eq!(
            v("2024-02-29", Some(DataType::Date)).unwrap(),
            Value::Date(20240229)
        );
        assert!(v("2023-02-29", Some(DataType::Date)).unwrap_err().mismatch);
        assert_eq!(
            v("0x0aff", Some(DataType::Blob)).unwrap(),
            Value::Blob(vec![0x0a, 0xff])
        );
        assert_eq!(
            v("X'00'", Some(DataType::Blob)).unwrap(),
            Value::Blob(vec![0])
        );
        assert!(v("abc", Some(DataType::Blob)).unwrap_err().mismatch);
        assert_eq!(v("12", None).unwrap(), Value::Double(12.0));
        assert_eq!(v("-2.5e3", None).unwrap(), Value::Double(-2500.0));
        assert_eq!(v("false", None).unwrap(), Value::Boolean(false));
        assert_eq!(v("inf", None).unwrap(), Value::Text("inf".into()));
        assert_eq!(v("1.2.3", None).unwrap(), Value::Text("1.2.3".into()));
    }

    #[test]
    fn rows_of_one_device_make_one_tablet_over_their_measurements() {
        let t = union_tablet(
            "root.sg.d".into(),
            vec![
                (1, vec![("a".into(), Value::Int32(1))]),
                (
                    2,
                    vec![
                        ("b".into(), Value::Text("x".into())),
                        ("a".into(), Value::Int32(2)),
                    ],
                ),
            ],
        )
        .unwrap();
        assert_eq!(t.measurements, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(t.timestamps, vec![1, 2]);
        assert!(t.is_null(0, 1) && !t.is_null(1, 1));
        let two_types = union_tablet(
            "root.sg.d".into(),
            vec![
                (1, vec![("a".into(), Value::Int32(1))]),
                (2, vec![("a".into(), Value::Double(1.0))]),
            ],
        );
        assert!(two_types.unwrap_err().mismatch);
    }
}
