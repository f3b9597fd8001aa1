//! A region's digest: every point of every series, in sorted order, hashed (what `fencepost
//! verify` and the tests compare across replicas).

use common::Value;

use super::{in_ranges, DataRegion, Partition, RegionDigest, RegionState};
use crate::digest::DigestBuilder;
use crate::error::Result;
use crate::sealed::SealedFile;

impl DataRegion {
    /// [`DataRegion::digest`] of the points at or after `from` only: with `from` a TTL's read
    /// cutoff, replicas agree whether or not their compactions removed the expired points yet.
    pub fn digest_visible_from(&self, from: i64) -> Result<RegionDigest> {
        Ok(self
            .digest_until_cancelled(from, &|| false)?
            .expect("never cancelled"))
    }

    /// [`DataRegion::digest_visible_from`], given up (`None`) as soon as `cancelled` says so
    /// between two series: a digest reads every point of the region, and one nobody waits for
    /// any more must not hold the region's state (and so its writes) for minutes.
    pub fn digest_until_cancelled(
        &self,
        from: i64,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<RegionDigest>> {
        let state = self.state.read();
        let mut digest = DigestBuilder::new();
        for (device, measurement, data_type) in state.sorted_series() {
            if cancelled() {
                return Ok(None);
            }
            let mut started = false;
            for partition in state.partitions.values() {
                if let Some(file) = lone_sealed(&state, partition, device, measurement) {
                    // The usual case once compaction merged a partition: hashed straight from
                    // the decoded columns, as `merged_points` would return them.
                    let Some((timestamps, values)) =
                        file.read_range(device, measurement, i64::MIN, i64::MAX)?
                    else {
                        continue;
                    };
                    let first = timestamps.partition_point(|t| *t < from);
                    if first < timestamps.len() && !started {
                        digest.series(device, measurement, data_type);
                        started = true;
                    }
                    for (i, t) in timestamps.iter().enumerate().skip(first) {
                        digest.point(*t, &values.value(i));
                    }
                    continue;
                }
                let merged = merged_points(&state, partition, device, measurement)?;
                let first = merged.partition_point(|(t, _)| *t < from);
                let visible = &merged[first..];
                if !visible.is_empty() && !started {
                    digest.series(device, measurement, data_type);
                    started = true;
                }
                for (t, v) in visible {
                    digest.point(*t, v);
                }
            }
        }
        Ok(Some(digest.finish(state.applied_index)))
    }
}

/// The one source of a series in `partition` when it is a sealed file with nothing deleted from
/// it: no memtable holds the series, and no other unmasked file does.
fn lone_sealed<'a>(
    state: &RegionState,
    partition: &'a Partition,
    device: &str,
    measurement: &str,
) -> Option<&'a SealedFile> {
    if partition.working.series_type(device, measurement).is_some()
        || partition.flushing.iter().any(|(checkpoint, frozen)| {
            !state.masked(device, measurement, *checkpoint)
                && frozen.series_type(device, measurement).is_some()
        })
    {
        return None;
    }
    let mut holding = partition.sealed.iter().filter(|file| {
        !state.masked(device, measurement, file.checkpoint)
            && file.chunk(device, measurement).is_some()
    });
    let file = holding.next()?;
    let alone = holding.next().is_none()
        && state
            .deleted_ranges(device, measurement, file.checkpoint)
            .is_empty();
    alone.then_some(file.as_ref())
}

/// One series' points in one partition, sorted by time, a newer source's point winning: what
/// [`merge_partition`] builds into a map, built as a vector (the digest reads every point of a
/// region, and a map insertion per point made it several times slower). A lone source — the
/// usual case once compaction merged a partition — is taken as it is.
fn merged_points(
    state: &RegionState,
    partition: &Partition,
    device: &str,
    measurement: &str,
) -> Result<Vec<(i64, Value)>> {
    // Oldest first, as merge_partition applies them.
    let mut sources: Vec<Vec<(i64, Value)>> = Vec::new();
    for file in &partition.sealed {
        if state.masked(device, measurement, file.checkpoint) {
            continue;
        }
        if let Some((timestamps, values)) =
            file.read_range(device, measurement, i64::MIN, i64::MAX)?
        {
            let deleted = state.deleted_ranges(device, measurement, file.checkpoint);
            let points: Vec<(i64, Value)> = timestamps
                .into_iter()
                .enumerate()
                .filter(|(_, t)| !in_ranges(&deleted, *t))
                .map(|(i, t)| (t, values.value(i)))
                .collect();
            sources.push(points);
        }
    }
    for (checkpoint, frozen) in &partition.flushing {
        if state.masked(device, measurement, *checkpoint) {
            continue;
        }
        let deleted = state.deleted_ranges(device, measurement, *checkpoint);
        let mut points = frozen.query(device, measurement, i64::MIN, i64::MAX);
        points.retain(|(t, _)| !in_ranges(&deleted, *t));
        sources.push(points);
    }
    sources.push(
        partition
            .working
            .query(device, measurement, i64::MIN, i64::MAX),
    );
    sources.retain(|points| !points.is_empty());
    for points in &mut sources {
        if !points.is_sorted_by_key(|(t, _)| *t) {
            points.sort_by_key(|(t, _)| *t);
        }
    }
    if sources.len() <= 1 {
        return Ok(sources.pop().unwrap_or_default());
    }
    // A stable sort by time keeps the sources' order among equal times: the last is the newest.
    let mut all: Vec<(i64, Value)> = sources.into_iter().flatten().collect();
    all.sort_by_key(|(t, _)| *t);
    let mut merged: Vec<(i64, Value)> = Vec::with_capacity(all.len());
    for (t, v) in all {
        match merged.last_mut() {
            Some(last) if last.0 == t => *last = (t, v),
            _ => merged.push((t, v)),
        }
    }
    Ok(merged)
}
