//! A statement's result table as IoTDB's client reads it: column names without `Time`, type
//! names, and rows in TsBlocks, served a page at a time: `fetchSize` rows, fewer when the rows
//! are wide (a page is at most `query_page_bytes_max` as results are charged). The rows not yet
//! sent keep their charge on the node's result memory (`query_results_bytes_max_per_node`),
//! given back as pages go and all of it when the query is closed or dropped.

use std::collections::VecDeque;

use common::{Bitmap, Column, DataType, Value};
use iotdb_rpc::tsblock;
use sql::{Cell, Outcome, ResultCharge};

/// Rows of a page when the client asks for none or a negative number (IoTDB's
/// `maxTsBlockLineNumber`).
pub(crate) const DEFAULT_FETCH_ROWS: usize = 1000;

/// Most rows of one page, whatever the client asks: a page is one TsBlock in one frame.
pub(crate) const FETCH_ROWS_MAX: usize = 100_000;

/// The rows of a query not yet sent.
pub(crate) struct Pending {
    /// The first column is the rows' time.
    has_time: bool,
    /// Every column's type, `Time` included.
    types: Vec<DataType>,
    rows: VecDeque<Vec<Cell>>,
    /// What the rows not yet sent hold of the node's result memory.
    charge: ResultCharge,
}

/// The rows a page takes for the client's `fetchSize`.
pub(crate) fn page_rows(fetch_size: i32) -> usize {
    usize::try_from(fetch_size)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_FETCH_ROWS)
        .min(FETCH_ROWS_MAX)
}

/// The header of a result: `columns` and `dataTypeList` without `Time`, and `ignoreTimeStamp`.
pub(crate) struct Header {
    pub columns: Vec<String>,
    pub data_types: Vec<String>,
    pub ignore_time_stamp: bool,
}

impl Pending {
    /// Splits a query's outcome into its header and its rows, which keep `charge` (the rows'
    /// bytes, [`sql::row_bytes`]).
    pub(crate) fn new(outcome: Outcome, charge: ResultCharge) -> (Header, Pending) {
        let has_time = outcome.has_time();
        let skip = usize::from(has_time);
        let header = Header {
            columns: outcome.columns[skip..].to_vec(),
            data_types: outcome.types[skip..]
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
            ignore_time_stamp: !has_time,
        };
        let pending = Pending {
            has_time,
            types: outcome.types,
            rows: outcome.rows.into(),
            charge,
        };
        (header, pending)
    }

    /// True when every row was sent.
    pub(crate) fn is_done(&self) -> bool {
        self.rows.is_empty()
    }

    /// The next page as one TsBlock: at most `rows` rows and, past its first row, at most
    /// `bytes_max` bytes of them; `None` when no row is left (a TsBlock of zero rows is never
    /// sent). The page's rows give back their charge.
    pub(crate) fn next_page(&mut self, rows: usize, bytes_max: usize) -> Option<Vec<u8>> {
        let (mut n, mut bytes) = (0, 0);
        for row in self.rows.iter().take(rows) {
            let row_bytes = sql::row_bytes(row);
            if n > 0 && bytes + row_bytes > bytes_max {
                break;
            }
            n += 1;
            bytes += row_bytes;
        }
        if n == 0 {
            return None;
        }
        let page: Vec<Vec<Cell>> = self.rows.drain(..n).collect();
        let block = encode(&page, &self.types, self.has_time);
        drop(page);
        self.charge.release(bytes);
        Some(block)
    }
}

