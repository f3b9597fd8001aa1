//! A table-model tablet written for a client (Thrift's `writeToTable`, gRPC's
//! `InsertTableTablet`): derived into device tablets here while this node holds its lease, else
//! relayed whole to a lease holder.

use std::sync::Arc;

use common::{Status, StatusCode, Tablet};

use crate::ops::sql::{exec_status, DataNodeBackend};
use crate::parts::Shared;

/// A table-model tablet written for a client (Thrift's `writeToTable`, gRPC's
/// `InsertTableTablet`): by `sql::insert_table` here while this node holds its lease, else — or
/// when that fails because the lease is gone or the ConfigNode does not answer — handed whole to
/// a lease holder, which derives its devices from the table itself (a device tablet is never
/// relayed alone: it was derived from this node's view of the table). `decode` gives the tablet
/// afresh for each attempt, so none is copied for a relay that may not come.
pub(crate) async fn write_table<E>(
    shared: &Arc<Shared>,
    backend: &DataNodeBackend,
    database: &str,
    categories: &[common::table::Category],
    decode: impl Fn() -> Result<Tablet, E>,
) -> Result<Status, E> {
    let coordinator = &shared.coordinator;
    if coordinator.write_gate() {
        let outcome = sql::insert_table(backend, database, decode()?, categories).await;
        match outcome {
            Ok(()) => return Ok(Status::ok()),
            Err(e) if relayable(e.code()) => {
                tracing::debug!("table write relayed after {}: {e}", e.code())
            }
            Err(e) => return Ok(exec_status(&e)),
        }
    }
    let tablet = decode()?;
    Ok(
        match coordinator
            .relay_table_insert(database, &tablet, categories)
            .await
        {
            Ok(()) => Status::ok(),
            Err(e) => e.status(),
        },
    )
}

/// Whether a table write that failed with `code` is relayed to a lease holder: this node's
/// lease is fenced (535, 536) or its ConfigNode did not answer (712).
fn relayable(code: i32) -> bool {
    [
        StatusCode::MetadataLeaseFenced,
        StatusCode::MetadataLeaseFencedRetryRequired,
        StatusCode::InternalRequestTimeOut,
    ]
    .iter()
    .any(|c| c.wire() == code)
}
