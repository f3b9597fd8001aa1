//! The table model's statements (`sql_dialect=table`), over the same tokens and helpers as the
//! tree model's. Names (databases, tables, columns) are case-insensitive and kept lower case,
//! as IoTDB keeps them; `"name"` quotes one.

use common::table::{self, Category, TableColumn, TableSchema};
use common::DataType;

use super::{lex_error, not_supported_yet, parse_statement, Now, Parser};

mod aggregate;
use crate::ast::{Insert, RowWindow, Statement, TableSelect, TableStatement, TimeRange};
use crate::lexer::{advance, tokenize, TokenKind};
use crate::time::wall_clock_ms;
use crate::{ParseError, Position, MEASUREMENTS_MAX, STATEMENT_BYTES_MAX};

/// Clauses a table-model query does not take yet: 300 naming them.
const TABLE_CLAUSES_UNSUPPORTED: [&str; 5] = ["OR", "GROUP", "FILL", "HAVING", "ALIGN"];

/// Parses the one table-model statement of `text` (a trailing `;` allowed); `now()` reads the
/// wall clock once.
pub fn parse_table_statement(text: &str) -> Result<TableStatement, ParseError> {
    parse_table_statement_with_clock(text, &wall_clock_ms)
}

/// [`parse_table_statement`] with `now()` read from `clock` (ms since the epoch), at most once.
pub fn parse_table_statement_with_clock(
    text: &str,
    clock: &dyn Fn() -> i64,
) -> Result<TableStatement, ParseError> {
    if text.len() > STATEMENT_BYTES_MAX {
        return Err(ParseError::new(
            Position::START,
            format!(
                "statement of {} bytes is over the limit of {STATEMENT_BYTES_MAX} bytes",
                text.len()
            ),
        ));
    }
    let tokens = tokenize(text, Position::START);
    let mut groups = tokens
        .split(|t| t.kind == TokenKind::Semicolon)
        .filter(|g| !g.is_empty());
    let Some(statement) = groups.next() else {
        return Err(ParseError::new(Position::START, "no statement"));
    };
    if let Some(second) = groups.next() {
        return Err(ParseError::new(
            second[0].position,
            "one statement per call",
        ));
    }
    if let Some(error) = lex_error(statement) {
        return Err(error);
    }
    let end = tokens
        .iter()
        .find(|t| t.kind == TokenKind::Semicolon && t.offset > statement[0].offset)
        .map_or_else(|| advance(Position::START, text), |t| t.position);
    let mut parser = Parser {
        tokens: statement,
        next: 0,
        end,
        now: Now::new(clock),
        table_model: true,
    };
    let parsed = match parser.table_statement()? {
        Some(parsed) => parsed,
        None => return shared(statement, end, text.len(), clock),
    };
    parser.expect_end()?;
    Ok(parsed)
}

/// A statement both models share, parsed as the tree model's; the tree model's own statements
/// (paths under `root`) answer 300 here.
fn shared(
    tokens: &[crate::lexer::Token],
    end: Position,
    bytes: usize,
    clock: &dyn Fn() -> i64,
) -> Result<TableStatement, ParseError> {
    let statement = parse_statement(tokens, end, bytes, clock)?;
    match statement {
        Statement::Flush
        | Statement::CreateUser { .. }
        | Statement::DropUser { .. }
        | Statement::AlterUserPassword { .. }
        | Statement::ListUsers
        | Statement::ShowCluster
        | Statement::ShowRegions
        | Statement::ShowLeases
        | Statement::ShowLocalLease
        | Statement::ShowQueries
        | Statement::KillQuery { .. }
        | Statement::RemoveDataNode { .. } => Ok(TableStatement::Shared(statement)),
        _ => Err(ParseError {
            position: tokens[0].position,
            message: "a tree-model statement in a table-model session: open the session with \
                      sql_dialect=tree to run it"
                .into(),
            unsupported: true,
        }),
    }
}

