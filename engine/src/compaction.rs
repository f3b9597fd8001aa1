//! Compaction: per time partition, a size-tiered merge of a contiguous run of sealed files into
//! one, dropping the data deletions mask, so files per partition stay few and deleted data is
//! physically reclaimed.
//!
//! Only deletions the manifest holds are applied (`RegionState::masked_durably`): after a crash
//! the log replays from the manifest's checkpoint, and a replayed insert's type verdict must meet
//! the data it met the first time, so data a later deletion masks stays until a flush makes that
//! deletion durable.
//!
//! Why contiguous: a partition's sealed files are ordered (a newer file's point wins), so a merge
//! may only replace a run of neighbours, and its output takes the run's place. The output's
//! checkpoint is the run's greatest: a deletion newer than every input still masks the output, and
//! one that masked only older inputs has been applied to their data.
//!
//! Crash safety, manifest-driven like a flush; the sync points are:
//! 1. the output file is written and fsynced under a fresh sequence number, not yet named by the
//!    manifest (a crash leaves an orphan, deleted on open);
//! 2. the manifest naming the output instead of the inputs is installed (write temp, fsync,
//!    rename, fsync directory): the switch is atomic;
//! 3. the inputs are deleted (a crash leaves them unnamed: orphans, deleted on open).
//!
//! **TTL.** With a cutoff set ([`DataRegion::set_ttl_cutoff`], the DataNode's `now - ttl`), a
//! merge also drops points older than the cutoff, except each series' newest point in the
//! output: the region's type registry is rebuilt from the series its files hold, so a series
//! must not vanish from a replica's files merely because time passed (a replayed insert's type
//! verdict would change). Reads hide expired points anyway (the coordinator raises their start
//! to the cutoff), so what is kept costs a few bytes per series and partition, never a wrong
//! answer. A file is rewritten alone for its expired points once they are at least half its
//! points (counted from its page index), so the cutoff's steady advance does not rewrite files
//! over and over. A merge does not read the pages that end before the cutoff (only, for a
//! series with nothing left after it, the page holding its newest point), so dropping expired
//! data costs I/O for what stays, not for what goes; `expired_points` counts the points of the
//! skipped pages and those cut from the pages read, per input (a point stored in two inputs
//! counts twice). Replicas compact at their own times, so below the cutoff their files differ;
//! above it they hold the same points.
//!
//! Writes never wait for a compaction: the merge runs under no region lock; only its install
//! takes the manifest lock (as a flush does) and the state lock for a pointer swap.

use std::collections::BTreeMap;
use std::fs;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Column, DataType};

use crate::error::{Result, StorageError};
use crate::manifest::{sync_dir, FileEntry};
use crate::region::{DataRegion, RegionState};
use crate::sealed::{self, Header, SealedFile, SeriesCodecs};

/// When and how fast partitions are compacted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionConfig {
    /// A run of at least this many neighbouring files of one size tier is merged. Default 4.
    pub files_min: usize,
    /// Files merged at most at once. Default 16.
    pub files_max: usize,
    /// Files of up to this size form tier 0; tier k holds files up to 4^k times it.
    /// Default 1 MiB.
    pub tier_base_bytes: u64,
    /// Bytes a compaction writes per second at most; 0 is unlimited. Default 64 MiB/s.
    pub write_bytes_per_sec: u64,
    /// A newer run takes in its older neighbour when the neighbour is at most this many times
    /// the run's bytes (size-ratio merging for files of mixed sizes). Default 2.
    pub size_ratio: u64,
    /// A partition that no flush has added a file to for this many milliseconds, with nothing
    /// buffered, is merged whole (up to `files_max` files at a time): old partitions end as one
    /// file each, as InfluxDB's `compact-full-write-cold-duration` does for its shards.
    /// Default 3600000 (1 h); 0 never.
    pub cold_after_ms: u64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            files_min: 4,
            files_max: 16,
            tier_base_bytes: 1 << 20,
            write_bytes_per_sec: 64 << 20,
            size_ratio: 2,
            cold_after_ms: 3_600_000,
        }
    }
}

impl CompactionConfig {
    fn tier(&self, bytes: u64) -> u32 {
        let mut tier = 0;
        let mut bound = self.tier_base_bytes.max(1);
        while bytes > bound {
            tier += 1;
            bound = bound.saturating_mul(4);
        }
        tier
    }

