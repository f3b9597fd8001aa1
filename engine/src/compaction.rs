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
//! checkpoint is the run's greatest, raised to the newest deletion the manifest holds (every one of
//! those has been applied to the inputs it masked): a deletion not yet in the manifest still masks
//! the output, and none that was applied masks it again.
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
//! **Pages are copied where that is exact** ([`SeriesMerge`]): a page that overlaps no other
//! input's page in time, lies after the TTL cutoff and is at least half full goes to the output
//! as it is stored, so a merge of files flushed one after another costs I/O and CRCs, not
//! decoding and encoding; overlaps and small pages are decoded and re-paged.
//!
//! Writes never wait for a compaction: the merge runs under no region lock; only its install
//! takes the manifest lock (as a flush does) and the state lock for a pointer swap.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Column, DataType};

use crate::error::{Result, StorageError};
use crate::manifest::{sync_dir, FileEntry, Tombstone};
use crate::region::{in_ranges, overlaps, DataRegion, Partition, RegionState};
use crate::sealed::{self, ChunkIndex, Header, PageIndex, PageReader, SealedFile, SeriesCodecs};
use codec::SeriesCodec;

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
    /// Bytes of the output that are input pages copied as they were stored, neither decoded nor
    /// encoded (the rest of `output_bytes` was re-encoded, plus the index).
    pub copied_bytes: u64,
}

