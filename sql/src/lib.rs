//! IoTDB's SQL subset: a lexer ([`lexer`]), the statements ([`ast`]), a recursive-descent
//! parser ([`parser`]) and an executor over any [`Backend`] ([`exec`]). Keywords are
//! case-insensitive; positions are 1-based lines and columns (columns count characters) within
//! the whole input, so `-e "A; B"` reports B's errors where B sits in that string.
//!
//! Architecture invariant: no networking and no runtime; the DataNode's client service and the
//! CLI bring the backend.

pub mod ast;
pub mod exec;
pub mod expr;
pub mod lexer;
pub mod parser;
pub mod pattern;
pub mod time;

pub use ast::{
    AggregateFunction, AggregateItem, CountIf, DateBin, Fill, GroupByTime, Insert, Literal,
    PathPattern, Projection, RowWindow, SelectItem, Statement, TableAggregate, TableItem,
    TableItemKind, TableSelect, TableStatement, TimeRange,
};
pub use exec::{
    delete_paths, execute, execute_charged, execute_table, execute_table_charged, insert_table,
    row_bytes, Backend, Cell, ExecError, ExecResult, Outcome, OutcomeKind, ResultBudget,
    ResultCharge, TableOutcome,
};
pub use expr::{BinaryOp, Expr};
pub use parser::{
    complete_prefix_bytes, parse_script, parse_script_with_clock, parse_table_statement,
    parse_table_statement_with_clock, Parsed,
};

/// Longest statement accepted, in bytes (the REPL refuses to buffer more).
pub const STATEMENT_BYTES_MAX: usize = 16 << 20;
/// Most rows in one `INSERT` (they travel as one tablet).
pub const INSERT_ROWS_MAX: usize = 100_000;
/// Most measurements named in one statement (`INSERT` columns, `SELECT` list).
pub const MEASUREMENTS_MAX: usize = 1024;
/// Series one query reads at most, its FROM patterns expanded (700 past it).
pub const QUERY_SERIES_MAX: usize = 65_536;

/// A place in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

impl Position {
    /// The first character of an input.
    pub const START: Position = Position { line: 1, column: 1 };
}

/// A statement that cannot be parsed; IoTDB answers these with 700 (SQL_PARSE_ERROR), and
/// IoTDB statements Fencepost does not run yet with 300 (UNSUPPORTED_OPERATION).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {}, column {}: {message}", position.line, position.column)]
pub struct ParseError {
    /// Where the offending token starts (or where the statement ends, for a missing token).
    pub position: Position,
    /// What was expected and what was found.
    pub message: String,
    /// IoTDB's syntax, which Fencepost does not run yet (GROUP BY, value filters, the other
    /// aggregations, the table model, ...).
    pub unsupported: bool,
}

impl ParseError {
    /// A syntax error at `position`.
    pub fn new(position: Position, message: impl Into<String>) -> ParseError {
        ParseError {
            position,
            message: message.into(),
            unsupported: false,
        }
    }
}
