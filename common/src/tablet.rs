//! The IoTDB tree-model data types and the tablet: one device, N typed measurements, M rows.

use crate::path::DevicePath;
use std::fmt;

/// A series' value type (design §2). The `u8` codes are IoTDB's `TSDataType` ordinals and are
/// used on disk and on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DataType {
    /// `BOOLEAN`
    Boolean = 0,
    /// `INT32`
    Int32 = 1,
    /// `INT64`
    Int64 = 2,
    /// `FLOAT`
    Float = 3,
    /// `DOUBLE`
    Double = 4,
    /// `TEXT` (UTF-8)
    Text = 5,
    /// `TIMESTAMP`: an instant in the database's precision, stored as INT64.
    Timestamp = 8,
    /// `DATE`: a day as `yyyymmdd`, stored as INT32 (see [`crate::date`]).
    Date = 9,
    /// `BLOB`: bytes.
    Blob = 10,
    /// `STRING` (UTF-8), stored as TEXT.
    String = 11,
}

impl DataType {
    /// Every type, in code order.
    pub const ALL: [DataType; 10] = [
        DataType::Boolean,
        DataType::Int32,
        DataType::Int64,
        DataType::Float,
        DataType::Double,
        DataType::Text,
        DataType::Timestamp,
        DataType::Date,
        DataType::Blob,
        DataType::String,
    ];

    /// The on-disk and wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The type for a code, if valid.
    pub fn from_code(code: u8) -> Option<DataType> {
        DataType::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The classic type whose layout and encodings this type's values share, as Java's columns
    /// report it: INT64 for TIMESTAMP, INT32 for DATE, TEXT for STRING and BLOB (length-prefixed
    /// values; BLOB's need not be UTF-8). Result columns go to IoTDB's clients typed by it
    /// (IOTDB_PROTOCOL §9).
    pub fn physical(self) -> DataType {
        match self {
            DataType::Timestamp => DataType::Int64,
            DataType::Date => DataType::Int32,
            DataType::String | DataType::Blob => DataType::Text,
            other => other,
        }
    }

    /// IoTDB's name, as used in `CREATE TIMESERIES ... WITH DATATYPE=`.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Boolean => "BOOLEAN",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Float => "FLOAT",
            DataType::Double => "DOUBLE",
            DataType::Text => "TEXT",
            DataType::Timestamp => "TIMESTAMP",
            DataType::Date => "DATE",
            DataType::Blob => "BLOB",
            DataType::String => "STRING",
        }
    }

    /// Parses IoTDB's name, case-insensitively.
    pub fn parse(name: &str) -> Option<DataType> {
        DataType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One value of a series.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `BOOLEAN`
    Boolean(bool),
    /// `INT32`
    Int32(i32),
    /// `INT64`
    Int64(i64),
    /// `FLOAT`
    Float(f32),
    /// `DOUBLE`
    Double(f64),
    /// `TEXT`
    Text(String),
    /// `TIMESTAMP`
    Timestamp(i64),
    /// `DATE`, as `yyyymmdd`
    Date(i32),
    /// `BLOB`
    Blob(Vec<u8>),
    /// `STRING`
    String(String),
}