/// What a merge dropped and copied, for its [`CompactionReport`].
#[derive(Clone, Copy, Debug, Default)]
struct MergeCounts {
    dropped_series: usize,
    expired_points: u64,
    copied_bytes: u64,
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

/// A running compaction's claim on its inputs, released however the compaction ends.
struct Claim<'a> {
    region: &'a DataRegion,
    paths: Vec<PathBuf>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut claims = self.region.compaction_claims.lock();
        for path in &self.paths {
            claims.remove(path);
        }
    }
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
    /// `None` when no partition needs one. Writes go on meanwhile, and so may other calls: each
    /// claims the files it merges, and plans among the files no running call claimed.
    pub fn compact_once(&self) -> Result<Option<CompactionReport>> {
        self.check_cancelled()?;
        let (job, _claim) = {
            let mut claims = self.compaction_claims.lock();
            let Some(job) = self.plan(&self.state.read(), &claims) else {
                if claims.is_empty() {
                    self.pending_compactions.store(0, Ordering::Relaxed);
                }
                return Ok(None);
            };
            let paths: Vec<PathBuf> = job.inputs.iter().map(|f| f.path().to_path_buf()).collect();
            claims.extend(paths.iter().cloned());
            let claim = Claim {
                region: self,
                paths,
            };
            (job, claim)
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
        let claims = self.compaction_claims.lock();
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
            if plan && self.plan_partition(&state, *slot, &claims).is_some() {
                stats.pending_compactions += 1;
            }
        }
        stats
    }

    fn plan(&self, state: &RegionState, claims: &HashSet<PathBuf>) -> Option<Job> {
        state
            .partitions
            .keys()
            .find_map(|slot| self.plan_partition(state, *slot, claims))
    }

    /// The partition's next job among the files no running compaction claimed: within each
    /// run of unclaimed neighbours, oldest first, see [`DataRegion::plan_files`].
    fn plan_partition(
        &self,
        state: &RegionState,
        slot: i64,
        claims: &HashSet<PathBuf>,
    ) -> Option<Job> {
        let partition = state.partitions.get(&slot)?;
        partition
            .sealed
            .split(|f| claims.contains(f.path()))
            .filter(|run| !run.is_empty())
            .find_map(|run| self.plan_files(state, partition, slot, run))
    }

    /// The next job among `files`, neighbours in a partition: a run
    /// [`CompactionConfig::plan_run`] picks; else, for a cold partition (see
    /// [`CompactionConfig::cold_after_ms`]) of several files, its first `files_max`; else the
    /// first file holding data a deletion masks or enough expired points (rewritten alone).
    fn plan_files(
        &self,
        state: &RegionState,
        partition: &Partition,
        slot: i64,
        files: &[Arc<SealedFile>],
    ) -> Option<Job> {
        let config = &self.config.compaction;
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
        let sequence = self.sequences.fetch_add(1, Ordering::Relaxed);
        let mut entry = FileEntry {
            time_slot: job.time_slot,
            sequence,
            checkpoint: 0,
        };
        let sealed_dir = self.dir.join(crate::region::SEALED_DIR);
        let path = sealed_dir.join(entry.file_name());
        let written = self.merge(&job, &path);
        let (output, counts, checkpoint) = match written {
            Ok(output) => output,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(e);
            }
        };
        entry.checkpoint = checkpoint;
        let report = CompactionReport {
            time_slot: job.time_slot,
            inputs: job.inputs.len(),
            input_bytes: job.inputs.iter().map(|f| f.bytes).sum(),
            output_bytes: output.as_ref().map_or(0, |f| f.bytes),
            dropped_series: counts.dropped_series,
            expired_points: counts.expired_points,
            copied_bytes: counts.copied_bytes,
        };
        sync_dir(&sealed_dir)?;
        fail::fail_point!("storage::compact::before_manifest", |_| Err(
            StorageError::Injected("storage::compact::before_manifest")
        ));
        let output = output.map(|file| (entry, Arc::new(file)));
        if !self.install(&job, output, counts.expired_points > 0)? {
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
    /// number of series dropped for a deletion and of points dropped for the TTL, and its
    /// checkpoint.
    ///
    /// The checkpoint is the run's greatest, raised to the newest deletion the manifest holds:
    /// every one of those is applied to the inputs it masks, so none of them may mask the
    /// output again (a time range that only partly covers a series would otherwise have its file
    /// rewritten over and over). A deletion not yet in the manifest has a greater index than
    /// both, so it still masks the output.
    fn merge(
        &self,
        job: &Job,
        path: &std::path::Path,
    ) -> Result<(Option<SealedFile>, MergeCounts, u64)> {
        let mut checkpoint = job
            .inputs
            .iter()
            .map(|f| f.checkpoint)
            .max()
            .expect("a job has inputs");
        let cutoff = self.ttl_cutoff();
        let mut counts = MergeCounts::default();
        // Which inputs hold each series, and which of those a durable deletion masks: decided
        // once, against the manifest's tombstones as they are now. A deletion newer than the
        // manifest's checkpoint is not applied here; its index is above every input's
        // checkpoint, so it masks the output just as it masked the inputs.
        // Per series: its type, the inputs holding it, and per input the time ranges durable
        // `deleteData`s removed from it (empty for most).
        let mut series: BTreeMap<(String, String), MergeSources> = BTreeMap::new();
        {
            let state = self.state.read();
            let applied = state.manifest.tombstones.iter().map(Tombstone::index).max();
            checkpoint = checkpoint.max(applied.unwrap_or(0));
            for (i, file) in job.inputs.iter().enumerate() {
                for (device, measurement, chunk) in file.series() {
                    if state.masked_durably(device, measurement, file.checkpoint) {
                        counts.dropped_series += 1;
                        continue;
                    }
                    let sources = series
                        .entry((device.to_string(), measurement.to_string()))
                        .or_insert_with(|| MergeSources {
                            data_type: chunk.data_type,
                            inputs: Vec::new(),
                            deleted: vec![Vec::new(); job.inputs.len()],
                        });
                    sources.inputs.push(i);
                    sources.deleted[i] =
                        state.deleted_ranges_durably(device, measurement, file.checkpoint);
                }
            }
        }
        if series.is_empty() {
            return Ok((None, counts, checkpoint));
        }
        let header = Header {
            time_slot: job.time_slot,
            checkpoint,
        };
        let codecs = self.series_codecs();
        let mut readers = job
            .inputs
            .iter()
            .map(|input| input.page_reader())
            .collect::<Result<Vec<_>>>()?;
        let mut writer = sealed::create(path, header, &self.config.sealed, &self.files)?;
        let mut throttle = Throttle::new(self.config.compaction.write_bytes_per_sec);
        for ((device, measurement), merge_sources) in &series {
            let MergeSources {
                data_type,
                inputs: sources,
                deleted,
            } = merge_sources;
            self.check_cancelled()?;
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
            let series = SeriesMerge {
                inputs: &job.inputs,
                sources,
                device,
                measurement,
                data_type: *data_type,
                from,
                deleted,
                codec: codecs.get(device, measurement),
            };
            series.write(&mut writer, &mut readers, &mut throttle, &mut counts)?;
        }
        let output = writer.finish()?;
        if output.series().next().is_none() {
            // Time-range deletions removed every point.
            let _ = fs::remove_file(path);
            return Ok((None, counts, checkpoint));
        }
        Ok((Some(output), counts, checkpoint))
    }

    /// Swaps the output (if any) in for the inputs in the manifest, then in memory. False when
    /// the inputs are no longer a run of the partition's files. A merge that `expired` points
    /// forgets the cached newest points in its partition (`last_cache.rs`).
    fn install(
        &self,
        job: &Job,
        output: Option<(FileEntry, Arc<SealedFile>)>,
        expired: bool,
    ) -> Result<bool> {
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
        if expired {
            let slots = &self.config.partition;
            self.last_values.forget_where(|_, _, newest| {
                newest
                    .as_ref()
                    .is_some_and(|(t, _)| slots.time_slot(*t) == job.time_slot)
            });
        }
        if partition.is_empty() {
            state.partitions.remove(&job.time_slot);
        }
        state.manifest = manifest;
        if state.prune_tombstones() {
            state.manifest.store(&self.dir)?;
        }
        Ok(true)
    }
}

