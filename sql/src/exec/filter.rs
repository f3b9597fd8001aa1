//! Value filters, bound and evaluated: a WHERE clause's [`Expr`] with its names bound to the
//! cells of a joined row (`row[0]` the time, then one cell per series read), type-checked once
//! (700 for `s1 > 'a'` on a number, `s1 + 1` on text, a non-boolean WHERE), then evaluated per
//! row with SQL's three-valued logic: a comparison with NULL is NULL, `NULL AND false` is false,
//! and a row is kept only when the filter is true. A name the device lacks is NULL.
//!
//! Numbers compare exactly when both are integers and as doubles otherwise; arithmetic answers
//! DOUBLE, as IoTDB's; a DATE compares with `'yyyy-mm-dd'`; LIKE's `%` is any run of characters
//! and `_` one; REGEXP finds its pattern anywhere in the value.

use std::cmp::Ordering;

use common::{DataType, StatusCode, Value};
use regex::Regex;

use super::analyze::Series;
use super::{Cell, ExecError, ExecResult};
use crate::expr::{BinaryOp, Expr};
use crate::Literal;

/// Where a name's cell is in a row, and its type (`None`: the name is NULL).
pub(super) type Lookup<'a> = dyn Fn(&str) -> Option<(usize, DataType)> + 'a;

/// A filter bound to one row layout: kept when every root is true (one root per device a
/// filter over several devices aligned by time is expanded to, as IoTDB ANDs the expansions).
#[derive(Debug)]
pub(super) struct Filter {
    roots: Vec<Node>,
}

impl Filter {
    /// `expr` bound once per binding: `lookup(name)` is the cell index and type of `name`'s
    /// series in a row (none: the name is NULL).
    pub(super) fn bind<'a, 'b: 'a>(
        expr: &Expr,
        bindings: impl IntoIterator<Item = &'a Lookup<'b>>,
    ) -> ExecResult<Filter> {
        let roots = bindings
            .into_iter()
            .map(|lookup| {
                let node = Node::bind(expr, lookup)?;
                match node.kind() {
                    Kind::Bool | Kind::Null => Ok(node),
                    other => Err(type_error(format!(
                        "WHERE takes a condition, and this one is {}",
                        other.name()
                    ))),
                }
            })
            .collect::<ExecResult<Vec<Node>>>()?;
        assert!(!roots.is_empty(), "a filter has one binding at least");
        Ok(Filter { roots })
    }

    /// `expr` over rows that read `read` (cell `i + 1` is `read[i]`), its names being the series
    /// of `referenced` (each labelled by the name it was found by). One binding when those are of
    /// one device (or none); one per device when one name spans several devices, as IoTDB ANDs
    /// a filter's expansions; several names over several devices are not run yet (300).
    pub(super) fn over(expr: &Expr, read: &[Series], referenced: &[Series]) -> ExecResult<Filter> {
        let mut devices: Vec<&str> = referenced.iter().map(|s| s.device.as_str()).collect();
        devices.sort_unstable();
        devices.dedup();
        if devices.len() > 1 && expr.columns().len() > 1 {
            return Err(ExecError::refused(
                StatusCode::UnsupportedOperation,
                "a value filter naming several measurements of several devices is not \
                 supported yet aligned by time; add ALIGN BY DEVICE, or name one device",
            ));
        }
        let cell_of = |device: Option<&str>, name: &str| {
            let r = referenced
                .iter()
                .find(|s| s.label == name && device.is_none_or(|d| s.device == d))?;
            let at = read
                .iter()
                .position(|s| s.device == r.device && s.measurement == r.measurement)?;
            Some((at + 1, r.data_type))
        };
        let lookups: Vec<Box<Lookup<'_>>> = if devices.len() > 1 {
            devices
                .iter()
                .map(|d| Box::new(move |name: &str| cell_of(Some(d), name)) as Box<Lookup<'_>>)
                .collect()
        } else {
            vec![Box::new(|name: &str| cell_of(None, name))]
        };
        Filter::bind(expr, lookups.iter().map(|l| &**l))
    }

    /// The row's truth in three-valued logic: `None` when it is unknown (a NULL decides it).
    pub(super) fn judge(&self, row: &[Cell]) -> Option<bool> {
        let mut unknown = false;
        for root in &self.roots {
            match root.eval(row) {
                Datum::Bool(false) => return Some(false),
                Datum::Bool(true) => {}
                _ => unknown = true,
            }
        }
        (!unknown).then_some(true)
    }

    /// True when the row is kept.
    pub(super) fn keeps(&self, row: &[Cell]) -> bool {
        self.roots
            .iter()
            .all(|root| root.eval(row) == Datum::Bool(true))
    }
}

