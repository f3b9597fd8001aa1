//! A recursive-descent parser over the lexer's tokens, one statement per `;`-separated group.

use common::DataType;

use super::ast::{Insert, InsertRow, Literal, PathPattern, Statement, TimeRange};
use super::lexer::{advance, tokenize, Token, TokenKind};
use super::time::wall_clock_ms;
use super::{ParseError, Position, INSERT_ROWS_MAX, MEASUREMENTS_MAX, STATEMENT_BYTES_MAX};

/// One statement of a script: where it starts and what it parsed to.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    /// Its first token.
    pub position: Position,
    /// Its text, from its first token to its end (the `;` left out).
    pub text: String,
    /// The statement, or why it is malformed.
    pub result: Result<Statement, ParseError>,
}

/// Parses every `;`-separated statement of `text`, whose first character sits at `base`.
/// Empty statements (`;;`, a trailing `;`) are skipped; a malformed statement does not stop
/// the ones after it. The last statement needs no `;`. `now()` reads the wall clock, once per
/// statement.
pub fn parse_script(text: &str, base: Position) -> Vec<Parsed> {
    parse_script_with_clock(text, base, &wall_clock_ms)
}

/// [`parse_script`] with `now()` read from `clock` (ms since the epoch), at most once per
/// statement so every `now()` of one statement is the same instant.
pub fn parse_script_with_clock(text: &str, base: Position, clock: &dyn Fn() -> i64) -> Vec<Parsed> {
    let tokens = tokenize(text, base);
    let end_of_input = advance(base, text);
    let mut parsed = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let stop = tokens[start..]
            .iter()
            .position(|t| t.kind == TokenKind::Semicolon)
            .map_or(tokens.len(), |i| start + i);
        if stop > start {
            let (end, end_offset) = tokens
                .get(stop)
                .map_or((end_of_input, text.len()), |t| (t.position, t.offset));
            let bytes = end_offset - tokens[start].offset;
            parsed.push(Parsed {
                position: tokens[start].position,
                text: text[tokens[start].offset..end_offset]
                    .trim_end()
                    .to_string(),
                result: parse_statement(&tokens[start..stop], end, bytes, clock),
            });
        }
        start = stop + 1;
    }
    parsed
}

/// The length in bytes of the longest prefix of `text` made of whole statements, i.e. up to and
/// including the last `;` that ends a statement (not one inside a string or comment); 0 if none.
pub fn complete_prefix_bytes(text: &str) -> usize {
    tokenize(text, Position::START)
        .iter()
        .rev()
        .find(|t| t.kind == TokenKind::Semicolon)
        .map_or(0, |t| t.offset + 1)
}

fn parse_statement(
    tokens: &[Token],
    end: Position,
    bytes: usize,
    clock: &dyn Fn() -> i64,
) -> Result<Statement, ParseError> {
    if bytes > STATEMENT_BYTES_MAX {
        return Err(ParseError::new(
            tokens[0].position,
            format!("statement of {bytes} bytes is over the limit of {STATEMENT_BYTES_MAX} bytes"),
        ));
    }
    // IoTDB syntax not run yet is named as such even where the lexer cannot read a token of it.
    if let Some(error) = unsupported(tokens) {
        return Err(error);
    }
    if let Some(error) = lex_error(tokens) {
        return Err(error);
    }

    let mut parser = Parser {
        tokens,
        next: 0,
        end,
        now: Now::new(clock),
        table_model: false,
    };
    let statement = parser.statement()?;
    parser.expect_end()?;
    Ok(statement)
}

/// The first token the lexer could not read, as the statement's error.
fn lex_error(tokens: &[Token]) -> Option<ParseError> {
    tokens.iter().find_map(|t| match &t.kind {
        TokenKind::Error(message) => Some(ParseError::new(t.position, message.clone())),
        _ => None,
    })
}

/// IoTDB's aggregation functions Fencepost does not run yet (those it runs are
/// [`crate::AggregateFunction`]).
const AGGREGATIONS_UNSUPPORTED: [&str; 2] = ["COUNT_TIME", "AVG_BY"];

/// The clauses that pick rows and series of a query's result.
const ROW_CLAUSES: [&str; 5] = ["ORDER", "LIMIT", "OFFSET", "SLIMIT", "SOFFSET"];