    /// The run of neighbouring files (given oldest first by size) to merge, if any, by three
    /// rules in turn:
    /// 1. **Tiers**: the first run of `files_min..=files_max` neighbours in one size tier.
    /// 2. **Size ratio**, for files of mixed sizes (flushes of different sizes, outputs of
    ///    earlier merges, files shrunk by TTL rewrites), where rule 1 can find nothing however
    ///    many files pile up: from the newest file back, a run takes in its older neighbour while
    ///    that neighbour is at most `size_ratio` times the run's bytes; a run of at least
    ///    `files_min` files is merged. Each byte is then rewritten about log(total / flush)
    ///    times, and what stays unmerged is a geometric series of sizes: few files.
    /// 3. **Cap**: past `files_max` files, the cheapest run of `files_min` neighbours, so the
    ///    count cannot grow without bound whatever the sizes.
    pub fn plan_run(&self, sizes: &[u64]) -> Option<std::ops::Range<usize>> {
        let files_min = self.files_min.max(2);
        let files_max = self.files_max.max(files_min);
        let mut start = 0;
        while start < sizes.len() {
            let tier = self.tier(sizes[start]);
            let mut end = start + 1;
            while end < sizes.len() && end - start < files_max && self.tier(sizes[end]) == tier {
                end += 1;
            }
            if end - start >= files_min {
                return Some(start..end);
            }
            start = end;
        }
        let mut end = sizes.len();
        while end > 0 {
            let mut start = end - 1;
            let mut bytes = sizes[start];
            while start > 0
                && end - start < files_max
                && sizes[start - 1] <= bytes.saturating_mul(self.size_ratio.max(1))
            {
                start -= 1;
                bytes = bytes.saturating_add(sizes[start]);
            }
            if end - start >= files_min {
                return Some(start..end);
            }
            end = start;
        }
        if sizes.len() > files_max {
            let cheapest = (0..=sizes.len() - files_min)
                .min_by_key(|&i| sizes[i..i + files_min].iter().sum::<u64>())
                .expect("more than files_min files");
            return Some(cheapest..cheapest + files_min);
        }
        None
    }
}

/// What one compaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionReport {
    /// The partition's time slot.
    pub time_slot: i64,
    /// Files merged.
    pub inputs: usize,
    /// Their bytes.
    pub input_bytes: u64,
    /// Bytes of the file that replaced them.
    pub output_bytes: u64,
    /// Series (of any input) whose data was dropped because a deletion masked it.
    pub dropped_series: usize,
    /// Points dropped because they were older than the TTL cutoff.
    pub expired_points: u64,
}

/// A region's sealed files in numbers, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Time partitions with data.
    pub partitions: usize,
    /// Sealed files.
    pub sealed_files: usize,
    /// The most sealed files in one partition.
    pub max_files_per_partition: usize,
    /// Bytes of sealed files.
    pub sealed_bytes: u64,
    /// Partitions a compaction would work on now.
    pub pending_compactions: usize,
}

/// The run a compaction merges: neighbouring files of one partition.
struct Job {
    time_slot: i64,
    inputs: Vec<Arc<SealedFile>>,
}

impl DataRegion {
    /// Sets the TTL cutoff: compactions from now on drop points older than `cutoff` (see the
    /// module documentation); `None` keeps everything. The caller computes it from the wall
    /// clock and the database's TTL; setting an older cutoff never brings removed points back.
    pub fn set_ttl_cutoff(&self, cutoff: Option<i64>) {
        self.ttl_cutoff
            .store(cutoff.unwrap_or(i64::MIN), Ordering::Relaxed);
    }

    /// Sets the declared encodings and compressors that flushes and compactions from now on
    /// write series with (the DataNode learns them from the ConfigNode). Files already written
    /// keep their encoding until a compaction rewrites them; any encoding reads back the same
    /// points, so replicas that learn a declaration at different times differ only in bytes.
    pub fn set_series_codecs(&self, codecs: Arc<SeriesCodecs>) {
        *self.series_codecs.write() = codecs;
    }

    /// The declarations flushes and compactions honour now.
    pub fn series_codecs(&self) -> Arc<SeriesCodecs> {
        self.series_codecs.read().clone()
    }

    /// The TTL cutoff compactions apply, if any.
    pub fn ttl_cutoff(&self) -> Option<i64> {
        Some(self.ttl_cutoff.load(Ordering::Relaxed)).filter(|c| *c != i64::MIN)
    }