/// True when a deletion the manifest holds masks any series of `file` (see
/// `RegionState::masked_durably`), or removes a time range that holds some of a series' points.
/// Only deletions newer than the file can: usually none, so this costs one pass over the
/// tombstones.
fn holds_masked_data(state: &RegionState, file: &SealedFile) -> bool {
    let newer: Vec<_> = state
        .manifest
        .tombstones
        .iter()
        .filter(|t| t.index() > file.checkpoint)
        .collect();
    !newer.is_empty()
        && file.series().any(|(device, measurement, chunk)| {
            newer.iter().any(|t| {
                t.masks(device, measurement, file.checkpoint)
                    || t.deletes(device, measurement, file.checkpoint)
                        .is_some_and(|range| overlaps(range, chunk.min_time, chunk.max_time))
            })
        })
}

/// Drops from the manifest the time-range tombstones that no longer mask anything, after a
/// compaction's install or a flush (no live file
/// or frozen memtable older than the deletion holds the series in its range: compaction rewrote
/// them without the deleted points) and whose series' type a live file records. They carry no
/// token, so nothing else needs them. True when some were dropped (the caller stores the
/// manifest; a crash before that keeps them, which is harmless).
pub(crate) fn prune_range_tombstones(state: &mut RegionState) -> bool {
    let masks_something = |t: &Tombstone| -> bool {
        let Tombstone::Range {
            device,
            measurement,
            start,
            end,
            index,
            ..
        } = t
        else {
            return true;
        };
        let masks = || {
            state.partitions.values().any(|p| {
                p.sealed.iter().any(|f| {
                    f.checkpoint < *index
                        && f.chunk(device, measurement)
                            .is_some_and(|c| overlaps((*start, *end), c.min_time, c.max_time))
                }) || p.flushing.iter().any(|(checkpoint, frozen)| {
                    *checkpoint < *index && frozen.series_type(device, measurement).is_some()
                })
            })
        };
        let type_recorded = || {
            state.partitions.values().any(|p| {
                p.sealed.iter().any(|f| {
                    f.chunk(device, measurement).is_some()
                        && !state.masked_durably(device, measurement, f.checkpoint)
                })
            })
        };
        masks() || !type_recorded()
    };
    let keep: Vec<bool> = state
        .manifest
        .tombstones
        .iter()
        .map(masks_something)
        .collect();
    if keep.iter().all(|k| *k) {
        return false;
    }
    let mut keep = keep.into_iter();
    state
        .manifest
        .tombstones
        .retain(|_| keep.next().expect("one verdict per tombstone"));
    true
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

/// One series of a merge: its pages in every input that holds it, written to the output as
/// they are where that is exact, decoded and merged where not.
///
/// The series' pages (those ending at or after `from`) are taken in time order and grouped into
/// clusters of pages whose time ranges overlap. A cluster of one version-2 page that starts at or
/// after `from` and holds at least half a page's points is copied verbatim (IoTDB's "fast"
/// compaction: no decoding, no encoding, statistics carried over). Every other cluster is
/// decoded, merged (on equal timestamps the newer input wins), cut at `from`, and gathered with
/// the clusters next to it into pages of their own, so small pages (a flush's last page of a
/// series) are merged into full ones rather than copied forever. A copyable page that follows a
/// gathering of fewer than half a page's points joins it instead, which keeps every written page
/// at least half full but the series' last.
struct SeriesMerge<'a> {
    inputs: &'a [Arc<SealedFile>],
    /// Indexes into `inputs` of the files that hold the series, oldest first.
    sources: &'a [usize],
    device: &'a str,
    measurement: &'a str,
    data_type: DataType,
    /// Points before this are dropped (the TTL; `i64::MIN` without one).
    from: i64,
    /// Per input (indexed like `inputs`), the time ranges a durable `deleteData` removed from
    /// the series there: those points are dropped, and a page holding any is decoded.
    deleted: &'a [Vec<(i64, i64)>],
    codec: SeriesCodec,
}

