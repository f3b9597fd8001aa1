//! The coordinator's `deleteData`: the lease gate → the series' schemas through the cache (a
//! series that does not exist has no point to delete) → the regions holding their devices'
//! series slots in any time slot → one `DeleteData` command per region, through its leader and
//! retried as a write's part is. No fencing token: a deletion of points changes no schema, so it
//! can make no insert's validation stale; the log orders it against the inserts.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::RegionCommand;

use super::{Coordinator, CoordinatorError, Outcome};

impl Coordinator {
    /// Deletes the points of `paths` with `start <= time <= end` on every region that holds
    /// them. A path that names no existing series is passed over, as IoTDB does.
    pub(crate) async fn delete_data(
        self: &Arc<Self>,
        paths: Vec<proto::SeriesPath>,
        start: i64,
        end: i64,
    ) -> Outcome<()> {
        if !self.write_gate() {
            return Err(self.fenced_write());
        }
        if start > end {
            return Err(CoordinatorError::Invalid(format!(
                "the start time {start} is after the end time {end}"
            )));
        }
        // Held until every region answered: an invalidation waits for this deletion.
        let pinned = self.metadata.pin();
        let schemas = self.read_schemas(&pinned, &paths).await?;
        let mut by_database: BTreeMap<String, Vec<proto::SeriesPath>> = BTreeMap::new();
        for path in paths {
            let Some(schema) = schemas.get(&path.device) else {
                continue;
            };
            if schema.types.contains_key(&path.measurement) {
                by_database
                    .entry(schema.database.clone())
                    .or_default()
                    .push(path);
            }
        }
        let mut parts = tokio::task::JoinSet::new();
        for (database, database_paths) in by_database {
            let by_region = self
                .regions_of_paths(&pinned, &database, &database_paths)
                .await?;
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
                };
                let wire = proto::region_write_req::Command::DeleteData(proto::DeleteDataCommand {
                    series: paths,
                    start_time: start,
                    end_time: end,
                });
                let coordinator = self.clone();
                let generation = pinned.generation();
                parts.spawn(async move {
                    coordinator
                        .write_region(region, route, (command, wire), generation, 0)
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
        if statuses.iter().all(|s| s.is_success()) {
            Ok(())
        } else {
            Err(CoordinatorError::Parts(statuses))
        }
    }
}
