//! Aggregates of one series over time windows, answered from sealed pages' statistics where a
//! page's points are exactly the visible ones, decoded elsewhere.
//!
//! A page is answered from its statistics ("clean") when all of these hold:
//! - the windows do not ask for the second moment ([`Windows::moments`]);
//! - it carries statistics with its first and last values (version 2; not TEXT, STRING, BLOB);
//! - its time range lies inside one window (so inside the query's range);
//! - no deletion of its file's checkpoint meets its time range;
//! - no other source of the partition holds a point in its time range: no page of another file
//!   (or another page of the same chunk, which a sound file never has) and no memtable point.
//!
//! Then its points are the visible points of that span, last write wins being moot. Every other
//! page is decoded and merged with the memtables exactly as [`DataRegion::query`] merges
//! (sealed files oldest first, then the frozen memtables, then the working one, a later source's
//! point winning), and the merged points are folded into their windows. A page that overlaps
//! another is dirty on both sides, so a clean page never hides a newer point.

use std::collections::BTreeMap;

use common::aggregate::{PageFacts, Partial, Windows};
use common::Value;

use super::{in_ranges, overlaps, DataRegion, Partition, RegionState};
use crate::error::Result;
use crate::sealed::{ChunkIndex, PageIndex, SealedFile};

/// What one aggregate read did, for `EXPLAIN ANALYZE` and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggregateWork {
    /// Pages answered from their statistics.
    pub pages_from_stats: u64,
    /// Pages read and decoded.
    pub pages_decoded: u64,
}

/// A page of a sealed file in the span asked, with what decides whether it is clean.
struct PageRef<'a> {
    file: usize,
    chunk: &'a ChunkIndex,
    page: &'a PageIndex,
    clean: bool,
    /// No other page and no memtable point lies within its time range: its decoded points are
    /// the series' only ones there, folded as they come rather than merged by time first.
    alone: bool,
}

impl DataRegion {
    /// The partial aggregates of `device.measurement` in each of `windows`, in window order
    /// (a window without points has a default partial).
    pub fn aggregate(
        &self,
        device: &str,
        measurement: &str,
        windows: &Windows,
    ) -> Result<(Vec<Partial>, AggregateWork)> {
        let count = usize::try_from(windows.count()).expect("windows are bounded by the caller");
        let mut out = vec![Partial::default(); count];
        let mut work = AggregateWork::default();
        let range = windows.range();
        if range.is_empty() {
            return Ok((out, work));
        }
        let state = self.state.read();
        let first = self.config.partition.time_slot(range.start);
        let last = self.config.partition.time_slot(range.end - 1);
        for (_, partition) in state.partitions.range(first..=last) {
            let series = PartitionSeries {
                state: &state,
                partition,
                device,
                measurement,
                windows,
            };
            series.aggregate(&mut out, &mut work)?;
        }
        Ok((out, work))
    }
}

impl DataRegion {
    /// The point with the greatest timestamp of a series, if any: from the last-value cache
    /// when it knows the series (`last_cache.rs`), else computed ([`DataRegion::last_uncached`])
    /// and kept there.
    pub fn last(&self, device: &str, measurement: &str) -> Result<Option<(i64, Value)>> {
        let state = self.state.read();
        if let Some(newest) = self.last_values.get(device, measurement) {
            return Ok(newest);
        }
        let newest = last_of(&state, device, measurement)?;
        // Under the same read lock: no apply ran since the state was read.
        self.last_values.fill(device, measurement, &newest);
        Ok(newest)
    }

    /// [`DataRegion::last`] computed afresh, the cache neither read nor filled: the newest
    /// partition that holds a visible point answers, from its pages' statistics where they
    /// answer (a page of the newest partition is decoded only where a newer source or a
    /// deletion meets it).
    pub fn last_uncached(&self, device: &str, measurement: &str) -> Result<Option<(i64, Value)>> {
        last_of(&self.state.read(), device, measurement)
    }
}

/// The newest visible point of a series in `state`.
fn last_of(state: &RegionState, device: &str, measurement: &str) -> Result<Option<(i64, Value)>> {
    let all = Windows::whole(i64::MIN..i64::MAX).expect("a range that is not empty");
    for partition in state.partitions.values().rev() {
        let mut out = [Partial::default()];
        let series = PartitionSeries {
            state,
            partition,
            device,
            measurement,
            windows: &all,
        };
        series.aggregate(&mut out, &mut AggregateWork::default())?;
        let [partial] = out;
        if let Some(last) = partial.last {
            return Ok(Some(last));
        }
    }
    Ok(None)
}

/// One series in one time partition, aggregated into windows.
struct PartitionSeries<'a> {
    state: &'a RegionState,
    partition: &'a Partition,
    device: &'a str,
    measurement: &'a str,
    windows: &'a Windows,
}

