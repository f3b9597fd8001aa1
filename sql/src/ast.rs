//! The statements the front end understands, as the parser hands them to the executor.

use common::DataType;

use crate::expr::{BinaryOp, Expr};
pub use crate::pattern::PathPattern;

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
        /// `root.sg.d1.s1(alias)`, `TAGS(k=v, ...)`, `ATTRIBUTES(k=v, ...)`.
        meta: common::views::SeriesMeta,
    },
    /// `DELETE TIMESERIES root.sg.d1.s1`
    DeleteTimeseries {
        /// The full series path.
        path: String,
    },
    /// `DELETE FROM root.sg.d1.s1, root.sg.d2.* [WHERE time >= 1 AND time <= 9]`: the points in
    /// the range (every point without a WHERE); the series stay.
    DeleteData {
        /// Series paths or patterns: a path without a wildcard is that one series.
        paths: Vec<PathPattern>,
        /// The time range.
        range: TimeRange,
    },
    /// `INSERT INTO root.sg.d1(time, s1) VALUES (1, 1.5), ...`
    Insert(Insert),
    /// `SELECT s1, s2 FROM root.sg.d1 WHERE time >= 0 AND time < 100 [ORDER BY TIME [ASC|DESC]]
    /// [LIMIT n] [OFFSET n] [ALIGN BY DEVICE]`; FROM takes patterns (`root.sg.*`, `root.**`) and
    /// lists of them.
    Select {
        /// The devices: paths or patterns, in the order written.
        from: Vec<PathPattern>,
        /// The measurements under each of them.
        measurements: Projection,
        /// The time range.
        range: TimeRange,
        /// The value filter: the rows kept (`None`: all).
        filter: Option<Expr>,
        /// Which rows, in which order.
        rows: RowWindow,
        /// `FILL(...)`: NULL cells filled.
        fill: Option<Fill>,
        /// `ALIGN BY DEVICE`: a `Device` column and one column per measurement name.
        align_by_device: bool,
    },
    /// `SELECT LAST s1 FROM root.sg.* [WHERE time >= t]`
    SelectLast {
        /// The devices, as for [`Statement::Select`].
        from: Vec<PathPattern>,
        /// The measurements.
        measurements: Projection,
        /// Only a last point at or after this time is answered (`i64::MIN`: any).
        since: i64,
    },
    /// `SELECT count(s1), avg(s2), max_value(*) FROM root.sg.d1 [WHERE ...] [GROUP BY ([t1, t2),
    /// 10ms)] [ALIGN BY DEVICE]`: IoTDB's aggregations, over the WHERE range or in GROUP BY's
    /// windows.
    SelectAggregate {
        /// The devices, as for [`Statement::Select`].
        from: Vec<PathPattern>,
        /// The aggregations, in the order written.
        items: Vec<AggregateItem>,
        /// The points aggregated (the WHERE range).
        range: TimeRange,
        /// The value filter: only the rows it keeps are aggregated (`None`: all).
        filter: Option<Expr>,
        /// `GROUP BY ([start, end), interval)`: one row per window.
        group_by: Option<GroupByTime>,
        /// `GROUP BY LEVEL = n[, m]`: the series whose paths agree at these levels (and in
        /// their measurement) are aggregated together, into `count(root.sg.*.s1)`.
        levels: Option<Vec<usize>>,
        /// `GROUP BY TAGS(k, ...)`: the series with the same values of these tags are
        /// aggregated together, one row per combination of values (and window).
        tags: Option<Vec<String>>,
        /// `HAVING condition`: the rows (windows) kept, by their aggregations.
        having: Option<Expr>,
        /// Which rows (windows), in which order, and which columns (SLIMIT, SOFFSET).
        rows: RowWindow,
        /// `FILL(...)`: NULL cells (empty windows) filled.
        fill: Option<Fill>,
        /// `ALIGN BY DEVICE`: a `Device` column and one row (or window's rows) per device.
        align_by_device: bool,
        /// A select list with expressions over aggregations (`count(s1) + 1`, `sum(s1) /
        /// count(s1)`): its items, computed from the result of `items` — then each distinct
        /// call once, without aliases. `None`: the result is `items`' columns.
        outputs: Option<Vec<SelectItem>>,
    },
    /// `SHOW DATABASES [pattern]`
    ShowDatabases {
        /// The databases shown; `None` lists every one.
        pattern: Option<PathPattern>,
    },
    /// `COUNT TIMESERIES [pattern] [GROUP BY LEVEL = n]`
    CountTimeseries {
        /// The series counted; `None` counts every one.
        pattern: Option<PathPattern>,
        /// `GROUP BY LEVEL = n`: one count per path prefix of `n + 1` nodes (`root` is level 0).
        level: Option<usize>,
    },
    /// `COUNT DEVICES [pattern]`
    CountDevices {
        /// The devices counted; `None` counts every one.
        pattern: Option<PathPattern>,
    },
    /// `SHOW CHILD PATHS [pattern]` (`nodes`: `SHOW CHILD NODES`): the nodes one level under the
    /// paths `pattern` matches (`root` when none).
    ShowChild {
        /// The parents.
        pattern: Option<PathPattern>,
        /// Only the child nodes' names, each once.
        nodes: bool,
    },
    /// `SHOW TIMESERIES [pattern]`
    ShowTimeseries {
        /// The series shown (see [`PathPattern::matches`]); `None` lists every series.
        pattern: Option<PathPattern>,
    },
    /// `SHOW DEVICES [pattern]`
    ShowDevices {
        /// The devices shown, as for [`Statement::ShowTimeseries`].
        pattern: Option<PathPattern>,
    },
    /// `FLUSH`: the answering DataNode writes its memtables to files.
    Flush,
    /// `CREATE USER name 'password'` (root only).
    CreateUser {
        /// The user name.
        name: String,
        /// Its password.
        password: String,
    },
    /// `DROP USER name` (root only; root itself cannot be dropped).
    DropUser {
        /// The user name.
        name: String,
    },
    /// `ALTER USER name SET PASSWORD 'password'` (root, or the user itself).
    AlterUserPassword {
        /// The user name.
        name: String,
        /// The new password.
        password: String,
    },
    /// `LIST USER`
    ListUsers,
    /// `SHOW CLUSTER`
    ShowCluster,
    /// `SHOW REGIONS`
    ShowRegions,
    /// `SHOW LEASES`: the ConfigNode's view of every DataNode's lease.
    ShowLeases,
    /// `SHOW LOCAL LEASE`: the answering DataNode's own lease.
    ShowLocalLease,
    /// `SHOW QUERIES`: the statements every DataNode runs that the user may see.
    ShowQueries,
    /// `KILL QUERY '<id>'`, or `KILL ALL QUERIES` (`id` `None`).
    KillQuery {
        /// The query's id.
        id: Option<String>,
    },
    /// `EXPLAIN [ANALYZE [VERBOSE]] query`: the query's plan, a line per row; with ANALYZE
    /// the query runs (its rows dropped) and its time, rows and region reads follow the plan.
    Explain {
        /// `EXPLAIN ANALYZE`.
        analyze: bool,
        /// The query: a SELECT.
        query: Box<Statement>,
    },
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
    /// `X'<hex digits>'`: a BLOB's bytes.
    Blob(Vec<u8>),
    /// `NULL`: no value in this row.
    Null,
}

