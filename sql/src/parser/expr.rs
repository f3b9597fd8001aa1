//! WHERE clauses of the tree model's queries: a boolean expression over `time`, the device's
//! measurements and constants, with IoTDB's operators and precedence (lowest first: OR, AND,
//! NOT, then the predicates — comparison, `[NOT] BETWEEN`, `[NOT] IN`, `IS [NOT] NULL`,
//! `[NOT] LIKE`, `[NOT] REGEXP` —, then `+ -`, then `* / %`, then unary `-`).
//!
//! The conjuncts that bound `time` by a constant (`time >= t`, `t > time`, `time BETWEEN a AND
//! b`, `time = t`) become the query's time range, which every read is cut to; what is left is
//! the value filter. A time is written as anywhere else (`2024-01-01`, `now() - 1h`).

use super::{narrow, ParseError, Parser, TokenKind};
use crate::expr::{BinaryOp, Expr};
use crate::{Literal, TimeRange};

/// Expressions nested deeper than this are refused: the parser recurses per level.
const NESTING_MAX: usize = 64;

/// What an operand is, for messages.
const OPERAND: &str = "a measurement, time, a constant or '('";

impl Parser<'_> {
    /// `[WHERE expression]`: its time range and the value filter left (`None`: every row).
    pub(super) fn where_filter(&mut self) -> Result<(TimeRange, Option<Expr>), ParseError> {
        let next_clause =
            matches!(self.peek_kind(), Some(TokenKind::Word(w)) if super::ends_where(w));
        if self.peek().is_none() || next_clause {
            return Ok((TimeRange::ALL, None));
        }
        if !self.eat_keyword("WHERE") {
            return Err(self.error("WHERE or end of statement"));
        }
        let at = self.next;
        let expr = self.or_expr(0)?;
        if let Some((function, arg)) = expr.calls().into_iter().next() {
            return Err(Self::error_at(
                &self.tokens[at],
                format!("{function}({arg}) in WHERE: an aggregation belongs in HAVING"),
            ));
        }
        let mut range = TimeRange::ALL;
        let mut rest = Vec::new();
        for part in expr.conjuncts() {
            if !time_bound(&part, &mut range) {
                rest.push(part);
            }
        }
        Ok((range, Expr::all(rest)))
    }

    /// `[HAVING expression]`: a condition on an aggregate query's rows, naming aggregations.
    pub(super) fn having(&mut self) -> Result<Option<Expr>, ParseError> {
        if !self.eat_keyword("HAVING") {
            return Ok(None);
        }
        let at = self.next;
        let expr = self.or_expr(0)?;
        if let Some(name) = expr.columns().into_iter().next() {
            return Err(Self::error_at(
                &self.tokens[at],
                format!("{name} in HAVING: HAVING names aggregations, like count({name})"),
            ));
        }
        Ok(Some(expr))
    }

    pub(super) fn or_expr(&mut self, depth: usize) -> Result<Expr, ParseError> {
        if depth > NESTING_MAX {
            return Err(self.error(&format!("an expression nested at most {NESTING_MAX} deep")));
        }
        let mut left = self.and_expr(depth)?;
        while self.eat_keyword("OR") {
            let right = self.and_expr(depth)?;
            left = Expr::binary(BinaryOp::Or, left, right);
        }
        Ok(left)
    }

    fn and_expr(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.not_expr(depth)?;
        while self.eat_keyword("AND") {
            let right = self.not_expr(depth)?;
            left = Expr::binary(BinaryOp::And, left, right);
        }
        Ok(left)
    }

    fn not_expr(&mut self, depth: usize) -> Result<Expr, ParseError> {
        if self.eat_keyword("NOT") {
            return Ok(Expr::Not(Box::new(self.not_expr(depth + 1)?)));
        }
        self.predicate(depth)
    }

    /// An operand, then perhaps one predicate over it.
    fn predicate(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let left = self.additive(depth)?;
        let is_time = left == Expr::Time;
        if let Some(op) = self.comparison() {
            self.next += 1;
            let right = self.value(is_time, depth)?;
            return Ok(Expr::binary(op, left, right));
        }
        if self.eat_keyword("IS") {
            let negated = self.eat_keyword("NOT");
            self.expect_keyword("NULL")?;
            return Ok(Expr::IsNull {
                expr: Box::new(left),
                negated,
            });
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("BETWEEN") {
            let low = self.value(is_time, depth)?;
            self.expect_keyword("AND")?;
            let high = self.value(is_time, depth)?;
            return Ok(Expr::Between {
                expr: Box::new(left),
                low: Box::new(low),
                high: Box::new(high),
                negated,
            });
        }
        if self.eat_keyword("IN") {
            self.expect(&TokenKind::LeftParen, "'(' after IN")?;
            let mut list = Vec::new();
            loop {
                list.push(self.value(is_time, depth)?);
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
            }
            self.expect(&TokenKind::RightParen, "')' or ',' in the IN list")?;
            return Ok(Expr::InList {
                expr: Box::new(left),
                list,
                negated,
            });
        }
        let regexp = self.is_keyword("REGEXP");
        if regexp || self.is_keyword("LIKE") {
            self.next += 1;
            let Some(TokenKind::Str(pattern)) = self.peek_kind().cloned() else {
                return Err(self.error("a quoted pattern"));
            };
            if regexp {
                if let Err(e) = regex::Regex::new(&pattern) {
                    return Err(self.error(&format!("a valid regular expression ({e})")));
                }
            }
            self.next += 1;
            return Ok(Expr::Match {
                expr: Box::new(left),
                pattern,
                regexp,
                negated,
            });
        }
        if negated {
            return Err(self.error("BETWEEN, IN, LIKE or REGEXP after NOT"));
        }
        Ok(left)
    }

    /// The comparison operator next, if any.
    fn comparison(&self) -> Option<BinaryOp> {
        Some(match self.peek_kind()? {
            TokenKind::Equal => BinaryOp::Eq,
            TokenKind::NotEqual => BinaryOp::NotEq,
            TokenKind::Less => BinaryOp::Lt,
            TokenKind::LessEqual => BinaryOp::LtEq,
            TokenKind::Greater => BinaryOp::Gt,
            TokenKind::GreaterEqual => BinaryOp::GtEq,
            _ => return None,
        })
    }

    /// What a predicate compares its operand with: a time expression when the operand is
    /// `time` (so `'2024-01-01'` is a date there), otherwise an operand.
    fn value(&mut self, time: bool, depth: usize) -> Result<Expr, ParseError> {
        if time {
            let ms = self.time_expression()?;
            return Ok(Expr::Literal(Literal::Integer(ms)));
        }
        self.additive(depth)
    }

    fn additive(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.multiplicative(depth)?;
        loop {
            let op = match self.peek_kind() {
                Some(TokenKind::Plus) => BinaryOp::Add,
                Some(TokenKind::Minus) => BinaryOp::Sub,
                _ => return Ok(left),
            };
            self.next += 1;
            let right = self.multiplicative(depth)?;
            left = Expr::binary(op, left, right);
        }
    }

    fn multiplicative(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.unary(depth)?;
        loop {
            let op = match self.peek_kind() {
                Some(TokenKind::Star) => BinaryOp::Mul,
                Some(TokenKind::Slash) => BinaryOp::Div,
                Some(TokenKind::Percent) => BinaryOp::Rem,
                _ => return Ok(left),
            };
            self.next += 1;
            let right = self.unary(depth)?;
            left = Expr::binary(op, left, right);
        }
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, ParseError> {
        match self.peek_kind() {
            Some(TokenKind::Minus | TokenKind::Plus)
                if matches!(
                    self.tokens.get(self.next + 1).map(|t| &t.kind),
                    Some(TokenKind::Number(_))
                ) =>
            {
                Ok(Expr::Literal(self.number(OPERAND)?))
            }
            Some(TokenKind::Minus) => {
                self.next += 1;
                Ok(Expr::Negate(Box::new(self.unary(depth + 1)?)))
            }
            Some(TokenKind::Plus) => {
                self.next += 1;
                self.unary(depth + 1)
            }
            _ => self.primary(depth),
        }
    }

    fn primary(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let Some(token) = self.peek().cloned() else {
            return Err(self.error(OPERAND));
        };
        match &token.kind {
            TokenKind::LeftParen => {
                self.next += 1;
                let inner = self.or_expr(depth + 1)?;
                self.expect(&TokenKind::RightParen, "')'")?;
                Ok(inner)
            }
            TokenKind::Number(_) => Ok(Expr::Literal(self.number(OPERAND)?)),
            TokenKind::Str(text) => {
                self.next += 1;
                Ok(Expr::Literal(Literal::Text(text.clone())))
            }
            TokenKind::DateTime(_) => Ok(Expr::Literal(Literal::Integer(self.time_expression()?))),
            TokenKind::Duration(text) => {
                let ms = super::aggregate::duration_token_ms(&token, text)?;
                self.next += 1;
                let ms = i64::try_from(ms).map_err(|_| self.error("a shorter duration"))?;
                Ok(Expr::Literal(Literal::Integer(ms)))
            }
            TokenKind::Word(w) => {
                let upper = w.to_ascii_uppercase();
                match upper.as_str() {
                    "TIME" | "TIMESTAMP" => {
                        self.next += 1;
                        Ok(Expr::Time)
                    }
                    "TRUE" | "FALSE" => {
                        self.next += 1;
                        Ok(Expr::Literal(Literal::Boolean(upper == "TRUE")))
                    }
                    "NULL" => {
                        self.next += 1;
                        Ok(Expr::Literal(Literal::Null))
                    }
                    "NOW" => Ok(Expr::Literal(Literal::Integer(self.time_expression()?))),
                    _ if self.tokens.get(self.next + 1).map(|t| &t.kind)
                        == Some(&TokenKind::LeftParen) =>
                    {
                        self.call()
                    }
                    _ if w.contains(['.', '*']) => Err(Self::error_at(
                        &token,
                        format!(
                            "expected a measurement of the FROM devices, found '{w}': a WHERE \
                             clause names measurements, not paths"
                        ),
                    )),
                    _ if is_reserved(&upper) => Err(self.error(OPERAND)),
                    _ => {
                        self.next += 1;
                        Ok(Expr::Column(w.clone()))
                    }
                }
            }
            _ => Err(self.error(OPERAND)),
        }
    }
}

impl Parser<'_> {
    /// `function(measurement | *)`: one of the aggregations Fencepost runs.
    fn call(&mut self) -> Result<Expr, ParseError> {
        if self.table_model {
            return self.table_call();
        }
        let token = self.tokens[self.next].clone();
        let TokenKind::Word(name) = &token.kind else {
            unreachable!("a call starts with its name");
        };
        let Some(function) = crate::AggregateFunction::parse(name) else {
            return Err(super::not_supported_yet(
                token.position,
                &format!("the function {}", name.to_ascii_uppercase()),
            ));
        };
        self.next += 2;
        let arg = if self.eat(&TokenKind::Star) {
            "*".to_string()
        } else {
            self.measurement()?
        };
        self.expect(&TokenKind::RightParen, "')'")?;
        Ok(Expr::Call {
            function: function.name().to_string(),
            arg,
        })
    }
}

