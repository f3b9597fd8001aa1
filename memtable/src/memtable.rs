//! The live memtable: series buffers of one time partition, with marks to roll back to.

use std::collections::HashMap;
use std::fmt;
use std::mem;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{DataType, Tablet, Value};

use crate::error::{ConfigError, MemTableError, Result};
use crate::frozen::FrozenMemTable;
use crate::series::{empty_series_bytes, Series};

/// A memtable's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemTableConfig {
    /// Estimated heap bytes at which [`MemTable::should_flush`] turns true. A soft limit: writes
    /// are never refused for it; the storage engine freezes and flushes. Default 64 MiB.
    pub flush_threshold_bytes: usize,
}

impl MemTableConfig {
    /// The default flush threshold, 64 MiB.
    pub const DEFAULT_FLUSH_THRESHOLD_BYTES: usize = 64 * 1024 * 1024;

    /// Checks the settings; run once at start-up.
    pub fn validate(&self) -> std::result::Result<(), ConfigError> {
        if self.flush_threshold_bytes == 0 {
            return Err(ConfigError::FlushThresholdZero);
        }
        Ok(())
    }
}

impl Default for MemTableConfig {
    fn default() -> Self {
        MemTableConfig {
            flush_threshold_bytes: MemTableConfig::DEFAULT_FLUSH_THRESHOLD_BYTES,
        }
    }
}

/// A point in a memtable's history to roll back to, taken by [`MemTable::mark`]. It carries
/// what it restores, so taking one registers nothing.
///
/// A mark stays live until [`MemTable::delete_series`], [`MemTable::delete_where`] or
/// [`MemTable::release_marks`] runs, or until the memtable rolls back past it: to an earlier mark
/// with something written between the two (rolling back to the mark itself keeps it live). Rolling back to a
/// mark that is not live, or that another memtable took, panics: it is a bug in the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mark {
    /// The undo log the mark belongs to (see `MemTable::log_id`).
    log_id: u64,
    /// The undo log's length at the mark.
    undo_len: usize,
    /// The tag of the undo log's last entry at the mark (0 when empty): if the entry at
    /// `undo_len - 1` still has it, the log's first `undo_len` entries are those of the mark.
    undo_tag: u64,
    memory_bytes: usize,
    point_count: usize,
}

/// Undo log ids, unique across every memtable of the process so that a mark is never mistaken
/// for one of another memtable.
static NEXT_LOG_ID: AtomicU64 = AtomicU64::new(1);

fn next_log_id() -> u64 {
    NEXT_LOG_ID.fetch_add(1, Ordering::Relaxed)
}

/// One step back towards an older state.
#[derive(Clone, Copy, Debug)]
struct Undo {
    /// Unique within the memtable and never reused, even after a rollback pops the entry.
    tag: u64,
    id: u32,
    step: UndoStep,
}

#[derive(Clone, Copy, Debug)]
enum UndoStep {
    /// The series was created: rolling back removes it. Series are created at the end of
    /// `MemTable::series` and undone newest first, so it is the last one.
    Created,
    /// The series held `len` points (with the derived state `sorted`, `max_time`) and had
    /// `undo_epoch` when first touched after a mark.
    Appended {
        len: usize,
        sorted: bool,
        max_time: i64,
        undo_epoch: u64,
    },
}

/// Estimated heap bytes of one undo log entry.
const UNDO_ENTRY_BYTES: usize = mem::size_of::<Undo>();