/// A query's `ORDER BY TIME`, `OFFSET` and `LIMIT`: the rows kept, in time order or its
/// reverse, after skipping `offset` of them; and `SOFFSET`/`SLIMIT`: the series (columns) kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowWindow {
    /// `ORDER BY TIME DESC`: newest first.
    pub descending: bool,
    /// Rows skipped (`OFFSET`).
    pub offset: usize,
    /// Rows kept at most (`LIMIT`); `None` keeps every row.
    pub limit: Option<usize>,
    /// Series skipped (`SOFFSET`).
    pub series_offset: usize,
    /// Series kept at most (`SLIMIT`); `None` keeps every series.
    pub series_limit: Option<usize>,
}

impl RowWindow {
    /// The part of `items` that OFFSET and LIMIT keep.
    pub fn page<T>(&self, items: Vec<T>) -> Vec<T> {
        let limit = self.limit.unwrap_or(usize::MAX);
        items.into_iter().skip(self.offset).take(limit).collect()
    }

    /// The part of `items` that SOFFSET and SLIMIT keep.
    pub fn series<T>(&self, items: Vec<T>) -> Vec<T> {
        let limit = self.series_limit.unwrap_or(usize::MAX);
        items
            .into_iter()
            .skip(self.series_offset)
            .take(limit)
            .collect()
    }
}