impl Value {
    /// The value's type.
    pub fn data_type(&self) -> DataType {
        match self {
            Value::Boolean(_) => DataType::Boolean,
            Value::Int32(_) => DataType::Int32,
            Value::Int64(_) => DataType::Int64,
            Value::Float(_) => DataType::Float,
            Value::Double(_) => DataType::Double,
            Value::Text(_) => DataType::Text,
            Value::Timestamp(_) => DataType::Timestamp,
            Value::Date(_) => DataType::Date,
            Value::Blob(_) => DataType::Blob,
            Value::String(_) => DataType::String,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Boolean(v) => write!(f, "{v}"),
            Value::Int32(v) => write!(f, "{v}"),
            Value::Int64(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Double(v) => write!(f, "{v}"),
            Value::Text(v) | Value::String(v) => write!(f, "{v}"),
            Value::Timestamp(v) => write!(f, "{v}"),
            Value::Date(v) => f.write_str(&crate::date::format(*v)),
            Value::Blob(v) => {
                f.write_str("0x")?;
                v.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
        }
    }
}

/// The bytes an even number of hex digits spell (either case), as in IoTDB's BLOB literals
/// `X'0a1B'` and `0x0a1b`; `None` for anything else.
pub fn blob_from_hex(digits: &str) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    digits
        .as_bytes()
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// Keeps the points (`timestamps[i]`, row `i` of `values`) whose time `keep` accepts, in
/// order; returns whether any was dropped. Panics when the lengths differ.
pub fn retain_points(
    timestamps: &mut Vec<i64>,
    values: &mut Column,
    keep: impl Fn(i64) -> bool,
) -> bool {
    assert_eq!(timestamps.len(), values.len(), "a point without a value");
    let kept: Vec<usize> = (0..timestamps.len())
        .filter(|&i| keep(timestamps[i]))
        .collect();
    if kept.len() == timestamps.len() {
        return false;
    }
    *timestamps = kept.iter().map(|&i| timestamps[i]).collect();
    *values = values.select(&kept);
    true
}

/// What a null DATE row holds: 1970-01-01, as IoTDB's clients fill it.
pub const NULL_DATE: i32 = 19700101;

/// A column of values of one type, one per tablet row. A null row holds a placeholder value
/// (false, 0 or the empty string) and is marked in the tablet's null bitmap.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// `BOOLEAN` values.
    Boolean(Vec<bool>),
    /// `INT32` values.
    Int32(Vec<i32>),
    /// `INT64` values.
    Int64(Vec<i64>),
    /// `FLOAT` values.
    Float(Vec<f32>),
    /// `DOUBLE` values.
    Double(Vec<f64>),
    /// `TEXT` values.
    Text(Vec<String>),
    /// `TIMESTAMP` values.
    Timestamp(Vec<i64>),
    /// `DATE` values (`yyyymmdd`).
    Date(Vec<i32>),
    /// `BLOB` values.
    Blob(Vec<Vec<u8>>),
    /// `STRING` values.
    String(Vec<String>),
}

impl Column {
    /// An empty column of a type, with room for `capacity` rows.
    pub fn with_capacity(data_type: DataType, capacity: usize) -> Column {
        match data_type {
            DataType::Boolean => Column::Boolean(Vec::with_capacity(capacity)),
            DataType::Int32 => Column::Int32(Vec::with_capacity(capacity)),
            DataType::Int64 => Column::Int64(Vec::with_capacity(capacity)),
            DataType::Float => Column::Float(Vec::with_capacity(capacity)),
            DataType::Double => Column::Double(Vec::with_capacity(capacity)),
            DataType::Text => Column::Text(Vec::with_capacity(capacity)),
            DataType::Timestamp => Column::Timestamp(Vec::with_capacity(capacity)),
            DataType::Date => Column::Date(Vec::with_capacity(capacity)),
            DataType::Blob => Column::Blob(Vec::with_capacity(capacity)),
            DataType::String => Column::String(Vec::with_capacity(capacity)),
        }
    }

    /// The column's type.
    pub fn data_type(&self) -> DataType {
        match self {
            Column::Boolean(_) => DataType::Boolean,
            Column::Int32(_) => DataType::Int32,
            Column::Int64(_) => DataType::Int64,
            Column::Float(_) => DataType::Float,
            Column::Double(_) => DataType::Double,
            Column::Text(_) => DataType::Text,
            Column::Timestamp(_) => DataType::Timestamp,
            Column::Date(_) => DataType::Date,
            Column::Blob(_) => DataType::Blob,
            Column::String(_) => DataType::String,
        }
    }

