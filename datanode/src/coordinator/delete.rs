//! The coordinator's `deleteData`: the lease gate → the series' schemas through the cache (a
//! series that does not exist has no point to delete) → the regions holding their devices'
//! series slots in any time slot → one `DeleteData` command per region, through its leader and
//! retried as a write's part is. A deletion of points changes no schema, so it makes no
//! insert's validation stale; but its series list was resolved against metadata, so it carries
//! the oldest version of the schemas it read as its token: a region refuses it after a deletion
//! of one of its series, and a late delivery cannot remove the points of a series created again
//! since (REVIEW N6). An operation id, the same for every retry, makes a second delivery a no-op.
//! A fenced coordinator (or one whose ConfigNode does not answer) relays the deletion to a peer
//! holding its lease, as it relays an insert.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use common::{SeriesPath, Status};
use engine::{Deletion, RegionCommand};

use super::{Coordinator, CoordinatorError, Outcome, Relay, RelayCall, Tokens};
use crate::cache::DeviceSchema;
use crate::metrics::inc;

/// The series of `paths` that exist (an alias names its series), by database, and the token: the
/// oldest metadata version their schemas were resolved against.
fn existing_series(
    paths: &[SeriesPath],
    schemas: &BTreeMap<String, DeviceSchema>,
) -> (BTreeMap<String, Vec<SeriesPath>>, u64) {
    let mut by_database: BTreeMap<String, Vec<SeriesPath>> = BTreeMap::new();
    let mut metadata_version = u64::MAX;
    for path in paths {
        let Some(schema) = schemas.get(&path.device) else {
            continue;
        };
        // A series named by its alias loses the points of that series.
        let measurement = schema.series_name(&path.measurement);
        if schema.types.contains_key(measurement) {
            metadata_version = metadata_version.min(schema.version);
            by_database
                .entry(schema.database.clone())
                .or_default()
                .push(SeriesPath::new(path.device.clone(), measurement));
        }
    }
    (by_database, metadata_version)
}

/// A new `deleteData` operation id: never 0, and unique across processes with overwhelming
/// likelihood (a per-process random seed, a counter, mixed).
fn new_operation_id() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    });
    // splitmix64 of seed + n: distinct n give distinct ids within a process.
    let mut z = seed.wrapping_add(
        NEXT.fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).max(1)
}

impl Coordinator {
    /// Deletes the points of `paths` with `start <= time <= end` on every region that holds
    /// them. A path that names no existing series is passed over, as IoTDB does.
    pub(crate) async fn delete_data(
        self: &Arc<Self>,
        paths: Vec<SeriesPath>,
        start: i64,
        end: i64,
        relay: Relay,
    ) -> Outcome<()> {
        if start > end {
            return Err(CoordinatorError::Invalid(format!(
                "the start time {start} is after the end time {end}"
            )));
        }
        if !self.write_gate() {
            return match relay {
                Relay::WhenFenced => self.relay_delete_data(paths, start, end).await,
                Relay::Never => Err(self.fenced_write()),
            };
        }
        // Held until every region answered: an invalidation waits for this deletion.
        let pinned = self.metadata.pin();
        let schemas = match self.read_schemas(&pinned, &paths).await {
            Ok(schemas) => schemas,
            Err(e) if relay == Relay::WhenFenced && e.confignode_unreachable() => {
                drop(pinned);
                return self.relay_delete_data(paths, start, end).await;
            }
            Err(e) => return Err(e),
        };
        // `paths` stays whole for a relay should the ConfigNode stop answering below.
        let (by_database, metadata_version) = existing_series(&paths, &schemas);
        let mut by_database_region = Vec::with_capacity(by_database.len());
        for (database, database_paths) in by_database {
            match self
                .regions_of_paths(&pinned, &database, &database_paths)
                .await
            {
                Ok(by_region) => by_database_region.push(by_region),
                Err(e) if relay == Relay::WhenFenced && e.confignode_unreachable() => {
                    drop(pinned);
                    return self.relay_delete_data(paths, start, end).await;
                }
                Err(e) => return Err(e),
            }
        }
        let mut parts = tokio::task::JoinSet::new();
        let tokens = Tokens {
            metadata_version,
            table_version: 0,
            operation_id: new_operation_id(),
        };
        for by_region in by_database_region {
            for (region, paths) in by_region {
                let route = pinned
                    .region(region)
                    .map_err(|_| self.fenced_write())?
                    .unwrap_or_default();
                let command = RegionCommand::DeleteData {
                    series: paths
                        .iter()
                        .map(|p| (p.device.clone(), p.measurement.clone()))
                        .collect(),
                    start,
                    end,
                    deletion: Deletion {
                        metadata_version: tokens.metadata_version,
                        operation_id: tokens.operation_id,
                    },
                };
                let coordinator = self.clone();
                let generation = pinned.generation();
                parts.spawn(async move {
                    coordinator
                        .write_region(region, route, command, generation)
                        .await
                });
            }
        }
        let mut statuses = Vec::with_capacity(parts.len());
        while let Some(joined) = parts.join_next().await {
            statuses.push(joined.unwrap_or_else(|e| {
                CoordinatorError::Internal(format!("region deletion task: {e}")).status()
            }));
        }
        if statuses.iter().all(Status::is_ok) {
            Ok(())
        } else {
            Err(CoordinatorError::Parts(statuses))
        }
    }

    /// Hands the deletion to a DataNode that holds its lease, which resolves and deletes it
    /// itself, as [`Coordinator::relay_tablet`] does an insert. 536 with `need_retry` when no
    /// peer takes it.
    async fn relay_delete_data(&self, paths: Vec<SeriesPath>, start: i64, end: i64) -> Outcome<()> {
        let rpc = self.peers.rpc();
        let paths = &paths;
        self.relay(
            "took the deletion",
            RelayCall::Write,
            |address| async move {
                let s = rpc.relay_delete_data(&address, paths, start, end).await;
                if s.is_ok() {
                    Ok(())
                } else {
                    Err(s)
                }
            },
        )
        .await?;
        inc(&self.metrics.fencing.relayed_deletes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operation_ids_are_distinct_and_never_zero() {
        let ids: std::collections::BTreeSet<u64> =
            (0..10_000).map(|_| super::new_operation_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&0));
    }
}
