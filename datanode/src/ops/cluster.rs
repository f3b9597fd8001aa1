//! Schema statements, user statements and cluster views: forwarded to the ConfigNode leader
//! (bounded by the link's deadline), answered with the leader's reply or the link's status. The
//! local lease is answered here.

use std::time::Duration;

use common::StatusCode;

use crate::convert::{ok, status};
use crate::parts::Shared;

/// A schema statement. A DROP DATABASE / DELETE TIMESERIES / SET TTL / DROP TABLE waits until
/// every DataNode acknowledged the invalidation or is fenced (fence + margin), then deletes
/// through the regions' logs: the ConfigNode gives it fence + margin + 60 s before it answers
/// "still in progress", so a shorter deadline here would re-send the statement while the first
/// still runs.
pub(crate) async fn schema_statement(
    shared: &Shared,
    statement: Option<proto::schema_statement_req::Statement>,
) -> proto::Status {
    use proto::schema_statement_req::Statement;
    let Some(statement) = statement else {
        return status(StatusCode::IllegalParameter, "no statement");
    };
    let timeout = Duration::from_millis(shared.metadata.lease().fence_ms() * 2)
        + crate::timing::SCHEMA_STATEMENT_SLACK;
    let outcome = shared
        .confignode
        .call(Some(timeout), |mut c| {
            let statement = statement.clone();
            async move {
                match statement {
                    Statement::CreateDatabase(r) => c.create_database(r).await,
                    Statement::DropDatabase(r) => c.drop_database(r).await,
                    Statement::CreateTimeseries(r) => c.create_timeseries(r).await,
                    Statement::DeleteTimeseries(r) => c.delete_timeseries(r).await,
                    // Also a fence operation: answered once every DataNode dropped its cached
                    // copy of the database (and so its TTL) or is fenced.
                    Statement::SetTtl(r) => c.set_ttl(r).await,
                    Statement::RemoveDataNode(r) => c.remove_data_node(r).await,
                    Statement::CreateTable(r) => c.create_table(r).await,
                    Statement::SetDeviceAttributes(r) => c.set_device_attributes(r).await,
                    // A fence operation, as DELETE TIMESERIES.
                    Statement::DropTable(r) => c.drop_table(r).await,
                }
            }
        })
        .await;
    outcome.unwrap_or_else(|e| e.status().into())
}

/// A user statement issued by `issuer`. Whatever the answer, this DataNode asks the ConfigNode
/// about the statement's user at its next login.
pub(crate) async fn user_statement(
    shared: &Shared,
    issuer: String,
    statement: Option<proto::user_statement_req::Statement>,
) -> proto::Status {
    use proto::user_statement_req::Statement;
    let target = match &statement {
        Some(Statement::CreateUser(r)) => r.username.clone(),
        Some(Statement::DropUser(r)) => r.username.clone(),
        Some(Statement::AlterPassword(r)) => r.username.clone(),
        None => String::new(),
    };
    let req = proto::UserStatementReq { issuer, statement };
    let outcome = shared
        .confignode
        .call(None, |mut c| {
            let req = req.clone();
            async move { c.user_statement(req).await }
        })
        .await;
    crate::auth::forget(shared, &target);
    outcome.unwrap_or_else(|e| e.status().into())
}

/// Calls the ConfigNode leader with `call` (no argument to copy); the link's failure becomes
/// `failed`'s answer.
macro_rules! view {
    ($shared:expr, $resp:ty, |$c:ident| $call:expr) => {{
        let outcome = $shared
            .confignode
            .call(None, |mut $c| async move { $call.await })
            .await;
        outcome.unwrap_or_else(|e| <$resp>::failed(e.status().into()))
    }};
}

/// A view's answer that carries only a failed status.
trait Failed {
    fn failed(status: proto::Status) -> Self;
}

macro_rules! failed_views {
    ($($resp:ty),*) => {$(
        impl Failed for $resp {
            fn failed(status: proto::Status) -> Self {
                Self {
                    status: Some(status),
                    ..Default::default()
                }
            }
        }
    )*};
}

failed_views!(
    proto::ShowDatabasesResp,
    proto::ShowTimeseriesResp,
    proto::ShowClusterResp,
    proto::ShowRegionsResp,
    proto::ShowLeasesResp,
    proto::ListUsersResp
);

pub(crate) async fn show_databases(shared: &Shared) -> proto::ShowDatabasesResp {
    view!(shared, proto::ShowDatabasesResp, |c| c
        .show_databases(proto::ShowDatabasesReq {}))
}

/// The series under `prefix`.
pub(crate) async fn show_timeseries(shared: &Shared, prefix: String) -> proto::ShowTimeseriesResp {
    let outcome = shared
        .confignode
        .call(None, |mut c| {
            let prefix = prefix.clone();
            async move {
                c.show_timeseries(proto::ShowTimeseriesReq {
                    prefix,
                    declared_codecs_only: false,
                })
                .await
            }
        })
        .await;
    outcome.unwrap_or_else(|e| proto::ShowTimeseriesResp::failed(e.status().into()))
}

pub(crate) async fn show_cluster(shared: &Shared) -> proto::ShowClusterResp {
    view!(shared, proto::ShowClusterResp, |c| c
        .show_cluster(proto::ShowClusterReq {}))
}

pub(crate) async fn show_regions(shared: &Shared) -> proto::ShowRegionsResp {
    view!(shared, proto::ShowRegionsResp, |c| c
        .show_regions(proto::ShowRegionsReq::default()))
}

pub(crate) async fn show_leases(shared: &Shared) -> proto::ShowLeasesResp {
    view!(shared, proto::ShowLeasesResp, |c| c
        .show_leases(proto::ShowLeasesReq {}))
}

pub(crate) async fn list_users(shared: &Shared) -> proto::ListUsersResp {
    view!(shared, proto::ListUsersResp, |c| c
        .list_users(proto::ListUsersReq {}))
}

/// This DataNode's own lease, answered without the ConfigNode.
pub(crate) fn local_lease(shared: &Shared) -> proto::ShowLocalLeaseResp {
    let lease = shared.metadata.lease();
    // `is_live` first: it moves a lapsed lease out of NORMAL, so the state read after it agrees.
    let fenced = !lease.is_live();
    proto::ShowLocalLeaseResp {
        status: Some(ok()),
        data_node_id: shared.identity.node_id,
        endpoint: shared.identity.rpc_address.clone(),
        state: lease.state().name().to_string(),
        incarnation: lease.incarnation(),
        heartbeat_age_ms: lease.heartbeat_age_ms(),
        fence_ms: lease.fence_ms(),
        fenced,
    }
}