/// An expression of a select list bound to a row layout: its value in each row, of one type
/// (arithmetic DOUBLE, a condition BOOLEAN, `-x` and a bare name their operand's).
#[derive(Debug)]
pub(super) struct Scalar {
    node: Node,
    data_type: DataType,
}

impl Scalar {
    /// `expr` with its names bound by `lookup` (none: NULL); 700 when its operands' kinds do
    /// not fit its operators.
    pub(super) fn bind(expr: &Expr, lookup: &Lookup<'_>) -> ExecResult<Scalar> {
        let node = Node::bind(expr, lookup)?;
        let data_type = type_of(expr, lookup).unwrap_or(DataType::Double);
        Ok(Scalar { node, data_type })
    }

    /// The type of its values.
    pub(super) fn data_type(&self) -> DataType {
        self.data_type
    }

    /// Its value in `row` (a bare name's cell as it is).
    pub(super) fn eval(&self, row: &[Cell]) -> Cell {
        if let Node::Cell(i, _) = self.node {
            return row[i].clone();
        }
        match (self.node.eval(row), self.data_type) {
            (Datum::Null, _) => None,
            (Datum::Bool(b), _) => Some(Value::Boolean(b)),
            // Java's int negation wraps; so does this.
            (Datum::Int(i), DataType::Int32) => Some(Value::Int32(i as i32)),
            (Datum::Int(i), DataType::Timestamp) => Some(Value::Timestamp(i)),
            (Datum::Int(i), DataType::Float | DataType::Double) => Some(Value::Double(i as f64)),
            (Datum::Int(i), _) => Some(Value::Int64(i)),
            (Datum::Float(f), DataType::Float) => Some(Value::Float(f as f32)),
            (Datum::Float(f), _) => Some(Value::Double(f)),
            (Datum::Text(s), DataType::String) => Some(Value::String(s)),
            (Datum::Text(s), _) => Some(Value::Text(s)),
            (Datum::Blob(b), _) => Some(Value::Blob(b)),
        }
    }
}

/// The type `expr` answers when its names are bound by `lookup` (`None`: only NULL).
pub(super) fn type_of(expr: &Expr, lookup: &Lookup<'_>) -> Option<DataType> {
    Some(match expr {
        Expr::Time => DataType::Int64,
        Expr::Column(name) => lookup(name)?.1,
        Expr::Literal(literal) => match literal {
            Literal::Integer(_) => DataType::Int64,
            Literal::Float(_) => DataType::Double,
            Literal::Boolean(_) => DataType::Boolean,
            Literal::Text(_) => DataType::Text,
            Literal::Blob(_) => DataType::Blob,
            Literal::Null => return None,
        },
        Expr::Call { function, arg } => lookup(&format!("{function}({arg})"))?.1,
        Expr::Negate(e) => type_of(e, lookup)?,
        Expr::Binary { op, .. } if op.is_arithmetic() => DataType::Double,
        Expr::Not(_)
        | Expr::Binary { .. }
        | Expr::Between { .. }
        | Expr::InList { .. }
        | Expr::IsNull { .. }
        | Expr::Match { .. } => DataType::Boolean,
    })
}

fn type_error(message: String) -> ExecError {
    ExecError::refused(StatusCode::IllegalParameter, message)
}