    /// Makes every compaction of this region, running or to come, stop with
    /// [`StorageError::CompactionCancelled`] at its next series (leaving the inputs as they
    /// are), so closing a region never waits for a long, throttled merge.
    pub fn cancel_compactions(&self) {
        self.compactions_cancelled.store(true, Ordering::Relaxed);
    }

    fn check_cancelled(&self) -> Result<()> {
        if self.compactions_cancelled.load(Ordering::Relaxed) {
            return Err(StorageError::CompactionCancelled);
        }
        Ok(())
    }

    /// Runs at most one compaction (the first partition with work, oldest first) and reports it;
    /// `None` when no partition needs one. Writes go on meanwhile.
    pub fn compact_once(&self) -> Result<Option<CompactionReport>> {
        self.check_cancelled()?;
        let Some(job) = self.plan(&self.state.read()) else {
            self.pending_compactions.store(0, Ordering::Relaxed);
            return Ok(None);
        };
        self.run(job).map(Some)
    }

    /// Compacts until no partition needs it; returns the compactions run.
    pub fn compact_all(&self) -> Result<Vec<CompactionReport>> {
        let mut reports = Vec::new();
        while let Some(report) = self.compact_once()? {
            reports.push(report);
        }
        Ok(reports)
    }

    /// The region's sealed files in numbers, planning every partition for
    /// `pending_compactions` (a pass over each partition's files and the tombstones: for the
    /// compaction loop and tests, not for every metrics scrape).
    pub fn storage_stats(&self) -> StorageStats {
        let stats = self.count_files(true);
        self.pending_compactions
            .store(stats.pending_compactions, Ordering::Relaxed);
        stats
    }

    /// [`DataRegion::storage_stats`] without planning: `pending_compactions` is the count of
    /// the last planning pass (or 0 once a compaction found no work). Cheap enough for scrapes.
    pub fn storage_summary(&self) -> StorageStats {
        StorageStats {
            pending_compactions: self.pending_compactions.load(Ordering::Relaxed),
            ..self.count_files(false)
        }
    }

    fn count_files(&self, plan: bool) -> StorageStats {
        let state = self.state.read();
        let mut stats = StorageStats::default();
        for (slot, partition) in &state.partitions {
            if partition.sealed.is_empty() {
                continue;
            }
            stats.partitions += 1;
            stats.sealed_files += partition.sealed.len();
            stats.max_files_per_partition =
                stats.max_files_per_partition.max(partition.sealed.len());
            stats.sealed_bytes += partition.sealed.iter().map(|f| f.bytes).sum::<u64>();
            if plan && self.plan_partition(&state, *slot).is_some() {
                stats.pending_compactions += 1;
            }
        }
        stats
    }

    fn plan(&self, state: &RegionState) -> Option<Job> {
        state
            .partitions
            .keys()
            .find_map(|slot| self.plan_partition(state, *slot))
    }

    /// The partition's next job: a run [`CompactionConfig::plan_run`] picks; else, for a cold
    /// partition (see [`CompactionConfig::cold_after_ms`]) of several files, its first
    /// `files_max`; else the first file holding data a deletion masks or enough expired points
    /// (rewritten alone).
    fn plan_partition(&self, state: &RegionState, slot: i64) -> Option<Job> {
        let config = &self.config.compaction;
        let partition = state.partitions.get(&slot)?;
        let files = &partition.sealed;
        let job = |run: &[Arc<SealedFile>]| Job {
            time_slot: slot,
            inputs: run.to_vec(),
        };
        let sizes: Vec<u64> = files.iter().map(|f| f.bytes).collect();
        if let Some(run) = config.plan_run(&sizes) {
            return Some(job(&files[run]));
        }
        if config.cold_after_ms > 0
            && files.len() >= 2
            && partition.is_cold(Duration::from_millis(config.cold_after_ms))
        {
            return Some(job(&files[..files.len().min(config.files_max.max(2))]));
        }
        let cutoff = self.ttl_cutoff();
        files
            .iter()
            .position(|f| holds_masked_data(state, f) || mostly_expired(f, cutoff))
            .map(|i| job(&files[i..=i]))
    }

