//! The CLI runs statements with the `sql` crate's executor over a [`Session`]: every call of
//! the executor's [`Backend`] is the session's call of the same name, and a session error is an
//! [`ExecError`] with the status code it carried.

use common::{DataType, StatusCode, Tablet, Value};
use session::{
    ClusterView, LeasesView, LocalLeaseView, RegionView, Session, SessionConfig, SessionError,
    TimeseriesView,
};
use sql::{Backend, ExecResult, Statement};

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

/// Runs one statement over `session`. [`Statement::Quit`] is the caller's business and succeeds
/// here.
pub async fn execute(session: &Session, statement: &Statement) -> ExecResult<Outcome> {
    sql::execute(&SessionBackend(session), statement).await
}

/// The executor's backend: a session.
struct SessionBackend<'a>(&'a Session);

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

impl Backend for SessionBackend<'_> {
    async fn create_database(&self, database: &str) -> ExecResult<()> {
        self.0.create_database(database).await.map_err(status)
    }

    async fn drop_database(&self, database: &str) -> ExecResult<()> {
        self.0.drop_database(database).await.map_err(status)
    }

    async fn set_ttl(&self, database: &str, ttl_ms: i64) -> ExecResult<()> {
        self.0.set_ttl(database, ttl_ms).await.map_err(status)
    }

    async fn unset_ttl(&self, database: &str) -> ExecResult<()> {
        self.0.unset_ttl(database).await.map_err(status)
    }

    async fn remove_data_node(&self, data_node_id: u64) -> ExecResult<()> {
        self.0.remove_data_node(data_node_id).await.map_err(status)
    }

    async fn create_timeseries(
        &self,
        path: &str,
        data_type: DataType,
        encoding: Option<&str>,
        compressor: Option<&str>,
    ) -> ExecResult<()> {
        self.0
            .create_timeseries_with(path, data_type, encoding, compressor)
            .await
            .map_err(status)
    }

    async fn delete_timeseries(&self, path: &str) -> ExecResult<()> {
        self.0.delete_timeseries(path).await.map_err(status)
    }

    async fn insert_tablet(&self, tablet: Tablet) -> ExecResult<()> {
        self.0.insert_tablet(&tablet).await.map_err(status)
    }

    async fn series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> ExecResult<Vec<(String, DataType)>> {
        self.0
            .series_types(device, measurements)
            .await
            .map_err(status)
    }

    async fn show_timeseries(&self, prefix: &str) -> ExecResult<Vec<TimeseriesView>> {
        self.0.show_timeseries(prefix).await.map_err(status)
    }

    async fn query_raw(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
    ) -> ExecResult<Vec<(i64, Value)>> {
        self.0
            .query_raw(device, measurement, from, to)
            .await
            .map_err(status)
    }

    async fn query_last(
        &self,
        device: &str,
        measurement: &str,
    ) -> ExecResult<Option<(i64, Value)>> {
        self.0.query_last(device, measurement).await.map_err(status)
    }

    async fn show_databases(&self) -> ExecResult<Vec<(String, Option<i64>)>> {
        self.0.show_databases_with_ttl().await.map_err(status)
    }

    async fn show_cluster(&self) -> ExecResult<ClusterView> {
        self.0.show_cluster().await.map_err(status)
    }

    async fn show_regions(&self) -> ExecResult<Vec<RegionView>> {
        self.0.show_regions().await.map_err(status)
    }

    async fn show_leases(&self) -> ExecResult<LeasesView> {
        self.0.show_leases().await.map_err(status)
    }

    async fn local_lease(&self) -> ExecResult<LocalLeaseView> {
        self.0.local_lease().await.map_err(status)
    }

    async fn flush(&self) -> ExecResult<()> {
        self.0.flush().await.map_err(status)
    }

    async fn create_user(&self, name: &str, password: &str) -> ExecResult<()> {
        self.0.create_user(name, password).await.map_err(status)
    }

    async fn drop_user(&self, name: &str) -> ExecResult<()> {
        self.0.drop_user(name).await.map_err(status)
    }

    async fn alter_user_password(&self, name: &str, password: &str) -> ExecResult<()> {
        self.0
            .alter_user_password(name, password)
            .await
            .map_err(status)
    }

    async fn list_users(&self) -> ExecResult<Vec<String>> {
        self.0.list_users().await.map_err(status)
    }
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
