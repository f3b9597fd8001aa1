//! The last-value cache: each series' newest visible point, as [`DataRegion::last`] computes it,
//! kept so that `SELECT LAST` and lastpoint queries answer without touching memtables or pages.
//!
//! Exactness rests on one rule: the cache changes only under the region's state lock.
//! - A reader fills an entry while it holds the state's read lock, from the state it read: no
//!   apply can run in between.
//! - An insert that wrote a tablet whole (under the write lock) moves each known entry of its
//!   series forward: a point at or after the cached one replaces it (the later write wins a tie,
//!   as in the memtables). A rolled-back or refused insert changes nothing and touches nothing.
//! - A deletion of points, series or a database forgets the entries it may touch; a snapshot or
//!   checkpoint install forgets them all. The next read computes them afresh.
//!
//! Flushes and compactions change where points live, not which are visible, and leave the cache
//! as it is; except that a compaction that dropped expired points forgets the entries whose
//! newest point lies in its time partition (it keeps each series' newest point, `compaction.rs`,
//! but not one a later `deleteData` masks, so what is newest below the cutoff may go). After a
//! restart the cache starts empty. An entry that is absent is unknown; `Some(None)` means known empty.
//!
//! Memory is bounded by `bytes_max`: an entry that would pass it is not kept (the series is read
//! as if uncached), so the bound never costs an answer, only its speed.

use std::collections::HashMap;

use common::{Tablet, Value};
use parking_lot::Mutex;

/// What one entry costs beyond its strings and a text value's bytes: the map slots, the
/// measurement's `String` and the value.
const ENTRY_OVERHEAD: usize = 96;

/// A series' newest point: `None` when the series holds no visible point.
pub(crate) type Newest = Option<(i64, Value)>;

/// The cache: device → measurement → newest point, and the bytes it holds.
pub(crate) struct LastCache {
    inner: Mutex<Entries>,
    bytes_max: usize,
}

#[derive(Default)]
struct Entries {
    devices: HashMap<String, HashMap<String, Newest>>,
    bytes: usize,
}

impl LastCache {
    /// An empty cache holding at most `bytes_max` bytes (0: nothing is ever kept).
    pub(crate) fn new(bytes_max: usize) -> LastCache {
        LastCache {
            inner: Mutex::new(Entries::default()),
            bytes_max,
        }
    }

    /// The cached newest point of a series: `None` when unknown.
    pub(crate) fn get(&self, device: &str, measurement: &str) -> Option<Newest> {
        let inner = self.inner.lock();
        inner.devices.get(device)?.get(measurement).cloned()
    }

    /// Keeps `newest` for a series, read under the state's read lock (see the module comment),
    /// unless it would pass the bound.
    pub(crate) fn fill(&self, device: &str, measurement: &str, newest: &Newest) {
        let cost = entry_bytes(device, measurement, newest);
        let mut inner = self.inner.lock();
        if inner.bytes + cost > self.bytes_max {
            return;
        }
        let measurements = inner.devices.entry(device.to_string()).or_default();
        if measurements
            .insert(measurement.to_string(), newest.clone())
            .is_none()
        {
            inner.bytes += cost;
        } else {
            // A concurrent reader filled the same series from the same state: same value.
            debug_assert_eq!(
                inner.devices[device].get(measurement),
                Some(newest),
                "two reads of one state disagree on {device}.{measurement}'s newest point"
            );
        }
    }

    /// Moves the entries of `tablet`'s series forward, after it was written whole.
    pub(crate) fn note_insert(&self, tablet: &Tablet) {
        let mut inner = self.inner.lock();
        let Entries { devices, bytes } = &mut *inner;
        let Some(measurements) = devices.get_mut(&tablet.device) else {
            return;
        };
        for (column, measurement) in tablet.measurements.iter().enumerate() {
            let Some(entry) = measurements.get_mut(measurement) else {
                continue;
            };
            let Some(row) = newest_row(tablet, column) else {
                continue;
            };
            let time = tablet.timestamps[row];
            if matches!(entry, Some((cached, _)) if *cached > time) {
                continue;
            }
            let newest = Some((time, tablet.columns[column].value(row)));
            let (old, new) = (
                entry_bytes(&tablet.device, measurement, entry),
                entry_bytes(&tablet.device, measurement, &newest),
            );
            if *bytes - old + new > self.bytes_max {
                measurements.remove(measurement);
                *bytes -= old;
                continue;
            }
            *entry = newest;
            *bytes = *bytes - old + new;
        }
        if measurements.is_empty() {
            devices.remove(&tablet.device);
        }
    }

    /// Forgets the entry of every series for which `pred(device, measurement, newest)` holds.
    pub(crate) fn forget_where(&self, pred: impl Fn(&str, &str, &Newest) -> bool) {
        let mut inner = self.inner.lock();
        let Entries { devices, bytes } = &mut *inner;
        devices.retain(|device, measurements| {
            measurements.retain(|measurement, newest| {
                let forget = pred(device, measurement, newest);
                if forget {
                    *bytes -= entry_bytes(device, measurement, newest);
                }
                !forget
            });
            !measurements.is_empty()
        });
    }