    fn run(&self, job: Job) -> Result<CompactionReport> {
        let checkpoint = job
            .inputs
            .iter()
            .map(|f| f.checkpoint)
            .max()
            .expect("a job has inputs");
        let sequence = self.sequences.fetch_add(1, Ordering::Relaxed);
        let entry = FileEntry {
            time_slot: job.time_slot,
            sequence,
            checkpoint,
        };
        let sealed_dir = self.dir.join(crate::region::SEALED_DIR);
        let path = sealed_dir.join(entry.file_name());
        let written = self.merge(&job, &path, checkpoint);
        let (output, dropped_series, expired_points) = match written {
            Ok(output) => output,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(e);
            }
        };
        let report = CompactionReport {
            time_slot: job.time_slot,
            inputs: job.inputs.len(),
            input_bytes: job.inputs.iter().map(|f| f.bytes).sum(),
            output_bytes: output.as_ref().map_or(0, |f| f.bytes),
            dropped_series,
            expired_points,
        };
        sync_dir(&sealed_dir)?;
        fail::fail_point!("storage::compact::before_manifest", |_| Err(
            StorageError::Injected("storage::compact::before_manifest")
        ));
        let output = output.map(|file| (entry, Arc::new(file)));
        if !self.install(&job, output)? {
            // The partition changed under the merge (a snapshot replaced the region's content):
            // the output is an orphan.
            let _ = fs::remove_file(&path);
            return Ok(CompactionReport {
                output_bytes: 0,
                ..report
            });
        }
        fail::fail_point!("storage::compact::after_manifest", |_| Err(
            StorageError::Injected("storage::compact::after_manifest")
        ));
        for input in &job.inputs {
            match fs::remove_file(input.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io(input.path(), e)),
            }
        }
        sync_dir(&sealed_dir)?;
        Ok(report)
    }

    /// Writes the merged file (none when deletions masked everything); returns it with the
    /// number of series dropped for a deletion and of points dropped for the TTL.
    fn merge(
        &self,
        job: &Job,
        path: &std::path::Path,
        checkpoint: u64,
    ) -> Result<(Option<SealedFile>, usize, u64)> {
        let cutoff = self.ttl_cutoff();
        let mut expired = 0u64;
        // Which inputs hold each series, and which of those a durable deletion masks: decided
        // once, against the manifest's tombstones as they are now. A deletion newer than the
        // manifest's checkpoint is not applied here; its index is above every input's
        // checkpoint, so it masks the output just as it masked the inputs.
        let mut series: BTreeMap<(String, String), (DataType, Vec<usize>)> = BTreeMap::new();
        let mut dropped = 0;
        {
            let state = self.state.read();
            for (i, file) in job.inputs.iter().enumerate() {
                for (device, measurement, chunk) in file.series() {
                    if state.masked_durably(device, measurement, file.checkpoint) {
                        dropped += 1;
                        continue;
                    }
                    series
                        .entry((device.to_string(), measurement.to_string()))
                        .or_insert_with(|| (chunk.data_type, Vec::new()))
                        .1
                        .push(i);
                }
            }
        }
        if series.is_empty() {
            return Ok((None, dropped, 0));
        }
        let header = Header {
            time_slot: job.time_slot,
            checkpoint,
        };
        let codecs = self.series_codecs();
        let mut writer = sealed::create(path, header, &self.config.sealed, &self.files)?;
        let mut throttle = Throttle::new(self.config.compaction.write_bytes_per_sec);
        for ((device, measurement), (data_type, sources)) in &series {
            self.check_cancelled()?;
            let mut merged: Option<(Vec<i64>, Column)> = None;
            // With a cutoff, pages wholly below it are not even read; the series' newest point
            // is kept (see the module documentation), so when every page is below it the page
            // holding that point is read.
            let from = match cutoff {
                Some(c) => {
                    let newest = newest_point_below(&job.inputs, sources, device, measurement, c);
                    newest.unwrap_or(c)
                }
                None => i64::MIN,
            };
            for &i in sources {
                let input = &job.inputs[i];
                if from > i64::MIN {
                    expired += points_in_pages_before(input, device, measurement, from);
                }
                let Some(read) = input.read_range(device, measurement, from, i64::MAX)? else {
                    continue;
                };
                if read.0.is_empty() {
                    continue;
                }
                if read.1.data_type() != *data_type {
                    return Err(StorageError::Corruption {
                        what: "sealed file",
                        path: job.inputs[i].path().to_path_buf(),
                        offset: 0,
                        reason: format!("{device}.{measurement} changes type between files"),
                    });
                }
                merged = Some(match merged {
                    None => read,
                    Some(older) => merge_newer_wins(older, read),
                });
            }
            if let Some((timestamps, values)) = merged {
                let (timestamps, values, gone) = drop_expired(timestamps, values, cutoff);
                expired += gone;
                writer.series(
                    device,
                    measurement,
                    &timestamps,
                    &values,
                    codecs.get(device, measurement),
                )?;
                throttle.pace(writer.bytes_written());
            }
        }
        Ok((Some(writer.finish()?), dropped, expired))
    }

    /// Swaps the output (if any) in for the inputs in the manifest, then in memory. False when
    /// the inputs are no longer a run of the partition's files.
    fn install(&self, job: &Job, output: Option<(FileEntry, Arc<SealedFile>)>) -> Result<bool> {
        let _one_change = self.flush_lock.lock();
        let mut state = self.state.write();
        let Some(partition) = state.partitions.get(&job.time_slot) else {
            return Ok(false);
        };
        let Some(at) = partition
            .sealed
            .iter()
            .position(|f| Arc::ptr_eq(f, &job.inputs[0]))
        else {
            return Ok(false);
        };
        let run = at..at + job.inputs.len();
        let still_a_run = partition.sealed.get(run.clone()).is_some_and(|files| {
            files
                .iter()
                .zip(&job.inputs)
                .all(|(a, b)| Arc::ptr_eq(a, b))
        });
        if !still_a_run {
            return Ok(false);
        }
        let mut manifest = state.manifest.clone();
        let names: Vec<_> = job.inputs.iter().map(|f| f.path().file_name()).collect();
        let first = manifest
            .files
            .iter()
            .position(|e| Some(e.file_name().as_ref()) == names[0])
            .expect("a live file is named by the manifest");
        manifest
            .files
            .retain(|e| !names.contains(&Some(e.file_name().as_ref())));
        let (entry, file) = output.unzip();
        if let Some(entry) = entry {
            manifest.files.insert(first, entry);
        }
        manifest.next_sequence = self.sequences.load(Ordering::Relaxed);
        manifest.store(&self.dir)?;
        let partition = state
            .partitions
            .get_mut(&job.time_slot)
            .expect("checked above, under the same lock");
        partition.sealed.splice(run, file);
        if partition.is_empty() {
            state.partitions.remove(&job.time_slot);
        }
        state.manifest = manifest;
        Ok(true)
    }
}

