//! Time expressions, wherever a statement takes a time (WHERE's time bounds, GROUP BY's window,
//! DELETE's range, INSERT's time column): a term — an integer in ms since the epoch (with an
//! optional sign), `now()` in any case, or a date-time literal, unquoted or quoted (see
//! [`crate::time::datetime_ms`]) — then `+ duration` or `- duration` any number of times
//! (`now() - 1h30m`, `2024-01-01T00:00:00 + 1d - 10m`), as IoTDB's `timeValue` and
//! `dateExpression`. IoTDB adds durations only to `now()` and date-times; Fencepost also to an
//! integer. A result past i64 milliseconds is a syntax error.

use super::aggregate::duration_token_ms;
use super::{Literal, ParseError, Parser, TokenKind};
use crate::time::datetime_ms;

/// What a time is, for messages.
const EXPECTED: &str = "a time (an integer in ms, a date-time like 2024-01-01T00:00:00, or now())";

/// What may follow `+` or `-` in a time expression, for messages.
const DURATION: &str = "a duration like 1h or 500ms after '+' or '-'";

/// `now()` in one statement: the clock, read at most once, so every `now()` of the statement is
/// the same instant.
pub(super) struct Now<'a> {
    clock: &'a dyn Fn() -> i64,
    read: Option<i64>,
}

impl<'a> Now<'a> {
    pub(super) fn new(clock: &'a dyn Fn() -> i64) -> Self {
        Now { clock, read: None }
    }

    fn ms(&mut self) -> i64 {
        *self.read.get_or_insert_with(|| (self.clock)())
    }
}