/// A value while a filter is evaluated.
#[derive(Clone, Debug, PartialEq)]
enum Datum {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Datum {
    fn of(value: &Value) -> Datum {
        match value {
            Value::Boolean(b) => Datum::Bool(*b),
            Value::Int32(i) => Datum::Int(i64::from(*i)),
            Value::Int64(i) | Value::Timestamp(i) => Datum::Int(*i),
            Value::Date(d) => Datum::Int(i64::from(*d)),
            Value::Float(f) => Datum::Float(f64::from(*f)),
            Value::Double(d) => Datum::Float(*d),
            Value::Text(s) | Value::String(s) => Datum::Text(s.clone()),
            Value::Blob(b) => Datum::Blob(b.clone()),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Datum::Int(i) => Some(*i as f64),
            Datum::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The order of two values of one kind; `None` with a NULL (or NaN).
    fn compare(&self, other: &Datum) -> Option<Ordering> {
        match (self, other) {
            (Datum::Int(a), Datum::Int(b)) => Some(a.cmp(b)),
            (Datum::Text(a), Datum::Text(b)) => Some(a.cmp(b)),
            (Datum::Bool(a), Datum::Bool(b)) => Some(a.cmp(b)),
            (Datum::Blob(a), Datum::Blob(b)) => Some(a.cmp(b)),
            (a, b) => a.number()?.partial_cmp(&b.number()?),
        }
    }
}

/// What an expression answers, checked when it is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Number,
    Date,
    Text,
    Blob,
}

impl Kind {
    fn of(data_type: DataType) -> Kind {
        match data_type {
            DataType::Boolean => Kind::Bool,
            DataType::Date => Kind::Date,
            DataType::Text | DataType::String => Kind::Text,
            DataType::Blob => Kind::Blob,
            _ => Kind::Number,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "NULL",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::Date => "a date",
            Kind::Text => "text",
            Kind::Blob => "a blob",
        }
    }

    /// True when values of the two kinds compare (a NULL with anything; a date with a number).
    fn compares_with(self, other: Kind) -> bool {
        let numeric = |k| matches!(k, Kind::Number | Kind::Date);
        self == other
            || self == Kind::Null
            || other == Kind::Null
            || numeric(self) && numeric(other)
    }
}

/// An expression bound to a row layout.
#[derive(Debug)]
enum Node {
    Time,
    Cell(usize, Kind),
    Const(Datum, Kind),
    Not(Box<Node>),
    Negate(Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    Between(Box<Node>, Box<Node>, Box<Node>, bool),
    InList(Box<Node>, Vec<Node>, bool),
    IsNull(Box<Node>, bool),
    Match(Box<Node>, Regex, bool),
}

impl Node {
    fn bind(expr: &Expr, lookup: &dyn Fn(&str) -> Option<(usize, DataType)>) -> ExecResult<Node> {
        let bind = |e: &Expr| Node::bind(e, lookup).map(Box::new);
        let node = match expr {
            Expr::Time => Node::Time,
            Expr::Column(name) => match lookup(name) {
                Some((cell, data_type)) => Node::Cell(cell, Kind::of(data_type)),
                None => Node::Const(Datum::Null, Kind::Null),
            },
            Expr::Literal(literal) => constant(literal),
            Expr::Call { function, arg } => match lookup(&format!("{function}({arg})")) {
                Some((cell, data_type)) => Node::Cell(cell, Kind::of(data_type)),
                None => Node::Const(Datum::Null, Kind::Null),
            },
            Expr::Not(e) => Node::Not(bind(e)?),
            Expr::Negate(e) => Node::Negate(bind(e)?),
            Expr::Binary { op, left, right } => {
                let (left, right) = (bind(left)?, bind(right)?);
                let (left, right) = dates_compared(*left, *right);
                Node::Binary(*op, Box::new(left), Box::new(right))
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let e = *bind(expr)?;
                let (e, low) = dates_compared(e, *bind(low)?);
                let (e, high) = dates_compared(e, *bind(high)?);
                Node::Between(Box::new(e), Box::new(low), Box::new(high), *negated)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let mut e = *bind(expr)?;
                let mut values = Vec::with_capacity(list.len());
                for item in list {
                    let (bound, v) = dates_compared(e, *bind(item)?);
                    e = bound;
                    values.push(v);
                }
                Node::InList(Box::new(e), values, *negated)
            }
            Expr::IsNull { expr, negated } => Node::IsNull(bind(expr)?, *negated),
            Expr::Match {
                expr,
                pattern,
                regexp,
                negated,
            } => {
                let regex = if *regexp {
                    Regex::new(pattern)
                } else {
                    Regex::new(&like_regex(pattern))
                }
                .map_err(|e| type_error(format!("the pattern '{pattern}': {e}")))?;
                Node::Match(bind(expr)?, regex, *negated)
            }
        };
        node.check()?;
        Ok(node)
    }