/// What a merge knows of one series before reading it.
struct MergeSources {
    data_type: DataType,
    /// Indexes into the job's inputs of the files that hold the series, oldest first.
    inputs: Vec<usize>,
    /// Per input (all of them), the time ranges deleted from the series there.
    deleted: Vec<Vec<(i64, i64)>>,
}

/// A page of the series in one input.
struct SourcePage<'a> {
    input: usize,
    chunk: &'a ChunkIndex,
    page: &'a PageIndex,
}

impl SeriesMerge<'_> {
    /// Writes the series, counting the points dropped for the TTL (on the pages skipped and cut
    /// from the pages decoded) and the bytes of the pages copied.
    fn write(
        &self,
        writer: &mut sealed::FileWriter,
        readers: &mut [PageReader],
        throttle: &mut Throttle,
        counts: &mut MergeCounts,
    ) -> Result<()> {
        let (pages, skipped) = self.pages()?;
        let page_points = writer.page_points();
        let copy_min = (page_points / 2).max(1) as u32;
        let mut gathered = Gathered::new(self.data_type);
        counts.expired_points += skipped;
        writer.begin_series(self.device, self.measurement, self.data_type);
        let mut at = 0;
        while at < pages.len() {
            let mut end = at + 1;
            let mut max_time = pages[at].page.max_time;
            while end < pages.len() && pages[end].page.min_time <= max_time {
                max_time = max_time.max(pages[end].page.max_time);
                end += 1;
            }
            let cluster = &pages[at..end];
            at = end;
            let copyable = match cluster {
                [one] => {
                    one.page.min_time >= self.from
                        && one.page.count >= copy_min
                        && !self.deleted[one.input]
                            .iter()
                            .any(|r| overlaps(*r, one.page.min_time, one.page.max_time))
                }
                _ => false,
            };
            if copyable && (gathered.is_empty() || gathered.len() >= copy_min as usize) {
                let at = cluster[0].input;
                if let Some(stored) =
                    self.inputs[at].stored_page(&mut readers[at], cluster[0].page)?
                {
                    gathered.write_all(writer, self.codec)?;
                    writer.copy_page(&stored)?;
                    counts.copied_bytes += u64::from(cluster[0].page.length);
                    throttle.pace(writer.bytes_written());
                    continue;
                }
            }
            let (timestamps, values) = self.decode(cluster, readers)?;
            let cut = timestamps.partition_point(|t| *t < self.from);
            counts.expired_points += cut as u64;
            gathered.push(&timestamps[cut..], values, cut);
            gathered.write_full(writer, self.codec)?;
            throttle.pace(writer.bytes_written());
        }
        gathered.write_all(writer, self.codec)?;
        writer.end_series();
        Ok(())
    }

    /// The series' pages that end at or after `from`, by start time (then input), and the
    /// points on the pages that end before it.
    fn pages(&self) -> Result<(Vec<SourcePage<'_>>, u64)> {
        let mut pages = Vec::new();
        let mut skipped = 0;
        for &input in self.sources {
            let file = &self.inputs[input];
            let chunk = file
                .chunk(self.device, self.measurement)
                .expect("a source holds the series");
            if chunk.data_type != self.data_type {
                return Err(StorageError::Corruption {
                    what: "sealed file",
                    path: file.path().to_path_buf(),
                    offset: 0,
                    reason: format!(
                        "{}.{} changes type between files",
                        self.device, self.measurement
                    ),
                });
            }
            for page in &chunk.pages {
                if page.max_time < self.from {
                    skipped += u64::from(page.count);
                } else {
                    pages.push(SourcePage { input, chunk, page });
                }
            }
        }
        pages.sort_by_key(|p| (p.page.min_time, p.input));
        Ok((pages, skipped))
    }

    /// Decodes a cluster's pages and merges them, the newer input winning on equal timestamps.
    fn decode(
        &self,
        cluster: &[SourcePage<'_>],
        readers: &mut [PageReader],
    ) -> Result<(Vec<i64>, Column)> {
        // Per input, its pages in time order (they never overlap within one file).
        let mut by_input: BTreeMap<usize, (Vec<i64>, Column)> = BTreeMap::new();
        for source in cluster {
            let (mut ts, mut values) = self.inputs[source.input].read_page_with(
                &mut readers[source.input],
                self.device,
                self.measurement,
                source.chunk,
                source.page,
            )?;
            let deleted = &self.deleted[source.input];
            if !deleted.is_empty() {
                common::retain_points(&mut ts, &mut values, |t| !in_ranges(deleted, t));
            }
            match by_input.entry(source.input) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert((ts, values));
                }
                std::collections::btree_map::Entry::Occupied(mut e) => {
                    let (all_ts, all_values) = e.get_mut();
                    all_ts.extend_from_slice(&ts);
                    crate::sealed::append_column(all_values, values);
                }
            }
        }
        Ok(by_input
            .into_values()
            .reduce(merge_newer_wins)
            .expect("a cluster has pages"))
    }
}