    /// The same values as `data_type` when that type stores them alike: a TEXT column as STRING,
    /// an INT64 one as TIMESTAMP, an INT32 one as DATE, and back. Any other column is returned
    /// unchanged, to be refused by the caller's type check.
    pub fn with_type(self, data_type: DataType) -> Column {
        match (self, data_type) {
            (Column::Text(v), DataType::String) => Column::String(v),
            (Column::String(v), DataType::Text) => Column::Text(v),
            (Column::Int64(v), DataType::Timestamp) => Column::Timestamp(v),
            (Column::Timestamp(v), DataType::Int64) => Column::Int64(v),
            (Column::Int32(v), DataType::Date) => Column::Date(v),
            (Column::Date(v), DataType::Int32) => Column::Int32(v),
            (column, _) => column,
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Column::Boolean(v) => v.len(),
            Column::Int32(v) => v.len(),
            Column::Int64(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Double(v) => v.len(),
            Column::Text(v) | Column::String(v) => v.len(),
            Column::Timestamp(v) => v.len(),
            Column::Date(v) => v.len(),
            Column::Blob(v) => v.len(),
        }
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows `range`, copied. Panics when the range is out of bounds.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Column {
        match self {
            Column::Boolean(v) => Column::Boolean(v[range].to_vec()),
            Column::Int32(v) => Column::Int32(v[range].to_vec()),
            Column::Int64(v) => Column::Int64(v[range].to_vec()),
            Column::Float(v) => Column::Float(v[range].to_vec()),
            Column::Double(v) => Column::Double(v[range].to_vec()),
            Column::Text(v) => Column::Text(v[range].to_vec()),
            Column::Timestamp(v) => Column::Timestamp(v[range].to_vec()),
            Column::Date(v) => Column::Date(v[range].to_vec()),
            Column::Blob(v) => Column::Blob(v[range].to_vec()),
            Column::String(v) => Column::String(v[range].to_vec()),
        }
    }

    /// Appends the rows of `other`; returns `false` (and appends nothing) when its type differs.
    pub fn extend_from(&mut self, other: &Column) -> bool {
        match (self, other) {
            (Column::Boolean(c), Column::Boolean(v)) => c.extend_from_slice(v),
            (Column::Int32(c), Column::Int32(v)) => c.extend_from_slice(v),
            (Column::Int64(c), Column::Int64(v)) => c.extend_from_slice(v),
            (Column::Float(c), Column::Float(v)) => c.extend_from_slice(v),
            (Column::Double(c), Column::Double(v)) => c.extend_from_slice(v),
            (Column::Text(c), Column::Text(v)) => c.extend_from_slice(v),
            (Column::Timestamp(c), Column::Timestamp(v)) => c.extend_from_slice(v),
            (Column::Date(c), Column::Date(v)) => c.extend_from_slice(v),
            (Column::Blob(c), Column::Blob(v)) => c.extend_from_slice(v),
            (Column::String(c), Column::String(v)) => c.extend_from_slice(v),
            _ => return false,
        }
        true
    }

    /// Removes the first `rows` rows. Panics when there are fewer.
    pub fn drain_front(&mut self, rows: usize) {
        match self {
            Column::Boolean(v) => drop(v.drain(..rows)),
            Column::Int32(v) => drop(v.drain(..rows)),
            Column::Int64(v) => drop(v.drain(..rows)),
            Column::Float(v) => drop(v.drain(..rows)),
            Column::Double(v) => drop(v.drain(..rows)),
            Column::Text(v) | Column::String(v) => drop(v.drain(..rows)),
            Column::Timestamp(v) => drop(v.drain(..rows)),
            Column::Date(v) => drop(v.drain(..rows)),
            Column::Blob(v) => drop(v.drain(..rows)),
        }
    }

    /// The values at `rows`, in that order. Panics when a row is out of range.
    pub fn select(&self, rows: &[usize]) -> Column {
        fn gather<T: Clone>(v: &[T], rows: &[usize]) -> Vec<T> {
            rows.iter().map(|&r| v[r].clone()).collect()
        }
        match self {
            Column::Boolean(v) => Column::Boolean(gather(v, rows)),
            Column::Int32(v) => Column::Int32(gather(v, rows)),
            Column::Int64(v) => Column::Int64(gather(v, rows)),
            Column::Float(v) => Column::Float(gather(v, rows)),
            Column::Double(v) => Column::Double(gather(v, rows)),
            Column::Text(v) => Column::Text(gather(v, rows)),
            Column::Timestamp(v) => Column::Timestamp(gather(v, rows)),
            Column::Date(v) => Column::Date(gather(v, rows)),
            Column::Blob(v) => Column::Blob(gather(v, rows)),
            Column::String(v) => Column::String(gather(v, rows)),
        }
    }

    /// The value at `row`. Panics when out of range.
    pub fn value(&self, row: usize) -> Value {
        match self {
            Column::Boolean(v) => Value::Boolean(v[row]),
            Column::Int32(v) => Value::Int32(v[row]),
            Column::Int64(v) => Value::Int64(v[row]),
            Column::Float(v) => Value::Float(v[row]),
            Column::Double(v) => Value::Double(v[row]),
            Column::Text(v) => Value::Text(v[row].clone()),
            Column::Timestamp(v) => Value::Timestamp(v[row]),
            Column::Date(v) => Value::Date(v[row]),
            Column::Blob(v) => Value::Blob(v[row].clone()),
            Column::String(v) => Value::String(v[row].clone()),
        }
    }

    /// Appends a value; returns `false` (and appends nothing) when the type differs.
    pub fn push(&mut self, value: Value) -> bool {
        match (self, value) {
            (Column::Boolean(c), Value::Boolean(v)) => c.push(v),
            (Column::Int32(c), Value::Int32(v)) => c.push(v),
            (Column::Int64(c), Value::Int64(v)) => c.push(v),
            (Column::Float(c), Value::Float(v)) => c.push(v),
            (Column::Double(c), Value::Double(v)) => c.push(v),
            (Column::Text(c), Value::Text(v)) => c.push(v),
            (Column::Timestamp(c), Value::Timestamp(v)) => c.push(v),
            (Column::Date(c), Value::Date(v)) => c.push(v),
            (Column::Blob(c), Value::Blob(v)) => c.push(v),
            (Column::String(c), Value::String(v)) => c.push(v),
            _ => return false,
        }
        true
    }

    /// Appends the type's placeholder for a null row.
    pub fn push_placeholder(&mut self) {
        match self {
            Column::Boolean(c) => c.push(false),
            Column::Int32(c) => c.push(0),
            Column::Int64(c) => c.push(0),
            Column::Float(c) => c.push(0.0),
            Column::Double(c) => c.push(0.0),
            Column::Text(c) | Column::String(c) => c.push(String::new()),
            Column::Timestamp(c) => c.push(0),
            // The placeholder is a real day, so a null row never holds an invalid DATE.
            Column::Date(c) => c.push(NULL_DATE),
            Column::Blob(c) => c.push(Vec::new()),
        }
    }
}

/// A fixed-length bitmap; a set bit marks a null row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    len: usize,
}

impl Bitmap {
    /// All bits clear.
    pub fn new(len: usize) -> Bitmap {
        Bitmap {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the bitmap has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets bit `i`. Panics when out of range.
    pub fn set(&mut self, i: usize) {
        assert!(
            i < self.len,
            "bit {i} out of range for bitmap of {}",
            self.len
        );
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Reads bit `i`. Panics when out of range.
    pub fn get(&self, i: usize) -> bool {
        assert!(
            i < self.len,
            "bit {i} out of range for bitmap of {}",
            self.len
        );
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Grows to `len` bits, the new ones clear. Never shrinks.
    pub fn grow(&mut self, len: usize) {
        if len > self.len {
            self.len = len;
            self.words.resize(len.div_ceil(64), 0);
        }
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// Explicit limits on a tablet's shape; exceeding one is a clear error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TabletLimits {
    /// Maximum rows in one tablet (default 1,000,000).
    pub rows_max: usize,
    /// Maximum measurements in one tablet (default 10,000).
    pub measurements_max: usize,
    /// Maximum bytes of one TEXT value (default 65,536).
    pub text_bytes_max: usize,
    /// Maximum bytes of a device path or measurement name (default 1024).
    pub path_bytes_max: usize,
}

impl Default for TabletLimits {
    fn default() -> Self {
        TabletLimits {
            rows_max: 1_000_000,
            measurements_max: 10_000,
            text_bytes_max: 65_536,
            path_bytes_max: crate::path::PATH_BYTES_MAX,
        }
    }
}

/// Why a tablet is malformed. Each maps to 700 ILLEGAL_PARAMETER except where noted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TabletError {
    /// The device path is not `root.` followed by non-empty dot-separated names.
    #[error("invalid device path {device:?}: {reason}")]
    InvalidDevice {
        /// The path given.
        device: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A measurement name is empty, contains a dot, or is too long.
    #[error("invalid measurement name {name:?}: {reason}")]
    InvalidMeasurement {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same measurement appears twice.
    #[error("measurement {name:?} appears more than once")]
    DuplicateMeasurement {
        /// The repeated name.
        name: String,
    },
    /// Measurement, type, column and bitmap counts differ.
    #[error("tablet shape mismatch: {measurements} measurements, {data_types} types, {columns} columns, {bitmaps} bitmaps")]
    ShapeMismatch {
        /// Number of measurement names.
        measurements: usize,
        /// Number of types.
        data_types: usize,
        /// Number of columns.
        columns: usize,
        /// Number of null bitmaps.
        bitmaps: usize,
    },
    /// A column's length differs from the number of timestamps.
    #[error("column {measurement:?} has {len} values but the tablet has {rows} rows")]
    ColumnLength {
        /// The column's measurement.
        measurement: String,
        /// Its length.
        len: usize,
        /// The number of timestamps.
        rows: usize,
    },
    /// A column's values are of another type than declared.
    #[error("column {measurement:?} is declared {declared} but holds {actual}")]
    ColumnType {
        /// The column's measurement.
        measurement: String,
        /// The declared type.
        declared: DataType,
        /// The values' type.
        actual: DataType,
    },
    /// A null bitmap's length differs from the number of rows.
    #[error("null bitmap of {measurement:?} has {len} bits but the tablet has {rows} rows")]
    BitmapLength {
        /// The column's measurement.
        measurement: String,
        /// Its length.
        len: usize,
        /// The number of timestamps.
        rows: usize,
    },
    /// A limit was exceeded.
    #[error("{what} is {actual}, over the limit of {limit}")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The value given.
        actual: usize,
        /// The limit.
        limit: usize,
    },
    /// A DATE value is no real day between 1000-01-01 and 9999-12-31.
    #[error(
        "column {measurement:?} holds DATE {value}, which is no day (yyyymmdd, years 1000 to 9999)"
    )]
    InvalidDate {
        /// The column's measurement.
        measurement: String,
        /// The value.
        value: i32,
    },
    /// The tablet has no rows or no measurements.
    #[error("tablet is empty: {rows} rows, {measurements} measurements")]
    Empty {
        /// Number of rows.
        rows: usize,
        /// Number of measurements.
        measurements: usize,
    },
}

/// One device's rows: N measurements with their types, M timestamps, M×N values, and an optional
/// null bitmap per column. Timestamps need not be sorted and may repeat (writes are upserts; the
/// later row wins).
#[derive(Clone, Debug, PartialEq)]
pub struct Tablet {
    /// Device path, e.g. `root.sg.d1`.
    pub device: String,
    /// Measurement names, e.g. `s1`.
    pub measurements: Vec<String>,
    /// One type per measurement.
    pub data_types: Vec<DataType>,
    /// Row timestamps in milliseconds.
    pub timestamps: Vec<i64>,
    /// One column per measurement, one value per row.
    pub columns: Vec<Column>,
    /// One optional null bitmap per measurement; `None` means no nulls.
    pub bitmaps: Vec<Option<Bitmap>>,
}

impl Tablet {
    /// An empty tablet with the given schema.
    pub fn new(device: impl Into<String>, schema: &[(&str, DataType)]) -> Tablet {
        Tablet {
            device: device.into(),
            measurements: schema.iter().map(|(m, _)| m.to_string()).collect(),
            data_types: schema.iter().map(|(_, t)| *t).collect(),
            timestamps: Vec::new(),
            columns: schema
                .iter()
                .map(|(_, t)| Column::with_capacity(*t, 0))
                .collect(),
            bitmaps: schema.iter().map(|_| None).collect(),
        }
    }

    /// Appends a row; `None` is a null. Panics when the row's arity or a value's type differs from
    /// the schema: building a tablet row by row is programmer input, not user input.
    pub fn push_row(&mut self, timestamp: i64, values: Vec<Option<Value>>) {
        assert_eq!(
            values.len(),
            self.columns.len(),
            "row has {} values for {} measurements",
            values.len(),
            self.columns.len()
        );
        let row = self.timestamps.len();
        self.timestamps.push(timestamp);
        for (i, value) in values.into_iter().enumerate() {
            if let Some(bitmap) = &mut self.bitmaps[i] {
                bitmap.grow(row + 1);
            }
            match value {
                Some(v) => {
                    let t = v.data_type();
                    assert!(
                        self.columns[i].push(v),
                        "value of type {t} for column {} of type {}",
                        self.measurements[i],
                        self.data_types[i]
                    );
                }
                None => {
                    self.columns[i].push_placeholder();
                    self.set_null(row, i);
                }
            }
        }
    }

    /// The rows `rows` of this tablet, in that order, copied column by column. Panics when a row
    /// is out of range.
    pub fn select_rows(&self, rows: &[usize]) -> Tablet {
        Tablet {
            device: self.device.clone(),
            measurements: self.measurements.clone(),
            data_types: self.data_types.clone(),
            timestamps: rows.iter().map(|&r| self.timestamps[r]).collect(),
            columns: self.columns.iter().map(|c| c.select(rows)).collect(),
            bitmaps: self
                .bitmaps
                .iter()
                .map(|b| {
                    let b = b.as_ref()?;
                    let mut part = Bitmap::new(rows.len());
                    for (i, &r) in rows.iter().enumerate() {
                        if b.get(r) {
                            part.set(i);
                        }
                    }
                    Some(part)
                })
                .collect(),
        }
    }

    /// Marks `(row, column)` null.
    pub fn set_null(&mut self, row: usize, column: usize) {
        let rows = self.timestamps.len();
        let bitmap = self.bitmaps[column].get_or_insert_with(|| Bitmap::new(rows));
        bitmap.set(row);
    }

    /// Number of rows.
    pub fn row_count(&self) -> usize {
        self.timestamps.len()
    }

    /// True when `(row, column)` is null.
    pub fn is_null(&self, row: usize, column: usize) -> bool {
        self.bitmaps[column].as_ref().is_some_and(|b| b.get(row))
    }

    /// Number of non-null values.
    pub fn point_count(&self) -> usize {
        let rows = self.row_count();
        self.bitmaps
            .iter()
            .map(|b| rows - b.as_ref().map_or(0, |b| b.count_ones()))
            .sum()
    }

    /// Checks the tablet's shape, names and limits; the device path, parsed.
    pub fn validate(&self, limits: &TabletLimits) -> Result<DevicePath, TabletError> {
        let device = validate_device(&self.device, limits)?;
        let n = self.measurements.len();
        if self.data_types.len() != n || self.columns.len() != n || self.bitmaps.len() != n {
            return Err(TabletError::ShapeMismatch {
                measurements: n,
                data_types: self.data_types.len(),
                columns: self.columns.len(),
                bitmaps: self.bitmaps.len(),
            });
        }
        let rows = self.timestamps.len();
        if rows == 0 || n == 0 {
            return Err(TabletError::Empty {
                rows,
                measurements: n,
            });
        }
        limit("rows", rows, limits.rows_max)?;
        limit("measurements", n, limits.measurements_max)?;
        let mut names = std::collections::HashSet::with_capacity(n);
        for i in 0..n {
            let name = &self.measurements[i];
            validate_measurement(name, limits)?;
            if !names.insert(name.as_str()) {
                return Err(TabletError::DuplicateMeasurement { name: name.clone() });
            }
            let column = &self.columns[i];
            if column.data_type() != self.data_types[i] {
                return Err(TabletError::ColumnType {
                    measurement: name.clone(),
                    declared: self.data_types[i],
                    actual: column.data_type(),
                });
            }
            if column.len() != rows {
                return Err(TabletError::ColumnLength {
                    measurement: name.clone(),
                    len: column.len(),
                    rows,
                });
            }
            if let Some(bitmap) = &self.bitmaps[i] {
                if bitmap.len() != rows {
                    return Err(TabletError::BitmapLength {
                        measurement: name.clone(),
                        len: bitmap.len(),
                        rows,
                    });
                }
            }
            match column {
                Column::Text(values) | Column::String(values) => {
                    for v in values {
                        limit("TEXT value bytes", v.len(), limits.text_bytes_max)?;
                    }
                }
                Column::Blob(values) => {
                    for v in values {
                        limit("BLOB value bytes", v.len(), limits.text_bytes_max)?;
                    }
                }
                Column::Date(values) => {
                    let bitmap = self.bitmaps[i].as_ref();
                    let bad = values.iter().enumerate().find(|&(row, v)| {
                        !crate::date::is_valid(*v) && !bitmap.is_some_and(|b| b.get(row))
                    });
                    if let Some((_, &value)) = bad {
                        return Err(TabletError::InvalidDate {
                            measurement: name.clone(),
                            value,
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(device)
    }
}

fn limit(what: &'static str, actual: usize, limit: usize) -> Result<(), TabletError> {
    if actual > limit {
        return Err(TabletError::LimitExceeded {
            what,
            actual,
            limit,
        });
    }
    Ok(())
}

fn validate_device(device: &str, limits: &TabletLimits) -> Result<DevicePath, TabletError> {
    DevicePath::parse(device, limits.path_bytes_max).map_err(|e| TabletError::InvalidDevice {
        device: e.path,
        reason: e.reason,
    })
}

fn validate_measurement(name: &str, limits: &TabletLimits) -> Result<(), TabletError> {
    crate::path::check_measurement(name, limits.path_bytes_max).map_err(|reason| {
        TabletError::InvalidMeasurement {
            name: name.to_string(),
            reason,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Tablet {
        let mut t = Tablet::new(
            "root.sg.d1",
            &[("s1", DataType::Double), ("s2", DataType::Text)],
        );
        t.push_row(
            1,
            vec![Some(Value::Double(1.5)), Some(Value::Text("a".into()))],
        );
        t.push_row(2, vec![None, Some(Value::Text("b".into()))]);
        t
    }

    #[test]
    fn valid_tablet_passes() {
        let t = sample();
        t.validate(&TabletLimits::default()).unwrap();
        assert_eq!(t.row_count(), 2);
        assert_eq!(t.point_count(), 3);
        assert!(t.is_null(1, 0));
        assert!(!t.is_null(0, 0));
    }

    #[test]
    fn malformed_tablets_are_rejected_with_reasons() {
        let limits = TabletLimits::default();
        let mut t = sample();
        t.device = "sg.d1".into();
        assert!(matches!(
            t.validate(&limits),
            Err(TabletError::InvalidDevice { .. })
        ));

        let mut t = sample();
        t.device = "root.sg".into();
        assert!(matches!(
            t.validate(&limits),
            Err(TabletError::InvalidDevice { .. })
        ));

        let mut t = sample();
        t.measurements[1] = "s1".into();
        assert!(matches!(
            t.validate(&limits),
            Err(TabletError::DuplicateMeasurement { .. })
        ));

        let mut t = sample();
        t.timestamps.push(3);
        assert!(matches!(
            t.validate(&limits),
            Err(TabletError::ColumnLength { .. })
        ));

        let mut t = sample();
        t.data_types[0] = DataType::Int64;
        assert!(matches!(
            t.validate(&limits),
            Err(TabletError::ColumnType { .. })
        ));

        let mut t = sample();
        t.bitmaps[0] = Some(Bitmap::new(5));
        assert!(matches!(
            t.validate(&limits),
            Err(TabletError::BitmapLength { .. })
        ));

        let t = sample();
        let tight = TabletLimits {
            rows_max: 1,
            ..limits
        };
        assert!(matches!(
            t.validate(&tight),
            Err(TabletError::LimitExceeded { what: "rows", .. })
        ));
    }

    #[test]
    fn type_codes_round_trip() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_code(t.code()), Some(t));
            assert_eq!(DataType::parse(&t.name().to_lowercase()), Some(t));
        }
        for code in [6, 7, 12, 255] {
            assert_eq!(DataType::from_code(code), None);
        }
        assert_eq!(DataType::Timestamp.physical(), DataType::Int64);
        assert_eq!(DataType::Blob.physical(), DataType::Text);
    }

    #[test]
    fn selected_rows_keep_values_and_nulls() {
        let mut t = Tablet::new(
            "root.sg.d1",
            &[("a", DataType::Int32), ("b", DataType::Text)],
        );
        t.push_row(1, vec![Some(Value::Int32(1)), None]);
        t.push_row(2, vec![None, Some(Value::Text("x".into()))]);
        t.push_row(
            3,
            vec![Some(Value::Int32(3)), Some(Value::Text("y".into()))],
        );
        let part = t.select_rows(&[1, 2]);
        assert_eq!(part.timestamps, [2, 3]);
        assert!(part.is_null(0, 0));
        assert_eq!(part.columns[1].value(1), Value::Text("y".into()));
    }

    #[test]
    fn date_columns_hold_real_days_except_in_null_rows() {
        let mut t = Tablet::new("root.sg.d1", &[("d", DataType::Date)]);
        t.push_row(1, vec![Some(Value::Date(20240229))]);
        t.push_row(2, vec![None]);
        t.validate(&TabletLimits::default()).unwrap();
        assert_eq!(t.columns[0].value(1), Value::Date(NULL_DATE));

        t.columns[0] = Column::Date(vec![20240229, 0]);
        t.validate(&TabletLimits::default()).unwrap();
        t.columns[0] = Column::Date(vec![20230229, 0]);
        assert_eq!(
            t.validate(&TabletLimits::default()),
            Err(TabletError::InvalidDate {
                measurement: "d".into(),
                value: 20230229
            })
        );
    }

    #[test]
    fn retained_points_keep_their_order_and_values() {
        let mut ts = vec![5, 1, 3, 2];
        let mut values = Column::Blob(vec![vec![5], vec![1], vec![3], vec![2]]);
        assert!(!retain_points(&mut ts, &mut values, |_| true));
        assert!(retain_points(&mut ts, &mut values, |t| t != 3 && t != 1));
        assert_eq!(ts, [5, 2]);
        assert_eq!(values, Column::Blob(vec![vec![5], vec![2]]));
    }

    #[test]
    fn hex_digits_spell_blobs() {
        assert_eq!(blob_from_hex("0aFf"), Some(vec![0x0a, 0xff]));
        assert_eq!(blob_from_hex(""), Some(vec![]));
        assert_eq!(blob_from_hex("abc"), None);
        assert_eq!(blob_from_hex("zz"), None);
        assert_eq!(blob_from_hex("é1"), None);
    }

    #[test]
    fn new_types_display_as_iotdb_prints_them() {
        assert_eq!(Value::Date(20240105).to_string(), "2024-01-05");
        assert_eq!(Value::Blob(vec![0, 0xab]).to_string(), "0x00ab");
        assert_eq!(Value::String("s".into()).to_string(), "s");
        assert_eq!(Value::Timestamp(-3).to_string(), "-3");
    }
}