/// The series buffers of one time partition: takes writes, answers reads, rolls back to marks,
/// and freezes into a [`FrozenMemTable`] for flushing. `Send` and `Sync`: readers may share it
/// behind a lock while writes take it exclusively.
///
/// Writes are upserts keyed by (series, timestamp): the value written last wins. Each series
/// keeps its points in insertion order and resolves upserts when read or frozen.
///
/// Rollback is exact: after `rollback(mark)` the contents, the series, [`memory_bytes`] and
/// [`point_count`] are what they were at `mark`. Once a mark has been taken, the undo log gains
/// one small entry for each series first touched after each mark (none while no mark is
/// taken); [`release_marks`] empties it once no rollback can follow. Its bytes count in
/// [`memory_bytes`], so the flush threshold bounds it too.
///
/// [`memory_bytes`]: MemTable::memory_bytes
/// [`point_count`]: MemTable::point_count
/// [`release_marks`]: MemTable::release_marks
pub struct MemTable {
    config: MemTableConfig,
    /// Series by id; ids are indexes here.
    series: Vec<Series>,
    /// device → measurement → series id.
    index: HashMap<String, HashMap<String, u32>>,
    /// Sum of the series' `memory_bytes()` plus the undo log's bytes.
    memory_bytes: usize,
    /// Points appended, duplicates counted, less those rolled back or deleted.
    point_count: usize,
    /// Steps back to the state when the log was last emptied, oldest first.
    undo: Vec<Undo>,
    /// Identifies the undo log since it was last emptied; marks of another log are dead.
    log_id: u64,
    /// The tag of the next undo entry.
    next_undo_tag: u64,
    /// Raised by every mark. A series whose `undo_epoch` is below it has not been logged since
    /// the newest mark. Atomic because `mark` takes `&self`.
    epoch: AtomicU64,
    /// True once a mark was taken since the undo log was last emptied: only then is anything
    /// logged.
    logging: AtomicBool,
    /// device → measurement → points to reserve when the series is created: what the series
    /// held in the memtable this one succeeds, plus headroom (see [`MemTable::successor`]).
    capacity_hints: HashMap<String, HashMap<String, usize>>,
}

impl fmt::Debug for MemTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTable")
            .field("config", &self.config)
            .field("series", &self.series.len())
            .field("point_count", &self.point_count)
            .field("memory_bytes", &self.memory_bytes)
            .field("undo_entries", &self.undo.len())
            .finish()
    }
}

impl MemTable {
    /// An empty memtable.
    pub fn new(config: MemTableConfig) -> MemTable {
        MemTable {
            config,
            series: Vec::new(),
            index: HashMap::new(),
            memory_bytes: 0,
            point_count: 0,
            undo: Vec::new(),
            log_id: next_log_id(),
            next_undo_tag: 1,
            epoch: AtomicU64::new(1),
            logging: AtomicBool::new(false),
            capacity_hints: HashMap::new(),
        }
    }

    /// An empty memtable with the same settings that takes over from this one: each series it
    /// creates reserves room for what the series holds here plus a quarter, so a steady workload
    /// fills its series without regrowing them (every regrowth copies the whole series).
    ///
    /// The reservation is made when a series receives its first write, so the successor's heap
    /// may run ahead of [`memory_bytes`](MemTable::memory_bytes) (which counts points written) by
    /// at most a quarter more than this memtable holds.
    pub fn successor(&self) -> MemTable {
        let mut next = MemTable::new(self.config);
        for series in &self.series {
            let points = series.len();
            if points == 0 {
                continue;
            }
            next.capacity_hints
                .entry(series.device.clone())
                .or_default()
                .insert(series.measurement.clone(), points + points / 4);
        }
        next
    }

    /// The settings it was made with.
    pub fn config(&self) -> &MemTableConfig {
        &self.config
    }

