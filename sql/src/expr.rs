//! Expressions: a WHERE clause's value filter, as the parser hands it to the executor. Names are
//! measurements (or aliases) of the device a row belongs to; `time` is the row's time. The
//! executor binds the names to a device's series and evaluates with SQL's three-valued logic
//! (`exec/filter.rs`).

use crate::Literal;

/// One expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `time` (or `timestamp`): the row's time, INT64 ms.
    Time,
    /// A measurement (or alias) of the row's device.
    Column(String),
    /// A constant; a time literal (`2024-01-01`, `now() - 1h`) is its INT64 ms.
    Literal(Literal),
    /// An aggregation of a measurement (`count(s1)`), in a HAVING clause: the result's column
    /// of that function and measurement.
    Call {
        /// The function, as IoTDB names it in a column (`count`, `max_value`).
        function: String,
        /// The measurement (or alias), or `*`.
        arg: String,
    },
    /// `NOT e`
    Not(Box<Expr>),
    /// `-e`
    Negate(Box<Expr>),
    /// `left op right`
    Binary {
        /// The operator.
        op: BinaryOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `e [NOT] BETWEEN low AND high` (both ends included).
    Between {
        /// The value tested.
        expr: Box<Expr>,
        /// The lower end.
        low: Box<Expr>,
        /// The upper end.
        high: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `e [NOT] IN (v1, v2, ...)`
    InList {
        /// The value tested.
        expr: Box<Expr>,
        /// The values.
        list: Vec<Expr>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `e IS [NOT] NULL`
    IsNull {
        /// The value tested.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `e [NOT] LIKE 'pattern'` (`%` any run of characters, `_` one, `\` escapes) or
    /// `e [NOT] REGEXP 'pattern'` (a regular expression found anywhere in the value).
    Match {
        /// The value tested (TEXT or STRING).
        expr: Box<Expr>,
        /// The pattern as written.
        pattern: String,
        /// REGEXP rather than LIKE.
        regexp: bool,
        /// `NOT LIKE` / `NOT REGEXP`.
        negated: bool,
    },
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `AND`
    And,
    /// `OR`
    Or,
    /// `=` (or `==`)
    Eq,
    /// `!=` (or `<>`)
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
}

impl BinaryOp {
    /// True for `=`, `!=`, `<`, `<=`, `>`, `>=`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::NotEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
        )
    }

    /// True for `+`, `-`, `*`, `/`, `%`.
    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem
        )
    }

    /// The comparison with its operands swapped (`a < b` is `b > a`).
    pub fn flipped(self) -> BinaryOp {
        match self {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            other => other,
        }
    }
}

impl Expr {
    /// `left op right`.
    pub fn binary(op: BinaryOp, left: Expr, right: Expr) -> Expr {
        Expr::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        }
    }

    /// The conjunction of `parts` (`None` when there are none).
    pub fn all(parts: Vec<Expr>) -> Option<Expr> {
        parts
            .into_iter()
            .reduce(|a, b| Expr::binary(BinaryOp::And, a, b))
    }

    /// The parts of a conjunction (`a AND b AND c` → a, b, c); any other expression is one part.
    pub fn conjuncts(self) -> Vec<Expr> {
        match self {
            Expr::Binary {
                op: BinaryOp::And,
                left,
                right,
            } => {
                let mut parts = left.conjuncts();
                parts.extend(right.conjuncts());
                parts
            }
            other => vec![other],
        }
    }

    /// The names of the columns it reads, each once, in first-seen order.
    pub fn columns(&self) -> Vec<String> {
        let mut names = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Column(name) = e {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        });
        names
    }

    /// True when it reads the row's time.
    pub fn reads_time(&self) -> bool {
        let mut time = false;
        self.visit(&mut |e| time |= matches!(e, Expr::Time));
        time
    }

    /// The aggregations it names (`count(s1)`), each once, in first-seen order.
    pub fn calls(&self) -> Vec<(String, String)> {
        let mut calls = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Call { function, arg } = e {
                let call = (function.clone(), arg.clone());
                if !calls.contains(&call) {
                    calls.push(call);
                }
            }
        });
        calls
    }

    /// The same expression with every column name `c` renamed `rename(c)`.
    pub fn rename_columns(&self, rename: &impl Fn(&str) -> String) -> Expr {
        let boxed = |e: &Expr| Box::new(e.rename_columns(rename));
        match self {
            Expr::Column(name) => Expr::Column(rename(name)),
            Expr::Time | Expr::Literal(_) | Expr::Call { .. } => self.clone(),
            Expr::Not(e) => Expr::Not(boxed(e)),
            Expr::Negate(e) => Expr::Negate(boxed(e)),
            Expr::Binary { op, left, right } => Expr::Binary {
                op: *op,
                left: boxed(left),
                right: boxed(right),
            },
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => Expr::Between {
                expr: boxed(expr),
                low: boxed(low),
                high: boxed(high),
                negated: *negated,
            },
            Expr::InList {
                expr,
                list,
                negated,
            } => Expr::InList {
                expr: boxed(expr),
                list: list.iter().map(|e| e.rename_columns(rename)).collect(),
                negated: *negated,
            },
            Expr::IsNull { expr, negated } => Expr::IsNull {
                expr: boxed(expr),
                negated: *negated,
            },
            Expr::Match {
                expr,
                pattern,
                regexp,
                negated,
            } => Expr::Match {
                expr: boxed(expr),
                pattern: pattern.clone(),
                regexp: *regexp,
                negated: *negated,
            },
        }
    }

    /// Calls `f` on this expression and every one inside it.
    fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Time | Expr::Column(_) | Expr::Literal(_) | Expr::Call { .. } => {}
            Expr::Not(e) | Expr::Negate(e) => e.visit(f),
            Expr::Binary { left, right, .. } => {
                left.visit(f);
                right.visit(f);
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.visit(f);
                low.visit(f);
                high.visit(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.visit(f);
                list.iter().for_each(|e| e.visit(f));
            }
            Expr::IsNull { expr, .. } | Expr::Match { expr, .. } => expr.visit(f),
        }
    }
}