    /// 700 unless the operands' kinds fit the operator.
    fn check(&self) -> ExecResult<()> {
        let fits = |k: Kind, want: &[Kind]| k == Kind::Null || want.contains(&k);
        let refuse = |what: &str, k: Kind| Err(type_error(format!("{what} takes {}", k.name())));
        match self {
            Node::Not(e) if !fits(e.kind(), &[Kind::Bool]) => refuse("NOT", e.kind()),
            Node::Negate(e) if !fits(e.kind(), &[Kind::Number]) => refuse("'-'", e.kind()),
            Node::Binary(op, l, r) => {
                let (lk, rk) = (l.kind(), r.kind());
                let ok = match op {
                    BinaryOp::And | BinaryOp::Or => {
                        fits(lk, &[Kind::Bool]) && fits(rk, &[Kind::Bool])
                    }
                    op if op.is_arithmetic() => {
                        fits(lk, &[Kind::Number]) && fits(rk, &[Kind::Number])
                    }
                    _ => lk.compares_with(rk),
                };
                if ok {
                    Ok(())
                } else {
                    Err(type_error(format!(
                        "{op:?} cannot take {} and {}",
                        lk.name(),
                        rk.name()
                    )))
                }
            }
            Node::Between(e, low, high, _)
                if !(e.kind().compares_with(low.kind()) && e.kind().compares_with(high.kind())) =>
            {
                refuse("BETWEEN's ends must be like its value, which is", e.kind())
            }
            Node::InList(e, list, _) if list.iter().any(|v| !e.kind().compares_with(v.kind())) => {
                refuse("IN's values must be like its value, which is", e.kind())
            }
            Node::Match(e, _, _) if !fits(e.kind(), &[Kind::Text]) => {
                refuse("LIKE and REGEXP take text, not", e.kind())
            }
            _ => Ok(()),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Node::Time => Kind::Number,
            Node::Cell(_, k) | Node::Const(_, k) => *k,
            Node::Negate(_) => Kind::Number,
            Node::Binary(op, _, _) if op.is_arithmetic() => Kind::Number,
            _ => Kind::Bool,
        }
    }