impl PartitionSeries<'_> {
    fn aggregate(&self, out: &mut [Partial], work: &mut AggregateWork) -> Result<()> {
        let range = self.windows.range();
        let (start, end) = (range.start, range.end - 1);
        let memory = self.memtable_points(range.start, range.end);
        let files: Vec<&SealedFile> = self
            .partition
            .sealed
            .iter()
            .map(|f| f.as_ref())
            .filter(|f| {
                !self
                    .state
                    .masked(self.device, self.measurement, f.checkpoint)
            })
            .collect();
        let deleted: Vec<Vec<(i64, i64)>> = files
            .iter()
            .map(|f| {
                self.state
                    .deleted_ranges(self.device, self.measurement, f.checkpoint)
            })
            .collect();
        let mut pages = self.pages(&files, start, end);
        mark_clean(&mut pages, &deleted, &memory, self.windows);
        // Pages come file by file, oldest file first: a later file's decoded point wins.
        let mut merged: BTreeMap<i64, Value> = BTreeMap::new();
        for p in &pages {
            if p.clean {
                let facts = page_facts(p.page).expect("a clean page has statistics");
                let window = self
                    .windows
                    .index(p.page.min_time)
                    .expect("inside a window");
                out[window].merge(&Partial::of_page(&facts));
                work.pages_from_stats += 1;
                continue;
            }
            let (times, values) =
                files[p.file].read_page(self.device, self.measurement, p.chunk, p.page)?;
            work.pages_decoded += 1;
            for (i, t) in times.into_iter().enumerate() {
                let Some(window) = self.windows.index(t) else {
                    continue;
                };
                if in_ranges(&deleted[p.file], t) {
                    continue;
                }
                if p.alone {
                    out[window].push(t, &values.value(i));
                } else {
                    merged.insert(t, values.value(i));
                }
            }
        }
        merged.extend(memory);
        for (t, v) in &merged {
            let window = self.windows.index(*t).expect("merged points are in range");
            out[window].push(*t, v);
        }
        Ok(())
    }

    /// The memtables' visible points in `[from, to)`, later sources winning (frozen ones
    /// oldest first without their file's deletions, then the working one).
    fn memtable_points(&self, from: i64, to: i64) -> BTreeMap<i64, Value> {
        let (device, measurement) = (self.device, self.measurement);
        let mut points = BTreeMap::new();
        for (checkpoint, frozen) in &self.partition.flushing {
            if self.state.masked(device, measurement, *checkpoint) {
                continue;
            }
            let deleted = self.state.deleted_ranges(device, measurement, *checkpoint);
            points.extend(
                frozen
                    .query(device, measurement, from, to)
                    .into_iter()
                    .filter(|(t, _)| !in_ranges(&deleted, *t)),
            );
        }
        points.extend(self.partition.working.query(device, measurement, from, to));
        points
    }

    /// The pages of `files` that meet `start..=end`, all dirty until [`mark_clean`].
    fn pages<'f>(&self, files: &[&'f SealedFile], start: i64, end: i64) -> Vec<PageRef<'f>> {
        let mut pages = Vec::new();
        for (file, f) in files.iter().enumerate() {
            let Some(chunk) = f.chunk(self.device, self.measurement) else {
                continue;
            };
            pages.extend(
                chunk
                    .pages
                    .iter()
                    .filter(|p| p.max_time >= start && p.min_time <= end)
                    .map(|page| PageRef {
                        file,
                        chunk,
                        page,
                        clean: false,
                        alone: false,
                    }),
            );
        }
        pages
    }
}

/// Marks the pages whose statistics answer for them (the rules of the module's doc), and those
/// alone in their time range.
fn mark_clean(
    pages: &mut [PageRef<'_>],
    deleted: &[Vec<(i64, i64)>],
    memory: &BTreeMap<i64, Value>,
    windows: &Windows,
) {
    // Overlaps between pages: sorted by start, a page meets another iff it meets the latest
    // end before it or the next start after it.
    let mut order: Vec<usize> = (0..pages.len()).collect();
    order.sort_by_key(|&i| (pages[i].page.min_time, pages[i].page.max_time));
    let mut overlapped = vec![false; pages.len()];
    let mut reach: Option<(i64, usize)> = None;
    for &i in &order {
        if let Some((end, owner)) = reach {
            if pages[i].page.min_time <= end {
                overlapped[i] = true;
                overlapped[owner] = true;
            }
        }
        if reach.is_none_or(|(end, _)| pages[i].page.max_time > end) {
            reach = Some((pages[i].page.max_time, i));
        }
    }
    for (i, p) in pages.iter_mut().enumerate() {
        let (min, max) = (p.page.min_time, p.page.max_time);
        p.alone = !overlapped[i] && memory.range(min..=max).next().is_none();
        // Statistics carry no second moment: a query that wants it decodes every page.
        p.clean = p.alone
            && !windows.moments
            && page_facts(p.page).is_some()
            && windows.index(min).is_some()
            && windows.index(min) == windows.index(max)
            && !deleted[p.file].iter().any(|d| overlaps(*d, min, max));
    }
}

/// The page's statistics as a partial needs them, if it has them with its ends.
fn page_facts(page: &PageIndex) -> Option<PageFacts<'_>> {
    let stats = page.stats.as_ref()?;
    Some(PageFacts {
        count: u64::from(page.count),
        min_time: page.min_time,
        max_time: page.max_time,
        first: stats.first.as_ref()?,
        last: stats.last.as_ref()?,
        min: stats.min.as_ref(),
        max: stats.max.as_ref(),
        sum: stats.sum.unwrap_or(0.0),
    })
}