    /// Appends the selected rows (indexes into the tablet, in any order, possibly repeating rows
    /// or timestamps) of every column of the tablet; null cells are skipped. Returns the number
    /// of points written.
    ///
    /// If any measurement of the tablet that has a non-null selected cell already holds another
    /// type in this memtable, returns [`MemTableError::TypeMismatch`] before writing anything: a
    /// failed call changes nothing. A column with no non-null selected cell creates no series and
    /// is not type-checked.
    ///
    /// Assumes the tablet passed [`Tablet::validate`]; panics on a row index out of range or a
    /// tablet whose shape or column types are inconsistent.
    pub fn insert_tablet(&mut self, tablet: &Tablet, rows: &[u32]) -> Result<usize> {
        let columns = tablet.columns.len();
        assert!(
            tablet.measurements.len() == columns
                && tablet.data_types.len() == columns
                && tablet.bitmaps.len() == columns,
            "tablet of {} has {} measurements, {} types, {columns} columns and {} bitmaps \
             (was Tablet::validate run?)",
            tablet.device,
            tablet.measurements.len(),
            tablet.data_types.len(),
            tablet.bitmaps.len()
        );
        let row_count = tablet.row_count();
        if let Some(&row) = rows.iter().find(|&&row| row as usize >= row_count) {
            panic!(
                "row index {row} out of range for a tablet of {} with {row_count} rows",
                tablet.device
            );
        }
        let contiguous = contiguous_rows(rows);

        // Resolve every series and check every type before the first append, so that a refused
        // tablet leaves no trace. A column with no non-null selected cell writes nothing and is
        // not checked: its verdict must not depend on which series this memtable happens to
        // hold (the storage engine rebuilds its type registry from stored points alone, and a
        // replica's answer must not change with its flush state).
        let device_index = self.index.get(&tablet.device);
        // Per column: None when the column writes nothing; Some(existing series id, if any).
        let mut ids: Vec<Option<Option<u32>>> = Vec::with_capacity(columns);
        for (column, (measurement, &requested)) in tablet
            .measurements
            .iter()
            .zip(&tablet.data_types)
            .enumerate()
        {
            let writes = match tablet.bitmaps[column].as_ref() {
                Some(nulls) => rows.iter().any(|&row| !nulls.get(row as usize)),
                None => !rows.is_empty(),
            };
            if !writes {
                ids.push(None);
                continue;
            }
            let id = device_index.and_then(|d| d.get(measurement)).copied();
            if let Some(id) = id {
                let existing = self.series[id as usize].data_type();
                if existing != requested {
                    return Err(MemTableError::TypeMismatch {
                        device: tablet.device.clone(),
                        measurement: measurement.clone(),
                        existing,
                        requested,
                    });
                }
            }
            ids.push(Some(id));
        }

        let epoch = self.logging.get_mut().then_some(*self.epoch.get_mut());
        let mut written = 0;
        for (column, id) in ids.into_iter().enumerate() {
            // A column without a point neither creates a series nor enters the undo log.
            let Some(id) = id else { continue };
            let nulls = tablet.bitmaps[column].as_ref();
            let id = match id {
                Some(id) => {
                    self.touch(id, epoch);
                    id
                }
                None => self.create(
                    &tablet.device,
                    &tablet.measurements[column],
                    tablet.data_types[column],
                    rows.len(),
                    epoch,
                ),
            };
            let (points, bytes) = self.series[id as usize].append(
                &tablet.timestamps,
                &tablet.columns[column],
                nulls,
                rows,
                contiguous.clone(),
            );
            written += points;
            self.point_count += points;
            self.memory_bytes += bytes;
        }
        Ok(written)
    }

    /// Records the series' state in the undo log if this is its first touch since the newest
    /// mark (`epoch`; `None` while no mark is taken), so that rolling back can restore it.
    fn touch(&mut self, id: u32, epoch: Option<u64>) {
        let Some(epoch) = epoch else { return };
        let series = &mut self.series[id as usize];
        if series.undo_epoch < epoch {
            let step = UndoStep::Appended {
                len: series.len(),
                sorted: series.sorted,
                max_time: series.max_time,
                undo_epoch: series.undo_epoch,
            };
            series.undo_epoch = epoch;
            self.log(id, step);
        }
    }

    fn log(&mut self, id: u32, step: UndoStep) {
        let tag = self.next_undo_tag;
        self.next_undo_tag += 1;
        self.undo.push(Undo { tag, id, step });
        self.memory_bytes += UNDO_ENTRY_BYTES;
    }

    /// Adds an empty series and returns its id.
    fn create(
        &mut self,
        device: &str,
        measurement: &str,
        data_type: DataType,
        capacity: usize,
        epoch: Option<u64>,
    ) -> u32 {
        let id = u32::try_from(self.series.len())
            .unwrap_or_else(|_| panic!("more than {} series in one memtable", u32::MAX));
        // A series created after a mark is removed whole on rollback; later touches in the same
        // epoch need no entry of their own.
        if epoch.is_some() {
            self.log(id, UndoStep::Created);
        }
        let hint = self
            .capacity_hints
            .get(device)
            .and_then(|m| m.get(measurement))
            .copied()
            .unwrap_or(0);
        let capacity = capacity.max(hint);
        self.series.push(Series::new(
            device,
            measurement,
            data_type,
            capacity,
            epoch.unwrap_or_else(|| *self.epoch.get_mut()),
        ));
        // The device's entry usually exists; look it up by reference to avoid allocating a key.
        match self.index.get_mut(device) {
            Some(measurements) => {
                let previous = measurements.insert(measurement.to_string(), id);
                assert!(
                    previous.is_none(),
                    "series {device}.{measurement} created twice: the measurement appears twice \
                     in the tablet (was Tablet::validate run?)"
                );
            }
            None => {
                self.index.insert(
                    device.to_string(),
                    HashMap::from([(measurement.to_string(), id)]),
                );
            }
        }
        self.memory_bytes += empty_series_bytes(device, measurement);
        id
    }