/// True when a deletion the manifest holds masks any series of `file` (see
/// `RegionState::masked_durably`). Only deletions newer than the file can: usually none, so this
/// costs one pass over the tombstones.
fn holds_masked_data(state: &RegionState, file: &SealedFile) -> bool {
    let newer: Vec<_> = state
        .manifest
        .tombstones
        .iter()
        .filter(|t| t.index() > file.checkpoint)
        .collect();
    !newer.is_empty()
        && file.series().any(|(device, measurement, _)| {
            newer
                .iter()
                .any(|t| t.masks(device, measurement, file.checkpoint))
        })
}

/// True when at least half of `file`'s points, and at least one, are older than `cutoff` and
/// not a series' newest point (which a merge keeps), by the page index: only whole pages below
/// the cutoff count, so the answer never overstates what a rewrite removes.
fn mostly_expired(file: &SealedFile, cutoff: Option<i64>) -> bool {
    let Some(cutoff) = cutoff else {
        return false;
    };
    let (mut total, mut removable) = (0u64, 0u64);
    for (_, _, chunk) in file.series() {
        total += u64::from(chunk.count);
        if chunk.min_time >= cutoff {
            continue;
        }
        let expired: u64 = chunk
            .pages
            .iter()
            .filter(|p| p.max_time < cutoff)
            .map(|p| u64::from(p.count))
            .sum();
        // The newest point stays when the whole chunk expired.
        let kept = u64::from(chunk.max_time < cutoff);
        removable += expired.saturating_sub(kept);
    }
    removable > 0 && removable * 2 >= total
}

/// When every point of the series in `sources` is older than `cutoff`, the newest one's
/// timestamp (the one point a merge keeps); `None` when some point is at or after the cutoff.
fn newest_point_below(
    inputs: &[Arc<SealedFile>],
    sources: &[usize],
    device: &str,
    measurement: &str,
    cutoff: i64,
) -> Option<i64> {
    let newest = sources
        .iter()
        .filter_map(|&i| inputs[i].chunk(device, measurement))
        .map(|chunk| chunk.max_time)
        .max()?;
    (newest < cutoff).then_some(newest)
}

