//! Schema statements, user statements and cluster views: forwarded to the ConfigNode leader
//! (bounded by the link's deadline), answered with the leader's status, or its reply as a view of
//! `common::views`, or the link's status. The local lease is answered here.
//!
//! The leader's wire reply becomes a view here, right where it arrives: a failed status is
//! `Err(status)`, a reply that does not convert is malformed (305, as the link's own readers
//! refuse one, [`LinkError::Malformed`]).

use std::time::Duration;

use common::views::{
    ClusterView, DatabasesView, LeasesView, LocalLeaseView, RegionView, TimeseriesView,
};
use common::{Status, StatusCode};
use proto::config_node_service_client::ConfigNodeServiceClient;
use runtime::HasStatus;

use crate::metadata::{check_status, LinkError};
use crate::parts::Shared;

/// A schema statement. A DROP DATABASE / DELETE TIMESERIES / SET TTL / DROP TABLE waits until
/// every DataNode acknowledged the invalidation or is fenced (fence + margin), then deletes
/// through the regions' logs: the ConfigNode gives it fence + margin + 60 s before it answers
/// "still in progress", so a shorter deadline here would re-send the statement while the first
/// still runs.
pub(crate) async fn schema_statement(
    shared: &Shared,
    statement: Option<proto::schema_statement_req::Statement>,
) -> Status {
    use proto::schema_statement_req::Statement;
    let Some(statement) = statement else {
        return Status::new(StatusCode::IllegalParameter, "no statement");
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
    outcome.map_or_else(|e| e.status(), Status::from)
}

/// A user statement issued by `issuer`. Whatever the answer, this DataNode asks the ConfigNode
/// about the statement's user at its next login.
pub(crate) async fn user_statement(
    shared: &Shared,
    issuer: String,
    statement: Option<proto::user_statement_req::Statement>,
) -> Status {
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
    outcome.map_or_else(|e| e.status(), Status::from)
}

/// The ConfigNode leader's 200 reply to `call` (no argument to copy).
async fn ask<T, F, Fut>(shared: &Shared, call: F) -> Result<T, LinkError>
where
    T: HasStatus,
    F: Fn(ConfigNodeServiceClient<runtime::PooledChannel>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let reply = shared.confignode.call(None, call).await?;
    check_status(reply.status())?;
    Ok(reply)
}

pub(crate) async fn show_databases(shared: &Shared) -> Result<DatabasesView, Status> {
    let reply = ask(shared, |mut c| async move {
        c.show_databases(proto::ShowDatabasesReq {}).await
    })
    .await;
    reply
        .and_then(|r| {
            DatabasesView::try_from(r)
                .map_err(|e| LinkError::Malformed(format!("ShowDatabases: {e}")))
        })
        .map_err(|e| e.status())
}

/// The series under `prefix`.
pub(crate) async fn show_timeseries(
    shared: &Shared,
    prefix: String,
) -> Result<Vec<TimeseriesView>, Status> {
    let reply = ask(shared, |mut c| {
        let prefix = prefix.clone();
        async move {
            c.show_timeseries(proto::ShowTimeseriesReq {
                prefix,
                declared_codecs_only: false,
            })
            .await
        }
    })
    .await
    .map_err(|e| e.status())?;
    reply
        .series
        .into_iter()
        .map(|s| {
            let series = format!("{}.{}", s.device, s.measurement);
            TimeseriesView::try_from(s)
                .map_err(|e| LinkError::Malformed(format!("series {series}: {e}")).status())
        })
        .collect()
}

pub(crate) async fn show_cluster(shared: &Shared) -> Result<ClusterView, Status> {
    let reply = ask(shared, |mut c| async move {
        c.show_cluster(proto::ShowClusterReq {}).await
    })
    .await;
    reply.map(ClusterView::from).map_err(|e| e.status())
}

pub(crate) async fn show_regions(shared: &Shared) -> Result<Vec<RegionView>, Status> {
    let reply = ask(shared, |mut c| async move {
        c.show_regions(proto::ShowRegionsReq::default()).await
    })
    .await;
    reply
        .map(|r| r.regions.into_iter().map(RegionView::from).collect())
        .map_err(|e| e.status())
}

pub(crate) async fn show_leases(shared: &Shared) -> Result<LeasesView, Status> {
    let reply = ask(shared, |mut c| async move {
        c.show_leases(proto::ShowLeasesReq {}).await
    })
    .await;
    reply.map(LeasesView::from).map_err(|e| e.status())
}

/// Every user's name, sorted.
pub(crate) async fn list_users(shared: &Shared) -> Result<Vec<String>, Status> {
    let reply = ask(shared, |mut c| async move {
        c.list_users(proto::ListUsersReq {}).await
    })
    .await;
    reply.map(|r| r.users).map_err(|e| e.status())
}

/// This DataNode's own lease, answered without the ConfigNode.
pub(crate) fn local_lease(shared: &Shared) -> LocalLeaseView {
    let lease = shared.metadata.lease();
    // `is_live` first: it moves a lapsed lease out of NORMAL, so the state read after it agrees.
    let fenced = !lease.is_live();
    LocalLeaseView {
        data_node_id: shared.identity.node_id,
        endpoint: shared.identity.rpc_address.clone(),
        state: lease.state().name().to_string(),
        fenced,
        incarnation: lease.incarnation(),
        heartbeat_age_ms: lease.heartbeat_age_ms(),
        fence_ms: lease.fence_ms(),
    }
}
