//! The statements the front end understands, as the parser hands them to the executor.

use common::DataType;

/// One parsed statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// `CREATE DATABASE root.sg`
    CreateDatabase {
        /// The database path.
        database: String,
    },
    /// `DROP DATABASE root.sg`
    DropDatabase {
        /// The database path.
        database: String,
    },
    /// `SET TTL TO root.sg 86400000` (milliseconds)
    SetTtl {
        /// The database path.
        database: String,
        /// The time to live in ms; the server refuses one that is not positive (700).
        ttl_ms: i64,
    },
    /// `UNSET TTL TO root.sg` (or IoTDB's older `UNSET TTL FROM root.sg`)
    UnsetTtl {
        /// The database path.
        database: String,
    },
    /// `REMOVE DATANODE 3`: its replicas migrate to the other DataNodes.
    RemoveDataNode {
        /// The DataNode's id (`SHOW CLUSTER`).
        data_node_id: u64,
    },
    /// `CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=DOUBLE`
    CreateTimeseries {
        /// The full series path.
        path: String,
        /// Its type.
        data_type: DataType,
        /// `ENCODING=...` as written (upper case), if given.
        encoding: Option<String>,
        /// `COMPRESSOR=...` (or `COMPRESSION=...`) as written (upper case), if given.
        compressor: Option<String>,
    },
    /// `DELETE TIMESERIES root.sg.d1.s1`
    DeleteTimeseries {
        /// The full series path.
        path: String,
    },
    /// `INSERT INTO root.sg.d1(time, s1) VALUES (1, 1.5), ...`
    Insert(Insert),
    /// `SELECT s1, s2 FROM root.sg.d1 WHERE time >= 0 AND time < 100`
    Select {
        /// The device.
        device: String,
        /// The measurements.
        measurements: Projection,
        /// The time range.
        range: TimeRange,
    },
    /// `SELECT LAST s1 FROM root.sg.d1`
    SelectLast {
        /// The device.
        device: String,
        /// The measurements.
        measurements: Projection,
    },
    /// `SELECT COUNT(s1) FROM root.sg.d1 WHERE ...`
    SelectCount {
        /// The device.
        device: String,
        /// The measurements counted.
        measurements: Projection,
        /// The time range.
        range: TimeRange,
    },
    /// `SHOW DATABASES`
    ShowDatabases,
    /// `SHOW TIMESERIES [prefix]`
    ShowTimeseries {
        /// A path prefix (`root.sg`, with any trailing `.**` removed); `None` lists every series.
        prefix: Option<String>,
    },
    /// `SHOW CLUSTER`
    ShowCluster,
    /// `SHOW REGIONS`
    ShowRegions,
    /// `SHOW LEASES`: the ConfigNode's view of every DataNode's lease.
    ShowLeases,
    /// `SHOW LOCAL LEASE`: the answering DataNode's own lease.
    ShowLocalLease,
    /// `QUIT` or `EXIT`: stop reading statements.
    Quit,
}

/// The rows of one `INSERT`, which go to the server as one tablet.
#[derive(Clone, Debug, PartialEq)]
pub struct Insert {
    /// The device path.
    pub device: String,
    /// The measurement names, in column order (the time column removed).
    pub measurements: Vec<String>,
    /// The rows.
    pub rows: Vec<InsertRow>,
}

/// One row of an `INSERT`.
#[derive(Clone, Debug, PartialEq)]
pub struct InsertRow {
    /// Milliseconds.
    pub timestamp: i64,
    /// One literal per measurement, in [`Insert::measurements`] order.
    pub values: Vec<Literal>,
}

/// A value as written in the statement; its series type is decided by the executor.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// An integer, e.g. `-12`.
    Integer(i64),
    /// A number with a fraction or exponent, e.g. `1.5e3`.
    Float(f64),
    /// `true` or `false`.
    Boolean(bool),
    /// A quoted string.
    Text(String),
    /// `NULL`: no value in this row.
    Null,
}

/// Which measurements a `SELECT` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Projection {
    /// `*`: every series of the device.
    All,
    /// The listed measurements, in order.
    Measurements(Vec<String>),
}

/// The half-open time range `[from, to)` in milliseconds; empty when `from >= to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    /// The first time included.
    pub from: i64,
    /// The first time excluded.
    pub to: i64,
}

impl TimeRange {
    /// Every time: `[i64::MIN, i64::MAX)` (a point at `i64::MAX` itself cannot be selected).
    pub const ALL: TimeRange = TimeRange {
        from: i64::MIN,
        to: i64::MAX,
    };

    /// True when no time is in the range.
    pub fn is_empty(&self) -> bool {
        self.from >= self.to
    }
}
