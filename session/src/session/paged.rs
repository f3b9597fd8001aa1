//! [`Session::execute_statement_paged`]: a statement's result read a page at a time from the
//! DataNode's `ExecuteStatementPaged` stream, so neither end holds it whole. The call (up to
//! the first page) is retried like any other; once rows have come, a failure ends the result.

use std::time::Duration;

use common::{DataType, Value};

use super::{status_error, status_of, Session};
use crate::convert::value_from_wire;
use crate::error::{Result, SessionError};

/// A statement's answer whose rows are read as they are asked for.
#[derive(Debug)]
pub struct StatementPages {
    /// A query (a table, even of no rows) rather than a statement that only succeeded.
    pub query: bool,
    /// Column names; a first column `Time` is the rows' time.
    pub columns: Vec<String>,
    /// Parallel to `columns`.
    pub types: Vec<DataType>,
    /// The first page, until it is asked for.
    first: Option<Vec<Vec<Option<Value>>>>,
    stream: Option<tonic::Streaming<proto::ExecuteStatementResp>>,
    timeout: Duration,
}

impl StatementPages {
    /// The next page of rows (at most 1,000), `None` once every row was read. A failure past
    /// the first page (the query's deadline, a fenced read) ends the result with its status.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Vec<Option<Value>>>>> {
        if let Some(first) = self.first.take() {
            return Ok(Some(first));
        }
        let Some(stream) = self.stream.as_mut() else {
            return Ok(None);
        };
        let message = tokio::time::timeout(self.timeout, stream.message())
            .await
            .map_err(|_| SessionError::Protocol("no next page within the request timeout".into()))?
            .map_err(|e| SessionError::Protocol(format!("the result stream failed: {e}")))?;
        let Some(message) = message else {
            self.stream = None;
            return Ok(None);
        };
        if let Some(status) = message.status.as_ref().filter(|s| !s.is_success()) {
            self.stream = None;
            return Err(status_error(status));
        }
        decode_rows(self.columns.len(), message.rows).map(Some)
    }
}

impl Session {
    /// Runs one statement (of the tree model) with its result paged: the rows are read on the
    /// DataNode as [`StatementPages::next_page`] asks for them, a page a message. Dropping the
    /// pages stops the query.
    pub async fn execute_statement_paged(&self, statement: &str) -> Result<StatementPages> {
        let (first, stream) = self
            .call(None, |mut c, session_id| {
                let req = proto::ExecuteStatementReq {
                    session_id,
                    statement: statement.to_string(),
                    table_model: false,
                    database: String::new(),
                };
                async move {
                    let mut stream = c.execute_statement_paged(req).await?.into_inner();
                    let first = stream.message().await?.unwrap_or_default();
                    Ok((status_of(first.status.clone()), (first, stream)))
                }
            })
            .await?;
        let types = decode_types(first.columns.len(), &first.types)?;
        let rows = decode_rows(first.columns.len(), first.rows)?;
        Ok(StatementPages {
            query: first.query,
            columns: first.columns,
            types,
            first: Some(rows),
            stream: Some(stream),
            timeout: Duration::from_millis(self.config.request_timeout_ms),
        })
    }
}

/// The types of a result of `width` columns.
pub(super) fn decode_types(width: usize, types: &[i32]) -> Result<Vec<DataType>> {
    let types = types
        .iter()
        .map(|&t| proto::data_type(t).map_err(|e| SessionError::Protocol(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    if types.len() != width {
        return Err(SessionError::Protocol(format!(
            "{width} columns but {} types",
            types.len()
        )));
    }
    Ok(types)
}

/// Rows of a result of `width` columns.
pub(super) fn decode_rows(
    width: usize,
    rows: Vec<proto::ResultRow>,
) -> Result<Vec<Vec<Option<Value>>>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        if row.cells.len() != width {
            return Err(SessionError::Protocol(format!(
                "a row of {} cells for {width} columns",
                row.cells.len()
            )));
        }
        out.push(row.cells.iter().map(value_from_wire).collect());
    }
    Ok(out)
}