/// The clauses after WHERE (and GROUP BY): where a WHERE clause ends.
fn ends_where(word: &str) -> bool {
    ["GROUP", "ALIGN", "FILL", "HAVING"]
        .iter()
        .chain(&ROW_CLAUSES)
        .any(|c| word.eq_ignore_ascii_case(c))
}

/// The first piece of IoTDB's syntax in a statement that Fencepost does not run yet, as an
/// unsupported error (300) naming it, so a client learns what is missing rather than reading a
/// syntax error: the aggregations Fencepost does not run, and the table model's statements
/// (which a table-model session runs).
fn unsupported(tokens: &[Token]) -> Option<ParseError> {
    let word = |t: &Token| match &t.kind {
        TokenKind::Word(w) => Some(w.to_ascii_uppercase()),
        _ => None,
    };
    let refuse = |t: &Token, what: String| Some(not_supported_yet(t.position, &what));
    let other_model = |t: &Token, what: &str| {
        Some(ParseError {
            position: t.position,
            message: format!(
                "{what} is a table-model statement: open the session with sql_dialect=table \
                 (IoTDB's TableSession) to run it"
            ),
            unsupported: true,
        })
    };
    // EXPLAIN's query is checked as the query itself.
    let explained = tokens
        .iter()
        .take(3)
        .take_while(|t| {
            word(t).is_some_and(|w| matches!(w.as_str(), "EXPLAIN" | "ANALYZE" | "VERBOSE"))
        })
        .count();
    let tokens = &tokens[explained..];
    let first = word(tokens.first()?)?;
    match first.as_str() {
        "USE" => return other_model(&tokens[0], "USE"),
        "CREATE" | "DROP" | "SHOW" | "DESC" | "DESCRIBE"
            if tokens
                .get(1)
                .and_then(word)
                .is_some_and(|w| w == "TABLE" || w == "TABLES")
                || first.starts_with("DESC") =>
        {
            let what = match tokens.get(1).and_then(word) {
                Some(second) if !first.starts_with("DESC") => format!("{first} {second}"),
                _ => first.clone(),
            };
            return other_model(&tokens[0], &what);
        }
        "SELECT" => {}
        _ => return None,
    }
    for (i, t) in tokens.iter().enumerate() {
        let Some(w) = word(t) else {
            continue;
        };
        let next_is_paren = tokens.get(i + 1).map(|n| &n.kind) == Some(&TokenKind::LeftParen);
        if next_is_paren && AGGREGATIONS_UNSUPPORTED.contains(&w.as_str()) {
            return refuse(t, format!("the aggregation {w}"));
        }
    }
    None
}

/// "`what` is not supported yet" at `position`: 300, not a syntax error.
fn not_supported_yet(position: Position, what: &str) -> ParseError {
    ParseError {
        position,
        message: format!(
            "{what} is not supported yet; Fencepost runs raw, LAST and aggregate queries (FROM \
             patterns, WHERE filters, GROUP BY time windows, ALIGN BY DEVICE) and the tree \
             model's statements"
        ),
        unsupported: true,
    }
}

/// What kind of path a statement expects, for validation and messages.
#[derive(Clone, Copy)]
enum PathKind {
    /// `root.sg`: two nodes or more.
    Database,
    /// `root.sg.d1`: two nodes or more.
    Device,
    /// `root.sg.d1.s1`: three nodes or more.
    Series,
}

impl PathKind {
    fn example(self) -> &'static str {
        match self {
            PathKind::Database => "a database path like root.sg",
            PathKind::Device => "a device path like root.sg.d1",
            PathKind::Series => "a series path like root.sg.d1.s1",
        }
    }

    fn nodes_min(self) -> usize {
        match self {
            PathKind::Database | PathKind::Device => 2,
            PathKind::Series => 3,
        }
    }
}

