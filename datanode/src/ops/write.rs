//! Writes as the application asks for them, whatever protocol carried them: tablets one by one
//! under the request's partition cap, a table write's device tablets under one pin, series-type
//! lookups.

use std::sync::Arc;

use common::{DataType, Status, StatusCode, Tablet};

use crate::coordinator::{aggregate, write_status, Relay, TableOrigin};
use crate::parts::Shared;

/// Tablets in one InsertTablets call and records in one InsertRecords call.
pub(crate) const BATCH_ITEMS_MAX: usize = 10_000;

/// Writes `tablets` one by one; a request spanning more partitions than one FetchPartitions may
/// ask is refused whole (700) before any of them is written.
pub(crate) async fn insert_tablets(
    shared: &Arc<Shared>,
    tablets: Vec<Tablet>,
    relay: Relay,
) -> Status {
    if let Err(e) = shared.coordinator.limits.check_request_partitions(&tablets) {
        return e.status();
    }
    let mut statuses = Vec::with_capacity(tablets.len());
    for tablet in tablets {
        let outcome = shared.coordinator.insert_tablet(tablet, relay).await;
        statuses.push(write_status(&outcome));
    }
    aggregate(statuses)
}

/// Writes the device tablets of one table write (`sql::insert_table`), derived from the table
/// `origin` names, under one pin held until the last is answered: an invalidation (DROP TABLE)
/// waits for the whole table write, and once it moved the caches the rest is refused. Stops at
/// the first device refused and answers its status, so the client (or the Thrift layer's relay)
/// retries the whole write, which is idempotent; a device tablet is never relayed on its own.
pub(crate) async fn insert_table_tablets(
    shared: &Arc<Shared>,
    origin: &TableOrigin<'_>,
    tablets: Vec<Tablet>,
) -> Status {
    if let Err(e) = shared.coordinator.limits.check_request_partitions(&tablets) {
        return e.status();
    }
    let pinned = shared.metadata.pin();
    let mut redirect = None;
    let devices = tablets.len();
    for tablet in tablets {
        match shared
            .coordinator
            .insert_table_device(&pinned, tablet, origin)
            .await
        {
            Ok(written) => redirect = written.redirect.or(redirect),
            Err(e) => return e.status(),
        }
    }
    // A hint is about one device.
    let written = crate::coordinator::Written {
        redirect: redirect.filter(|_| devices == 1),
    };
    written.status()
}

/// The types of those of `measurements` of `device` that exist, in the order named
/// ([`crate::coordinator::Coordinator::series_types`]): the session's lookup, or one a fenced
/// peer relayed here (`relay` = [`Relay::Never`]).
pub(crate) async fn series_types(
    shared: &Arc<Shared>,
    device: &str,
    measurements: &[String],
    relay: Relay,
) -> Result<Vec<(String, DataType)>, Status> {
    shared
        .coordinator
        .series_types(device, measurements, relay)
        .await
        .map_err(|e| e.status())
}

/// The refusal (301 ILLEGAL_PARAMETER) of a request naming more than `max` `what`.
pub(crate) fn too_many(what: &str, n: usize, max: usize) -> Option<Status> {
    (n > max).then(|| {
        Status::new(
            StatusCode::IllegalParameter,
            format!("{n} {what} in one request; the limit is {max}"),
        )
    })
}