/// `FILL(PREVIOUS | LINEAR | constant)`: how the NULL cells of a result's value columns are
/// filled, in the result's order (each device's rows on their own, aligned by device).
#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    /// The column's last value before, if any.
    Previous,
    /// Numbers interpolated on time between the values before and after (none at either end).
    Linear,
    /// The constant, in the columns whose type takes it without loss.
    Constant(Literal),
}

/// One aggregation of a SELECT list: `avg(s1)`, `count(*)`.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregateItem {
    /// The function.
    pub function: AggregateFunction,
    /// The measurement (or an alias), or `*`: every series of each device. MAX_BY's and
    /// MIN_BY's first argument (x), which may be `time`.
    pub measurement: String,
    /// MAX_BY's and MIN_BY's second argument (y): the measurement whose greatest (least) value
    /// picks the row x is read in.
    pub by: Option<String>,
    /// COUNT_IF's arguments (its `measurement` is empty).
    pub count_if: Option<Box<CountIf>>,
    /// `AS name`: the column's name, for an aggregation of one series.
    pub alias: Option<String>,
}

/// `COUNT_IF(predicate, keep[, 'ignoreNull'='true'|'false'])`: how many runs of consecutive
/// rows (of the predicate's series joined on time) satisfy the predicate for a number of rows
/// that `keep` accepts.
#[derive(Clone, Debug, PartialEq)]
pub struct CountIf {
    /// The condition, over measurements of one device.
    pub predicate: Expr,
    /// The comparison a run's length must pass: `keep >= 3`, or a bare `3` (the same).
    pub keep: (BinaryOp, i64),
    /// Whether `keep` was written as a bare number.
    pub keep_bare: bool,
    /// `'ignoreNull'='true'` (the default): a row where the predicate is NULL (a value missing)
    /// is passed over; `false`: it ends the run.
    pub ignore_null: bool,
}

impl CountIf {
    /// Whether a run of `rows` rows counts.
    pub fn keeps(&self, rows: i64) -> bool {
        let (op, n) = self.keep;
        match op {
            BinaryOp::Eq => rows == n,
            BinaryOp::NotEq => rows != n,
            BinaryOp::Lt => rows < n,
            BinaryOp::LtEq => rows <= n,
            BinaryOp::Gt => rows > n,
            _ => rows >= n,
        }
    }

    /// `keep` as written: `3` or `keep > 3`.
    pub fn keep_text(&self) -> String {
        match self.keep_bare {
            true => self.keep.1.to_string(),
            false => format!("keep {} {}", self.keep.0, self.keep.1),
        }
    }
}

/// IoTDB's aggregation functions Fencepost runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateFunction {
    /// `COUNT`: points, INT64.
    Count,
    /// `SUM`: DOUBLE.
    Sum,
    /// `AVG`: DOUBLE.
    Avg,
    /// `MIN_VALUE`: the smallest value, of the series' type.
    MinValue,
    /// `MAX_VALUE`: the greatest value, of the series' type.
    MaxValue,
    /// `EXTREME`: the value of greatest magnitude (the positive one on a tie).
    Extreme,
    /// `FIRST_VALUE`: the value with the smallest timestamp.
    FirstValue,
    /// `LAST_VALUE`: the value with the greatest timestamp.
    LastValue,
    /// `MIN_TIME`: the smallest timestamp, INT64.
    MinTime,
    /// `MAX_TIME`: the greatest timestamp, INT64.
    MaxTime,
    /// `STDDEV` (`STDDEV_SAMP`): the sample standard deviation, DOUBLE; null under two points.
    Stddev,
    /// `STDDEV_POP`: the population standard deviation, DOUBLE.
    StddevPop,
    /// `STDDEV_SAMP`: as `STDDEV`.
    StddevSamp,
    /// `VARIANCE` (`VAR_SAMP`): the sample variance, DOUBLE; null under two points.
    Variance,
    /// `VAR_POP`: the population variance, DOUBLE.
    VarPop,
    /// `VAR_SAMP`: as `VARIANCE`.
    VarSamp,
    /// `TIME_DURATION`: the greatest timestamp minus the smallest, INT64.
    TimeDuration,
    /// `MAX_BY(x, y)`: x in the row where y is greatest (the earliest such row), of x's type
    /// (INT64 for `time`); NULL where x has no value in that row.
    MaxBy,
    /// `MIN_BY(x, y)`: x in the row where y is least, as `MAX_BY`.
    MinBy,
    /// `COUNT_IF(predicate, keep)`: runs of rows satisfying the predicate, INT64 ([`CountIf`]).
    CountIf,
    /// `MODE`: the most frequent value (the earliest seen on a tie), of the series' type.
    Mode,
}