impl std::fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        })
    }
}

impl std::fmt::Display for Literal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Literal::Integer(n) => write!(f, "{n}"),
            Literal::Float(x) => write!(f, "{x:?}"),
            Literal::Boolean(b) => write!(f, "{b}"),
            Literal::Text(text) => write!(f, "'{}'", text.replace('\'', "''")),
            Literal::Blob(bytes) => {
                f.write_str("X'")?;
                bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
                f.write_str("'")
            }
            Literal::Null => f.write_str("NULL"),
        }
    }
}

/// An operand of a larger expression: in parentheses unless it is a name, literal or call.
struct Operand<'a>(&'a Expr);

impl std::fmt::Display for Operand<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            e @ (Expr::Time | Expr::Column(_) | Expr::Literal(_) | Expr::Call { .. }) => {
                write!(f, "{e}")
            }
            e => write!(f, "({e})"),
        }
    }
}

/// The expression as SQL: every operand that is itself an operation in parentheses, so the
/// text reads back as the same expression.
impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let not = |negated: bool| if negated { "NOT " } else { "" };
        match self {
            Expr::Time => f.write_str("time"),
            Expr::Column(name) => f.write_str(name),
            Expr::Literal(literal) => write!(f, "{literal}"),
            Expr::Call { function, arg } => write!(f, "{function}({arg})"),
            Expr::Not(e) => write!(f, "NOT {}", Operand(e)),
            Expr::Negate(e) => write!(f, "-{}", Operand(e)),
            Expr::Binary { op, left, right } => {
                write!(f, "{} {op} {}", Operand(left), Operand(right))
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => write!(
                f,
                "{} {}BETWEEN {} AND {}",
                Operand(expr),
                not(*negated),
                Operand(low),
                Operand(high)
            ),
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                write!(f, "{} {}IN (", Operand(expr), not(*negated))?;
                for (i, e) in list.iter().enumerate() {
                    let comma = if i == 0 { "" } else { ", " };
                    write!(f, "{comma}{e}")?;
                }
                f.write_str(")")
            }
            Expr::IsNull { expr, negated } => {
                write!(f, "{} IS {}NULL", Operand(expr), not(*negated))
            }
            Expr::Match {
                expr,
                pattern,
                regexp,
                negated,
            } => {
                let how = if *regexp { "REGEXP" } else { "LIKE" };
                let pattern = Literal::Text(pattern.clone());
                write!(f, "{} {}{how} {pattern}", Operand(expr), not(*negated))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_print_as_sql_that_reads_back_alike() {
        let c = |n: &str| Expr::Column(n.into());
        let e = Expr::binary(
            BinaryOp::Or,
            Expr::binary(
                BinaryOp::Gt,
                Expr::binary(BinaryOp::Add, c("s1"), Expr::Literal(Literal::Float(1.5))),
                Expr::Time,
            ),
            Expr::Match {
                expr: Box::new(c("s2")),
                pattern: "it's%".into(),
                regexp: false,
                negated: true,
            },
        );
        assert_eq!(
            e.to_string(),
            "((s1 + 1.5) > time) OR (s2 NOT LIKE 'it''s%')"
        );
        let e = Expr::InList {
            expr: Box::new(Expr::Negate(Box::new(c("s1")))),
            list: vec![
                Expr::Literal(Literal::Integer(1)),
                Expr::Literal(Literal::Null),
            ],
            negated: false,
        };
        assert_eq!(e.to_string(), "(-s1) IN (1, NULL)");
    }

    #[test]
    fn conjuncts_and_columns() {
        let c = |n: &str| Expr::Column(n.into());
        let one = Expr::Literal(Literal::Integer(1));
        let e = Expr::binary(
            BinaryOp::And,
            Expr::binary(BinaryOp::Gt, c("s1"), one.clone()),
            Expr::binary(
                BinaryOp::Or,
                Expr::binary(BinaryOp::Lt, c("s2"), c("s1")),
                Expr::IsNull {
                    expr: Box::new(c("s3")),
                    negated: false,
                },
            ),
        );
        assert_eq!(e.columns(), ["s1", "s2", "s3"]);
        let parts = e.clone().conjuncts();
        assert_eq!(parts.len(), 2);
        assert_eq!(Expr::all(parts), Some(e));
        assert_eq!(Expr::all(Vec::new()), None);
        assert_eq!(BinaryOp::Lt.flipped(), BinaryOp::Gt);
    }
}