    /// Takes a mark to roll back to. O(1); registers nothing.
    pub fn mark(&self) -> Mark {
        // Series touched from now on are logged afresh. Relaxed suffices: `mark` may race only
        // with other `&self` calls, and writers hold `&mut self`, which orders them after it.
        self.epoch.fetch_add(1, Ordering::Relaxed);
        self.logging.store(true, Ordering::Relaxed);
        Mark {
            log_id: self.log_id,
            undo_len: self.undo.len(),
            undo_tag: self.undo.last().map_or(0, |u| u.tag),
            memory_bytes: self.memory_bytes,
            point_count: self.point_count,
        }
    }

    /// Restores the exact state at `mark`: contents, series, memory accounting and point count.
    /// Costs O(series touched since the mark). `mark` stays live; marks taken after it die,
    /// unless nothing was written between the two (then they name the same state).
    ///
    /// Panics when `mark` is not live (see [`Mark`]).
    pub fn rollback(&mut self, mark: Mark) {
        assert_eq!(
            mark.log_id, self.log_id,
            "rollback to a mark of another memtable, or taken before delete_series, delete_where \
             or release_marks: {mark:?}"
        );
        let live = mark.undo_len <= self.undo.len()
            && (mark.undo_len == 0 || self.undo[mark.undo_len - 1].tag == mark.undo_tag);
        assert!(
            live,
            "rollback to a mark that died when the memtable rolled back to an earlier mark and \
             was written again: {mark:?}"
        );
        while self.undo.len() > mark.undo_len {
            let Undo { id, step, .. } = self.undo.pop().expect("undo log longer than the mark's");
            match step {
                UndoStep::Created => {
                    assert_eq!(
                        id as usize + 1,
                        self.series.len(),
                        "undo log removes series {id}, which is not the newest"
                    );
                    let series = self.series.pop().expect("series count checked above");
                    self.unindex(&series.device, &series.measurement);
                }
                UndoStep::Appended {
                    len,
                    sorted,
                    max_time,
                    undo_epoch,
                } => {
                    let series = &mut self.series[id as usize];
                    series.truncate(len, sorted, max_time);
                    series.undo_epoch = undo_epoch;
                }
            }
        }
        self.memory_bytes = mark.memory_bytes;
        self.point_count = mark.point_count;
    }

    /// Kills every mark and empties the undo log. Call it once no rollback can follow (a write
    /// succeeded), so the undo log does not grow with the memtable.
    pub fn release_marks(&mut self) {
        self.memory_bytes -= self.undo.len() * UNDO_ENTRY_BYTES;
        self.undo.clear();
        self.log_id = next_log_id();
        *self.logging.get_mut() = false;
    }

    /// Entries in the undo log: nonzero only after a mark, until [`release_marks`],
    /// [`delete_series`] or [`delete_where`].
    ///
    /// [`release_marks`]: MemTable::release_marks
    /// [`delete_series`]: MemTable::delete_series
    /// [`delete_where`]: MemTable::delete_where
    pub fn undo_entries(&self) -> usize {
        self.undo.len()
    }

    /// The points of a series with a timestamp in `[from, to)`, ascending, one per timestamp:
    /// the value written last. Empty when the series does not exist.
    pub fn query(&self, device: &str, measurement: &str, from: i64, to: i64) -> Vec<(i64, Value)> {
        self.get(device, measurement)
            .map_or_else(Vec::new, |s| s.query(from, to))
    }

    /// The point of a series with the greatest timestamp: the value written last there.
    pub fn last(&self, device: &str, measurement: &str) -> Option<(i64, Value)> {
        self.get(device, measurement)?.last()
    }

    /// The type of a series, if it exists in this memtable.
    pub fn series_type(&self, device: &str, measurement: &str) -> Option<DataType> {
        self.get(device, measurement).map(Series::data_type)
    }