/// Rows as one TsBlock: the time column from the first cell when `has_time` (else zeros, which
/// the client ignores), and each other column with its nulls.
fn encode(rows: &[Vec<Cell>], types: &[DataType], has_time: bool) -> Vec<u8> {
    let n = rows.len();
    let times: Vec<i64> = rows
        .iter()
        .map(|row| match (has_time, row.first()) {
            (true, Some(Some(Value::Int64(t)))) => *t,
            _ => 0,
        })
        .collect();
    let skip = usize::from(has_time);
    let columns: Vec<(Column, Option<Bitmap>)> = types[skip..]
        .iter()
        .enumerate()
        .map(|(j, &data_type)| {
            let mut column = Column::with_capacity(data_type, n);
            let mut nulls: Option<Bitmap> = None;
            for (i, row) in rows.iter().enumerate() {
                let pushed = match &row[skip + j] {
                    Some(value) => column.push(value.clone()),
                    None => false,
                };
                if !pushed {
                    column.push_placeholder();
                    nulls.get_or_insert_with(|| Bitmap::new(n)).set(i);
                }
            }
            (column, nulls)
        })
        .collect();
    tsblock::encode(&times, &columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql::OutcomeKind;

    #[test]
    fn pages_split_rows_and_drop_the_time_column_from_the_header() {
        let outcome = Outcome {
            kind: OutcomeKind::Query,
            columns: vec!["Time".into(), "root.sg.d.s".into()],
            types: vec![DataType::Int64, DataType::Int32],
            rows: (0..5)
                .map(|t| {
                    vec![
                        Some(Value::Int64(t)),
                        (t != 2).then_some(Value::Int32(t as i32)),
                    ]
                })
                .collect(),
        };
        let (header, mut pending) = Pending::new(outcome, ResultCharge::unbounded());
        assert_eq!(header.columns, vec!["root.sg.d.s".to_string()]);
        assert_eq!(header.data_types, vec!["INT32".to_string()]);
        assert!(!header.ignore_time_stamp);
        let first = pending.next_page(3, usize::MAX).expect("a page");
        // The same rows encoded directly: times 0..3, a null at row 2.
        let mut column = Column::with_capacity(DataType::Int32, 3);
        let mut nulls = Bitmap::new(3);
        for t in 0..3 {
            if t == 2 {
                column.push_placeholder();
                nulls.set(2);
            } else {
                column.push(Value::Int32(t));
            }
        }
        assert_eq!(first, tsblock::encode(&[0, 1, 2], &[(column, Some(nulls))]));
        assert!(!pending.is_done());
        assert!(pending.next_page(3, usize::MAX).is_some());
        assert!(pending.is_done());
        assert_eq!(pending.next_page(3, usize::MAX), None);
    }

    /// Wide rows make short pages (one row at least), and each page gives back its rows'
    /// charge; dropping the rest gives back the rest (REVIEW N5).
    #[test]
    fn pages_are_bounded_in_bytes_and_give_back_their_charge() {
        let width = 100;
        let rows: Vec<Vec<Cell>> = (0..10)
            .map(|t| {
                let mut row = vec![Some(Value::Int64(t))];
                row.extend((0..width).map(|_| Some(Value::Double(1.0))));
                row
            })
            .collect();
        let row_bytes = sql::row_bytes(&rows[0]);
        let mut types = vec![DataType::Int64];
        types.extend(std::iter::repeat_n(DataType::Double, width));
        let outcome = Outcome {
            kind: OutcomeKind::Query,
            columns: std::iter::once("Time".to_string())
                .chain((0..width).map(|s| format!("root.sg.d.s{s}")))
                .collect(),
            types,
            rows,
        };
        let budget = sql::ResultBudget::new(1 << 20, 1 << 20);
        let mut charge = budget.charge();
        charge.settle(sql::exec::outcome_bytes(&outcome)).unwrap();
        let (_, mut pending) = Pending::new(outcome, charge);
        assert_eq!(budget.used(), 10 * row_bytes);
        // Room for three rows in bytes, though ten are asked.
        pending.next_page(10, 3 * row_bytes + 1).expect("a page");
        assert_eq!(pending.rows.len(), 7);
        assert_eq!(budget.used(), 7 * row_bytes);
        // A row wider than the page still goes, alone.
        pending.next_page(10, 1).expect("a page");
        assert_eq!(pending.rows.len(), 6);
        drop(pending);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn fetch_sizes_of_zero_or_less_take_the_default() {
        assert_eq!(page_rows(0), DEFAULT_FETCH_ROWS);
        assert_eq!(page_rows(-5), DEFAULT_FETCH_ROWS);
        assert_eq!(page_rows(10), 10);
        assert_eq!(page_rows(i32::MAX), FETCH_ROWS_MAX);
    }
}
