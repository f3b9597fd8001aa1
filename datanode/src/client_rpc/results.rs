//! A statement's result table as IoTDB's client reads it: column names without `Time`, type
//! names, and rows in TsBlocks, served a page (`fetchSize` rows) at a time.

use std::collections::VecDeque;

use common::{Bitmap, Column, DataType, Value};
use iotdb_rpc::tsblock;
use sql::{Cell, Outcome};

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
    /// Splits a query's outcome into its header and its rows.
    pub(crate) fn new(outcome: Outcome) -> (Header, Pending) {
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
        };
        (header, pending)
    }

    /// True when every row was sent.
    pub(crate) fn is_done(&self) -> bool {
        self.rows.is_empty()
    }

    /// The next page of at most `rows` rows as one TsBlock; `None` when no row is left (a
    /// TsBlock of zero rows is never sent).
    pub(crate) fn next_page(&mut self, rows: usize) -> Option<Vec<u8>> {
        let n = rows.min(self.rows.len());
        if n == 0 {
            return None;
        }
        let page: Vec<Vec<Cell>> = self.rows.drain(..n).collect();
        Some(encode(&page, &self.types, self.has_time))
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
        let (header, mut pending) = Pending::new(outcome);
        assert_eq!(header.columns, vec!["root.sg.d.s".to_string()]);
        assert_eq!(header.data_types, vec!["INT32".to_string()]);
        assert!(!header.ignore_time_stamp);
        let first = pending.next_page(3).expect("a page");
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
        assert!(pending.next_page(3).is_some());
        assert!(pending.is_done());
        assert_eq!(pending.next_page(3), None);
    }

    #[test]
    fn fetch_sizes_of_zero_or_less_take_the_default() {
        assert_eq!(page_rows(0), DEFAULT_FETCH_ROWS);
        assert_eq!(page_rows(-5), DEFAULT_FETCH_ROWS);
        assert_eq!(page_rows(10), 10);
        assert_eq!(page_rows(i32::MAX), FETCH_ROWS_MAX);
    }
}
