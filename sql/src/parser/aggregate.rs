//! Aggregate queries: a SELECT list of IoTDB's aggregations (`count(s1)`, `avg(*)`), which may
//! not be mixed with raw columns, and `GROUP BY ([t1, t2), interval)` with an interval of
//! IoTDB's duration units (`10ms`, `1h30m`). Natural months and years (`mo`, `y`), units finer
//! than the millisecond, the left-open window `(t1, t2]`, sliding steps and the other GROUP BY
//! forms answer 300.

use super::{not_supported_yet, ParseError, Parser, Statement, Token, TokenKind, MEASUREMENTS_MAX};
use crate::ast::{AggregateFunction, AggregateItem, CountIf, GroupByTime, Literal, SelectItem};
use crate::expr::{BinaryOp, Expr};
use crate::lexer::duration_parts;

/// Why a SELECT list mixing raw columns and aggregations is refused (IoTDB refuses it too).
pub(super) const MIXED: &str =
    "raw columns and aggregations cannot be mixed in one SELECT (IoTDB refuses a raw data and \
     aggregation hybrid query)";

/// An example of the GROUP BY Fencepost runs, for messages.
const GROUP_BY_EXAMPLE: &str = "GROUP BY ([0, 1000), 100ms)";

impl Parser<'_> {
    /// True when the next token is a word right before `(`: a function call.
    pub(super) fn at_function(&self) -> bool {
        matches!(self.peek_kind(), Some(TokenKind::Word(_)))
            && self.tokens.get(self.next + 1).map(|t| &t.kind) == Some(&TokenKind::LeftParen)
    }

    /// The rest of `SELECT <aggregations> FROM device [WHERE ...] [GROUP BY ...]`, after SELECT.
    pub(super) fn select_aggregate(&mut self) -> Result<Statement, ParseError> {
        let (mut items, outputs) = self.aggregate_list()?;
        let from = self.from()?;
        let (range, filter) = self.where_filter()?;
        let (group_by, levels, tags) = if self.is_keyword("GROUP") {
            self.group_by()?
        } else {
            (None, None, None)
        };
        let having = self.having()?;
        if let (Some(_), Some(having)) = (&outputs, &having) {
            // HAVING's calls are computed too, though not shown.
            add_calls(&mut items, having);
        }
        let (rows, fill) = self.row_clauses()?;
        let align_at = self.next;
        let align_by_device = self.align_by()?;
        if align_by_device && (levels.is_some() || tags.is_some()) {
            return Err(Self::error_at(
                &self.tokens[align_at],
                "GROUP BY LEVEL and TAGS merge devices; they do not take ALIGN BY DEVICE"
                    .to_string(),
            ));
        }
        if tags.is_some() && fill.is_some() {
            return Err(not_supported_yet(
                self.tokens[align_at.min(self.tokens.len() - 1)].position,
                "FILL with GROUP BY TAGS",
            ));
        }
        Ok(Statement::SelectAggregate {
            from,
            items,
            range,
            filter,
            group_by,
            levels,
            tags,
            having,
            rows,
            fill,
            align_by_device,
            outputs,
        })
    }

    /// The select list of an aggregate query: aggregations (`count(s1) AS n`, `max_by(x, y)`),
    /// or, when one item is an expression over them (`count(s1) + 1`, `sum(s1) / count(s1)`),
    /// each distinct call as an item and the list as outputs.
    fn aggregate_list(
        &mut self,
    ) -> Result<(Vec<AggregateItem>, Option<Vec<SelectItem>>), ParseError> {
        let mut listed: Vec<Result<AggregateItem, SelectItem>> = Vec::new();
        loop {
            if listed.len() == MEASUREMENTS_MAX {
                return Err(self.error(&format!(
                    "FROM: at most {MEASUREMENTS_MAX} aggregations in one statement"
                )));
            }
            let at = self.next;
            if self.at_function() {
                let item = self.aggregate_item()?;
                if self.at_item_end() {
                    listed.push(Ok(item));
                } else {
                    // The call starts an expression: read it again as one.
                    self.next = at;
                    listed.push(Err(self.aggregate_expression()?));
                }
            } else {
                if let Some(t) = self.peek() {
                    if matches!(t.kind, TokenKind::Word(_) | TokenKind::Star) {
                        return Err(Self::error_at(t, MIXED.to_string()));
                    }
                }
                listed.push(Err(self.aggregate_expression()?));
            }
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        if listed.iter().all(Result::is_ok) {
            return Ok((listed.into_iter().flatten().collect(), None));
        }
        let mut outputs = Vec::with_capacity(listed.len());
        for item in listed {
            outputs.push(match item {
                Err(output) => output,
                Ok(item) if item.function.reads_rows() => {
                    return Err(not_supported_yet(
                        self.tokens[self.next.min(self.tokens.len() - 1)].position,
                        &format!(
                            "{} beside an expression over aggregations",
                            item.function.name().to_ascii_uppercase()
                        ),
                    ))
                }
                Ok(item) => SelectItem {
                    expr: Expr::Call {
                        function: item.function.name().to_string(),
                        arg: item.measurement,
                    },
                    alias: item.alias,
                },
            });
        }
        let mut items: Vec<AggregateItem> = Vec::new();
        for output in &outputs {
            add_calls(&mut items, &output.expr);
        }
        Ok((items, Some(outputs)))
    }

    /// True at the end of a select item: `,`, FROM or the statement's end.
    fn at_item_end(&self) -> bool {
        match self.peek_kind() {
            None | Some(TokenKind::Comma) => true,
            Some(TokenKind::Word(w)) => w.eq_ignore_ascii_case("FROM"),
            _ => false,
        }
    }

    /// An expression over aggregations (`count(s1) * 2 AS twice`): calls, constants and
    /// operators, no raw measurement and no time.
    fn aggregate_expression(&mut self) -> Result<SelectItem, ParseError> {
        let at = self.next;
        let expr = self.or_expr(0)?;
        if !expr.columns().is_empty() || expr.reads_time() {
            return Err(Self::error_at(&self.tokens[at], MIXED.to_string()));
        }
        if expr.calls().is_empty() {
            return Err(Self::error_at(
                &self.tokens[at],
                "expected an aggregation like count(s1) in the expression".to_string(),
            ));
        }
        let alias = if self.eat_keyword("AS") {
            Some(self.measurement_or("an alias (a name without '.' or '*')")?)
        } else {
            None
        };
        Ok(SelectItem { expr, alias })
    }

    /// `function(measurement)` or `function(*)`; a function Fencepost does not run is 300.
    fn aggregate_item(&mut self) -> Result<AggregateItem, ParseError> {
        let Some(token) = self.peek().cloned() else {
            return Err(self.error("an aggregation like count(s1)"));
        };
        let TokenKind::Word(name) = &token.kind else {
            return Err(self.error("an aggregation like count(s1)"));
        };
        let Some(function) = AggregateFunction::parse(name) else {
            let what = format!("the function {}", name.to_ascii_uppercase());
            return Err(not_supported_yet(token.position, &what));
        };
        self.next += 1;
        self.expect(&TokenKind::LeftParen, "'('")?;
        if function == AggregateFunction::CountIf {
            let count_if = self.count_if_arguments()?;
            self.expect(&TokenKind::RightParen, "')'")?;
            let alias = if self.eat_keyword("AS") {
                Some(self.measurement_or("an alias (a name without '.' or '*')")?)
            } else {
                None
            };
            return Ok(AggregateItem {
                function,
                measurement: String::new(),
                by: None,
                count_if: Some(Box::new(count_if)),
                alias,
            });
        }
        let (measurement, by) = if function.takes_two() {
            let x = self.measurement_or("a measurement name or time")?;
            self.expect(
                &TokenKind::Comma,
                "',' and the measurement that picks the row",
            )?;
            let y_at = self.next;
            let y = self.measurement_or("a measurement name")?;
            if y.eq_ignore_ascii_case("time") || y.eq_ignore_ascii_case("timestamp") {
                return Err(Self::error_at(
                    &self.tokens[y_at],
                    format!(
                        "{}'s second argument is a measurement, not time",
                        function.name().to_ascii_uppercase()
                    ),
                ));
            }
            (x, Some(y))
        } else if self.eat(&TokenKind::Star) {
            ("*".to_string(), None)
        } else {
            (self.measurement_or("'*' or a measurement name")?, None)
        };
        self.expect(&TokenKind::RightParen, "')'")?;
        let alias = if self.eat_keyword("AS") {
            Some(self.measurement_or("an alias (a name without '.' or '*')")?)
        } else {
            None
        };
        Ok(AggregateItem {
            function,
            measurement,
            by,
            count_if: None,
            alias,
        })
    }

    /// COUNT_IF's arguments after `(`: `predicate, keep[, 'ignoreNull'='true'|'false']`, where
    /// `keep` is `n` (a run of at least n rows) or `keep <op> n`.
    fn count_if_arguments(&mut self) -> Result<CountIf, ParseError> {
        let predicate = self.or_expr(0)?;
        if !predicate.calls().is_empty() || predicate.columns().is_empty() {
            return Err(self.error("a condition on measurements, then ','"));
        }
        self.expect(&TokenKind::Comma, "',' and the run length to keep")?;
        let keep_bare = !self.eat_keyword("KEEP");
        let op = if keep_bare {
            BinaryOp::GtEq
        } else {
            let op = match self.peek_kind() {
                Some(TokenKind::GreaterEqual) => BinaryOp::GtEq,
                Some(TokenKind::Greater) => BinaryOp::Gt,
                Some(TokenKind::Equal) => BinaryOp::Eq,
                Some(TokenKind::NotEqual) => BinaryOp::NotEq,
                Some(TokenKind::Less) => BinaryOp::Lt,
                Some(TokenKind::LessEqual) => BinaryOp::LtEq,
                _ => return Err(self.error("a comparison after keep (>=, >, =, !=, <, <=)")),
            };
            self.next += 1;
            op
        };
        let rows = match self.peek_kind() {
            Some(TokenKind::Number(n)) => n.parse::<i64>().ok(),
            _ => None,
        };
        let Some(rows) = rows else {
            return Err(self.error("a run length: a whole number of rows"));
        };
        self.next += 1;
        let mut ignore_null = true;
        if self.eat(&TokenKind::Comma) {
            let attribute = |p: &mut Self, expected: &str| match p.peek_kind() {
                Some(TokenKind::Str(text)) => {
                    let text = text.to_ascii_lowercase();
                    p.next += 1;
                    Ok(text)
                }
                _ => Err(p.error(expected)),
            };
            if attribute(self, "'ignoreNull'")? != "ignorenull" {
                return Err(self.error("COUNT_IF takes one attribute, 'ignoreNull'"));
            }
            self.expect(&TokenKind::Equal, "'='")?;
            ignore_null = match attribute(self, "'true' or 'false'")?.as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(self.error("'true' or 'false' for 'ignoreNull'")),
            };
        }
        Ok(CountIf {
            predicate,
            keep: (op, rows),
            keep_bare,
            ignore_null,
        })
    }

    /// `GROUP BY ([start, end), interval)`, `GROUP BY LEVEL = n[, m ...]`, `GROUP BY TAGS(k,
    /// ...)`, or the window then LEVEL or TAGS.
    #[allow(clippy::type_complexity)]
    fn group_by(
        &mut self,
    ) -> Result<(Option<GroupByTime>, Option<Vec<usize>>, Option<Vec<String>>), ParseError> {
        self.expect_keyword("GROUP")?;
        self.expect_keyword("BY")?;
        if self.is_keyword("LEVEL") {
            return Ok((None, Some(self.levels()?), None));
        }
        if self.is_keyword("TAGS") {
            return Ok((None, None, Some(self.tag_keys()?)));
        }
        let window = self.group_by_time()?;
        if !self.eat(&TokenKind::Comma) {
            return Ok((Some(window), None, None));
        }
        if self.is_keyword("TAGS") {
            return Ok((Some(window), None, Some(self.tag_keys()?)));
        }
        if !self.is_keyword("LEVEL") {
            return Err(
                self.unsupported_here("a grouping other than LEVEL or TAGS after a time window")
            );
        }
        Ok((Some(window), Some(self.levels()?), None))
    }

    /// `TAGS(k, ...)`: the tag keys grouped by.
    fn tag_keys(&mut self) -> Result<Vec<String>, ParseError> {
        self.expect_keyword("TAGS")?;
        self.expect(&TokenKind::LeftParen, "'(' and tag keys")?;
        let mut keys = Vec::new();
        loop {
            keys.push(self.measurement_or("a tag key")?);
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(keys)
    }

    /// `LEVEL = n[, m ...]`: the levels kept (`root` is level 0).
    fn levels(&mut self) -> Result<Vec<usize>, ParseError> {
        self.expect_keyword("LEVEL")?;
        self.expect(&TokenKind::Equal, "'=' after LEVEL")?;
        let mut levels = Vec::new();
        loop {
            let expected = "a level (0 is root)";
            match self.number(expected)? {
                Literal::Integer(n) if n >= 0 => {
                    levels.push(usize::try_from(n).unwrap_or(usize::MAX))
                }
                _ => return Err(self.error(expected)),
            }
            if !self.eat(&TokenKind::Comma) {
                return Ok(levels);
            }
        }
    }

    /// `([start, end), interval)`.
    fn group_by_time(&mut self) -> Result<GroupByTime, ParseError> {
        if let Some(TokenKind::Word(w)) = self.peek_kind() {
            let what = format!("GROUP BY {}", w.to_ascii_uppercase());
            return Err(self.unsupported_here(&what));
        }
        self.expect(
            &TokenKind::LeftParen,
            &format!("'(' as in {GROUP_BY_EXAMPLE}"),
        )?;
        let left_open = match self.peek_kind() {
            Some(TokenKind::LeftBracket) => false,
            Some(TokenKind::LeftParen) => true,
            Some(TokenKind::Duration(_)) => {
                return Err(self.unsupported_here(&format!(
                    "GROUP BY without a time range; give one, as in {GROUP_BY_EXAMPLE}"
                )))
            }
            _ => return Err(self.error(&format!("'[' as in {GROUP_BY_EXAMPLE}"))),
        };
        self.next += 1;
        let start_at = self.next;
        let start = self.time_expression()?;
        self.expect(&TokenKind::Comma, "','")?;
        let end_at = self.next;
        let end = self.time_expression()?;
        if left_open {
            self.expect(&TokenKind::RightBracket, "']': the window is (t1, t2]")?;
        } else {
            self.expect(&TokenKind::RightParen, "')': the window is [t1, t2)")?;
        }
        if start >= end {
            let shown = if left_open {
                format!("({start}, {end}]")
            } else {
                format!("[{start}, {end})")
            };
            return Err(Self::error_at(
                &self.tokens[end_at],
                format!("the GROUP BY window {shown} is empty: its start must be before its end"),
            ));
        }
        // (t1, t2] holds the same milliseconds as [t1 + 1, t2 + 1).
        let (start, end) = if left_open {
            match (start.checked_add(1), end.checked_add(1)) {
                (Some(s), Some(e)) => (s, e),
                _ => {
                    return Err(Self::error_at(
                        &self.tokens[start_at],
                        "the GROUP BY window ends past the last millisecond".to_string(),
                    ))
                }
            }
        } else {
            (start, end)
        };
        self.expect(&TokenKind::Comma, "',' and the interval")?;
        let (interval_months, interval_ms) = self.calendar_interval()?;
        let (step_months, step_ms) = if self.eat(&TokenKind::Comma) {
            self.calendar_interval()?
        } else {
            (interval_months, interval_ms)
        };
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(GroupByTime {
            start,
            end,
            interval_ms,
            step_ms,
            interval_months,
            step_months,
            left_open,
        })
    }

    /// GROUP BY's interval or step: a positive duration, as natural months (`mo`, `y`) and ms.
    fn calendar_interval(&mut self) -> Result<(u32, u64), ParseError> {
        let Some(token) = self.peek().cloned() else {
            return Err(self.error("an interval like 10ms"));
        };
        let TokenKind::Duration(text) = &token.kind else {
            return Err(self.error("an interval like 10ms (units ms, s, m, h, d, w, mo, y)"));
        };
        let (months, ms) = calendar_duration(text).map_err(|e| e.at(&token))?;
        if months == 0 && ms == 0 {
            return Err(Self::error_at(
                &token,
                format!("the GROUP BY interval must be positive, found '{text}'"),
            ));
        }
        self.next += 1;
        Ok((months, ms))
    }

    /// GROUP BY's interval: a positive duration, in ms.
    pub(super) fn interval(&mut self) -> Result<u64, ParseError> {
        let Some(token) = self.peek().cloned() else {
            return Err(self.error("an interval like 10ms"));
        };
        let TokenKind::Duration(text) = &token.kind else {
            return Err(self.error("an interval like 10ms (units ms, s, m, h, d, w)"));
        };
        let interval = duration_token_ms(&token, text)?;
        if interval == 0 {
            return Err(Self::error_at(
                &token,
                format!("the GROUP BY interval must be positive, found '{text}'"),
            ));
        }
        self.next += 1;
        Ok(interval)
    }
}

