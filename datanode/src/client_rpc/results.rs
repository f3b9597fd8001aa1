//! A statement's result table as IoTDB's client reads it: column names without `Time`, type
//! names, and rows in TsBlocks, served a page at a time: `fetchSize` rows, fewer when the rows
//! are wide (a page is at most `query_page_bytes_max` as results are charged). A raw SELECT's
//! rows are read as its pages are asked for ([`ResultCursor`]); what a result holds is charged on
//! the node's result memory (`query_results_bytes_max_per_node`), given back as pages go and all
//! of it when the query is closed or dropped.

use common::{Bitmap, Column, DataType, Value};
use iotdb_rpc::tsblock;
use sql::exec::ResultCursor;
use sql::{Cell, ExecError, ResultCharge};

use crate::ops::deadline::QueryDeadline;

/// Rows of a page when the client asks for none or a negative number (IoTDB's
/// `maxTsBlockLineNumber`).
pub(crate) const DEFAULT_FETCH_ROWS: usize = 1000;

/// Most rows of one page, whatever the client asks: a page is one TsBlock in one frame.
pub(crate) const FETCH_ROWS_MAX: usize = 100_000;

/// A query's result not yet sent: its cursor, and what the cursor holds of the node's result
/// memory.
pub(crate) struct Pending {
    /// The first column is the rows' time.
    has_time: bool,
    cursor: ResultCursor,
    charge: ResultCharge,
    /// Past it a fetch answers 720 and the query is closed (715 once killed); it holds the
    /// query's registration while the result is open.
    deadline: QueryDeadline,
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
    /// Splits a query's cursor into its header and the rows still to send, which keep `charge`.
    pub(crate) fn new(
        cursor: ResultCursor,
        charge: ResultCharge,
        deadline: QueryDeadline,
    ) -> (Header, Pending) {
        let has_time = cursor.has_time();
        let skip = usize::from(has_time);
        let header = Header {
            columns: cursor.columns[skip..].to_vec(),
            data_types: cursor.types[skip..]
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
            ignore_time_stamp: !has_time,
        };
        let pending = Pending {
            has_time,
            cursor,
            charge,
            deadline,
        };
        (header, pending)
    }

    /// True when every row was sent.
    pub(crate) fn is_done(&self) -> bool {
        self.cursor.is_done()
    }

    /// The next page as one TsBlock: at most `rows` rows and, past its first row, at most
    /// `bytes_max` bytes of them; `None` when no row is left (a TsBlock of zero rows is never
    /// sent). A streamed result reads its rows now (and may fail: a fenced node's 535, a bound's
    /// 700, the query's deadline's 720). The page's rows give back their charge once encoded.
    pub(crate) async fn next_page<B: sql::Backend>(
        &mut self,
        backend: &B,
        rows: usize,
        bytes_max: usize,
    ) -> Result<Option<Vec<u8>>, ExecError> {
        let page = self
            .deadline
            .run(
                self.cursor
                    .next_page(backend, rows, bytes_max, &mut self.charge),
            )
            .await?;
        if page.rows.is_empty() {
            return Ok(None);
        }
        let block = encode(&page.rows, &self.cursor.types, self.has_time);
        drop(page.rows);
        self.charge.release(page.bytes);
        Ok(Some(block))
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
    use sql::{Outcome, OutcomeKind};

    #[test]
    fn the_header_drops_the_time_column_and_a_page_is_one_tsblock_with_its_nulls() {
        let rows: Vec<Vec<Cell>> = (0..3)
            .map(|t| {
                vec![
                    Some(Value::Int64(t)),
                    (t != 2).then_some(Value::Int32(t as i32)),
                ]
            })
            .collect();
        let outcome = Outcome {
            kind: OutcomeKind::Query,
            columns: vec!["Time".into(), "root.sg.d.s".into()],
            types: vec![DataType::Int64, DataType::Int32],
            rows: rows.clone(),
        };
        let (header, pending) = Pending::new(
            ResultCursor::built(outcome),
            ResultCharge::unbounded(),
            QueryDeadline::new(0, 0),
        );
        assert_eq!(header.columns, vec!["root.sg.d.s".to_string()]);
        assert_eq!(header.data_types, vec!["INT32".to_string()]);
        assert!(!header.ignore_time_stamp);
        assert!(pending.has_time);
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
        assert_eq!(
            encode(&rows, &pending.cursor.types, true),
            tsblock::encode(&[0, 1, 2], &[(column, Some(nulls))])
        );
    }

    #[test]
    fn fetch_sizes_of_zero_or_less_take_the_default() {
        assert_eq!(page_rows(0), DEFAULT_FETCH_ROWS);
        assert_eq!(page_rows(-5), DEFAULT_FETCH_ROWS);
        assert_eq!(page_rows(10), 10);
        assert_eq!(page_rows(i32::MAX), FETCH_ROWS_MAX);
    }
}
