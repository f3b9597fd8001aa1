//! A statement's result as its client reads it, a page at a time ([`ResultCursor`]).
//!
//! A raw tree-model SELECT (and IoTDB's raw data query) is a cursor over its series joined on
//! time: a page reads only as far as its rows need, so what the node holds for an open result
//! is one chunk per series and one page, however many rows the result has. Every other
//! statement's result is built whole, bounded by its memory and [`RESULT_ROWS_MAX`] rows, and
//! paged from memory.
//!
//! The rows a cursor holds are charged to the result's [`ResultCharge`]; a page's rows are
//! charged until the caller has sent them and gives their bytes back ([`Page::bytes`]).
//!
//! A streamed result is no snapshot: each page reads the series as they are then, past the
//! previous page's last time, so a point written behind the cursor is not seen and one written
//! ahead of it may be (IoTDB's result sets behave alike).

use common::DataType;

use super::budget::{row_bytes, ResultCharge};
use super::join::too_many_rows;
use super::rows::RawRows;
use super::{Backend, Cell, ExecResult, Outcome, OutcomeKind, RESULT_ROWS_MAX, TIME_COLUMN};

/// Where a cursor's rows come from.
enum Source {
    /// Built whole; each row charged.
    Built(std::vec::IntoIter<Vec<Cell>>),
    /// Read as they are asked.
    Raw(Box<RawRows>),
}

/// A result read a page at a time.
pub struct ResultCursor {
    /// A query (rows, even none) or a statement that only succeeded.
    pub kind: OutcomeKind,
    /// Column names; a first one named [`TIME_COLUMN`] is the rows' time.
    pub columns: Vec<String>,
    /// Each column's type.
    pub types: Vec<DataType>,
    source: Source,
    /// A row read past the last page, the next page's first (charged).
    carry: Option<Vec<Cell>>,
    done: bool,
}

/// One page of rows, and the bytes they are charged: the caller gives them back
/// ([`ResultCharge::release`]) once the page is sent.
pub struct Page {
    pub rows: Vec<Vec<Cell>>,
    pub bytes: usize,
}

impl ResultCursor {
    /// A cursor over a result built whole (its rows charged as [`super::outcome_bytes`]).
    pub fn built(outcome: Outcome) -> ResultCursor {
        ResultCursor {
            kind: outcome.kind,
            columns: outcome.columns,
            types: outcome.types,
            done: outcome.rows.is_empty(),
            source: Source::Built(outcome.rows.into_iter()),
            carry: None,
        }
    }

    /// A cursor over a raw query's rows, read as they are asked.
    pub(super) fn raw(header: Vec<(String, DataType)>, rows: RawRows) -> ResultCursor {
        let (columns, types) = header.into_iter().unzip();
        ResultCursor {
            kind: OutcomeKind::Query,
            columns,
            types,
            source: Source::Raw(Box::new(rows)),
            carry: None,
            done: false,
        }
    }

    /// True when the first column is the rows' time.
    pub fn has_time(&self) -> bool {
        self.columns.first().is_some_and(|c| c == TIME_COLUMN)
    }

    /// True once every row was handed out.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next row, charged [`row_bytes`].
    async fn next_row<B: Backend>(
        &mut self,
        backend: &B,
        charge: &mut ResultCharge,
    ) -> ExecResult<Option<Vec<Cell>>> {
        if let Some(row) = self.carry.take() {
            return Ok(Some(row));
        }
        let row = match &mut self.source {
            Source::Built(rows) => rows.next(),
            Source::Raw(rows) => rows.next_row(backend, charge).await?,
        };
        if row.is_none() {
            self.done = true;
        }
        Ok(row)
    }

    /// The next page: at most `rows_max` rows and, past its first row, at most `bytes_max`
    /// bytes of them; empty once the cursor is done. The rows past it are read as far as one
    /// row, so [`ResultCursor::is_done`] tells whether another page follows.
    pub async fn next_page<B: Backend>(
        &mut self,
        backend: &B,
        rows_max: usize,
        bytes_max: usize,
        charge: &mut ResultCharge,
    ) -> ExecResult<Page> {
        let mut page = Page {
            rows: Vec::new(),
            bytes: 0,
        };
        while page.rows.len() < rows_max.max(1) {
            let Some(row) = self.next_row(backend, charge).await? else {
                return Ok(page);
            };
            let bytes = row_bytes(&row);
            if !page.rows.is_empty() && page.bytes + bytes > bytes_max {
                self.carry = Some(row);
                return Ok(page);
            }
            page.bytes += bytes;
            page.rows.push(row);
        }
        self.carry = self.next_row(backend, charge).await?;
        Ok(page)
    }

    /// Every row left, as an outcome whose rows stay charged; more than [`RESULT_ROWS_MAX`]
    /// rows are refused.
    pub async fn collect<B: Backend>(
        mut self,
        backend: &B,
        charge: &mut ResultCharge,
    ) -> ExecResult<Outcome> {
        let mut rows = Vec::new();
        while let Some(row) = self.next_row(backend, charge).await? {
            rows.push(row);
            if rows.len() > RESULT_ROWS_MAX {
                return Err(too_many_rows());
            }
        }
        Ok(Outcome {
            kind: self.kind,
            columns: self.columns,
            types: self.types,
            rows,
        })
    }
}