/// Appends to `items` each call of `expr` they lack, as an aggregation without an alias.
fn add_calls(items: &mut Vec<AggregateItem>, expr: &Expr) {
    for (function, arg) in expr.calls() {
        let function = AggregateFunction::parse(&function).expect("a call names a function");
        if !items
            .iter()
            .any(|i| i.function == function && i.measurement == arg && i.alias.is_none())
        {
            items.push(AggregateItem {
                function,
                measurement: arg,
                by: None,
                count_if: None,
                alias: None,
            });
        }
    }
}

/// The duration `text` of `token` in ms: 300 for the units IoTDB takes and Fencepost does not,
/// 700 when it is out of range.
pub(super) fn duration_token_ms(token: &Token, text: &str) -> Result<u64, ParseError> {
    duration_ms(text).map_err(|e| e.at(token))
}

/// Why a duration is not taken.
#[derive(Debug, PartialEq)]
enum DurationError {
    /// IoTDB takes it; Fencepost does not yet (300).
    Unsupported(String),
    /// Out of range (700).
    Malformed(String),
}

impl DurationError {
    /// The parse error at `token`.
    fn at(self, token: &Token) -> ParseError {
        match self {
            DurationError::Unsupported(what) => not_supported_yet(token.position, &what),
            DurationError::Malformed(message) => ParseError::new(token.position, message),
        }
    }
}