    fn eval(&self, row: &[Cell]) -> Datum {
        match self {
            Node::Time => row[0].as_ref().map_or(Datum::Null, Datum::of),
            Node::Cell(i, _) => row[*i].as_ref().map_or(Datum::Null, Datum::of),
            Node::Const(d, _) => d.clone(),
            Node::Not(e) => match e.eval(row) {
                Datum::Bool(b) => Datum::Bool(!b),
                _ => Datum::Null,
            },
            Node::Negate(e) => match e.eval(row) {
                Datum::Int(i) => Datum::Int(i.wrapping_neg()),
                other => other.number().map_or(Datum::Null, |n| Datum::Float(-n)),
            },
            Node::Binary(op, l, r) => binary(*op, l, r, row),
            Node::Between(e, low, high, negated) => {
                let v = e.eval(row);
                let above = v.compare(&low.eval(row)).map(|o| o != Ordering::Less);
                let below = v.compare(&high.eval(row)).map(|o| o != Ordering::Greater);
                match (above, below) {
                    (Some(a), Some(b)) => Datum::Bool((a && b) != *negated),
                    (Some(false), None) | (None, Some(false)) => Datum::Bool(*negated),
                    _ => Datum::Null,
                }
            }
            Node::InList(e, list, negated) => {
                let v = e.eval(row);
                if v == Datum::Null {
                    return Datum::Null;
                }
                let mut unknown = false;
                for item in list {
                    match v.compare(&item.eval(row)) {
                        Some(Ordering::Equal) => return Datum::Bool(!*negated),
                        None => unknown = true,
                        Some(_) => {}
                    }
                }
                if unknown {
                    Datum::Null
                } else {
                    Datum::Bool(*negated)
                }
            }
            Node::IsNull(e, negated) => Datum::Bool((e.eval(row) == Datum::Null) != *negated),
            Node::Match(e, regex, negated) => match e.eval(row) {
                Datum::Text(s) => Datum::Bool(regex.is_match(&s) != *negated),
                _ => Datum::Null,
            },
        }
    }
}

/// `AND`/`OR` in three-valued logic, comparisons, and arithmetic in doubles.
fn binary(op: BinaryOp, l: &Node, r: &Node, row: &[Cell]) -> Datum {
    match op {
        BinaryOp::And | BinaryOp::Or => {
            let decisive = op == BinaryOp::Or;
            let a = l.eval(row);
            if a == Datum::Bool(decisive) {
                return a;
            }
            let b = r.eval(row);
            match (a, b) {
                (_, Datum::Bool(x)) if x == decisive => Datum::Bool(decisive),
                (Datum::Bool(_), Datum::Bool(_)) => Datum::Bool(!decisive),
                _ => Datum::Null,
            }
        }
        op if op.is_arithmetic() => {
            let (Some(a), Some(b)) = (l.eval(row).number(), r.eval(row).number()) else {
                return Datum::Null;
            };
            Datum::Float(match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a / b,
                _ => a % b,
            })
        }
        op => match l.eval(row).compare(&r.eval(row)) {
            None => Datum::Null,
            Some(o) => Datum::Bool(match op {
                BinaryOp::Eq => o == Ordering::Equal,
                BinaryOp::NotEq => o != Ordering::Equal,
                BinaryOp::Lt => o == Ordering::Less,
                BinaryOp::LtEq => o != Ordering::Greater,
                BinaryOp::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }),
        },
    }
}

fn constant(literal: &Literal) -> Node {
    let (datum, kind) = match literal {
        Literal::Integer(i) => (Datum::Int(*i), Kind::Number),
        Literal::Float(f) => (Datum::Float(*f), Kind::Number),
        Literal::Boolean(b) => (Datum::Bool(*b), Kind::Bool),
        Literal::Text(s) => (Datum::Text(s.clone()), Kind::Text),
        Literal::Blob(b) => (Datum::Blob(b.clone()), Kind::Blob),
        Literal::Null => (Datum::Null, Kind::Null),
    };
    Node::Const(datum, kind)
}

/// A text constant compared with a DATE, as the date's `yyyymmdd` when it is `yyyy-mm-dd`.
fn dates_compared(left: Node, right: Node) -> (Node, Node) {
    let as_date = |node: Node| match node {
        Node::Const(Datum::Text(ref s), _) => match date_number(s) {
            Some(d) => Node::Const(Datum::Int(d), Kind::Date),
            None => node,
        },
        other => other,
    };
    match (left.kind(), right.kind()) {
        (Kind::Date, Kind::Text) => (left, as_date(right)),
        (Kind::Text, Kind::Date) => (as_date(left), right),
        _ => (left, right),
    }
}

/// `yyyy-mm-dd` as the number `yyyymmdd`.
fn date_number(text: &str) -> Option<i64> {
    let mut parts = text.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some(y * 10_000 + m * 100 + d)
}

/// LIKE's pattern as an anchored regular expression: `%` any run, `_` one character, `\` takes
/// the next character as itself.
fn like_regex(pattern: &str) -> String {
    let mut out = String::from("(?s)^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push_str(&regex::escape(&next.to_string()));
                }
            }
            other => out.push_str(&regex::escape(&other.to_string())),
        }
    }
    out.push('$');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_script, Position, Statement};

    /// The filter of `SELECT * FROM root.sg.d1 WHERE <text>` over columns a (DOUBLE), i (INT64),
    /// t (TEXT), b (BOOLEAN), day (DATE), as cells 1..=5.
    fn filter(text: &str) -> ExecResult<Filter> {
        let statement = parse_script(
            &format!("SELECT * FROM root.sg.d1 WHERE {text}"),
            Position::START,
        )
        .pop()
        .unwrap()
        .result
        .expect(text);
        let Statement::Select { filter, .. } = statement else {
            panic!("{text}")
        };
        let expr = filter.expect("a value filter");
        let lookup = |name: &str| {
            let types = [
                ("a", DataType::Double),
                ("i", DataType::Int64),
                ("t", DataType::Text),
                ("b", DataType::Boolean),
                ("day", DataType::Date),
            ];
            let at = types.iter().position(|(n, _)| *n == name)?;
            Some((at + 1, types[at].1))
        };
        Filter::bind(
            &expr,
            [&lookup as &dyn Fn(&str) -> Option<(usize, DataType)>],
        )
    }

    fn row(a: Option<f64>, i: Option<i64>, t: Option<&str>) -> Vec<Cell> {
        vec![
            Some(Value::Int64(100)),
            a.map(Value::Double),
            i.map(Value::Int64),
            t.map(|t| Value::Text(t.into())),
            Some(Value::Boolean(true)),
            Some(Value::Date(20240105)),
        ]
    }

    fn keeps(text: &str, r: &[Cell]) -> bool {
        filter(text).expect(text).keeps(r)
    }

    #[test]
    fn comparisons_logic_and_nulls() {
        let r = row(Some(1.5), Some(7), Some("north-1"));
        let null = row(None, Some(7), None);
        for (text, on_r, on_null) in [
            ("a > 1", true, false),
            ("a > 1 OR i = 7", true, true),
            ("NOT a > 1", false, false),
            ("a > 1 AND i != 7", false, false),
            ("a <> 1.5 OR a = 1.5", true, false),
            ("a BETWEEN 1 AND 2", true, false),
            ("a NOT BETWEEN 1 AND 2", false, false),
            ("i IN (1, 7, 9)", true, true),
            ("i NOT IN (1, 9)", true, true),
            ("a IS NULL", false, true),
            ("a IS NOT NULL", true, false),
            ("t LIKE 'north%'", true, false),
            ("t LIKE 'north_1'", true, false),
            ("t NOT LIKE '%south%'", true, false),
            ("t REGEXP '^n.*[0-9]$'", true, false),
            ("a * 2 + i >= 10", true, false),
            ("-a < 0 AND i % 2 = 1", true, false),
            ("i / 2 = 3.5", true, true),
            ("b", true, true),
            ("b = true AND day > '2024-01-01'", true, true),
            ("day BETWEEN '2024-01-05' AND '2024-01-05'", true, true),
            ("time > 50 OR a > 100", true, true),
            ("nope > 1", false, false),
            ("nope IS NULL", true, true),
        ] {
            assert_eq!(keeps(text, &r), on_r, "{text} on a full row");
            assert_eq!(keeps(text, &null), on_null, "{text} with a and t NULL");
        }
    }

    #[test]
    fn kinds_that_do_not_fit_are_refused() {
        for text in [
            "a > 'x'",
            "t + 1 > 2",
            "a",
            "t LIKE 'x' AND a",
            "b LIKE 'x'",
            "NOT a",
            "a IN (1, 'x')",
        ] {
            let e = filter(text).expect_err(text);
            assert_eq!(e.code(), 700, "{text}: {e}");
        }
    }

    #[test]
    fn like_escapes_and_anchors() {
        assert_eq!(like_regex("a%b_c"), "(?s)^a.*b.c$");
        assert_eq!(like_regex("100\\%"), "(?s)^100%$");
        assert_eq!(like_regex("a.b"), "(?s)^a\\.b$");
        assert_eq!(date_number("2024-02-29"), Some(20240229));
        assert_eq!(date_number("2024-2-29"), None);
    }
}