impl AggregateFunction {
    /// Every function.
    pub const ALL: [AggregateFunction; 21] = [
        AggregateFunction::Count,
        AggregateFunction::Sum,
        AggregateFunction::Avg,
        AggregateFunction::MinValue,
        AggregateFunction::MaxValue,
        AggregateFunction::Extreme,
        AggregateFunction::FirstValue,
        AggregateFunction::LastValue,
        AggregateFunction::MinTime,
        AggregateFunction::MaxTime,
        AggregateFunction::Stddev,
        AggregateFunction::StddevPop,
        AggregateFunction::StddevSamp,
        AggregateFunction::Variance,
        AggregateFunction::VarPop,
        AggregateFunction::VarSamp,
        AggregateFunction::TimeDuration,
        AggregateFunction::MaxBy,
        AggregateFunction::MinBy,
        AggregateFunction::CountIf,
        AggregateFunction::Mode,
    ];

    /// The function named `name`, in any case.
    pub fn parse(name: &str) -> Option<AggregateFunction> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// The function the table model names `name` (any case): its `min`, `max`, `first` and
    /// `last` are `MIN_VALUE`, `MAX_VALUE`, `FIRST_VALUE` and `LAST_VALUE`; the others keep the
    /// tree's names.
    pub fn parse_table(name: &str) -> Option<AggregateFunction> {
        let function = match name.to_ascii_lowercase().as_str() {
            "min" => AggregateFunction::MinValue,
            "max" => AggregateFunction::MaxValue,
            "first" => AggregateFunction::FirstValue,
            "last" => AggregateFunction::LastValue,
            "min_value" | "max_value" | "first_value" | "last_value" | "min_time" | "max_time"
            | "time_duration" | "max_by" | "min_by" | "count_if" | "mode" => return None,
            other => return AggregateFunction::parse(other),
        };
        Some(function)
    }

    /// The name as IoTDB prints it in a column's name (`count`, `max_value`).
    pub fn name(self) -> &'static str {
        match self {
            AggregateFunction::Count => "count",
            AggregateFunction::Sum => "sum",
            AggregateFunction::Avg => "avg",
            AggregateFunction::MinValue => "min_value",
            AggregateFunction::MaxValue => "max_value",
            AggregateFunction::Extreme => "extreme",
            AggregateFunction::FirstValue => "first_value",
            AggregateFunction::LastValue => "last_value",
            AggregateFunction::MinTime => "min_time",
            AggregateFunction::MaxTime => "max_time",
            AggregateFunction::Stddev => "stddev",
            AggregateFunction::StddevPop => "stddev_pop",
            AggregateFunction::StddevSamp => "stddev_samp",
            AggregateFunction::Variance => "variance",
            AggregateFunction::VarPop => "var_pop",
            AggregateFunction::VarSamp => "var_samp",
            AggregateFunction::TimeDuration => "time_duration",
            AggregateFunction::MaxBy => "max_by",
            AggregateFunction::MinBy => "min_by",
            AggregateFunction::CountIf => "count_if",
            AggregateFunction::Mode => "mode",
        }
    }

    /// Whether the function takes two arguments (`MAX_BY(x, y)`, `MIN_BY(x, y)`): it reads the
    /// rows of a device, which no statistics answer.
    pub fn takes_two(self) -> bool {
        matches!(self, AggregateFunction::MaxBy | AggregateFunction::MinBy)
    }

    /// Whether the function is answered from a device's rows, read raw (MAX_BY, MIN_BY,
    /// COUNT_IF, MODE), rather than from partial aggregates.
    pub fn reads_rows(self) -> bool {
        self.takes_two() || matches!(self, AggregateFunction::CountIf | AggregateFunction::Mode)
    }

    /// Whether the function is finished from the second moment (`Partial::m2`), which no page
    /// statistics carry.
    pub fn needs_moments(self) -> bool {
        matches!(
            self,
            AggregateFunction::Stddev
                | AggregateFunction::StddevPop
                | AggregateFunction::StddevSamp
                | AggregateFunction::Variance
                | AggregateFunction::VarPop
                | AggregateFunction::VarSamp
        )
    }
}

