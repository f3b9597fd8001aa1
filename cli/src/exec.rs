//! The CLI is a thin client, as IoTDB's: each statement's text goes to a DataNode, which parses
//! and runs it with the `sql` crate and answers the table; a session error is an [`ExecError`]
//! with the status code it carried.

use common::StatusCode;
use session::{Session, SessionConfig, SessionError, StatementPages};
use sql::ExecResult;

pub use sql::{Cell, ExecError, Outcome, OutcomeKind};

/// Why no session could be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to {endpoints}: {source}")]
pub struct ConnectError {
    /// The endpoints tried, comma separated.
    pub endpoints: String,
    /// The last failure.
    #[source]
    pub source: SessionError,
}

/// Opens a session on `endpoints`. A first session with one attempt per endpoint finds out
/// quickly whether any DataNode answers (the configured retries could wait minutes for an
/// endpoint that does not exist); only then is the session with `config` opened. DataNode
/// sessions hold no server-side state, so the probe costs one round trip.
pub async fn connect(endpoints: &[String], config: SessionConfig) -> Result<Session, ConnectError> {
    let addresses: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let failed = |source| ConnectError {
        endpoints: endpoints.join(","),
        source,
    };
    let attempts = u32::try_from(endpoints.len())
        .unwrap_or(u32::MAX)
        .clamp(1, session::MAX_ATTEMPTS_LIMIT);
    let probe = SessionConfig {
        max_attempts: attempts.min(config.max_attempts),
        retry_interval_ms: config.retry_interval_ms.min(100),
        ..config.clone()
    };
    Session::connect(&addresses, probe).await.map_err(failed)?;
    Session::connect(&addresses, config).await.map_err(failed)
}

/// A statement's answer whose rows come a page at a time.
pub struct Pages {
    /// A query's header (no rows), or a statement that only succeeded.
    pub header: Outcome,
    pages: StatementPages,
}

impl Pages {
    /// The next page of rows; `None` once every row came.
    pub async fn next_page(&mut self) -> ExecResult<Option<Vec<Vec<Cell>>>> {
        self.pages.next_page().await.map_err(status)
    }
}

/// Runs one statement on a DataNode: its text goes to the server, which parses and runs it (the
/// CLI parses only to split statements and report syntax errors where they sit in the input),
/// and its rows are read a page at a time as [`Pages::next_page`] asks for them.
pub async fn execute(session: &Session, text: &str) -> ExecResult<Pages> {
    let pages = session
        .execute_statement_paged(text)
        .await
        .map_err(status)?;
    let header = Outcome {
        kind: if pages.query {
            OutcomeKind::Query
        } else {
            OutcomeKind::Done
        },
        columns: pages.columns.clone(),
        types: pages.types.clone(),
        rows: Vec::new(),
    };
    Ok(Pages { header, pages })
}

/// A session error as a status: the server's own message for a final status, the whole
/// description otherwise; 305 (INTERNAL_SERVER_ERROR) when the error has no code (a malformed
/// answer, an RPC failure that is no status).
fn status(e: SessionError) -> ExecError {
    let code = e.code().unwrap_or(StatusCode::InternalServerError.wire());
    let message = match e {
        SessionError::Status { message, .. } => message,
        other => other.to_string(),
    };
    ExecError::Status { code, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_errors_keep_their_codes() {
        let e = status(SessionError::Status {
            code: 614,
            message: "m".into(),
        });
        assert_eq!((e.code(), e.to_string()), (614, "m".to_string()));
        let fenced = status(SessionError::LeaseFenced {
            endpoint: "e".into(),
            message: "m".into(),
        });
        assert_eq!(fenced.code(), 535);
        assert_eq!(status(SessionError::Protocol("p".into())).code(), 305);
    }
}
