//! `ExecuteStatementPaged`: one statement's result sent a page a message, read as the stream is
//! consumed. A task owns the query (its backend, result charge and deadline); the channel to the
//! stream holds one page, so a client that reads slowly holds the query where it stands rather
//! than the result piling up in memory, and a client that goes away ends the query at its next
//! page.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::convert::{ok, value_to_wire};
use crate::ops::deadline::QueryDeadline;
use crate::ops::sql::{exec_status, is_table_query, open_statement, DataNodeBackend};
use crate::parts::Shared;
use sql::exec::ResultCursor;
use sql::{Cell, ExecError};

/// Rows of one page at most, as IoTDB's clients fetch by default.
const PAGE_ROWS: usize = 1000;

/// The messages of one paged statement.
pub(crate) type Pages = mpsc::Receiver<Result<proto::ExecuteStatementResp, tonic::Status>>;

/// The stream an `ExecuteStatementPaged` call answers.
pub(crate) type PageStream = std::pin::Pin<
    Box<
        dyn tokio_stream::Stream<Item = Result<proto::ExecuteStatementResp, tonic::Status>>
            + Send
            + 'static,
    >,
>;

/// The one message of a call refused before it starts (`status`).
pub(crate) fn refused(status: proto::Status) -> Pages {
    let (tx, rx) = mpsc::channel(1);
    let refusal = proto::ExecuteStatementResp {
        status: Some(status),
        ..Default::default()
    };
    tx.try_send(Ok(refusal))
        .expect("a new channel has room for one message");
    rx
}

/// Starts `req` as `user` and answers the stream of its pages.
pub(crate) fn execute(shared: Arc<Shared>, user: String, req: proto::ExecuteStatementReq) -> Pages {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let backend = DataNodeBackend::new(shared.clone(), user);
        let mut charge = shared.clients.results.charge();
        let ticket = shared.queries.register(&req.statement, backend.user());
        let deadline =
            QueryDeadline::new(shared.config.query.query_timeout_ms, 0).registered(ticket);
        let opened = open(&backend, &req, &mut charge, &deadline).await;
        let mut cursor = match opened {
            Ok(cursor) => cursor,
            Err(e) => {
                // A closed channel means the client went away: nobody is left to tell.
                let _ = tx.send(Ok(failure(&e))).await;
                return;
            }
        };
        let bytes_max = shared.config.page_bytes_max();
        let mut first = true;
        loop {
            let read = cursor.next_page(&backend, PAGE_ROWS, bytes_max, &mut charge);
            let page = match deadline.run(read).await {
                Ok(page) => page,
                Err(e) => {
                    // As above: a failure reaches the client only if it is still reading.
                    let _ = tx.send(Ok(failure(&e))).await;
                    return;
                }
            };
            let mut message = proto::ExecuteStatementResp {
                rows: rows_to_wire(&page.rows),
                ..Default::default()
            };
            drop(page.rows);
            charge.release(page.bytes);
            if first {
                message.status = Some(ok());
                message.query = cursor.kind == sql::OutcomeKind::Query;
                message.columns = cursor.columns.clone();
                message.types = cursor
                    .types
                    .iter()
                    .map(|&t| proto::data_type_to_wire(t) as i32)
                    .collect();
                first = false;
            }
            // A closed channel: the client went away, and the query ends here.
            if tx.send(Ok(message)).await.is_err() || cursor.is_done() {
                return;
            }
        }
    });
    rx
}

/// The statement's cursor: a tree statement's read as asked; a table statement's built whole.
async fn open(
    backend: &DataNodeBackend,
    req: &proto::ExecuteStatementReq,
    charge: &mut sql::ResultCharge,
    deadline: &QueryDeadline,
) -> Result<ResultCursor, ExecError> {
    if !req.table_model {
        return open_statement(backend, &req.statement, charge, deadline).await;
    }
    let database = (!req.database.is_empty()).then_some(req.database.as_str());
    let statement = sql::parse_table_statement(&req.statement)?;
    let run = sql::execute_table_charged(backend, database, &statement, charge);
    let outcome = deadline.run_if(is_table_query(&statement), run).await?;
    Ok(ResultCursor::built(outcome.outcome))
}

/// The message that ends a stream with `e`.
fn failure(e: &ExecError) -> proto::ExecuteStatementResp {
    proto::ExecuteStatementResp {
        status: Some(exec_status(e).into()),
        ..Default::default()
    }
}

/// Rows as the wire has them: an absent cell is a value without a value.
pub(crate) fn rows_to_wire(rows: &[Vec<Cell>]) -> Vec<proto::ResultRow> {
    rows.iter()
        .map(|row| proto::ResultRow {
            cells: row
                .iter()
                .map(|cell| match cell {
                    Some(v) => value_to_wire(v),
                    None => proto::Value { value: None },
                })
                .collect(),
        })
        .collect()
}