struct Parser<'a> {
    tokens: &'a [Token],
    next: usize,
    /// Where the statement ends (its `;`, or the end of the input).
    end: Position,
    /// What `now()` is in this statement.
    now: Now<'a>,
    /// The statement is the table model's: calls in expressions take its function names.
    table_model: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next)
    }

    fn peek_kind(&self) -> Option<&TokenKind> {
        self.peek().map(|t| &t.kind)
    }

    /// "expected `expected`, found '<next token>'" at the next token (or the statement's end).
    fn error(&self, expected: &str) -> ParseError {
        match self.peek() {
            Some(t) => ParseError::new(
                t.position,
                format!("expected {expected}, found '{}'", t.text),
            ),
            None => ParseError::new(
                self.end,
                format!("expected {expected}, found end of statement"),
            ),
        }
    }

    fn error_at(token: &Token, message: String) -> ParseError {
        ParseError::new(token.position, message)
    }

    fn is_keyword(&self, keyword: &str) -> bool {
        matches!(self.peek_kind(), Some(TokenKind::Word(w)) if w.eq_ignore_ascii_case(keyword))
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        let found = self.is_keyword(keyword);
        if found {
            self.next += 1;
        }
        found
    }

    fn expect_keyword(&mut self, keyword: &str) -> Result<(), ParseError> {
        if self.eat_keyword(keyword) {
            Ok(())
        } else {
            Err(self.error(keyword))
        }
    }

    fn eat(&mut self, kind: &TokenKind) -> bool {
        let found = self.peek_kind() == Some(kind);
        if found {
            self.next += 1;
        }
        found
    }

    fn expect(&mut self, kind: &TokenKind, name: &str) -> Result<(), ParseError> {
        if self.eat(kind) {
            Ok(())
        } else {
            Err(self.error(name))
        }
    }

    fn expect_end(&self) -> Result<(), ParseError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("end of statement")),
        }
    }

    fn statement(&mut self) -> Result<Statement, ParseError> {
        const EXPECTED: &str =
            "a statement (CREATE, DROP, DELETE, INSERT, SELECT, SET, UNSET, SHOW, COUNT, REMOVE, FLUSH, ALTER, LIST, KILL, EXPLAIN, QUIT)";
        let keyword = match self.peek_kind() {
            Some(TokenKind::Word(w)) => w.to_ascii_uppercase(),
            _ => return Err(self.error(EXPECTED)),
        };
        match keyword.as_str() {
            "CREATE" => self.create(),
            "DROP" => self.drop(),
            "DELETE" => self.delete(),
            "FLUSH" => {
                self.next += 1;
                Ok(Statement::Flush)
            }
            "ALTER" => self.alter_user(),
            "LIST" => {
                self.next += 1;
                self.expect_keyword("USER")?;
                Ok(Statement::ListUsers)
            }
            "SET" => self.set_ttl(),
            "UNSET" => self.unset_ttl(),
            "REMOVE" => self.remove_data_node(),
            "INSERT" => self.insert(),
            "SELECT" => self.select(),
            "SHOW" => self.show(),
            "COUNT" => self.count(),
            "KILL" => self.kill(),
            "EXPLAIN" => {
                let analyze = self.explain_prefix();
                if !self.is_keyword("SELECT") {
                    return Err(self.error("a query (SELECT) to explain"));
                }
                let query = Box::new(self.select()?);
                Ok(Statement::Explain { analyze, query })
            }
            "QUIT" | "EXIT" => {
                self.next += 1;
                Ok(Statement::Quit)
            }
            _ => Err(self.error(EXPECTED)),
        }
    }

    /// `EXPLAIN [ANALYZE [VERBOSE]]`: whether ANALYZE is asked (VERBOSE adds nothing here: the
    /// analysis always lists every fragment).
    fn explain_prefix(&mut self) -> bool {
        debug_assert!(self.is_keyword("EXPLAIN"));
        self.next += 1;
        let analyze = self.eat_keyword("ANALYZE");
        if analyze {
            self.eat_keyword("VERBOSE");
        }
        analyze
    }

    /// `KILL QUERY '<id>'` or `KILL ALL QUERIES`.
    fn kill(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("KILL")?;
        if self.eat_keyword("ALL") {
            self.expect_keyword("QUERIES")?;
            return Ok(Statement::KillQuery { id: None });
        }
        self.expect_keyword("QUERY")?;
        match self.peek_kind() {
            Some(TokenKind::Str(id)) => {
                let id = id.clone();
                self.next += 1;
                Ok(Statement::KillQuery { id: Some(id) })
            }
            _ => Err(self.error("a query id in quotes, as SHOW QUERIES lists it")),
        }
    }

    /// `(key = value, ...)`: keys and values are names, numbers or quoted strings.
    fn key_values(&mut self) -> Result<std::collections::BTreeMap<String, String>, ParseError> {
        self.expect(&TokenKind::LeftParen, "'('")?;
        let mut pairs = std::collections::BTreeMap::new();
        loop {
            let key = self.label("a key")?;
            self.expect(&TokenKind::Equal, "'='")?;
            let value = self.label("a value")?;
            pairs.insert(key, value);
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(pairs)
    }

    fn label(&mut self, expected: &str) -> Result<String, ParseError> {
        let text = match self.peek_kind() {
            Some(TokenKind::Word(w) | TokenKind::Number(w) | TokenKind::Str(w)) => w.clone(),
            _ => return Err(self.error(expected)),
        };
        self.next += 1;
        Ok(text)
    }

    fn data_type(&mut self, expected: &str) -> Result<DataType, ParseError> {
        let parsed = match self.peek_kind() {
            Some(TokenKind::Word(w)) => DataType::parse(w),
            _ => None,
        };
        match parsed {
            Some(t) => {
                self.next += 1;
                Ok(t)
            }
            None => Err(self.error(&format!(
                "{expected} (BOOLEAN, INT32, INT64, FLOAT, DOUBLE, TEXT)"
            ))),
        }
    }

    /// IoTDB's `, ENCODING=...`, `, COMPRESSOR=...` (also `COMPRESSION`), each at most once:
    /// the names as written (the ConfigNode checks them against the type).
    fn codec_attributes(&mut self) -> Result<(Option<String>, Option<String>), ParseError> {
        let (mut encoding, mut compressor) = (None, None);
        while self.peek().is_some() && !self.is_keyword("TAGS") && !self.is_keyword("ATTRIBUTES") {
            self.eat(&TokenKind::Comma);
            let slot = if self.is_keyword("ENCODING") {
                &mut encoding
            } else if self.is_keyword("COMPRESSOR") || self.is_keyword("COMPRESSION") {
                &mut compressor
            } else {
                return Err(self.error("ENCODING or COMPRESSOR"));
            };
            if slot.is_some() {
                return Err(self.error("each of ENCODING and COMPRESSOR at most once"));
            }
            self.next += 1;
            self.expect(&TokenKind::Equal, "'='")?;
            let Some(TokenKind::Word(name)) = self.peek_kind() else {
                return Err(self.error("an encoding or compressor name"));
            };
            *slot = Some(name.to_ascii_uppercase());
            self.next += 1;
        }
        Ok((encoding, compressor))
    }

    fn insert(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("INSERT")?;
        self.expect_keyword("INTO")?;
        let device = self.path(PathKind::Device)?;
        let (time_column, measurements) = self.insert_columns()?;
        // `ALIGNED VALUES`: IoTDB's aligned devices; Fencepost stores every device one way.
        self.eat_keyword("ALIGNED");
        let rows = self.insert_values(time_column, measurements.len())?;
        Ok(Statement::Insert(Insert {
            device,
            measurements,
            rows,
        }))
    }

    /// `VALUES (row), ...`: at most [`INSERT_ROWS_MAX`] rows of `measurements` values and a time.
    fn insert_values(
        &mut self,
        time_column: usize,
        measurements: usize,
    ) -> Result<Vec<InsertRow>, ParseError> {
        self.expect_keyword("VALUES")?;
        let mut rows = Vec::new();
        loop {
            if rows.len() == INSERT_ROWS_MAX {
                return Err(self.error(&format!(
                    "end of statement: one INSERT takes at most {INSERT_ROWS_MAX} rows"
                )));
            }
            rows.push(self.insert_row(time_column, measurements)?);
            if !self.eat(&TokenKind::Comma) {
                return Ok(rows);
            }
        }
    }

    /// `(time, s1, s2)`: the time column's index and the measurements in order.
    fn insert_columns(&mut self) -> Result<(usize, Vec<String>), ParseError> {
        self.expect(&TokenKind::LeftParen, "'('")?;
        let mut time_column = None;
        let mut measurements: Vec<String> = Vec::new();
        let mut index = 0;
        loop {
            if self.is_keyword("TIME") || self.is_keyword("TIMESTAMP") {
                if time_column.is_some() {
                    return Err(self.error("a measurement name (time appears twice)"));
                }
                time_column = Some(index);
                self.next += 1;
            } else {
                if measurements.len() == MEASUREMENTS_MAX {
                    return Err(self.error(&format!(
                        "')': at most {MEASUREMENTS_MAX} measurements in one statement"
                    )));
                }
                let token = self.peek().cloned();
                let name = self.measurement()?;
                if let Some(token) = token.filter(|_| measurements.contains(&name)) {
                    return Err(Self::error_at(
                        &token,
                        format!("measurement '{name}' appears twice"),
                    ));
                }
                measurements.push(name);
            }
            index += 1;
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        let Some(time_column) = time_column else {
            return Err(self.error("',' and a time column (time or timestamp)"));
        };
        if measurements.is_empty() {
            return Err(self.error("',' and a measurement besides time"));
        }
        self.expect(&TokenKind::RightParen, "',' or ')'")?;
        Ok((time_column, measurements))
    }

    /// `(1, 1.5, 'x')`: as many literals as columns; the time column a time expression.
    fn insert_row(
        &mut self,
        time_column: usize,
        measurements: usize,
    ) -> Result<InsertRow, ParseError> {
        let open = self.peek().cloned();
        self.expect(&TokenKind::LeftParen, "'('")?;
        let mut timestamp = None;
        let mut values = Vec::with_capacity(measurements);
        let columns = measurements + 1;
        let mut index = 0;
        loop {
            if index == columns {
                return Err(self.error(&format!(
                    "')': the row has more values than the {columns} columns"
                )));
            }
            if index == time_column {
                timestamp = Some(self.time_expression()?);
            } else {
                values.push(self.literal()?);
            }
            index += 1;
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        if index < columns {
            return Err(self.error(&format!(
                "',': the row has {index} values for {columns} columns"
            )));
        }
        self.expect(&TokenKind::RightParen, "')'")?;
        let timestamp = match (timestamp, open) {
            (Some(t), _) => t,
            (None, open) => unreachable!("a complete row has its time column: {open:?}"),
        };
        Ok(InsertRow { timestamp, values })
    }

    /// A number (with an optional sign), a quoted string, `X'<hex>'`, TRUE, FALSE or NULL.
    fn literal(&mut self) -> Result<Literal, ParseError> {
        const EXPECTED: &str = "a value (number, 'string', X'hex', true, false or null)";
        if let Some(blob) = self.blob_literal()? {
            return Ok(blob);
        }
        let literal = match self.peek_kind() {
            Some(TokenKind::Minus | TokenKind::Plus | TokenKind::Number(_)) => {
                return self.number(EXPECTED)
            }
            Some(TokenKind::Str(s)) => Literal::Text(s.clone()),
            Some(TokenKind::Word(w)) if w.eq_ignore_ascii_case("true") => Literal::Boolean(true),
            Some(TokenKind::Word(w)) if w.eq_ignore_ascii_case("false") => Literal::Boolean(false),
            Some(TokenKind::Word(w)) if w.eq_ignore_ascii_case("null") => Literal::Null,
            _ => return Err(self.error(EXPECTED)),
        };
        self.next += 1;
        Ok(literal)
    }

    /// `X'0a1B'` (IoTDB's BLOB literal: an `X` right before a quoted string of an even number of
    /// hex digits), or `None` when the next tokens are not one.
    fn blob_literal(&mut self) -> Result<Option<Literal>, ParseError> {
        let (Some(x), Some(quoted)) = (self.tokens.get(self.next), self.tokens.get(self.next + 1))
        else {
            return Ok(None);
        };
        let (TokenKind::Word(w), TokenKind::Str(hex)) = (&x.kind, &quoted.kind) else {
            return Ok(None);
        };
        if !w.eq_ignore_ascii_case("x") || quoted.offset != x.offset + 1 {
            return Ok(None);
        }
        let Some(bytes) = common::blob_from_hex(hex) else {
            return Err(Self::error_at(
                quoted,
                format!("BLOB literal X'{hex}' is not an even number of hex digits"),
            ));
        };
        self.next += 2;
        Ok(Some(Literal::Blob(bytes)))
    }

    /// `[+|-]digits[.digits][e[+|-]digits]`: an integer when there is neither fraction nor
    /// exponent.
    fn number(&mut self, expected: &str) -> Result<Literal, ParseError> {
        let negative = match self.peek_kind() {
            Some(TokenKind::Minus) => {
                self.next += 1;
                true
            }
            Some(TokenKind::Plus) => {
                self.next += 1;
                false
            }
            _ => false,
        };
        let Some(TokenKind::Number(digits)) = self.peek_kind().cloned() else {
            return Err(self.error(expected));
        };
        let token = self.peek().cloned();
        self.next += 1;
        let text = if negative {
            format!("-{digits}")
        } else {
            digits.clone()
        };
        let out_of_range = || {
            let token = token.as_ref().expect("the number token was peeked");
            Self::error_at(token, format!("number '{text}' is out of range"))
        };
        if digits.contains(['.', 'e', 'E']) {
            match text.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Literal::Float(v)),
                _ => Err(out_of_range()),
            }
        } else {
            text.parse::<i64>()
                .map(Literal::Integer)
                .map_err(|_| out_of_range())
        }
    }

    /// "`what` is not supported yet" (300) at the next token.
    fn unsupported_here(&self, what: &str) -> ParseError {
        match self.peek().or(self.tokens.last()) {
            Some(t) => not_supported_yet(t.position, what),
            None => self.error(what),
        }
    }

    /// `[WHERE bound AND bound ...]` with `bound := time (>=|>|<=|<|=) integer`; GROUP BY and
    /// the row clauses may follow.
    fn where_clause(&mut self) -> Result<TimeRange, ParseError> {
        let mut range = TimeRange::ALL;
        let next_clause = matches!(self.peek_kind(), Some(TokenKind::Word(w)) if ends_where(w));
        if self.peek().is_none() || next_clause {
            return Ok(range);
        }
        if !self.eat_keyword("WHERE") {
            return Err(self.error("WHERE or end of statement"));
        }
        loop {
            self.time_bound(&mut range)?;
            if !self.eat_keyword("AND") {
                return Ok(range);
            }
        }
    }

    fn time_bound(&mut self, range: &mut TimeRange) -> Result<(), ParseError> {
        if !(self.eat_keyword("TIME") || self.eat_keyword("TIMESTAMP")) {
            return Err(self.error("time (only time bounds are supported)"));
        }
        let operator = match self.peek_kind() {
            Some(
                k @ (TokenKind::Greater
                | TokenKind::GreaterEqual
                | TokenKind::Less
                | TokenKind::LessEqual
                | TokenKind::Equal),
            ) => k.clone(),
            _ => return Err(self.error("one of >=, >, <=, <, =")),
        };
        self.next += 1;
        let bound = self.time_expression()?;
        narrow(range, &operator, bound);
        Ok(())
    }

    fn measurement(&mut self) -> Result<String, ParseError> {
        self.measurement_or("a measurement name")
    }

    /// A single path node: a word without dots or wildcards.
    fn measurement_or(&mut self, expected: &str) -> Result<String, ParseError> {
        match self.peek_kind() {
            Some(TokenKind::Word(w)) if !w.contains(['.', '*']) => {
                let name = w.clone();
                self.next += 1;
                Ok(name)
            }
            _ => Err(self.error(expected)),
        }
    }

    /// A dotted path starting with `root` (any case, normalised to `root`), without wildcards.
    fn path(&mut self, kind: PathKind) -> Result<String, ParseError> {
        let path = match self.peek_kind() {
            Some(TokenKind::Word(w)) => normalise_path(w, kind.nodes_min()),
            _ => None,
        };
        match path {
            Some(p) if !p.contains('*') => {
                self.next += 1;
                Ok(p)
            }
            _ => Err(self.error(kind.example())),
        }
    }

    fn show(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("SHOW")?;
        let keyword = match self.peek_kind() {
            Some(TokenKind::Word(w)) => w.to_ascii_uppercase(),
            _ => String::new(),
        };
        let statement =
            match keyword.as_str() {
                "DATABASES" => {
                    self.next += 1;
                    let pattern = self.show_pattern()?;
                    return Ok(Statement::ShowDatabases { pattern });
                }
                "CHILD" => {
                    self.next += 1;
                    return self.show_child();
                }
                "CLUSTER" => Statement::ShowCluster,
                "REGIONS" => Statement::ShowRegions,
                "LEASES" => Statement::ShowLeases,
                "QUERIES" => Statement::ShowQueries,
                "TIMESERIES" => {
                    self.next += 1;
                    let pattern = self.show_pattern()?;
                    return Ok(Statement::ShowTimeseries { pattern });
                }
                "DEVICES" => {
                    self.next += 1;
                    let pattern = self.show_pattern()?;
                    return Ok(Statement::ShowDevices { pattern });
                }
                "LOCAL" => {
                    self.next += 1;
                    self.expect_keyword("LEASE")?;
                    return Ok(Statement::ShowLocalLease);
                }
                _ => return Err(self.error(
                    "DATABASES, TIMESERIES, DEVICES, CHILD PATHS, CHILD NODES, CLUSTER, REGIONS, \
                     LEASES, LOCAL LEASE or QUERIES",
                )),
            };
        self.next += 1;
        Ok(statement)
    }

    /// The pattern of `SHOW TIMESERIES|DEVICES [pattern]`.
    /// A series path or pattern of `DELETE FROM`.
    fn delete_pattern(&mut self) -> Result<PathPattern, ParseError> {
        const EXPECTED: &str = "a series path or pattern like root.sg.d1.s1 or root.sg.d1.*";
        let pattern = match self.peek_kind() {
            Some(TokenKind::Word(word)) => {
                PathPattern::parse(word).filter(|p| p.has_wildcard() || p.as_series().is_some())
            }
            _ => None,
        };
        match pattern {
            Some(pattern) => {
                self.next += 1;
                Ok(pattern)
            }
            None => Err(self.error(EXPECTED)),
        }
    }

    fn show_pattern(&mut self) -> Result<Option<PathPattern>, ParseError> {
        const EXPECTED: &str = "end of statement or a path pattern like root.sg.** or root.sg.d1.*";
        if self.is_keyword("GROUP") {
            return Ok(None);
        }
        let Some(TokenKind::Word(word)) = self.peek_kind() else {
            return match self.peek() {
                None => Ok(None),
                Some(_) => Err(self.error(EXPECTED)),
            };
        };
        match PathPattern::parse(word) {
            Some(pattern) => {
                self.next += 1;
                Ok(Some(pattern))
            }
            None => Err(self.error(EXPECTED)),
        }
    }
}