/// Points of the series in `file` on pages that end before `from`: those a merge reading from
/// `from` skips, all of them expired.
fn points_in_pages_before(file: &SealedFile, device: &str, measurement: &str, from: i64) -> u64 {
    file.chunk(device, measurement).map_or(0, |chunk| {
        chunk
            .pages
            .iter()
            .filter(|p| p.max_time < from)
            .map(|p| u64::from(p.count))
            .sum()
    })
}

/// The points at or after `cutoff`, or, when none is, the newest one alone; with the number
/// dropped.
fn drop_expired(
    timestamps: Vec<i64>,
    values: Column,
    cutoff: Option<i64>,
) -> (Vec<i64>, Column, u64) {
    let Some(cutoff) = cutoff else {
        return (timestamps, values, 0);
    };
    let live = timestamps.partition_point(|t| *t < cutoff);
    let keep_from = live.min(timestamps.len().saturating_sub(1));
    if keep_from == 0 {
        return (timestamps, values, 0);
    }
    let rows: Vec<usize> = (keep_from..timestamps.len()).collect();
    let dropped = keep_from as u64;
    (
        timestamps[keep_from..].to_vec(),
        values.select(&rows),
        dropped,
    )
}

/// Merges two sorted series; on equal timestamps the newer point wins.
fn merge_newer_wins(older: (Vec<i64>, Column), newer: (Vec<i64>, Column)) -> (Vec<i64>, Column) {
    let (mut old_ts, mut old_values) = older;
    let (new_ts, new_values) = newer;
    // Files flushed one after another mostly hold later points than the ones before them:
    // then the merge is an append, with no per-row work.
    if old_ts
        .last()
        .is_none_or(|last| new_ts.first().is_none_or(|first| last < first))
    {
        old_ts.extend_from_slice(&new_ts);
        crate::sealed::append_column(&mut old_values, new_values);
        return (old_ts, old_values);
    }
    let offset = old_ts.len();
    let mut timestamps = Vec::with_capacity(old_ts.len() + new_ts.len());
    let mut rows = Vec::with_capacity(old_ts.len() + new_ts.len());
    let (mut i, mut j) = (0, 0);
    while i < old_ts.len() || j < new_ts.len() {
        let take_new = j < new_ts.len() && (i == old_ts.len() || new_ts[j] <= old_ts[i]);
        if take_new {
            if i < old_ts.len() && old_ts[i] == new_ts[j] {
                i += 1;
            }
            timestamps.push(new_ts[j]);
            rows.push(offset + j);
            j += 1;
        } else {
            timestamps.push(old_ts[i]);
            rows.push(i);
            i += 1;
        }
    }
    let mut both = old_values;
    crate::sealed::append_column(&mut both, new_values);
    (timestamps, both.select(&rows))
}

/// Paces a compaction's writes to a byte rate by sleeping (the compaction runs on a thread of
/// its own, never on a writer's).
struct Throttle {
    bytes_per_sec: u64,
    started: Instant,
}

impl Throttle {
    fn new(bytes_per_sec: u64) -> Throttle {
        Throttle {
            bytes_per_sec,
            started: Instant::now(),
        }
    }

