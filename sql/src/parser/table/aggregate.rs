//! The table model's aggregation queries: a select list of aggregations (`avg(temperature)`,
//! the table model's `min`, `max`, `first` and `last` among them), grouping TAG and ATTRIBUTE
//! columns and `date_bin(interval, time[, origin])`, each with an optional `AS` alias; then
//! `GROUP BY` (names, aliases, 1-based positions, `date_bin(...)`), `ORDER BY` output columns
//! and `OFFSET` / `LIMIT`; `date_bin_gapfill`, `first_by` and `last_by` too.

use super::super::{not_supported_yet, ParseError, Parser};
use crate::ast::{AggregateFunction, DateBin, Literal, TableAggregate, TableItem, TableItemKind};
use crate::expr::Expr;
use crate::lexer::TokenKind;
use crate::MEASUREMENTS_MAX;
use common::table;

/// A GROUP BY or ORDER BY term before it is resolved against the select list.
enum Term {
    Name(String),
    Position(usize),
    Item(TableItemKind),
}

impl Parser<'_> {
    /// True when the select list (from the next token to FROM) calls a function, or the
    /// statement has a GROUP BY: an aggregation query.
    pub(super) fn table_select_aggregates(&self) -> bool {
        let rest = &self.tokens[self.next..];
        let from = rest
            .iter()
            .position(|t| matches!(&t.kind, TokenKind::Word(w) if w.eq_ignore_ascii_case("FROM")))
            .unwrap_or(rest.len());
        let calls = rest[..from].windows(2).any(|pair| {
            matches!(pair[0].kind, TokenKind::Word(_)) && pair[1].kind == TokenKind::LeftParen
        });
        let groups = rest[from..]
            .iter()
            .any(|t| matches!(&t.kind, TokenKind::Word(w) if w.eq_ignore_ascii_case("GROUP")));
        calls || groups
    }

    /// After `SELECT`, when [`Parser::table_select_aggregates`].
    pub(super) fn table_aggregate(&mut self) -> Result<TableAggregate, ParseError> {
        let items = self.table_items()?;
        self.expect_keyword("FROM")?;
        let (database, table) = self.qualified()?;
        let (range, filter) = self.where_filter()?;
        let mut group_columns = Vec::new();
        let mut date_bin = None;
        if self.eat_keyword("GROUP") {
            self.expect_keyword("BY")?;
            loop {
                let at = self.next;
                let term = self.term()?;
                match self.resolve(term, &items, "GROUP BY")? {
                    TableItemKind::Column(name) => group_columns.push(name),
                    TableItemKind::DateBin(bin) if date_bin.is_none() => date_bin = Some(bin),
                    TableItemKind::DateBin(_) => {
                        return Err(Self::error_at(
                            &self.tokens[at],
                            "GROUP BY takes one date_bin".to_string(),
                        ))
                    }
                    _ => {
                        return Err(Self::error_at(
                            &self.tokens[at],
                            "GROUP BY cannot take an aggregation".to_string(),
                        ))
                    }
                }
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
            }
        }
        let mut items = items;
        let shown = items.len();
        let having = if self.eat_keyword("HAVING") {
            let at = self.next;
            let condition = self.or_expr(0)?;
            self.having_items(&condition, &group_columns, &mut items, at)?;
            Some(condition)
        } else {
            None
        };
        let order_by = self.table_order_by(&items[..shown])?;
        let (mut offset, mut limit) = (0, None);
        loop {
            if self.eat_keyword("OFFSET") {
                offset = self.count_literal("OFFSET")?;
            } else if self.eat_keyword("LIMIT") {
                limit = Some(self.count_literal("LIMIT")?);
            } else {
                break;
            }
        }
        let aggregate = TableAggregate {
            database,
            table,
            items,
            shown,
            range,
            filter,
            having,
            group_columns,
            date_bin,
            order_by,
            offset,
            limit,
        };
        self.check_grouping(&aggregate)?;
        Ok(aggregate)
    }

    /// The select list: aggregations, columns and `date_bin(...)`, each `[AS alias]`.
    fn table_items(&mut self) -> Result<Vec<TableItem>, ParseError> {
        let mut items = Vec::new();
        loop {
            if items.len() == MEASUREMENTS_MAX {
                return Err(self.error(&format!("at most {MEASUREMENTS_MAX} columns")));
            }
            if let Some(star) = self.peek().filter(|t| t.kind == TokenKind::Star) {
                return Err(Self::error_at(
                    star,
                    "an aggregation query selects its GROUP BY columns and aggregations, not *"
                        .to_string(),
                ));
            }
            let kind = self.item_kind()?;
            let alias = if self.eat_keyword("AS") {
                Some(self.name("an alias")?)
            } else {
                None
            };
            items.push(TableItem { kind, alias });
            if !self.eat(&TokenKind::Comma) {
                return Ok(items);
            }
        }
    }

    /// An aggregation in an expression (HAVING): its function by the tree's name, its column
    /// lower case.
    pub(in crate::parser) fn table_call(&mut self) -> Result<Expr, ParseError> {
        let at = self.next;
        match self.item_kind()? {
            TableItemKind::Aggregate { function, column } => Ok(Expr::Call {
                function: function.name().to_string(),
                arg: column,
            }),
            _ => Err(Self::error_at(
                &self.tokens[at],
                "an expression takes aggregations of one column".to_string(),
            )),
        }
    }

    /// An aggregation, `date_bin(...)` or a column name.
    fn item_kind(&mut self) -> Result<TableItemKind, ParseError> {
        if !self.at_function() {
            return Ok(TableItemKind::Column(
                self.name("a column or an aggregation")?,
            ));
        }
        let token = self.tokens[self.next].clone();
        let TokenKind::Word(word) = &token.kind else {
            unreachable!("at_function checked a word");
        };
        let word = word.to_ascii_lowercase();
        self.next += 2;
        if word == "date_bin" || word == "date_bin_gapfill" {
            let interval_ms = self.interval()?;
            self.expect(&TokenKind::Comma, "',' and time")?;
            self.expect_keyword("TIME")?;
            let origin_ms = if self.eat(&TokenKind::Comma) {
                self.time_expression()?
            } else {
                0
            };
            self.expect(&TokenKind::RightParen, "')'")?;
            return Ok(TableItemKind::DateBin(DateBin {
                interval_ms,
                origin_ms,
                gapfill: word == "date_bin_gapfill",
            }));
        }
        if word == "last_by" || word == "first_by" {
            return self.by_row(word == "last_by");
        }
        if word == "max_by" || word == "min_by" {
            let column = |p: &mut Self| match p.eat_keyword("TIME") {
                true => Ok(table::TIME_COLUMN.to_string()),
                false => p.name("a column or time"),
            };
            let x = column(self)?;
            self.expect(&TokenKind::Comma, "',' and the column that picks the row")?;
            let y = column(self)?;
            self.expect(&TokenKind::RightParen, "')'")?;
            let max = word == "max_by";
            return Ok(TableItemKind::ExtremeBy { x, y, max });
        }
        if word == "count_if" {
            let condition = self.or_expr(0)?;
            self.expect(&TokenKind::RightParen, "')'")?;
            return Ok(TableItemKind::CountIf(condition));
        }
        let Some(function) = AggregateFunction::parse_table(&word) else {
            let what = format!("the function {word} in a table-model query");
            return Err(not_supported_yet(token.position, &what));
        };
        let star = function == AggregateFunction::Count && self.eat(&TokenKind::Star);
        let column = if star || self.eat_keyword("TIME") {
            let function = match function {
                AggregateFunction::MinValue | AggregateFunction::FirstValue => {
                    AggregateFunction::MinTime
                }
                AggregateFunction::MaxValue | AggregateFunction::LastValue => {
                    AggregateFunction::MaxTime
                }
                AggregateFunction::Count => AggregateFunction::Count,
                _ => {
                    return Err(Self::error_at(
                        &token,
                        format!(
                            "{word}(time) does not aggregate time: count, min, max, first and \
                             last do"
                        ),
                    ))
                }
            };
            self.expect(&TokenKind::RightParen, "')'")?;
            return Ok(TableItemKind::Aggregate {
                function,
                column: table::TIME_COLUMN.to_string(),
            });
        } else {
            self.name("a FIELD column")?
        };
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(TableItemKind::Aggregate { function, column })
    }

    /// The arguments of `last_by(x, y)` / `first_by(x, y)` (`last`: the former), after `(`: x's
    /// value in the row where y is last (first) non-null. With `time` as y it is the group's
    /// last row; `last_by(time, x)` is x's last time. Two FIELD columns answer 300.
    fn by_row(&mut self, last: bool) -> Result<TableItemKind, ParseError> {
        let name = if last { "last_by" } else { "first_by" };
        let at = self.next;
        let time_first = self.eat_keyword("TIME");
        let first = if time_first {
            table::TIME_COLUMN.to_string()
        } else {
            self.name("a FIELD column or time")?
        };
        self.expect(&TokenKind::Comma, "',' and a second column")?;
        let time_second = self.eat_keyword("TIME");
        let second = if time_second {
            table::TIME_COLUMN.to_string()
        } else {
            self.name("a FIELD column or time")?
        };
        self.expect(&TokenKind::RightParen, "')'")?;
        let function = if last {
            AggregateFunction::MaxTime
        } else {
            AggregateFunction::MinTime
        };
        match (time_first, time_second) {
            (true, _) => Ok(TableItemKind::Aggregate {
                function,
                column: second,
            }),
            (false, true) => Ok(TableItemKind::ValueAtRow {
                column: first,
                last,
            }),
            (false, false) => Err(not_supported_yet(
                self.tokens[at].position,
                &format!(
                    "{name}(x, y) of two FIELD columns; {name}(x, time) and {name}(time, x) run"
                ),
            )),
        }
    }

    /// A GROUP BY or ORDER BY term: a 1-based position, a name, or an item written out.
    fn term(&mut self) -> Result<Term, ParseError> {
        if let Some(TokenKind::Number(_)) = self.peek_kind() {
            let at = self.next;
            return match self.number("a position")? {
                Literal::Integer(n) if n >= 1 => Ok(Term::Position(n as usize - 1)),
                _ => Err(Self::error_at(
                    &self.tokens[at],
                    "a position counts from 1".to_string(),
                )),
            };
        }
        if self.at_function() {
            return Ok(Term::Item(self.item_kind()?));
        }
        if self.eat_keyword("TIME") {
            return Ok(Term::Name(table::TIME_COLUMN.to_string()));
        }
        Ok(Term::Name(self.name("a column, an alias or a position")?))
    }

    /// What `term` stands for: an alias or a position names its item, a name not aliased is
    /// a column.
    fn resolve(
        &self,
        term: Term,
        items: &[TableItem],
        clause: &str,
    ) -> Result<TableItemKind, ParseError> {
        let at = self.next.saturating_sub(1);
        match term {
            Term::Item(kind) => Ok(kind),
            Term::Position(i) => items.get(i).map(|item| item.kind.clone()).ok_or_else(|| {
                Self::error_at(
                    &self.tokens[at],
                    format!("{clause} position {} is past the select list", i + 1),
                )
            }),
            Term::Name(name) => Ok(items
                .iter()
                .find(|item| item.alias.as_deref() == Some(name.as_str()))
                .map_or(TableItemKind::Column(name), |item| item.kind.clone())),
        }
    }

    /// `[ORDER BY term [ASC|DESC], ...]`: each term one of the select list's items.
    fn table_order_by(&mut self, items: &[TableItem]) -> Result<Vec<(usize, bool)>, ParseError> {
        let mut order = Vec::new();
        if !self.eat_keyword("ORDER") {
            return Ok(order);
        }
        self.expect_keyword("BY")?;
        loop {
            let at = self.next;
            let term = self.term()?;
            let kind = self.resolve(term, items, "ORDER BY")?;
            let Some(position) = items.iter().position(|item| item.kind == kind) else {
                return Err(Self::error_at(
                    &self.tokens[at],
                    "ORDER BY in an aggregation query names a column of its select list"
                        .to_string(),
                ));
            };
            let descending = self.eat_keyword("DESC");
            if !descending {
                self.eat_keyword("ASC");
            }
            order.push((position, descending));
            if !self.eat(&TokenKind::Comma) {
                return Ok(order);
            }
        }
    }

    /// Adds to `items` what `condition` names that the select list lacks: its aggregations,
    /// and the GROUP BY columns it names. A name that is neither an alias nor a GROUP BY column
    /// is refused.
    fn having_items(
        &self,
        condition: &Expr,
        group_columns: &[String],
        items: &mut Vec<TableItem>,
        at: usize,
    ) -> Result<(), ParseError> {
        for (function, column) in condition.calls() {
            let function = AggregateFunction::parse(&function).expect("a call the parser named");
            let kind = TableItemKind::Aggregate { function, column };
            if !items.iter().any(|item| item.kind == kind) {
                items.push(TableItem { kind, alias: None });
            }
        }
        for name in condition.columns() {
            let name = name.to_lowercase();
            if items
                .iter()
                .any(|item| item.alias.as_deref() == Some(name.as_str()))
            {
                continue;
            }
            if !group_columns.contains(&name) {
                return Err(Self::error_at(
                    &self.tokens[at],
                    format!("{name} in HAVING is neither grouped by nor an alias"),
                ));
            }
            let kind = TableItemKind::Column(name);
            if !items.iter().any(|item| item.kind == kind) {
                items.push(TableItem { kind, alias: None });
            }
        }
        Ok(())
    }

    /// Every column of the select list is grouped by, and its `date_bin` is GROUP BY's.
    fn check_grouping(&self, aggregate: &TableAggregate) -> Result<(), ParseError> {
        let at = self.next.min(self.tokens.len() - 1);
        for item in &aggregate.items {
            let grouped = match &item.kind {
                TableItemKind::Column(name) => aggregate.group_columns.contains(name),
                TableItemKind::DateBin(bin) => aggregate.date_bin == Some(*bin),
                kind => kind.is_aggregation(),
            };
            if !grouped {
                let what = match &item.kind {
                    TableItemKind::Column(name) => format!("the column {name}"),
                    _ => "date_bin(...)".to_string(),
                };
                return Err(Self::error_at(
                    &self.tokens[at],
                    format!("{what} must be in GROUP BY or inside an aggregation"),
                ));
            }
        }
        Ok(())
    }
}