/// Decoded points of a series waiting to be written as pages.
struct Gathered {
    timestamps: Vec<i64>,
    values: Column,
}

impl Gathered {
    fn new(data_type: DataType) -> Gathered {
        Gathered {
            timestamps: Vec::new(),
            values: Column::with_capacity(data_type, 0),
        }
    }

    fn len(&self) -> usize {
        self.timestamps.len()
    }

    fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// Appends `values[skip..]` at `timestamps` (the points after what is gathered).
    fn push(&mut self, timestamps: &[i64], values: Column, skip: usize) {
        self.timestamps.extend_from_slice(timestamps);
        let values = if skip == 0 {
            values
        } else {
            values.slice(skip..values.len())
        };
        crate::sealed::append_column(&mut self.values, values);
    }

    /// Writes full pages while at least two pages' worth is gathered, so that what stays can
    /// still be split into pages at least half full.
    fn write_full(&mut self, writer: &mut sealed::FileWriter, codec: SeriesCodec) -> Result<()> {
        let page = writer.page_points();
        let mut written = 0;
        while self.len() - written >= 2 * page {
            self.write(writer, written..written + page, codec)?;
            written += page;
        }
        self.drain(written);
        Ok(())
    }

    /// Writes everything gathered, as evenly filled pages.
    fn write_all(&mut self, writer: &mut sealed::FileWriter, codec: SeriesCodec) -> Result<()> {
        let n = self.len();
        let pages = n.div_ceil(writer.page_points());
        for i in 0..pages {
            self.write(writer, n * i / pages..n * (i + 1) / pages, codec)?;
        }
        self.drain(n);
        Ok(())
    }

    fn write(
        &self,
        writer: &mut sealed::FileWriter,
        rows: std::ops::Range<usize>,
        codec: SeriesCodec,
    ) -> Result<()> {
        let values = self.values.slice(rows.clone());
        writer.points(&self.timestamps[rows], &values, codec)
    }

    fn drain(&mut self, rows: usize) {
        if rows == self.len() {
            self.timestamps.clear();
            self.values.drain_front(rows);
        } else if rows > 0 {
            self.timestamps.drain(..rows);
            self.values.drain_front(rows);
        }
    }
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

    /// Sealed files of one series `root.sg.d.s` for merge tests, pages of at most 10 points.
    struct Files {
        dir: tempfile::TempDir,
        cache: Arc<crate::files::FileCache>,
        options: sealed::SealedOptions,
        written: usize,
    }

    impl Files {
        fn new() -> Files {
            Files {
                dir: tempfile::tempdir().unwrap(),
                cache: crate::files::FileCache::new(8),
                options: sealed::SealedOptions {
                    page_points: 10,
                    ..sealed::SealedOptions::default()
                },
                written: 0,
            }
        }

        fn create(&mut self) -> sealed::FileWriter {
            self.written += 1;
            let path = self.dir.path().join(format!("{}.fps", self.written));
            let header = Header {
                time_slot: 0,
                checkpoint: self.written as u64,
            };
            sealed::create(&path, header, &self.options, &self.cache).unwrap()
        }

