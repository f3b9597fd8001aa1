//! SELECT of the tree model: the select list, FROM's paths and patterns, the row clauses
//! (ORDER BY TIME, FILL, LIMIT/OFFSET, SLIMIT/SOFFSET) and ALIGN BY; WHERE is [`super::expr`]'s,
//! aggregations and GROUP BY [`super::aggregate`]'s.

use super::{
    not_supported_yet, ParseError, Parser, Statement, TokenKind, MEASUREMENTS_MAX, ROW_CLAUSES,
};
use crate::ast::{Fill, Literal, PathPattern, Projection, RowWindow, SelectItem, TimeRange};
use crate::expr::Expr;

impl Parser<'_> {
    pub(super) fn select(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("SELECT")?;
        if self.at_function() {
            return self.select_aggregate();
        }
        let last = self.is_keyword("LAST") && !self.next_is_from_or_comma();
        if last {
            self.next += 1;
            let at = self.next;
            let measurements = self.projection()?;
            match measurements {
                Projection::Aliased { .. } => {
                    return Err(not_supported_yet(
                        self.tokens[at].position,
                        "AS in a LAST query (its columns are fixed: Time, Timeseries, Value, \
                         DataType)",
                    ))
                }
                Projection::Computed { .. } => {
                    return Err(not_supported_yet(
                        self.tokens[at].position,
                        "an expression in a LAST query (it reads series, not expressions)",
                    ))
                }
                _ => {}
            }
            let from = self.from()?;
            let since = self.last_since()?;
            self.refuse_row_clauses("a LAST query")?;
            return Ok(Statement::SelectLast {
                from,
                measurements,
                since,
            });
        }
        if self.select_list_has_call() {
            return self.select_aggregate();
        }
        let measurements = self.projection()?;
        if self.peek_kind() == Some(&TokenKind::LeftParen) {
            // A name right before `(` ended the list: an aggregation after raw columns.
            return Err(Self::error_at(
                &self.tokens[self.next - 1],
                super::aggregate::MIXED.to_string(),
            ));
        }
        let from = self.from()?;
        let (range, filter) = self.where_filter()?;
        if self.is_keyword("GROUP") {
            return Err(self.error("end of statement: GROUP BY takes aggregations, like count(s1)"));
        }
        let (rows, fill) = self.row_clauses()?;
        let align_by_device = self.align_by()?;
        Ok(Statement::Select {
            from,
            measurements,
            range,
            filter,
            rows,
            fill,
            align_by_device,
        })
    }

    /// `[ALIGN BY DEVICE | ALIGN BY TIME]`, the last clause of a query: true for DEVICE.
    pub(super) fn align_by(&mut self) -> Result<bool, ParseError> {
        if !self.eat_keyword("ALIGN") {
            return Ok(false);
        }
        self.expect_keyword("BY")?;
        if self.eat_keyword("DEVICE") {
            Ok(true)
        } else if self.eat_keyword("TIME") {
            Ok(false)
        } else {
            Err(self.error("DEVICE or TIME after ALIGN BY"))
        }
    }

    /// A LAST query's `[WHERE time >= t]` (or `>`): the first time whose last point counts. An
    /// upper bound is refused: the last point is the series' newest, wherever it lies.
    pub(super) fn last_since(&mut self) -> Result<i64, ParseError> {
        let at = self.next;
        let range = self.where_clause()?;
        if range.to != TimeRange::ALL.to {
            let token = &self.tokens[at.min(self.tokens.len() - 1)];
            return Err(not_supported_yet(
                token.position,
                "an upper time bound in a LAST query (it takes time >= t or time > t)",
            ));
        }
        Ok(range.from)
    }

    /// `[ORDER BY TIME [ASC|DESC]] [FILL(...)] [LIMIT n] [OFFSET n] [SLIMIT n] [SOFFSET n]`
    /// (FILL also before ORDER BY; the pagination clauses in any order, as IoTDB takes them).
    pub(super) fn row_clauses(&mut self) -> Result<(RowWindow, Option<Fill>), ParseError> {
        let mut fill = self.fill()?;
        let rows = self.row_window(&mut fill)?;
        Ok((rows, fill))
    }

    /// `[FILL(PREVIOUS | LINEAR | constant)]`.
    pub(super) fn fill(&mut self) -> Result<Option<Fill>, ParseError> {
        if !self.eat_keyword("FILL") {
            return Ok(None);
        }
        self.expect(&TokenKind::LeftParen, "'(' after FILL")?;
        let fill = if self.eat_keyword("PREVIOUS") {
            Fill::Previous
        } else if self.eat_keyword("LINEAR") {
            Fill::Linear
        } else {
            match self.peek_kind() {
                Some(TokenKind::Word(w))
                    if !w.eq_ignore_ascii_case("null")
                        && !w.eq_ignore_ascii_case("true")
                        && !w.eq_ignore_ascii_case("false") =>
                {
                    return Err(self.error("PREVIOUS, LINEAR or a constant"));
                }
                _ => Fill::Constant(self.literal()?),
            }
        };
        if self.peek_kind() == Some(&TokenKind::Comma) {
            return Err(self.unsupported_here("a FILL time bound"));
        }
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(Some(fill))
    }

    /// `[ORDER BY TIME [ASC|DESC]] [LIMIT n] [OFFSET n]` (LIMIT and OFFSET in either order, as
    /// IoTDB takes them); a FILL after ORDER BY goes to `fill`.
    pub(super) fn row_window(&mut self, fill: &mut Option<Fill>) -> Result<RowWindow, ParseError> {
        let mut rows = RowWindow::default();
        if self.eat_keyword("ORDER") {
            self.expect_keyword("BY")?;
            if !(self.eat_keyword("TIME") || self.eat_keyword("TIMESTAMP")) {
                return Err(self.unsupported_here("ORDER BY anything but TIME"));
            }
            if self.eat_keyword("DESC") {
                rows.descending = true;
            } else {
                self.eat_keyword("ASC");
            }
        }
        if fill.is_none() {
            *fill = self.fill()?;
        }
        let mut seen = [false; 4];
        loop {
            let Some(clause) = ROW_CLAUSES[1..]
                .iter()
                .position(|c| self.is_keyword(c))
                .filter(|&i| !seen[i])
            else {
                return Ok(rows);
            };
            seen[clause] = true;
            self.next += 1;
            let name = ROW_CLAUSES[clause + 1];
            let n = self.count_literal(name)?;
            match clause {
                0 => rows.limit = Some(n),
                1 => rows.offset = n,
                2 => rows.series_limit = Some(n),
                _ => rows.series_offset = n,
            }
        }
    }

    /// A non-negative integer after `clause`.
    pub(super) fn count_literal(&mut self, clause: &str) -> Result<usize, ParseError> {
        let expected = format!("a row count after {clause}");
        match self.number(&expected)? {
            Literal::Integer(n) if n >= 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => Err(self.error(&expected)),
        }
    }

    /// 300 for ORDER BY, LIMIT or OFFSET after `query` (`a LAST query`), which does not take
    /// them yet.
    pub(super) fn refuse_row_clauses(&self, query: &str) -> Result<(), ParseError> {
        match self.peek().map(|t| &t.kind) {
            Some(TokenKind::Word(w)) if ROW_CLAUSES.iter().any(|c| w.eq_ignore_ascii_case(c)) => {
                Err(self.unsupported_here(&format!("{} on {query}", w.to_ascii_uppercase())))
            }
            _ => Ok(()),
        }
    }

    /// True when the token after the next one is FROM or `,` (so `SELECT last FROM` names a
    /// measurement called `last`).
    pub(super) fn next_is_from_or_comma(&self) -> bool {
        match self.tokens.get(self.next + 1).map(|t| &t.kind) {
            Some(TokenKind::Comma) => true,
            Some(TokenKind::Word(w)) => w.eq_ignore_ascii_case("FROM"),
            _ => false,
        }
    }

    /// `FROM path [, path ...]`: devices, or patterns of them (`root.sg.*`, `root.sg.**`).
    pub(super) fn from(&mut self) -> Result<Vec<PathPattern>, ParseError> {
        const EXPECTED: &str = "a device path or pattern like root.sg.d1 or root.sg.*";
        self.expect_keyword("FROM")?;
        let mut from = Vec::new();
        loop {
            let pattern = match self.peek_kind() {
                Some(TokenKind::Word(word)) => PathPattern::parse(word).filter(|p| p.len() >= 2),
                _ => None,
            };
            let Some(pattern) = pattern else {
                return Err(self.error(EXPECTED));
            };
            if from.len() == MEASUREMENTS_MAX {
                return Err(self.error(&format!(
                    "end of FROM: at most {MEASUREMENTS_MAX} paths in one statement"
                )));
            }
            self.next += 1;
            from.push(pattern);
            if !self.eat(&TokenKind::Comma) {
                return Ok(from);
            }
        }
    }

    /// `*`, or a list of items: measurements (`s1, s2`), each perhaps with an `AS` alias, or
    /// expressions over them (`s1 + s2`, `-s1 * 2 AS x`, `s1 > 0`).
    pub(super) fn projection(&mut self) -> Result<Projection, ParseError> {
        if self.eat(&TokenKind::Star) {
            return Ok(Projection::All);
        }
        let mut items = Vec::new();
        loop {
            if items.len() == MEASUREMENTS_MAX {
                return Err(self.error(&format!(
                    "FROM: at most {MEASUREMENTS_MAX} measurements in one statement"
                )));
            }
            let expr = self.select_item()?;
            let alias = if self.eat_keyword("AS") {
                Some(self.measurement_or("an alias (a name without '.' or '*')")?)
            } else {
                None
            };
            items.push(SelectItem { expr, alias });
            if !self.eat(&TokenKind::Comma) {
                break;
            }
        }
        if !items.iter().all(|i| matches!(i.expr, Expr::Column(_))) {
            let mut names: Vec<String> = Vec::new();
            for item in &items {
                for name in item.expr.columns() {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            return Ok(Projection::Computed { names, items });
        }
        let (names, aliases): (Vec<String>, Vec<Option<String>>) = items
            .into_iter()
            .map(|i| match i.expr {
                Expr::Column(name) => (name, i.alias),
                _ => unreachable!("every item is a measurement"),
            })
            .unzip();
        if aliases.iter().all(Option::is_none) {
            Ok(Projection::Measurements(names))
        } else {
            Ok(Projection::Aliased { names, aliases })
        }
    }

    /// True when a call (a word right before `(`) comes before FROM: an aggregate query,
    /// perhaps starting with an expression (`-count(s1)`, `(sum(s1) + 1) / 2`).
    fn select_list_has_call(&self) -> bool {
        let mut at = self.next;
        while let Some(token) = self.tokens.get(at) {
            if let TokenKind::Word(w) = &token.kind {
                if w.eq_ignore_ascii_case("FROM") {
                    return false;
                }
                if self.tokens.get(at + 1).map(|t| &t.kind) == Some(&TokenKind::LeftParen) {
                    return true;
                }
            }
            at += 1;
        }
        false
    }

    /// One item of a select list: a measurement name as it stands (any word before `,`, `AS`
    /// or FROM, so a measurement may be called `time`), or an expression naming at least one
    /// measurement and no aggregation.
    fn select_item(&mut self) -> Result<Expr, ParseError> {
        let plain = match self.tokens.get(self.next + 1).map(|t| &t.kind) {
            Some(TokenKind::Comma) => true,
            Some(TokenKind::Word(w)) => {
                w.eq_ignore_ascii_case("FROM") || w.eq_ignore_ascii_case("AS")
            }
            _ => false,
        };
        if plain {
            return Ok(Expr::Column(
                self.measurement_or("'*' or a measurement name")?,
            ));
        }
        let at = self.next;
        let expr = self.or_expr(0)?;
        if !expr.calls().is_empty() {
            return Err(Self::error_at(
                &self.tokens[at],
                super::aggregate::MIXED.to_string(),
            ));
        }
        if expr.columns().is_empty() {
            return Err(Self::error_at(
                &self.tokens[at],
                "expected a select item naming a measurement (a constant alone is no column)"
                    .to_string(),
            ));
        }
        Ok(expr)
    }
}