    /// Every series as (device, measurement, type), sorted.
    pub fn series_keys(&self) -> Vec<(String, String, DataType)> {
        let mut keys: Vec<_> = self
            .series
            .iter()
            .map(|s| (s.device.clone(), s.measurement.clone(), s.data_type()))
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The number of series.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Drops a series; returns whether it existed. Kills every mark (see [`Mark`]), whether or
    /// not it existed.
    pub fn delete_series(&mut self, device: &str, measurement: &str) -> bool {
        self.release_marks();
        let Some(id) = self.id(device, measurement) else {
            return false;
        };
        self.remove(id);
        true
    }

    /// Drops every series for which `pred(device, measurement)` holds; returns how many. Kills
    /// every mark (see [`Mark`]), whether or not any matched.
    pub fn delete_where(&mut self, pred: impl Fn(&str, &str) -> bool) -> usize {
        self.release_marks();
        let mut dropped = 0;
        // Descending, so that `remove`'s swap only moves a series already visited.
        for id in (0..self.series.len()).rev() {
            let series = &self.series[id];
            if pred(&series.device, &series.measurement) {
                self.remove(id as u32);
                dropped += 1;
            }
        }
        dropped
    }

    /// Drops the points of one series with `start <= time <= end` (IoTDB's `deleteData`); a
    /// series left with no point is dropped. Returns the points removed (duplicates counted).
    /// Kills every mark (see [`Mark`]), whether or not anything matched.
    pub fn delete_range(&mut self, device: &str, measurement: &str, start: i64, end: i64) -> usize {
        self.release_marks();
        let Some(id) = self.id(device, measurement) else {
            return 0;
        };
        let series = &mut self.series[id as usize];
        let before_len = series.len();
        let before_bytes = series.memory_bytes();
        series.retain_outside(start, end);
        let removed = before_len - series.len();
        let emptied = series.len() == 0;
        self.memory_bytes -= before_bytes - series.memory_bytes();
        self.point_count -= removed;
        if emptied {
            // Subtracts what the series holds now: its empty overhead.
            self.remove(id);
        }
        removed
    }

    /// Estimated heap bytes held: per point its timestamp (8 B) and value (by type; TEXT its
    /// length plus a `String` header), per series a fixed overhead plus its names, plus the undo
    /// log ([`undo_bytes`](MemTable::undo_bytes)). See
    /// [`estimated_point_bytes`](crate::estimated_point_bytes) and
    /// [`SERIES_OVERHEAD_BYTES`](crate::SERIES_OVERHEAD_BYTES). Duplicate timestamps count until
    /// freeze resolves them.
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// The part of [`memory_bytes`](MemTable::memory_bytes) that the undo log holds.
    pub fn undo_bytes(&self) -> usize {
        self.undo.len() * UNDO_ENTRY_BYTES
    }

    /// True once [`memory_bytes`](MemTable::memory_bytes) reaches the flush threshold.
    pub fn should_flush(&self) -> bool {
        self.memory_bytes >= self.config.flush_threshold_bytes
    }

    /// Points appended (duplicate timestamps counted) less those rolled back or deleted.
    pub fn point_count(&self) -> usize {
        self.point_count
    }

    /// True when the memtable holds no series (and so no point).
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// An immutable snapshot for flushing: every series sorted by timestamp with one point per
    /// timestamp. A new memtable takes the partition's writes.
    pub fn freeze(self) -> FrozenMemTable {
        FrozenMemTable::new(self.series, self.point_count)
    }

    fn id(&self, device: &str, measurement: &str) -> Option<u32> {
        self.index.get(device)?.get(measurement).copied()
    }

    fn get(&self, device: &str, measurement: &str) -> Option<&Series> {
        self.id(device, measurement)
            .map(|id| &self.series[id as usize])
    }

    /// Removes series `id`; the last series takes its id. Only while no mark is live: the undo
    /// log refers to series by id.
    fn remove(&mut self, id: u32) {
        assert!(self.undo.is_empty(), "series removed while marks are live");
        let series = self.series.swap_remove(id as usize);
        self.unindex(&series.device, &series.measurement);
        if let Some(moved) = self.series.get(id as usize) {
            *self
                .index
                .get_mut(&moved.device)
                .and_then(|d| d.get_mut(&moved.measurement))
                .expect("every series is indexed") = id;
        }
        self.memory_bytes -= series.memory_bytes();
        self.point_count -= series.len();
    }

    fn unindex(&mut self, device: &str, measurement: &str) {
        let measurements = self.index.get_mut(device).expect("every series is indexed");
        measurements
            .remove(measurement)
            .expect("every series is indexed");
        if measurements.is_empty() {
            self.index.remove(device);
        }
    }
}

/// `Some(first..last + 1)` when `rows` are consecutive ascending indexes (the usual selection:
/// every row of a tablet, or a run of them in one time partition).
fn contiguous_rows(rows: &[u32]) -> Option<Range<usize>> {
    let (&first, &last) = (rows.first()?, rows.last()?);
    let consecutive = rows.windows(2).all(|w| w[0].checked_add(1) == Some(w[1]));
    consecutive.then(|| first as usize..last as usize + 1)
}

#[cfg(test)]
mod tests {
    use common::{DataType, Tablet, Value};

    use super::*;