impl Parser<'_> {
    /// A table-model statement, or `None` when the statement is one both models share.
    fn table_statement(&mut self) -> Result<Option<TableStatement>, ParseError> {
        let word = |p: &Self, ahead: usize| match p.tokens.get(p.next + ahead).map(|t| &t.kind) {
            Some(TokenKind::Word(w)) => w.to_ascii_uppercase(),
            _ => String::new(),
        };
        let statement = match (word(self, 0).as_str(), word(self, 1).as_str()) {
            ("CREATE", "DATABASE") => {
                self.next += 2;
                let if_not_exists = self.if_exists(true)?;
                let name = self.name("a database name")?;
                TableStatement::CreateDatabase {
                    name,
                    if_not_exists,
                }
            }
            ("DROP", "DATABASE") => {
                self.next += 2;
                let if_exists = self.if_exists(false)?;
                let name = self.name("a database name")?;
                TableStatement::DropDatabase { name, if_exists }
            }
            ("USE", _) => {
                self.next += 1;
                TableStatement::Use {
                    name: self.name("a database name")?,
                }
            }
            ("SHOW", "DATABASES") => {
                self.next += 2;
                TableStatement::ShowDatabases
            }
            ("SHOW", "TABLES") => {
                self.next += 2;
                let database = if self.eat_keyword("FROM") || self.eat_keyword("IN") {
                    Some(self.name("a database name")?)
                } else {
                    None
                };
                TableStatement::ShowTables { database }
            }
            ("DESC" | "DESCRIBE", _) => {
                self.next += 1;
                let (database, table) = self.qualified()?;
                TableStatement::Describe { database, table }
            }
            ("CREATE", "TABLE") => {
                self.next += 2;
                self.create_table()?
            }
            ("EXPLAIN", _) => self.table_explain()?,
            ("SELECT", _) => {
                self.next += 1;
                if self.table_select_aggregates() {
                    TableStatement::SelectAggregate(self.table_aggregate()?)
                } else {
                    TableStatement::Select(self.table_select()?)
                }
            }
            ("INSERT", "INTO") => {
                self.next += 2;
                self.table_insert()?
            }
            ("DELETE", "FROM") => {
                self.next += 2;
                let (database, table) = self.qualified()?;
                let (range, equals) = self.table_where()?;
                if let Some(TokenKind::Word(w)) = self.peek_kind() {
                    let w = w.to_ascii_uppercase();
                    if w == "OR" {
                        return Err(self.unsupported_here("OR in a table-model DELETE"));
                    }
                }
                TableStatement::Delete {
                    database,
                    table,
                    range,
                    equals,
                }
            }
            ("DROP", "TABLE") => {
                self.next += 2;
                let if_exists = self.if_exists(false)?;
                let (database, table) = self.qualified()?;
                TableStatement::DropTable {
                    database,
                    table,
                    if_exists,
                }
            }
            ("ALTER", "TABLE") | ("UPDATE" | "DELETE", _) => {
                let what = format!(
                    "{} in the table model",
                    self.tokens[self.next].text.to_ascii_uppercase()
                );
                return Err(self.unsupported_here(&what));
            }
            _ => return Ok(None),
        };
        Ok(Some(statement))
    }

    /// `EXPLAIN [ANALYZE [VERBOSE]] SELECT ...` of the table model.
    fn table_explain(&mut self) -> Result<TableStatement, ParseError> {
        let analyze = self.explain_prefix();
        if !self.is_keyword("SELECT") {
            return Err(self.error("a query (SELECT) to explain"));
        }
        let query = self
            .table_statement()?
            .expect("a SELECT is the table model's");
        Ok(TableStatement::Explain {
            analyze,
            query: Box::new(query),
        })
    }

    /// `IF NOT EXISTS` (`not` true) or `IF EXISTS`, if there.
    fn if_exists(&mut self, not: bool) -> Result<bool, ParseError> {
        if !self.eat_keyword("IF") {
            return Ok(false);
        }
        if not {
            self.expect_keyword("NOT")?;
        }
        self.expect_keyword("EXISTS")?;
        Ok(true)
    }

    /// One name, lower case: a word without dots, or a quoted one.
    fn name(&mut self, expected: &str) -> Result<String, ParseError> {
        let name = match self.peek_kind() {
            Some(TokenKind::Word(w)) if !w.contains(['.', '*']) => w.to_lowercase(),
            Some(TokenKind::Str(w)) => w.to_lowercase(),
            _ => return Err(self.error(expected)),
        };
        if let Err(reason) = table::check_name(&name) {
            return Err(self.error(&format!("{expected} ({reason})")));
        }
        self.next += 1;
        Ok(name)
    }

    /// `t` or `db.t`.
    fn qualified(&mut self) -> Result<(Option<String>, String), ParseError> {
        const EXPECTED: &str = "a table name, or database.table";
        let text = match self.peek_kind() {
            Some(TokenKind::Word(w)) => w.to_lowercase(),
            Some(TokenKind::Str(_)) => return Ok((None, self.name("a table name")?)),
            _ => return Err(self.error(EXPECTED)),
        };
        let (database, table) = match text.split_once('.') {
            Some((db, t)) => (Some(db.to_string()), t.to_string()),
            None => (None, text),
        };
        let names = database.iter().chain(std::iter::once(&table));
        if let Some(reason) = names.filter_map(|n| table::check_name(n).err()).next() {
            return Err(self.error(&format!("{EXPECTED} ({reason})")));
        }
        self.next += 1;
        Ok((database, table))
    }

    /// After `CREATE TABLE`.
    fn create_table(&mut self) -> Result<TableStatement, ParseError> {
        let if_not_exists = self.if_exists(true)?;
        let (database, name) = self.qualified()?;
        self.expect(&TokenKind::LeftParen, "'('")?;
        let mut columns: Vec<TableColumn> = Vec::new();
        loop {
            if columns.len() == table::COLUMNS_MAX {
                return Err(self.error(&format!("at most {} columns", table::COLUMNS_MAX)));
            }
            // IoTDB lets the time column be declared: `time TIMESTAMP TIME`.
            if self.is_keyword(table::TIME_COLUMN) {
                self.next += 1;
                self.expect_keyword("TIMESTAMP")?;
                self.expect_keyword("TIME")?;
            } else {
                let column = self.name("a column name")?;
                let data_type = self.data_type("a data type")?;
                let category = match self.peek_kind() {
                    Some(TokenKind::Word(w)) => match Category::parse(w) {
                        Some(c) => {
                            self.next += 1;
                            c
                        }
                        None => Category::Field,
                    },
                    _ => Category::Field,
                };
                if self.eat_keyword("COMMENT") {
                    self.label("a comment")?;
                }
                if category != Category::Field && data_type != DataType::String {
                    return Err(self.error(&format!(
                        "STRING for the {} column {column}, not {data_type}",
                        category.name()
                    )));
                }
                if columns.iter().any(|c| c.name == column) {
                    return Err(self.error(&format!("column {column} once")));
                }
                columns.push(TableColumn {
                    name: column,
                    category,
                    data_type,
                });
            }
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        self.expect(&TokenKind::RightParen, "',' or ')'")?;
        let mut ttl_ms = None;
        if self.eat_keyword("WITH") {
            for (key, value) in self.key_values()? {
                if !key.eq_ignore_ascii_case("TTL") {
                    return Err(self.unsupported_here(&format!("the table property {key}")));
                }
                ttl_ms = match value.to_ascii_uppercase().as_str() {
                    "INF" => None,
                    v => match v.parse::<i64>() {
                        Ok(ms) if ms > 0 => Some(ms),
                        _ => return Err(self.error("TTL in milliseconds (> 0) or 'INF'")),
                    },
                };
            }
        }
        Ok(TableStatement::CreateTable {
            database,
            table: TableSchema {
                name,
                columns,
                ttl_ms,
            },
            if_not_exists,
        })
    }

    /// After `INSERT INTO`: the tree model's row syntax, with a table's columns.
    fn table_insert(&mut self) -> Result<TableStatement, ParseError> {
        let (database, table) = self.qualified()?;
        let (time_column, columns) = self.insert_columns()?;
        let mut measurements = Vec::with_capacity(columns.len());
        for column in columns {
            let column = column.to_lowercase();
            if let Err(reason) = table::check_name(&column) {
                return Err(self.error(&format!("a column name ({reason})")));
            }
            measurements.push(column);
        }
        let rows = self.insert_values(time_column, measurements.len())?;
        Ok(TableStatement::Insert {
            database,
            insert: Insert {
                device: table,
                measurements,
                rows,
            },
        })
    }

    /// `[WHERE term AND ...]`: `time` bounds, and `column = 'value'` terms.
    fn table_where(&mut self) -> Result<(TimeRange, Vec<(String, String)>), ParseError> {
        let mut range = TimeRange::ALL;
        let mut equals = Vec::new();
        if !self.eat_keyword("WHERE") {
            return Ok((range, equals));
        }
        loop {
            if self.is_keyword("TIME") {
                self.time_bound(&mut range)?;
            } else {
                let column = self.name("time or a TAG or ATTRIBUTE column")?;
                if !self.eat(&TokenKind::Equal) {
                    return Err(self.unsupported_here("a WHERE term other than column = 'value'"));
                }
                let value = match self.peek_kind() {
                    Some(TokenKind::Str(v)) => v.clone(),
                    _ => return Err(self.unsupported_here("a comparison with a non-string value")),
                };
                self.next += 1;
                equals.push((column, value));
            }
            if !self.eat_keyword("AND") {
                return Ok((range, equals));
            }
        }
    }

    /// After `SELECT`.
    fn table_select(&mut self) -> Result<TableSelect, ParseError> {
        let columns = if self.eat(&TokenKind::Star) {
            None
        } else {
            let mut names = Vec::new();
            loop {
                if names.len() == MEASUREMENTS_MAX {
                    return Err(self.error(&format!("at most {MEASUREMENTS_MAX} columns")));
                }
                let next_is_paren =
                    self.tokens.get(self.next + 1).map(|t| &t.kind) == Some(&TokenKind::LeftParen);
                if next_is_paren {
                    let what = format!("the function {}", self.tokens[self.next].text);
                    return Err(self.unsupported_here(&what));
                }
                names.push(match self.is_keyword(table::TIME_COLUMN) {
                    true => {
                        self.next += 1;
                        table::TIME_COLUMN.to_string()
                    }
                    false => self.name("'*' or a column name")?,
                });
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
            }
            Some(names)
        };
        self.expect_keyword("FROM")?;
        let (database, table) = self.qualified()?;
        let (range, filter) = self.where_filter()?;
        let order_by = self.raw_order_by(columns.as_deref())?;
        let order_by_time = order_by.is_empty() && self.is_keyword("ORDER");
        // The tree model's FILL, SLIMIT and SOFFSET are not the table model's yet.
        let clauses_at = self.next;
        let mut fill = None;
        let rows: RowWindow = self.row_window(&mut fill)?;
        if fill.is_some() || rows.series_limit.is_some() || rows.series_offset > 0 {
            return Err(not_supported_yet(
                self.tokens[clauses_at.min(self.tokens.len() - 1)].position,
                "FILL, SLIMIT and SOFFSET in a table-model query",
            ));
        }
        if let Some(TokenKind::Word(w)) = self.peek_kind() {
            let w = w.to_ascii_uppercase();
            if TABLE_CLAUSES_UNSUPPORTED.contains(&w.as_str()) {
                return Err(self.unsupported_here(&format!("{w} in a table-model query")));
            }
        }
        Ok(TableSelect {
            database,
            table,
            columns,
            range,
            filter,
            order_by_time,
            order_by,
            rows,
        })
    }

    /// `ORDER BY key [ASC|DESC] [NULLS LAST], ...` over columns (a name, or a 1-based position
    /// in `columns`) unless it is `ORDER BY time [ASC|DESC]` alone, which is left to the row
    /// clauses (an empty answer).
    fn raw_order_by(
        &mut self,
        columns: Option<&[String]>,
    ) -> Result<Vec<(String, bool)>, ParseError> {
        let at = self.next;
        if !self.is_keyword("ORDER") {
            return Ok(Vec::new());
        }
        self.next += 1;
        self.expect_keyword("BY")?;
        let time_alone = self.is_keyword(table::TIME_COLUMN)
            && {
                let mut after = self.next + 1;
                if self.tokens.get(after).is_some_and(|t| {
                matches!(&t.kind, TokenKind::Word(w) if w.eq_ignore_ascii_case("ASC") || w.eq_ignore_ascii_case("DESC"))
            }) {
                after += 1;
            }
                !matches!(
                    self.tokens.get(after).map(|t| &t.kind),
                    Some(TokenKind::Comma)
                ) && !matches!(self.tokens.get(after).map(|t| &t.kind), Some(TokenKind::Word(w)) if w.eq_ignore_ascii_case("NULLS"))
            };
        if time_alone {
            self.next = at;
            return Ok(Vec::new());
        }
        let mut keys = Vec::new();
        loop {
            let name = match self.peek_kind().cloned() {
                Some(TokenKind::Number(n)) => {
                    let position: usize = n.parse().unwrap_or(0);
                    let named = columns.and_then(|c| c.get(position.wrapping_sub(1)));
                    let Some(named) = named else {
                        return Err(self.error(
                            "a column, or the 1-based position of one in the select list \
                             (positions need the columns written out, not *)",
                        ));
                    };
                    self.next += 1;
                    named.clone()
                }
                _ if self.eat_keyword(table::TIME_COLUMN) => table::TIME_COLUMN.to_string(),
                _ => self.name("a column to order by")?,
            };
            let descending = self.eat_keyword("DESC");
            if !descending {
                self.eat_keyword("ASC");
            }
            if self.eat_keyword("NULLS") {
                if self.is_keyword("FIRST") {
                    return Err(self.unsupported_here("NULLS FIRST (NULL sorts last)"));
                }
                self.expect_keyword("LAST")?;
            }
            keys.push((name, descending));
            if !self.eat(&TokenKind::Comma) {
                return Ok(keys);
            }
        }
    }
}