/// Keywords that end or join expressions, never a measurement's name there.
fn is_reserved(upper: &str) -> bool {
    matches!(
        upper,
        "AND"
            | "OR"
            | "NOT"
            | "BETWEEN"
            | "IN"
            | "IS"
            | "LIKE"
            | "REGEXP"
            | "GROUP"
            | "ORDER"
            | "LIMIT"
            | "OFFSET"
            | "ALIGN"
            | "FILL"
            | "HAVING"
    )
}

/// Narrows `range` when `part` bounds `time` by a constant, and says whether it did.
fn time_bound(part: &Expr, range: &mut TimeRange) -> bool {
    let constant = |e: &Expr| match e {
        Expr::Literal(Literal::Integer(t)) => Some(*t),
        _ => None,
    };
    match part {
        Expr::Binary { op, left, right } if op.is_comparison() && *op != BinaryOp::NotEq => {
            let (op, bound) = match (&**left, &**right) {
                (Expr::Time, other) => (*op, constant(other)),
                (other, Expr::Time) => (op.flipped(), constant(other)),
                _ => return false,
            };
            let Some(bound) = bound else { return false };
            let kind = match op {
                BinaryOp::Eq => TokenKind::Equal,
                BinaryOp::Lt => TokenKind::Less,
                BinaryOp::LtEq => TokenKind::LessEqual,
                BinaryOp::Gt => TokenKind::Greater,
                BinaryOp::GtEq => TokenKind::GreaterEqual,
                _ => unreachable!("comparisons other than != only"),
            };
            narrow(range, &kind, bound);
            true
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } if **expr == Expr::Time => match (constant(low), constant(high)) {
            (Some(low), Some(high)) => {
                narrow(range, &TokenKind::GreaterEqual, low);
                narrow(range, &TokenKind::LessEqual, high);
                true
            }
            _ => false,
        },
        _ => false,
    }
}