    /// Forgets every entry.
    pub(crate) fn clear(&self) {
        *self.inner.lock() = Entries::default();
    }

    /// Bytes held, as counted against the bound.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

/// The row of `tablet`'s newest non-null value in `column`: the greatest timestamp, the last such
/// row on a tie (a later row of a tablet is a later write).
fn newest_row(tablet: &Tablet, column: usize) -> Option<usize> {
    let nulls = tablet.bitmaps[column].as_ref();
    let mut best: Option<usize> = None;
    for (row, &time) in tablet.timestamps.iter().enumerate() {
        if nulls.is_some_and(|n| n.get(row)) {
            continue;
        }
        if best.is_none_or(|b| tablet.timestamps[b] <= time) {
            best = Some(row);
        }
    }
    best
}

fn entry_bytes(device: &str, measurement: &str, newest: &Newest) -> usize {
    let value = match newest {
        Some((_, Value::Text(s) | Value::String(s))) => s.len(),
        Some((_, Value::Blob(b))) => b.len(),
        _ => 0,
    };
    // The device's key is counted with each of its entries: an upper bound, kept simple.
    device.len() + measurement.len() + value + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use common::DataType;

    use super::*;

    fn tablet(rows: &[(i64, Option<f64>)]) -> Tablet {
        let mut t = Tablet::new("root.sg.d1", &[("s1", DataType::Double)]);
        for (time, value) in rows {
            t.push_row(*time, vec![value.map(Value::Double)]);
        }
        t
    }

    #[test]
    fn an_insert_moves_a_known_entry_forward_and_a_tie_goes_to_the_later_row() {
        let cache = LastCache::new(1 << 20);
        cache.fill("root.sg.d1", "s1", &Some((10, Value::Double(1.0))));
        cache.note_insert(&tablet(&[(5, Some(9.0))]));
        assert_eq!(
            cache.get("root.sg.d1", "s1"),
            Some(Some((10, Value::Double(1.0))))
        );
        cache.note_insert(&tablet(&[(12, Some(2.0)), (12, Some(3.0)), (13, None)]));
        assert_eq!(
            cache.get("root.sg.d1", "s1"),
            Some(Some((12, Value::Double(3.0))))
        );
        cache.note_insert(&tablet(&[(12, Some(4.0))]));
        assert_eq!(
            cache.get("root.sg.d1", "s1"),
            Some(Some((12, Value::Double(4.0))))
        );
    }

    #[test]
    fn an_unknown_series_stays_unknown_and_a_known_empty_one_learns_its_point() {
        let cache = LastCache::new(1 << 20);
        cache.note_insert(&tablet(&[(5, Some(9.0))]));
        assert_eq!(cache.get("root.sg.d1", "s1"), None);
        cache.fill("root.sg.d1", "s1", &None);
        cache.note_insert(&tablet(&[(5, None)]));
        assert_eq!(cache.get("root.sg.d1", "s1"), Some(None));
        cache.note_insert(&tablet(&[(5, Some(9.0))]));
        assert_eq!(
            cache.get("root.sg.d1", "s1"),
            Some(Some((5, Value::Double(9.0))))
        );
    }

    #[test]
    fn the_bound_keeps_entries_out_and_forgetting_gives_their_bytes_back() {
        let one = entry_bytes("root.sg.d1", "s1", &None);
        let cache = LastCache::new(2 * one);
        cache.fill("root.sg.d1", "s1", &None);
        cache.fill("root.sg.d1", "s2", &None);
        cache.fill("root.sg.d1", "s3", &None);
        assert_eq!(cache.get("root.sg.d1", "s3"), None);
        assert_eq!(cache.bytes(), 2 * one);
        cache.forget_where(|_, m, _| m == "s1");
        assert_eq!(cache.get("root.sg.d1", "s1"), None);
        assert_eq!(cache.bytes(), one);
        cache.clear();
        assert_eq!(cache.bytes(), 0);
        assert_eq!(cache.get("root.sg.d1", "s2"), None);
    }

    #[test]
    fn a_text_value_too_large_for_the_bound_drops_its_entry() {
        let small = entry_bytes("root.sg.d1", "s1", &None);
        let cache = LastCache::new(small + 8);
        cache.fill("root.sg.d1", "s1", &None);
        let mut t = Tablet::new("root.sg.d1", &[("s1", DataType::Text)]);
        t.push_row(1, vec![Some(Value::Text("x".repeat(64)))]);
        cache.note_insert(&t);
        assert_eq!(cache.get("root.sg.d1", "s1"), None);
        assert_eq!(cache.bytes(), 0);
    }
}
