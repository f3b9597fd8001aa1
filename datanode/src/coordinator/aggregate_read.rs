//! The coordinator's aggregate path: the read path's gate, schemas and regions
//! ([`super::read`]), each region's leader answering partial aggregates per window
//! (`AggregateRegion`, from page statistics where they answer), merged here per series. No
//! point crosses the network.

use std::collections::HashMap;
use std::sync::Arc;

use common::aggregate::{Partial, Windows};
use common::{DataType, SeriesPath};

use super::{Coordinator, CoordinatorError, Outcome};
use crate::metadata::Pinned;
use crate::region_read::RegionAggregate;

/// One asked series' partial aggregates, one per window, merged from every region holding it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SeriesPartials {
    /// As asked (an alias stays an alias).
    pub path: SeriesPath,
    pub data_type: DataType,
    /// One per window; a window without a visible point has a default partial.
    pub partials: Vec<Partial>,
}

impl Coordinator {
    /// The partial aggregates of each of `paths` in each of `windows` through the region
    /// leaders, under `pinned`. Points a TTL hides are left out. Series that do not exist are
    /// absent; the rest come in the order asked. At most `query_points_max` windows.
    pub(crate) async fn read_aggregate(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        paths: &[SeriesPath],
        windows: Windows,
    ) -> Outcome<Vec<SeriesPartials>> {
        if !self.read_gate() {
            return Err(self.fenced_read());
        }
        let max = u64::from(self.limits.query_points_max);
        if windows.count() > max {
            return Err(CoordinatorError::Invalid(format!(
                "{} windows in one aggregate query; the limit is {max} (dn_query_points_max)",
                windows.count()
            )));
        }
        let count = windows.count() as usize;
        let resolved = self.resolve_paths(pinned, paths).await?;
        let mut merged: HashMap<SeriesPath, Vec<Partial>> = HashMap::new();
        for (database, db_paths) in &resolved.by_database {
            // Expired points (older than the TTL's cutoff) are invisible.
            let cutoff = resolved.cutoffs.get(database).copied().unwrap_or(i64::MIN);
            let visible = windows.visible(cutoff..i64::MAX);
            if visible.range().is_empty() {
                continue;
            }
            let read = RegionAggregate {
                region: 0,
                paths: db_paths.iter().cloned().collect(),
                windows: visible,
            };
            for (path, partials) in self.read_database(pinned, database, read).await? {
                if partials.len() != count {
                    return Err(CoordinatorError::Internal(format!(
                        "a region answered {} windows of {path}, not {count}",
                        partials.len()
                    )));
                }
                let mine = merged
                    .entry(path)
                    .or_insert_with(|| vec![Partial::default(); count]);
                for (window, theirs) in mine.iter_mut().zip(&partials) {
                    window.merge(theirs);
                }
            }
        }
        let mut out = Vec::with_capacity(paths.len());
        for asked in paths {
            let Some(data_type) = resolved.types.get(asked) else {
                continue;
            };
            let partials = merged
                .get(resolved.series(asked))
                .cloned()
                .unwrap_or_else(|| vec![Partial::default(); count]);
            out.push(SeriesPartials {
                path: asked.clone(),
                data_type: *data_type,
                partials,
            });
        }
        Ok(out)
    }
}