/// IoTDB's `GROUP BY ([start, end), interval[, step])`: windows `[start + k·step, start +
/// k·step + interval)` for every `start + k·step < end`, cut at `end`; without a step, `step`
/// is `interval` (windows side by side). A step under the interval makes windows that overlap,
/// one over it windows with gaps between. An interval or step in natural months (`1mo`, `1y`)
/// is added on the calendar, in UTC, always from `start` (so windows from January 31st start
/// on February 28th, then March 31st).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupByTime {
    /// The first window's first time, ms.
    pub start: i64,
    /// The end of the last window (excluded), ms; `start < end`.
    pub end: i64,
    /// A window's width, ms; positive.
    pub interval_ms: u64,
    /// From one window's start to the next one's, ms; positive (`interval_ms` unless given).
    pub step_ms: u64,
    /// Natural months in the interval, added before `interval_ms` (`1mo2d`: 1 and 2 days).
    pub interval_months: u32,
    /// Natural months in the step, as `interval_months`.
    pub step_months: u32,
    /// Written left-open, `((t1, t2], interval)`: `start` and `end` are `t1 + 1` and `t2 + 1`
    /// (a window `(a, b]` is `[a + 1, b + 1)` in ms), and a row is labelled with its window's
    /// right end, as IoTDB labels it.
    pub left_open: bool,
}

/// Which measurements a `SELECT` names.
#[derive(Clone, Debug, PartialEq)]
pub enum Projection {
    /// `*`: every series of the device.
    All,
    /// The listed measurements, in order.
    Measurements(Vec<String>),
    /// The listed measurements with their `AS` aliases, in order, when one has an alias: an
    /// alias names the column of the one series its measurement reads.
    Aliased {
        /// The measurements.
        names: Vec<String>,
        /// Each one's alias, if any.
        aliases: Vec<Option<String>>,
    },
    /// A select list with an expression in it (`s1 + s2`, `-s1`, `s1 * 2 AS x`, `s1 > 0`):
    /// each item is a column per combination of the series its names read (IoTDB's expansion),
    /// NULL in a row where an operand is NULL.
    Computed {
        /// The measurements the items name, each once, in first-seen order.
        names: Vec<String>,
        /// The items, in order.
        items: Vec<SelectItem>,
    },
}

/// One item of a computed select list.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectItem {
    /// The expression; a bare measurement is `Expr::Column`.
    pub expr: Expr,
    /// `AS name`: the column's name, for an item that reads one combination of series.
    pub alias: Option<String>,
}

impl Projection {
    /// The measurements named (`None` for `*`).
    pub fn names(&self) -> Option<&[String]> {
        match self {
            Projection::All => None,
            Projection::Measurements(names)
            | Projection::Aliased { names, .. }
            | Projection::Computed { names, .. } => Some(names),
        }
    }

    /// The alias of the `i`-th measurement, if any.
    pub fn alias(&self, i: usize) -> Option<&str> {
        match self {
            Projection::Aliased { aliases, .. } => aliases.get(i)?.as_deref(),
            _ => None,
        }
    }
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

    /// The last time included, as the inclusive bounds of a deletion take it: no upper bound
    /// is every time, `i64::MAX` included.
    pub fn inclusive_end(&self) -> i64 {
        if self.to == i64::MAX {
            i64::MAX
        } else {
            self.to - 1
        }
    }
}