impl Parser<'_> {
    /// A time expression, in milliseconds since the epoch.
    pub(super) fn time_expression(&mut self) -> Result<i64, ParseError> {
        let first = self.next;
        let mut time = self.time_term()?;
        loop {
            let add = match self.peek_kind() {
                Some(TokenKind::Plus) => true,
                Some(TokenKind::Minus) => false,
                _ => return Ok(time),
            };
            self.next += 1;
            let Some(token) = self.peek().cloned() else {
                return Err(self.error(DURATION));
            };
            let TokenKind::Duration(text) = &token.kind else {
                return Err(self.error(DURATION));
            };
            let ms = duration_token_ms(&token, text)?;
            self.next += 1;
            let moved = i64::try_from(ms).ok().and_then(|ms| {
                if add {
                    time.checked_add(ms)
                } else {
                    time.checked_sub(ms)
                }
            });
            time = moved.ok_or_else(|| {
                Self::error_at(
                    &self.tokens[first],
                    format!(
                        "time '{}' is out of range (times are i64 milliseconds)",
                        self.source_text(first)
                    ),
                )
            })?;
        }
    }

    /// An integer, `now()`, or a date-time literal, quoted or not.
    fn time_term(&mut self) -> Result<i64, ParseError> {
        let Some(token) = self.peek().cloned() else {
            return Err(self.error(EXPECTED));
        };
        match &token.kind {
            TokenKind::DateTime(text) | TokenKind::Str(text) => {
                let time = datetime_ms(text).map_err(|m| Self::error_at(&token, m))?;
                self.next += 1;
                Ok(time)
            }
            TokenKind::Word(w) if w.eq_ignore_ascii_case("now") => {
                self.next += 1;
                self.expect(&TokenKind::LeftParen, "'(' after now")?;
                self.expect(&TokenKind::RightParen, "')': now() takes no arguments")?;
                Ok(self.now.ms())
            }
            TokenKind::Minus | TokenKind::Plus | TokenKind::Number(_) => {
                let at = self.next;
                match self.number(EXPECTED)? {
                    Literal::Integer(t) => Ok(t),
                    _ => Err(Self::error_at(
                        &self.tokens[at],
                        format!("expected {EXPECTED}, found '{}'", self.source_text(at)),
                    )),
                }
            }
            _ => Err(self.error(EXPECTED)),
        }
    }

    /// The source text of the tokens from `first` up to the next one, a blank where they were
    /// apart.
    fn source_text(&self, first: usize) -> String {
        let mut text = String::new();
        let mut end = None;
        for token in &self.tokens[first..self.next] {
            if end.is_some_and(|end| token.offset > end) {
                text.push(' ');
            }
            text.push_str(&token.text);
            end = Some(token.offset + token.text.len());
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use crate::ast::{GroupByTime, InsertRow, Literal, PathPattern, Statement, TimeRange};
    use crate::{parse_script_with_clock, parse_table_statement_with_clock, ParseError, Position};

    /// 2024-01-01T00:00:00Z.
    const JAN_1: i64 = 1_704_067_200_000;
    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;
    /// The injected clock's reading.
    const NOW: i64 = 1_750_000_000_000;

    fn parse(text: &str) -> Result<Statement, ParseError> {
        let mut parsed = parse_script_with_clock(text, Position::START, &|| NOW);
        assert_eq!(parsed.len(), 1, "{text}");
        parsed.pop().unwrap().result
    }

    /// The range of `SELECT s1 FROM root.sg.d1 WHERE <condition>`.
    fn range(condition: &str) -> TimeRange {
        let text = format!("SELECT s1 FROM root.sg.d1 WHERE {condition}");
        match parse(&text) {
            Ok(Statement::Select { range, .. }) => range,
            other => panic!("{text}: {other:?}"),
        }
    }

    /// The error of `SELECT s1 FROM root.sg.d1 WHERE <condition>`, as displayed.
    fn error(condition: &str) -> ParseError {
        let text = format!("SELECT s1 FROM root.sg.d1 WHERE {condition}");
        parse(&text).expect_err(&text)
    }

    fn at_least(from: i64) -> TimeRange {
        TimeRange {
            from,
            to: TimeRange::ALL.to,
        }
    }

    #[test]
    fn every_literal_form_bounds_a_where() {
        for (bound, ms) in [
            ("2024-01-01", JAN_1),
            ("2024/01/01", JAN_1),
            ("2024.01.01", JAN_1),
            ("2024-01-01T00:00:00", JAN_1),
            ("2024-01-01 00:00:00", JAN_1),
            ("'2024-01-01 00:00:00'", JAN_1),
            ("\"2024-01-01T00:00:00\"", JAN_1),
            ("'2024-01-01'", JAN_1),
            ("2024-01-01T00:00:00Z", JAN_1),
            ("2024-01-01 08:00:00.123+08:00", JAN_1 + 123),
            ("'2024-01-01 08:00:00.123+08:00'", JAN_1 + 123),
            ("2023-12-31T19:00:00-0500", JAN_1),
            ("'2023-12-31T19:00:00-05:00'", JAN_1),
            ("1969-12-31T23:59:59.999", -1),
            ("1704067200000", JAN_1),
            ("-5", -5),
            ("+5", 5),
        ] {
            assert_eq!(range(&format!("time >= {bound}")), at_least(ms), "{bound}");
        }
        assert_eq!(
            range("time >= 2024-01-01 AND time < 2024-01-02T00:00:00"),
            TimeRange {
                from: JAN_1,
                to: JAN_1 + DAY
            }
        );
        assert_eq!(
            range("timestamp = 2024-01-01T00:00:00.001"),
            TimeRange {
                from: JAN_1 + 1,
                to: JAN_1 + 2
            }
        );
    }

    #[test]
    fn durations_add_and_subtract_left_to_right() {
        for (bound, ms) in [
            ("now()", NOW),
            ("NOW()", NOW),
            ("Now ( )", NOW),
            ("now() - 1h30m", NOW - HOUR * 3 / 2),
            ("now() - 1h - 30m", NOW - HOUR * 3 / 2),
            ("now()-1d", NOW - DAY),
            ("now() + 1w", NOW + 7 * DAY),
            ("2024-01-01T00:00:00 + 1d - 10m", JAN_1 + DAY - 600_000),
            ("2024-01-01T00:00:00+1d", JAN_1 + DAY),
            ("2024-01-01T00:00:00-1h", JAN_1 - HOUR),
            ("2024-01-01T08:00:00+08:00 - 1h", JAN_1 - HOUR),
            ("'2024-01-01 00:00:00' + 500ms", JAN_1 + 500),
            ("1000 + 1s", 2000),
            ("-1000 - 1s", -2000),
            // Past year 275,000 still fits in i64 milliseconds.
            ("now() + 100000000d", NOW + 100_000_000 * DAY),
        ] {
            assert_eq!(range(&format!("time >= {bound}")), at_least(ms), "{bound}");
        }
        assert_eq!(
            range("time >= now() - 1d AND time < now()"),
            TimeRange {
                from: NOW - DAY,
                to: NOW
            }
        );
    }

    #[test]
    fn every_now_of_a_statement_is_one_clock_reading() {
        let reads = Cell::new(0);
        let clock = || {
            reads.set(reads.get() + 1);
            NOW + reads.get() * 1000
        };
        let parsed = parse_script_with_clock(
            "SELECT count(s1) FROM root.sg.d1 WHERE time >= now() - 1h AND time < now() \
             GROUP BY ([now() - 1h, now()), 10m); \
             SELECT s1 FROM root.sg.d1 WHERE time < now(); \
             SELECT s1 FROM root.sg.d1 WHERE time < 5",
            Position::START,
            &clock,
        );
        let first = NOW + 1000;
        assert_eq!(
            parsed[0].result,
            Ok(Statement::SelectAggregate {
                from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
                items: vec![crate::AggregateItem {
                    function: crate::AggregateFunction::Count,
                    measurement: "s1".into(),
                    by: None,
                    count_if: None,
                    alias: None,
                }],
                range: TimeRange {
                    from: first - HOUR,
                    to: first
                },
                filter: None,
                group_by: Some(GroupByTime {
                    start: first - HOUR,
                    end: first,
                    interval_ms: 600_000,
                    step_ms: 600_000,
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
        // The next statement reads the clock anew; one without now() does not read it.
        assert!(matches!(
            parsed[1].result,
            Ok(Statement::Select { range, .. }) if range.to == NOW + 2000
        ));
        assert!(parsed[2].result.is_ok());
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn group_by_takes_date_time_bounds() {
        let group_by = |text: &str| match parse(text) {
            Ok(Statement::SelectAggregate { group_by, .. }) => group_by.expect(text),
            other => panic!("{text}: {other:?}"),
        };
        let g = group_by(
            "SELECT avg(s1) FROM root.sg.d1 GROUP BY ([2024-01-01T00:00:00, 2024-01-02), 1h)",
        );
        assert_eq!(
            (g.start, g.end, g.interval_ms),
            (JAN_1, JAN_1 + DAY, HOUR as u64)
        );
        let g = group_by(
            "SELECT avg(s1) FROM root.sg.d1 \
             GROUP BY (['2024-01-01 08:00:00+08:00', 2024-01-01 00:00:00 + 1d), 1d)",
        );
        assert_eq!((g.start, g.end), (JAN_1, JAN_1 + DAY));
        let g = group_by("SELECT avg(s1) FROM root.sg.d1 GROUP BY ([now() - 1d, now()), 1h)");
        assert_eq!((g.start, g.end), (NOW - DAY, NOW));
        let e = parse("SELECT avg(s1) FROM root.sg.d1 GROUP BY ([2024-01-02, 2024-01-01), 1h)")
            .unwrap_err();
        assert!(e.message.contains("is empty"), "{e}");
    }

    #[test]
    fn delete_and_insert_take_time_expressions() {
        assert_eq!(
            parse("DELETE FROM root.sg.d1.s1 WHERE time >= 2024-01-01 AND time < now()"),
            Ok(Statement::DeleteData {
                paths: vec![PathPattern::parse("root.sg.d1.s1").unwrap()],
                range: TimeRange {
                    from: JAN_1,
                    to: NOW
                },
            })
        );
        let rows = match parse(
            "INSERT INTO root.sg.d1(time, s1) VALUES (now(), 1), (2024-01-01 00:00:00, 2), \
             ('2024-01-01', 3), (now() - 1s, 4)",
        ) {
            Ok(Statement::Insert(insert)) => insert.rows,
            other => panic!("{other:?}"),
        };
        let row = |timestamp, v| InsertRow {
            timestamp,
            values: vec![Literal::Integer(v)],
        };
        assert_eq!(
            rows,
            vec![
                row(NOW, 1),
                row(JAN_1, 2),
                row(JAN_1, 3),
                row(NOW - 1000, 4)
            ]
        );
    }

    #[test]
    fn the_table_model_takes_them_too() {
        let statement = parse_table_statement_with_clock(
            "SELECT * FROM t WHERE time >= '2024-01-01 00:00:00' AND time < now()",
            &|| NOW,
        )
        .unwrap();
        let crate::TableStatement::Select(select) = statement else {
            panic!("{statement:?}");
        };
        assert_eq!(
            select.range,
            TimeRange {
                from: JAN_1,
                to: NOW
            }
        );
    }

    #[test]
    fn invalid_literals_are_syntax_errors_naming_them() {
        for (condition, message) in [
            (
                "time >= 2024-13-01",
                "line 1, column 41: invalid date-time '2024-13-01': month 13 is not 1 to 12",
            ),
            (
                "time >= 2024-02-30T00:00:00",
                "line 1, column 41: invalid date-time '2024-02-30T00:00:00': day 30 is not 1 to \
                 29 (February 2024 has 29 days)",
            ),
            (
                "time >= '2023-02-29 00:00:00'",
                "line 1, column 41: invalid date-time '2023-02-29 00:00:00': day 29 is not 1 to 28",
            ),
            (
                "time >= 2024-01-01T24:00:00",
                "line 1, column 41: invalid date-time '2024-01-01T24:00:00': hour 24",
            ),
            (
                "time >= 'yesterday'",
                "line 1, column 41: invalid date-time 'yesterday': expected the year",
            ),
            (
                "time >= 2024-01-01T25",
                "line 1, column 41: invalid date-time '2024-01-01T25'",
            ),
            ("time >= garbage", "line 1, column 41: expected a time (an integer in ms"),
            ("time >= 1.5", "line 1, column 41: expected a time (an integer in ms, a date-time like 2024-01-01T00:00:00, or now()), found '1.5'"),
            ("time >= now", "line 1, column 44: expected '(' after now, found end of statement"),
            ("time >= now(1)", "line 1, column 45: expected ')': now() takes no arguments, found '1'"),
            (
                "time >= now() - 1000",
                "line 1, column 49: expected a duration like 1h or 500ms after '+' or '-', found '1000'",
            ),
            (
                "time >= now() -",
                "line 1, column 48: expected a duration like 1h or 500ms after '+' or '-', found end",
            ),
            (
                "time >= now() + 9223372036854775807ms",
                "line 1, column 41: time 'now() + 9223372036854775807ms' is out of range",
            ),
            (
                "time >= -9223372036854775808 - 1ms",
                "line 1, column 41: time '-9223372036854775808 - 1ms' is out of range",
            ),
            (
                "time >= now() + 9999999999999999999ms",
                "line 1, column 41: time 'now() + 9999999999999999999ms' is out of range",
            ),
            (
                "time >= now() + 99999999999999999999ms",
                "line 1, column 49: duration '99999999999999999999ms' is out of range",
            ),
            (
                "time >= 999999999-01-01",
                "line 1, column 41: date-time '999999999-01-01' is out of range",
            ),
        ] {
            let e = error(condition);
            assert!(!e.unsupported, "{condition}: {e}");
            assert!(e.to_string().starts_with(message), "{condition}: {e}");
        }
    }

    #[test]
    fn months_and_years_in_a_time_expression_are_unsupported() {
        for condition in ["time >= now() - 1mo", "time >= 2024-01-01 + 1y"] {
            let e = error(condition);
            assert!(e.unsupported, "{condition}: {e}");
            assert!(e.message.contains("natural month or year"), "{e}");
        }
    }
}