        /// A file whose series holds `times` (value = time × 10 + `tag`), in pages of at most
        /// 10 points.
        fn file(&mut self, times: impl IntoIterator<Item = i64>, tag: i64) -> Arc<SealedFile> {
            let times: Vec<i64> = times.into_iter().collect();
            let values = Column::Int64(times.iter().map(|t| t * 10 + tag).collect());
            let mut writer = self.create();
            writer
                .series("root.sg.d", "s", &times, &values, SeriesCodec::default())
                .unwrap();
            Arc::new(writer.finish().unwrap())
        }

        /// Merges the series of `inputs` (oldest first) from `from` on: the output, with what
        /// was dropped and copied.
        fn merge(&mut self, inputs: &[Arc<SealedFile>], from: i64) -> (SealedFile, MergeCounts) {
            self.merge_deleting(inputs, from, &vec![Vec::new(); inputs.len()])
        }

        /// [`Files::merge`] with `deleted[i]` the time ranges deleted from input `i`.
        fn merge_deleting(
            &mut self,
            inputs: &[Arc<SealedFile>],
            from: i64,
            deleted: &[Vec<(i64, i64)>],
        ) -> (SealedFile, MergeCounts) {
            let sources: Vec<usize> = (0..inputs.len()).collect();
            let merge = SeriesMerge {
                inputs,
                sources: &sources,
                device: "root.sg.d",
                measurement: "s",
                data_type: DataType::Int64,
                from,
                deleted,
                codec: SeriesCodec::default(),
            };
            let mut readers: Vec<_> = inputs.iter().map(|f| f.page_reader().unwrap()).collect();
            let mut writer = self.create();
            let mut counts = MergeCounts::default();
            merge
                .write(
                    &mut writer,
                    &mut readers,
                    &mut Throttle::new(0),
                    &mut counts,
                )
                .unwrap();
            (writer.finish().unwrap(), counts)
        }
    }

    fn points(file: &SealedFile) -> (Vec<i64>, Column) {
        file.read("root.sg.d", "s").unwrap().unwrap()
    }

    fn page_counts(file: &SealedFile) -> Vec<u32> {
        let chunk = file.chunk("root.sg.d", "s").unwrap();
        chunk.pages.iter().map(|p| p.count).collect()
    }

    /// The stored bytes of every page of `file`'s series.
    fn page_bytes(file: &SealedFile) -> Vec<Vec<u8>> {
        let chunk = file.chunk("root.sg.d", "s").unwrap();
        let raw = std::fs::read(file.path()).unwrap();
        chunk
            .pages
            .iter()
            .map(|p| raw[p.offset as usize..(p.offset + u64::from(p.length)) as usize].to_vec())
            .collect()
    }

    /// `out` is byte for byte the pages of `inputs` (nothing was re-encoded), and the merge
    /// counted them all as copied.
    fn assert_copied_whole(out: &SealedFile, counts: MergeCounts, inputs: &[&Arc<SealedFile>]) {
        let pages: Vec<Vec<u8>> = inputs.iter().flat_map(|f| page_bytes(f)).collect();
        assert_eq!(page_bytes(out), pages);
        let stored: usize = pages.iter().map(Vec::len).sum();
        assert_eq!(counts.copied_bytes, stored as u64);
    }

    #[test]
    fn disjoint_full_pages_are_copied_as_they_are() {
        let mut files = Files::new();
        let a = files.file(0..20, 1);
        let b = files.file(100..120, 2);
        let (out, counts) = files.merge(&[a.clone(), b.clone()], i64::MIN);
        assert_eq!(counts.expired_points, 0);
        assert_eq!(page_counts(&out), vec![10, 10, 10, 10]);
        assert_copied_whole(&out, counts, &[&a, &b]);
        let (ts, values) = points(&out);
        assert_eq!(ts, (0..20).chain(100..120).collect::<Vec<_>>());
        assert_eq!(values.value(25), common::Value::Int64(1052));
        // The chunk's statistics are merged from the copied pages'.
        let stats = out.chunk("root.sg.d", "s").unwrap().stats.clone().unwrap();
        assert_eq!(stats.first, Some(common::Value::Int64(1)));
        assert_eq!(stats.last, Some(common::Value::Int64(1192)));
    }