/// A statement of the table model (`sql_dialect=table`). Names are lower case; a table named
/// without its database is in the session's current one.
#[derive(Clone, Debug, PartialEq)]
pub enum TableStatement {
    /// `CREATE DATABASE [IF NOT EXISTS] db`
    CreateDatabase {
        /// The database's name (no `root.`).
        name: String,
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
    },
    /// `DROP DATABASE [IF EXISTS] db`
    DropDatabase {
        /// The database's name.
        name: String,
        /// `IF EXISTS`.
        if_exists: bool,
    },
    /// `USE db` (or `USE "db"`): the session's current database.
    Use {
        /// The database's name.
        name: String,
    },
    /// `SHOW DATABASES`
    ShowDatabases,
    /// `CREATE TABLE [IF NOT EXISTS] [db.]t (c TYPE TAG|ATTRIBUTE|FIELD, ...) [WITH (TTL=ms)]`
    CreateTable {
        /// The database named with the table, if any.
        database: Option<String>,
        /// The table.
        table: common::table::TableSchema,
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
    },
    /// `SHOW TABLES [FROM|IN db]`
    ShowTables {
        /// The database named, if any.
        database: Option<String>,
    },
    /// `DESC [db.]t` / `DESCRIBE [db.]t`
    Describe {
        /// The database named with the table, if any.
        database: Option<String>,
        /// The table.
        table: String,
    },
    /// `SELECT * | c, ... FROM [db.]t [WHERE ...] [ORDER BY time [ASC|DESC]] [LIMIT n]
    /// [OFFSET n]`
    Select(TableSelect),
    /// `SELECT` of aggregations, grouping columns and `date_bin(...)` `FROM [db.]t [WHERE ...]
    /// [GROUP BY ...] [ORDER BY ...] [OFFSET n] [LIMIT n]`.
    SelectAggregate(TableAggregate),
    /// `INSERT INTO [db.]t(time, c1, ...) VALUES (...), ...`: `insert.device` is the table,
    /// `insert.measurements` its columns.
    Insert {
        /// The database named with the table, if any.
        database: Option<String>,
        /// The rows, typed by the table's columns when run.
        insert: Insert,
    },
    /// `DROP TABLE [IF EXISTS] [db.]t`
    DropTable {
        /// The database named with the table, if any.
        database: Option<String>,
        /// The table.
        table: String,
        /// `IF EXISTS`.
        if_exists: bool,
    },
    /// `DELETE FROM [db.]t [WHERE time bounds AND tag = 'value' ...]`: the points of the
    /// table's devices whose tags match, in the time range.
    Delete {
        /// The database named with the table, if any.
        database: Option<String>,
        /// The table.
        table: String,
        /// `time` bounds of the WHERE clause.
        range: TimeRange,
        /// `tag = 'value'` terms of the WHERE clause.
        equals: Vec<(String, String)>,
    },
    /// `EXPLAIN [ANALYZE [VERBOSE]] query`, as the tree model's [`Statement::Explain`].
    Explain {
        /// `EXPLAIN ANALYZE`.
        analyze: bool,
        /// The query: a SELECT.
        query: Box<TableStatement>,
    },
    /// A statement both models share: FLUSH, the user statements, SHOW CLUSTER / REGIONS.
    Shared(Statement),
}

/// A table-model query.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSelect {
    /// The database named with the table, if any.
    pub database: Option<String>,
    /// The table.
    pub table: String,
    /// The columns named (`time` among them, perhaps), or `None` for `*`.
    pub columns: Option<Vec<String>>,
    /// `time` bounds of the WHERE clause.
    pub range: TimeRange,
    /// The rest of the WHERE clause, on any column.
    pub filter: Option<Expr>,
    /// `ORDER BY time`: rows in time order across devices (else device by device).
    pub order_by_time: bool,
    /// `ORDER BY c [DESC], ...` on other columns (or time after one): each key a column name
    /// and whether it is descending; NULL sorts last either way.
    pub order_by: Vec<(String, bool)>,
    /// Direction, OFFSET and LIMIT.
    pub rows: RowWindow,
}