    fn pace(&mut self, written: u64) {
        if self.bytes_per_sec == 0 {
            return;
        }
        let due = Duration::from_secs_f64(written as f64 / self.bytes_per_sec as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            thread::sleep(due - elapsed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_points_win_a_merge() {
        let older = (vec![1, 3, 5], Column::Int64(vec![10, 30, 50]));
        let newer = (vec![3, 4, 6], Column::Int64(vec![33, 44, 66]));
        let (ts, values) = merge_newer_wins(older, newer);
        assert_eq!(ts, vec![1, 3, 4, 5, 6]);
        assert_eq!(values, Column::Int64(vec![10, 33, 44, 50, 66]));
        // Disjoint in time, either way round, or empty: the same answer as a row-wise merge.
        let a = (vec![1, 2], Column::Double(vec![1.0, 2.0]));
        let b = (vec![3, 9], Column::Double(vec![3.0, 9.0]));
        let all = (vec![1, 2, 3, 9], Column::Double(vec![1.0, 2.0, 3.0, 9.0]));
        assert_eq!(merge_newer_wins(a.clone(), b.clone()), all);
        assert_eq!(merge_newer_wins(b.clone(), a.clone()), all);
        let empty = (Vec::new(), Column::Double(Vec::new()));
        assert_eq!(merge_newer_wins(empty.clone(), a.clone()), a);
        assert_eq!(merge_newer_wins(a.clone(), empty), a);
    }

    #[test]
    fn expired_points_go_but_each_series_keeps_its_newest() {
        let ts = vec![1, 2, 3, 4];
        let values = Column::Int64(vec![10, 20, 30, 40]);
        assert_eq!(
            drop_expired(ts.clone(), values.clone(), None),
            (ts.clone(), values.clone(), 0)
        );
        assert_eq!(
            drop_expired(ts.clone(), values.clone(), Some(1)),
            (ts.clone(), values.clone(), 0)
        );
        assert_eq!(
            drop_expired(ts.clone(), values.clone(), Some(3)),
            (vec![3, 4], Column::Int64(vec![30, 40]), 2)
        );
        // All expired: the newest stays.
        assert_eq!(
            drop_expired(ts, values, Some(100)),
            (vec![4], Column::Int64(vec![40]), 3)
        );
    }

    #[test]
    fn tiers_grow_by_four() {
        let config = CompactionConfig::default();
        assert_eq!(config.tier(0), 0);
        assert_eq!(config.tier(1 << 20), 0);
        assert_eq!(config.tier((1 << 20) + 1), 1);
        assert_eq!(config.tier(4 << 20), 1);
        assert_eq!(config.tier(5 << 20), 2);
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn equal_neighbours_merge_by_tier() {
        let config = CompactionConfig::default();
        assert_eq!(config.plan_run(&[MIB; 3]), None);
        assert_eq!(config.plan_run(&[MIB; 4]), Some(0..4));
        assert_eq!(config.plan_run(&[MIB; 20]), Some(0..16));
        assert_eq!(
            config.plan_run(&[100 * MIB, MIB, MIB, MIB, MIB]),
            Some(1..5)
        );
    }

    #[test]
    fn mixed_sizes_merge_by_ratio_from_the_newest() {
        let config = CompactionConfig::default();
        // Alternating tiers: no run of one tier, ever.
        let sizes = [3 * MIB, 6 * MIB, 3 * MIB, 6 * MIB, 3 * MIB];
        assert_eq!(config.plan_run(&sizes), Some(0..5));
        // A big old file stays out while the newer ones are small beside it.
        let sizes = [400 * MIB, 3 * MIB, 6 * MIB, 3 * MIB, 6 * MIB];
        assert_eq!(config.plan_run(&sizes), Some(1..5));
        // A geometric series is left alone: merging would rewrite the big files for little.
        let sizes = [900 * MIB, 300 * MIB, 100 * MIB, 30 * MIB, 10 * MIB, 3 * MIB];
        assert_eq!(config.plan_run(&sizes), None);
    }

    #[test]
    fn past_files_max_the_cheapest_run_merges() {
        let config = CompactionConfig {
            files_max: 4,
            ..CompactionConfig::default()
        };
        let sizes = [5000, 1000, 200, 40, 8].map(|s| s * MIB);
        assert_eq!(config.plan_run(&sizes), Some(1..5));
    }

    /// Simulates flushes of varying sizes with every merge the planner asks for: the files per
    /// partition stay few (the soak's figure), and each byte is rewritten a bounded number of
    /// times.
    #[test]
    fn flushes_of_mixed_sizes_keep_few_files() {
        let config = CompactionConfig::default();
        let mut files: Vec<u64> = Vec::new();
        let (mut flushed, mut written) = (0u64, 0u64);
        let mut most = 0;
        for i in 0..2000u64 {
            let size = MIB + (i * 7919 % 13) * MIB / 2;
            files.push(size);
            flushed += size;
            while let Some(run) = config.plan_run(&files) {
                let merged: u64 = files[run.clone()].iter().sum();
                written += merged;
                files.splice(run, [merged]);
            }
            most = most.max(files.len());
        }
        assert!(most <= 16, "{most} files");
        assert!(
            written <= flushed * 12,
            "{written} bytes rewritten for {flushed} flushed"
        );
    }
}