    fn tablet(device: &str, measurement: &str, from: i64, rows: i64) -> Tablet {
        let mut tablet = Tablet::new(device, &[(measurement, DataType::Double)]);
        for t in from..from + rows {
            tablet.push_row(t, vec![Some(Value::Double(t as f64))]);
        }
        tablet
    }

    fn insert(mt: &mut MemTable, tablet: &Tablet) {
        let rows: Vec<u32> = (0..tablet.row_count() as u32).collect();
        mt.insert_tablet(tablet, &rows).unwrap();
    }

    #[test]
    fn a_successor_reserves_what_each_series_held_plus_a_quarter() {
        let mut mt = MemTable::new(MemTableConfig::default());
        for i in 0..10 {
            insert(&mut mt, &tablet("root.sg.d1", "s1", i * 100, 100));
        }
        insert(&mut mt, &tablet("root.sg.d2", "s1", 0, 7));

        let mut next = mt.successor();
        assert!(next.is_empty());
        assert_eq!(next.memory_bytes(), 0);
        insert(&mut next, &tablet("root.sg.d1", "s1", 5000, 100));
        insert(&mut next, &tablet("root.sg.d3", "s1", 0, 3));
        let d1 = &next.series[next.id("root.sg.d1", "s1").unwrap() as usize];
        assert!(
            d1.timestamps.capacity() >= 1250,
            "{}",
            d1.timestamps.capacity()
        );
        assert_eq!(d1.len(), 100);
        // A series the predecessor did not hold reserves only its first tablet's rows.
        let d3 = &next.series[next.id("root.sg.d3", "s1").unwrap() as usize];
        assert!(d3.timestamps.capacity() < 100);
        // Hints are not contents.
        assert_eq!(next.point_count(), 103);
        assert!(next.id("root.sg.d2", "s1").is_none());
    }

    #[test]
    fn a_range_deletion_drops_only_its_points_and_keeps_the_accounting_exact() {
        let mut mt = MemTable::new(MemTableConfig::default());
        insert(&mut mt, &tablet("root.sg.d1", "s1", 0, 10));
        // Upserts out of order: the series is unsorted, with duplicates.
        insert(&mut mt, &tablet("root.sg.d1", "s1", 3, 2));
        insert(&mut mt, &tablet("root.sg.d2", "s1", 0, 4));
        let d2_bytes = {
            let mut alone = MemTable::new(MemTableConfig::default());
            insert(&mut alone, &tablet("root.sg.d2", "s1", 0, 4));
            alone.memory_bytes()
        };

        assert_eq!(mt.delete_range("root.sg.d1", "s1", 2, 4), 5);
        let times: Vec<i64> = mt
            .query("root.sg.d1", "s1", i64::MIN, i64::MAX)
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        assert_eq!(times, vec![0, 1, 5, 6, 7, 8, 9]);
        assert_eq!(mt.point_count(), 7 + 4);
        assert_eq!(mt.last("root.sg.d1", "s1"), Some((9, Value::Double(9.0))));
        assert_eq!(mt.delete_range("root.sg.d1", "s1", 9, 9), 1);
        assert_eq!(mt.last("root.sg.d1", "s1"), Some((8, Value::Double(8.0))));

        // Emptied: the series is gone, and so are its bytes.
        assert_eq!(mt.delete_range("root.sg.d1", "s1", i64::MIN, i64::MAX), 6);
        assert_eq!(mt.series_type("root.sg.d1", "s1"), None);
        assert_eq!(mt.memory_bytes(), d2_bytes);
        assert_eq!(mt.point_count(), 4);
        assert_eq!(mt.delete_range("root.sg.nope", "s1", 0, 10), 0);
        assert_eq!(mt.delete_range("root.sg.d2", "s1", 10, 20), 0);
        assert_eq!(mt.point_count(), 4);
    }

    #[test]
    fn only_consecutive_ascending_rows_are_contiguous() {
        assert_eq!(contiguous_rows(&[]), None);
        assert_eq!(contiguous_rows(&[4]), Some(4..5));
        assert_eq!(contiguous_rows(&[0, 1, 2, 3]), Some(0..4));
        assert_eq!(contiguous_rows(&[2, 3, 5]), None);
        assert_eq!(contiguous_rows(&[3, 2]), None);
        assert_eq!(contiguous_rows(&[1, 1]), None);
        assert_eq!(
            contiguous_rows(&[u32::MAX - 1, u32::MAX]),
            Some(u32::MAX as usize - 1..u32::MAX as usize + 1)
        );
    }
}