/// A duration literal (`10ms`, `1h30m`) in milliseconds; 300 for natural months, which only
/// GROUP BY takes.
fn duration_ms(text: &str) -> Result<u64, DurationError> {
    match calendar_duration(text)? {
        (0, ms) => Ok(ms),
        _ => Err(DurationError::Unsupported(
            "a natural month or year (mo, y) outside GROUP BY's interval (months differ in \
             length); use days (d) or weeks (w)"
                .to_string(),
        )),
    }
}

/// A duration literal (`10ms`, `1h30m`, `1mo2d`, `1y`) as natural months (a year is 12) and
/// milliseconds.
fn calendar_duration(text: &str) -> Result<(u32, u64), DurationError> {
    let out_of_range = || DurationError::Malformed(format!("duration '{text}' is out of range"));
    let parts = duration_parts(text)
        .ok_or_else(|| DurationError::Malformed(format!("'{text}' is not a duration")))?;
    let (mut months, mut total): (u32, u64) = (0, 0);
    for (digits, unit) in parts {
        let count: u64 = digits.parse().map_err(|_| out_of_range())?;
        let per_unit = match unit.as_str() {
            "mo" => Some(1),
            "y" => Some(12),
            _ => None,
        };
        if let Some(per_unit) = per_unit {
            months = u32::try_from(count)
                .ok()
                .and_then(|n| n.checked_mul(per_unit))
                .and_then(|n| months.checked_add(n))
                .ok_or_else(out_of_range)?;
            continue;
        }
        let unit_ms: u64 = match unit.as_str() {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            _ => {
                return Err(DurationError::Unsupported(format!(
                    "the unit '{unit}' in a duration (times are in milliseconds)"
                )))
            }
        };
        total = count
            .checked_mul(unit_ms)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(out_of_range)?;
    }
    Ok((months, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_script, Position, TimeRange};

    fn parse(text: &str) -> Result<Statement, ParseError> {
        let mut parsed = parse_script(text, Position::START);
        assert_eq!(parsed.len(), 1, "{text}");
        parsed.pop().unwrap().result
    }

    fn item(function: AggregateFunction, measurement: &str) -> AggregateItem {
        AggregateItem {
            function,
            measurement: measurement.into(),
            by: None,
            count_if: None,
            alias: None,
        }
    }

    #[test]
    fn every_function_in_any_case_and_star() {
        for function in AggregateFunction::ALL {
            if function.takes_two() || function == AggregateFunction::CountIf {
                continue;
            }
            for name in [function.name().to_string(), function.name().to_uppercase()] {
                let text = format!("SELECT {name}(s1), {name}(*) FROM root.sg.d1");
                assert_eq!(
                    parse(&text),
                    Ok(Statement::SelectAggregate {
                        from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
                        items: vec![item(function, "s1"), item(function, "*")],
                        range: TimeRange::ALL,
                        filter: None,
                        group_by: None,
                        levels: None,
                        tags: None,
                        having: None,
                        rows: crate::RowWindow::default(),
                        fill: None,
                        align_by_device: false,
                        outputs: None,
                    }),
                    "{text}"
                );
            }
        }
        let Ok(Statement::SelectAggregate { items, .. }) =
            parse("SELECT MAX_BY(t, i) AS m, min_by(time, i) FROM root.sg.d1")
        else {
            panic!("MAX_BY and MIN_BY parse");
        };
        let by = |function, x: &str, alias: Option<&str>| AggregateItem {
            function,
            measurement: x.into(),
            by: Some("i".into()),
            count_if: None,
            alias: alias.map(Into::into),
        };
        assert_eq!(
            items,
            [
                by(AggregateFunction::MaxBy, "t", Some("m")),
                by(AggregateFunction::MinBy, "time", None)
            ]
        );
        assert_eq!(
            AggregateFunction::parse("Max_Value"),
            Some(AggregateFunction::MaxValue)
        );
        assert_eq!(AggregateFunction::parse("max"), None);
    }

    #[test]
    fn mixed_functions_with_where_and_group_by() {
        use AggregateFunction::{Avg, Count, MaxValue};
        assert_eq!(
            parse(
                "SELECT count(s1), avg(s1), max_value(s2) FROM root.sg.d1 \
                 WHERE time >= 0 AND time < 1000 GROUP BY ([0, 1000), 100ms)"
            ),
            Ok(Statement::SelectAggregate {
                from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
                items: vec![item(Count, "s1"), item(Avg, "s1"), item(MaxValue, "s2")],
                range: TimeRange { from: 0, to: 1000 },
                filter: None,
                group_by: Some(GroupByTime {
                    start: 0,
                    end: 1000,
                    interval_ms: 100,
                    step_ms: 100,
                    interval_months: 0,
                    step_months: 0,
                    left_open: false,
                }),
                levels: None,
                tags: None,
                having: None,
                rows: crate::RowWindow::default(),
                fill: None,
                align_by_device: false,
                outputs: None,
            })
        );
        let levels = |text: &str| match parse(text) {
            Ok(Statement::SelectAggregate {
                group_by, levels, ..
            }) => (group_by.is_some(), levels),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            levels("select count(s1) from root.sg.* group by level = 1"),
            (false, Some(vec![1]))
        );
        assert_eq!(
            levels("select count(s1) from root.** group by ([0, 9), 3ms), level = 1, 3"),
            (true, Some(vec![1, 3]))
        );
        assert!(
            parse("select count(s1) from root.sg.* group by level = 1 align by device").is_err()
        );
        let group_by = |text: &str| match parse(text) {
            Ok(Statement::SelectAggregate { group_by, .. }) => group_by.expect(text),
            other => panic!("{text}: {other:?}"),
        };
        let g = group_by("select count(*) from root.sg.d1 group by ([-5, +7), 2ms)");
        assert_eq!((g.start, g.end, g.interval_ms), (-5, 7, 2));
        let g = group_by("select count(*) from root.sg.d1 group by ((-5, 7], 2ms)");
        assert_eq!((g.start, g.end, g.left_open), (-4, 8, true));
        assert!(parse("select count(*) from root.sg.d1 group by ((0, 7), 2ms)").is_err());
        for (unit, ms) in [
            ("ms", 1),
            ("s", 1_000),
            ("m", 60_000),
            ("h", 3_600_000),
            ("d", 86_400_000),
            ("w", 604_800_000),
            ("h30m", 3_600_000 + 30 * 60_000),
        ] {
            let text = format!("SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 10), 1{unit})");
            assert_eq!(group_by(&text).interval_ms, ms, "{text}");
        }
    }

    #[test]
    fn group_by_takes_natural_months_and_years() {
        let group_by = |text: &str| match parse(text) {
            Ok(Statement::SelectAggregate { group_by, .. }) => group_by.expect(text),
            other => panic!("{text}: {other:?}"),
        };
        let g = group_by("SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 100), 1mo2d, 1y)");
        assert_eq!((g.interval_months, g.interval_ms), (1, 2 * 86_400_000));
        assert_eq!((g.step_months, g.step_ms), (12, 0));
        let g = group_by("SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 100), 3MO)");
        assert_eq!((g.interval_months, g.step_months, g.step_ms), (3, 3, 0));
        assert_eq!(calendar_duration("1y1mo"), Ok((13, 0)));
        assert!(matches!(
            calendar_duration("99999999999mo"),
            Err(DurationError::Malformed(_))
        ));
    }

    #[test]
    fn group_by_forms_not_run_yet_are_unsupported() {
        for (text, what) in [
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY TAGS(a) FILL(PREVIOUS)",
                "FILL with GROUP BY TAGS",
            ),
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 100), 10ms), SESSION(5ms)",
                "a grouping other than LEVEL or TAGS",
            ),
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY (10ms)",
                "GROUP BY without a time range",
            ),
            ("SELECT cos(s1) FROM root.sg.d1", "the function COS"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.unsupported, "{text}: {e}");
            assert!(e.message.starts_with(what), "{text}: {e}");
        }
    }

    #[test]
    fn malformed_aggregate_queries_are_syntax_errors() {
        for (text, message) in [
            (
                "SELECT count(s1), s2 FROM root.sg.d1",
                "line 1, column 19: raw columns and aggregations cannot be mixed",
            ),
            (
                "SELECT s2, count(s1) FROM root.sg.d1",
                "line 1, column 8: raw columns and aggregations cannot be mixed",
            ),
            (
                "SELECT count(s1), * FROM root.sg.d1",
                "line 1, column 19: raw columns and aggregations cannot be mixed",
            ),
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 100), 0ms)",
                "line 1, column 54: the GROUP BY interval must be positive, found '0ms'",
            ),
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY ([100, 100), 1ms)",
                "line 1, column 50: the GROUP BY window [100, 100) is empty",
            ),
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 100], 1ms)",
                "line 1, column 51: expected ')': the window is [t1, t2), found ']'",
            ),
            (
                "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 100), 10)",
                "line 1, column 54: expected an interval like 10ms",
            ),
            (
                "SELECT s1 FROM root.sg.d1 GROUP BY ([0, 100), 10ms)",
                "line 1, column 27: expected end of statement: GROUP BY takes aggregations",
            ),
            (
                "SELECT count(s1.x) FROM root.sg.d1",
                "line 1, column 14: expected '*' or a measurement name",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert!(!e.unsupported, "{text}: {e}");
            assert!(e.to_string().starts_with(message), "{text}: {e}");
        }
    }

    #[test]
    fn durations_in_milliseconds() {
        assert_eq!(duration_ms("10ms"), Ok(10));
        assert_eq!(duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(duration_ms("2S"), Ok(2_000));
        assert_eq!(duration_ms("1d1w"), Ok(86_400_000 + 604_800_000));
        assert!(matches!(
            duration_ms("1mo"),
            Err(DurationError::Unsupported(m)) if m.contains("natural month")
        ));
        assert!(matches!(
            duration_ms("1y"),
            Err(DurationError::Unsupported(_))
        ));
        assert!(matches!(
            duration_ms("5us"),
            Err(DurationError::Unsupported(m)) if m.contains("milliseconds")
        ));
        assert!(matches!(
            duration_ms("99999999999999999999ms"),
            Err(DurationError::Malformed(_))
        ));
        assert!(matches!(
            duration_ms("9999999999999w"),
            Err(DurationError::Malformed(_))
        ));
    }
}