    #[test]
    fn deleted_ranges_are_dropped_and_only_their_pages_decoded() {
        let mut files = Files::new();
        let a = files.file(0..30, 1);
        let b = files.file(100..120, 2);
        // From the older input: 12..=14 (inside its second page) and a range over `b`'s
        // times, which must not touch `b`'s own points.
        let deleted = vec![vec![(12, 14), (100, 119)], Vec::new()];
        let (out, counts) = files.merge_deleting(&[a.clone(), b.clone()], i64::MIN, &deleted);
        let (ts, values) = points(&out);
        let expected: Vec<i64> = (0..12).chain(15..30).chain(100..120).collect();
        assert_eq!(ts, expected);
        assert_eq!(values.value(12), common::Value::Int64(151));
        // `a`'s first and third pages and all of `b`'s are copied; its second is re-paged.
        let copied = [&page_bytes(&a)[0], &page_bytes(&a)[2]]
            .iter()
            .map(|p| p.len() as u64)
            .sum::<u64>()
            + page_bytes(&b).iter().map(|p| p.len() as u64).sum::<u64>();
        assert_eq!(counts.copied_bytes, copied);
        assert_eq!(page_bytes(&out)[0], page_bytes(&a)[0]);
    }

    #[test]
    fn small_pages_are_gathered_into_full_ones() {
        let mut files = Files::new();
        // Flushes of 3 points each: every page is too small to copy.
        let inputs: Vec<_> = (0..7).map(|i| files.file(i * 3..i * 3 + 3, 0)).collect();
        let (out, _) = files.merge(&inputs, i64::MIN);
        // 21 points: a full page once two pages' worth is gathered, then the last 11 split
        // evenly, every page at least half full.
        assert_eq!(page_counts(&out), vec![10, 5, 6]);
        assert_eq!(points(&out).0, (0..21).collect::<Vec<_>>());
        // A small page followed by full ones: the first full page joins it, the rest are copied.
        let tail = files.file(0..3, 0);
        let full = files.file(10..40, 0);
        let (out, _) = files.merge(&[tail, full.clone()], i64::MIN);
        // 13 gathered points as two pages, then the copies.
        assert_eq!(page_counts(&out), vec![6, 7, 10, 10]);
        assert_eq!(page_bytes(&out)[2..], page_bytes(&full)[1..]);
        assert_eq!(points(&out).0, (0..3).chain(10..40).collect::<Vec<_>>());
    }

    #[test]
    fn flushed_pages_are_evenly_filled_so_merges_copy_them_all() {
        let mut files = Files::new();
        // 25 points at 10 a page: 8, 8, 9 rather than 10, 10, 5, whose tail would be decoded
        // and re-paged with its neighbour by every merge.
        let a = files.file(0..25, 1);
        let b = files.file(100..125, 2);
        assert_eq!(page_counts(&a), vec![8, 8, 9]);
        let (out, counts) = files.merge(&[a.clone(), b.clone()], i64::MIN);
        assert_copied_whole(&out, counts, &[&a, &b]);
    }

    #[test]
    fn overlapping_pages_are_merged_and_the_newer_point_wins() {
        let mut files = Files::new();
        let older = files.file((0..40).map(|t| t * 2), 1); // even times, 4 pages
        let newer = files.file(50..60, 2); // overlaps older's third page only
        let (out, _) = files.merge(&[older.clone(), newer], i64::MIN);
        let (ts, values) = points(&out);
        let mut want: Vec<i64> = (0..40).map(|t| t * 2).chain(50..60).collect();
        want.sort();
        want.dedup();
        assert_eq!(ts, want);
        for (row, t) in ts.iter().enumerate() {
            let tag = if (50..60).contains(t) { 2 } else { 1 };
            assert_eq!(
                values.value(row),
                common::Value::Int64(t * 10 + tag),
                "at {t}"
            );
        }
        // The pages that overlap nothing are the older file's own.
        let old_pages = page_bytes(&older);
        let out_pages = page_bytes(&out);
        assert_eq!(out_pages[0], old_pages[0]);
        assert_eq!(out_pages[1], old_pages[1]);
        assert_eq!(out_pages.last(), old_pages.last());
    }

    #[test]
    fn the_ttl_cuts_pages_it_crosses_and_skips_those_below_it() {
        let mut files = Files::new();
        let a = files.file(0..40, 0);
        // From 15: page 0..=9 is skipped, page 10..=19 is cut, the rest is copied.
        let (out, counts) = files.merge(std::slice::from_ref(&a), 15);
        assert_eq!(counts.expired_points, 15);
        assert_eq!(points(&out).0, (15..40).collect::<Vec<_>>());
        assert_eq!(page_bytes(&out)[1..], page_bytes(&a)[2..]);
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