/// Narrows `range` by `time <operator> bound`.
fn narrow(range: &mut TimeRange, operator: &TokenKind, bound: i64) {
    // `> i64::MAX` selects nothing; `<= i64::MAX` cannot include i64::MAX itself in a
    // half-open range, which is documented on `TimeRange::ALL`.
    let after = bound.checked_add(1);
    match operator {
        TokenKind::GreaterEqual => range.from = range.from.max(bound),
        TokenKind::Greater => range.from = after.map_or(i64::MAX, |a| range.from.max(a)),
        TokenKind::Less => range.to = range.to.min(bound),
        TokenKind::LessEqual => range.to = range.to.min(after.unwrap_or(i64::MAX)),
        TokenKind::Equal => {
            range.from = range.from.max(bound);
            range.to = range.to.min(after.unwrap_or(i64::MAX));
        }
        other => unreachable!("time_bound only passes comparison operators, not {other:?}"),
    }
}

/// `path` with its first node `root` in lower case, if it has at least `nodes_min` nonempty
/// nodes and starts with `root`.
fn normalise_path(path: &str, nodes_min: usize) -> Option<String> {
    let mut nodes = path.split('.');
    let first = nodes.next()?;
    if !first.eq_ignore_ascii_case("root") {
        return None;
    }
    let rest: Vec<&str> = nodes.collect();
    if rest.len() + 1 < nodes_min || rest.iter().any(|n| n.is_empty()) {
        return None;
    }
    Some(
        std::iter::once("root")
            .chain(rest)
            .collect::<Vec<_>>()
            .join("."),
    )
}

mod admin;
mod aggregate;
mod expr;
mod schema;
mod select;
mod table;
mod time_expr;
pub use table::{parse_table_statement, parse_table_statement_with_clock};
use time_expr::Now;

#[cfg(test)]
mod tests;