/// A table-model aggregation query.
#[derive(Clone, Debug, PartialEq)]
pub struct TableAggregate {
    /// The database named with the table, if any.
    pub database: Option<String>,
    /// The table.
    pub table: String,
    /// The select list, in order, then the aggregations and columns only HAVING names (the
    /// result's columns are the first `shown`).
    pub items: Vec<TableItem>,
    /// How many of `items` the result shows.
    pub shown: usize,
    /// `time` bounds of the WHERE clause.
    pub range: TimeRange,
    /// The rest of the WHERE clause, on any column.
    pub filter: Option<Expr>,
    /// `HAVING`: a condition on the result's rows, naming its columns, aliases and
    /// aggregations.
    pub having: Option<Expr>,
    /// GROUP BY's TAG and ATTRIBUTE columns (aliases and positions resolved), in order.
    pub group_columns: Vec<String>,
    /// GROUP BY's `date_bin(...)`, if any.
    pub date_bin: Option<DateBin>,
    /// ORDER BY: select-list positions (from 0), each descending or not.
    pub order_by: Vec<(usize, bool)>,
    /// Rows skipped (`OFFSET`).
    pub offset: usize,
    /// Rows kept at most (`LIMIT`).
    pub limit: Option<usize>,
}

/// One entry of a table-model aggregation's select list.
#[derive(Clone, Debug, PartialEq)]
pub struct TableItem {
    /// What it computes.
    pub kind: TableItemKind,
    /// `AS name`.
    pub alias: Option<String>,
}

/// What a [`TableItem`] computes.
#[derive(Clone, Debug, PartialEq)]
pub enum TableItemKind {
    /// A TAG or ATTRIBUTE column the query groups by.
    Column(String),
    /// `date_bin(interval, time[, origin])`: the start of each row's time bin.
    DateBin(DateBin),
    /// `function(column)`; `min(time)` and `max(time)` (or `first(time)`, `last(time)`) are
    /// `MinTime` and `MaxTime` of `time`, `count(*)` and `count(time)` `Count` of `time` (rows).
    Aggregate {
        /// The function (the table model's `min`, `max`, `first` and `last` are the tree's
        /// `MIN_VALUE`, `MAX_VALUE`, `FIRST_VALUE` and `LAST_VALUE`).
        function: AggregateFunction,
        /// The FIELD column, or `time`.
        column: String,
    },
    /// `last_by(x, time)` / `first_by(x, time)`: the FIELD column's value in the group's last
    /// (first) row, NULL when that row has none. (`last_by(time, x)` is `MaxTime` of `x`.)
    ValueAtRow {
        /// The FIELD column.
        column: String,
        /// The last row, else the first.
        last: bool,
    },
    /// `count_if(condition)`: the group's rows where the condition (over the row's columns)
    /// is true, INT64.
    CountIf(Expr),
    /// `max_by(x, y)` / `min_by(x, y)`: x (a column or time) in the group's row where y is
    /// greatest (least), the earliest such row; NULL when x has no value there.
    ExtremeBy {
        /// x.
        x: String,
        /// y.
        y: String,
        /// `max_by`, else `min_by`.
        max: bool,
    },
}

impl TableItemKind {
    /// True for an aggregation (a value per group, not a grouping column or bin).
    pub fn is_aggregation(&self) -> bool {
        !matches!(self, TableItemKind::Column(_) | TableItemKind::DateBin(_))
    }
}

/// `date_bin(interval, time, origin)`: bins of `interval_ms` laid from `origin_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateBin {
    /// Width of a bin, > 0.
    pub interval_ms: u64,
    /// A bin boundary (default 0, the epoch).
    pub origin_ms: i64,
    /// `date_bin_gapfill`: every bin of the WHERE clause's time range has a row in each group
    /// that has one, NULL (count 0) where no point lies.
    pub gapfill: bool,
}

impl DateBin {
    /// The start of the bin holding `time`.
    pub fn bin_start(&self, time: i64) -> i64 {
        let interval = i128::from(self.interval_ms);
        let offset = (i128::from(time) - i128::from(self.origin_ms)).rem_euclid(interval);
        (i128::from(time) - offset) as i64
    }
}
