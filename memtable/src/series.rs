//! One series' buffer: an append-only (timestamps, values) column pair in insertion order, after
//! IoTDB's TVList. Upserts are resolved when read or frozen, by a stable sort that keeps the last
//! value written per timestamp; a series whose appends arrived in strictly ascending order (the
//! common case) skips that sort.

use std::mem;
use std::ops::Range;

use common::{Bitmap, Column, DataType, Value};

/// Estimated heap bytes of one series besides its points: the series record, its index entry and
/// the vectors' headers. The device and measurement names are added on top.
pub const SERIES_OVERHEAD_BYTES: usize = 160;

/// Estimated heap bytes of one TEXT, STRING or BLOB value besides its bytes: the `String` (or
/// `Vec<u8>`) header.
pub const TEXT_VALUE_OVERHEAD_BYTES: usize = mem::size_of::<String>();

/// Bytes of one timestamp.
pub const TIMESTAMP_BYTES: usize = mem::size_of::<i64>();

/// Estimated heap bytes of one point of `value`: its timestamp plus its value (BOOLEAN 1, INT32
/// and FLOAT and DATE 4, INT64, DOUBLE and TIMESTAMP 8, TEXT, STRING and BLOB its length plus
/// [`TEXT_VALUE_OVERHEAD_BYTES`]). This is
/// what [`MemTable::memory_bytes`](crate::MemTable::memory_bytes) charges per point written.
pub fn estimated_point_bytes(value: &Value) -> usize {
    TIMESTAMP_BYTES
        + match value {
            Value::Boolean(v) => v.bytes(),
            Value::Int32(v) | Value::Date(v) => v.bytes(),
            Value::Int64(v) | Value::Timestamp(v) => v.bytes(),
            Value::Float(v) => v.bytes(),
            Value::Double(v) => v.bytes(),
            Value::Text(v) | Value::String(v) => v.bytes(),
            Value::Blob(v) => v.bytes(),
        }
}

/// Estimated heap bytes of a series named `device`.`measurement` holding no points.
pub(crate) fn empty_series_bytes(device: &str, measurement: &str) -> usize {
    SERIES_OVERHEAD_BYTES + device.len() + measurement.len()
}

/// A value type a column holds, with its memory estimate.
trait Element: Clone + Default {
    /// Estimated heap bytes of this value.
    fn bytes(&self) -> usize;

    /// Estimated heap bytes of `values`.
    fn total_bytes(values: &[Self]) -> usize {
        values.iter().map(Element::bytes).sum()
    }
}

macro_rules! fixed_width_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            #[inline]
            fn bytes(&self) -> usize {
                mem::size_of::<$t>()
            }

            #[inline]
            fn total_bytes(values: &[Self]) -> usize {
                values.len() * mem::size_of::<$t>()
            }
        }
    )*};
}
fixed_width_element!(bool, i32, i64, f32, f64);

impl Element for String {
    #[inline]
    fn bytes(&self) -> usize {
        self.len() + TEXT_VALUE_OVERHEAD_BYTES
    }
}

impl Element for Vec<u8> {
    #[inline]
    fn bytes(&self) -> usize {
        self.len() + TEXT_VALUE_OVERHEAD_BYTES
    }
}

/// A series in a live memtable.
#[derive(Debug)]
pub(crate) struct Series {
    pub(crate) device: String,
    pub(crate) measurement: String,
    /// Timestamps in insertion order.
    pub(crate) timestamps: Vec<i64>,
    /// Values in insertion order; `values.len() == timestamps.len()`.
    pub(crate) values: Column,
    /// True while `timestamps` is strictly ascending, so reads and freeze need no sort or dedup.
    /// A function of `timestamps` alone.
    pub(crate) sorted: bool,
    /// The greatest timestamp held (`i64::MIN` while empty). A function of `timestamps` alone.
    pub(crate) max_time: i64,
    /// The id of the newest mark whose undo log already holds this series' state as it was when
    /// first touched after that mark (0: none). See `MemTable::touch`.
    pub(crate) undo_epoch: u64,
}

impl Series {
    pub(crate) fn new(
        device: &str,
        measurement: &str,
        data_type: DataType,
        capacity: usize,
        undo_epoch: u64,
    ) -> Series {
        Series {
            device: device.to_string(),
            measurement: measurement.to_string(),
            timestamps: Vec::with_capacity(capacity),
            values: Column::with_capacity(data_type, capacity),
            sorted: true,
            max_time: i64::MIN,
            undo_epoch,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.timestamps.len()
    }

    pub(crate) fn data_type(&self) -> DataType {
        self.values.data_type()
    }

    /// Appends the non-null cells of `column` at `rows`; returns (points appended, estimated
    /// bytes they hold). Panics when `column` is of another type than the series: the caller has
    /// checked the type against the tablet's declared one, so this means the tablet was not
    /// validated.
    pub(crate) fn append(
        &mut self,
        tablet_timestamps: &[i64],
        column: &Column,
        nulls: Option<&Bitmap>,
        rows: &[u32],
        contiguous: Option<Range<usize>>,
    ) -> (usize, usize) {
        let mut run = AppendRun {
            timestamps: &mut self.timestamps,
            sorted: self.sorted,
            max_time: self.max_time,
            tablet_timestamps,
            nulls,
            rows,
            contiguous,
        };
        let result = match (&mut self.values, column) {
            (Column::Boolean(out), Column::Boolean(input)) => run.append(out, input),
            (Column::Int32(out), Column::Int32(input)) => run.append(out, input),
            (Column::Int64(out), Column::Int64(input)) => run.append(out, input),
            (Column::Float(out), Column::Float(input)) => run.append(out, input),
            (Column::Double(out), Column::Double(input)) => run.append(out, input),
            (Column::Text(out), Column::Text(input)) => run.append(out, input),
            (Column::Timestamp(out), Column::Timestamp(input)) => run.append(out, input),
            (Column::Date(out), Column::Date(input)) => run.append(out, input),
            (Column::Blob(out), Column::Blob(input)) => run.append(out, input),
            (Column::String(out), Column::String(input)) => run.append(out, input),
            (out, input) => panic!(
                "column of type {} appended to series {}.{} of type {}: the tablet's columns \
                 disagree with its declared types (was Tablet::validate run?)",
                input.data_type(),
                self.device,
                self.measurement,
                out.data_type()
            ),
        };
        self.sorted = run.sorted;
        self.max_time = run.max_time;
        debug_assert_eq!(self.timestamps.len(), self.values.len());
        result
    }

    /// Drops every point appended after the series held `len` points, and restores the derived
    /// state recorded with that length.
    pub(crate) fn truncate(&mut self, len: usize, sorted: bool, max_time: i64) {
        assert!(
            len <= self.len(),
            "undo log truncates series {}.{} to {len} points but it holds only {}",
            self.device,
            self.measurement,
            self.len()
        );
        self.timestamps.truncate(len);
        match &mut self.values {
            Column::Boolean(v) => v.truncate(len),
            Column::Int32(v) | Column::Date(v) => v.truncate(len),
            Column::Int64(v) | Column::Timestamp(v) => v.truncate(len),
            Column::Float(v) => v.truncate(len),
            Column::Double(v) => v.truncate(len),
            Column::Text(v) | Column::String(v) => v.truncate(len),
            Column::Blob(v) => v.truncate(len),
        }
        self.sorted = sorted;
        self.max_time = max_time;
    }

    /// Drops the points with `start <= time <= end`, keeping the others in insertion order, and
    /// recomputes the derived state (a function of `timestamps` alone).
    pub(crate) fn retain_outside(&mut self, start: i64, end: i64) {
        let dropped = common::retain_points(&mut self.timestamps, &mut self.values, |t| {
            !(start..=end).contains(&t)
        });
        if !dropped {
            return;
        }
        self.sorted = self.timestamps.windows(2).all(|w| w[0] < w[1]);
        self.max_time = self.timestamps.iter().copied().max().unwrap_or(i64::MIN);
    }

    /// Estimated heap bytes held, consistent with what `append` reported.
    pub(crate) fn memory_bytes(&self) -> usize {
        empty_series_bytes(&self.device, &self.measurement)
            + points_bytes(&self.timestamps, &self.values)
    }

    pub(crate) fn query(&self, from: i64, to: i64) -> Vec<(i64, Value)> {
        if self.sorted {
            query_sorted(&self.timestamps, &self.values, from, to)
        } else {
            query_unsorted(&self.timestamps, &self.values, from, to)
        }
    }

    pub(crate) fn last(&self) -> Option<(i64, Value)> {
        // The last occurrence of the greatest timestamp is the value that wins; in a sorted
        // series it is the last point.
        let index = self.timestamps.iter().rposition(|&t| t == self.max_time)?;
        Some((self.max_time, self.values.value(index)))
    }

    /// Sorts by timestamp and keeps the last value written per timestamp. Returns the name,
    /// strictly ascending timestamps and their values.
    pub(crate) fn into_sorted(self) -> (String, String, Vec<i64>, Column) {
        let Series {
            device,
            measurement,
            timestamps,
            mut values,
            sorted,
            ..
        } = self;
        if sorted {
            return (device, measurement, timestamps, values);
        }
        let winners = sort_dedup_last(&timestamps, 0..timestamps.len());
        let timestamps = winners.iter().map(|&i| timestamps[i]).collect();
        let values = match &mut values {
            Column::Boolean(v) => Column::Boolean(take_at(v, &winners)),
            Column::Int32(v) => Column::Int32(take_at(v, &winners)),
            Column::Int64(v) => Column::Int64(take_at(v, &winners)),
            Column::Float(v) => Column::Float(take_at(v, &winners)),
            Column::Double(v) => Column::Double(take_at(v, &winners)),
            Column::Text(v) => Column::Text(take_at(v, &winners)),
            Column::Timestamp(v) => Column::Timestamp(take_at(v, &winners)),
            Column::Date(v) => Column::Date(take_at(v, &winners)),
            Column::Blob(v) => Column::Blob(take_at(v, &winners)),
            Column::String(v) => Column::String(take_at(v, &winners)),
        };
        (device, measurement, timestamps, values)
    }
}

/// One column's append: the state shared by every value type.
struct AppendRun<'a> {
    timestamps: &'a mut Vec<i64>,
    sorted: bool,
    max_time: i64,
    tablet_timestamps: &'a [i64],
    nulls: Option<&'a Bitmap>,
    rows: &'a [u32],
    /// `Some(range)` when `rows` is exactly `range` in order (a tablet whose rows all fall in
    /// one time partition): the cells are then copied as slices, not gathered row by row.
    contiguous: Option<Range<usize>>,
}

impl AppendRun<'_> {
    /// The hot path: without nulls, two `extend`s over exact-size iterators (one capacity check
    /// each, no lookup, no allocation besides a TEXT value's own), then one pass over the new
    /// timestamps for the sorted flag and the greatest timestamp.
    #[inline]
    fn append<T: Element>(&mut self, out: &mut Vec<T>, input: &[T]) -> (usize, usize) {
        let start = out.len();
        debug_assert_eq!(start, self.timestamps.len());
        let tablet_timestamps = self.tablet_timestamps;
        match (self.nulls, self.contiguous.clone()) {
            (None, Some(range)) => {
                self.timestamps
                    .extend_from_slice(&tablet_timestamps[range.clone()]);
                out.extend_from_slice(&input[range]);
            }
            (None, None) => {
                self.timestamps
                    .extend(self.rows.iter().map(|&row| tablet_timestamps[row as usize]));
                out.extend(self.rows.iter().map(|&row| input[row as usize].clone()));
            }
            (Some(nulls), _) => {
                self.timestamps.reserve(self.rows.len());
                out.reserve(self.rows.len());
                for &row in self.rows {
                    let row = row as usize;
                    if !nulls.get(row) {
                        self.timestamps.push(tablet_timestamps[row]);
                        out.push(input[row].clone());
                    }
                }
            }
        }
        let appended = &self.timestamps[start..];
        let Some(&last) = appended.last() else {
            return (0, 0);
        };
        // Once unsorted, a series stays unsorted until rolled back; skip the order check then.
        self.sorted =
            self.sorted && appended[0] > self.max_time && appended.windows(2).all(|w| w[0] < w[1]);
        let appended_max = if self.sorted {
            last
        } else {
            appended.iter().copied().max().unwrap_or(last)
        };
        self.max_time = self.max_time.max(appended_max);
        let points = appended.len();
        (
            points,
            points * TIMESTAMP_BYTES + T::total_bytes(&out[start..]),
        )
    }
}

/// Estimated bytes of the points in (`timestamps`, `values`).
pub(crate) fn points_bytes(timestamps: &[i64], values: &Column) -> usize {
    let value_bytes = match values {
        Column::Boolean(v) => Element::total_bytes(v),
        Column::Int32(v) | Column::Date(v) => Element::total_bytes(v),
        Column::Int64(v) | Column::Timestamp(v) => Element::total_bytes(v),
        Column::Float(v) => Element::total_bytes(v),
        Column::Double(v) => Element::total_bytes(v),
        Column::Text(v) | Column::String(v) => Element::total_bytes(v),
        Column::Blob(v) => Element::total_bytes(v),
    };
    timestamps.len() * TIMESTAMP_BYTES + value_bytes
}

/// The points of a strictly ascending series with a timestamp in `[from, to)`.
pub(crate) fn query_sorted(
    timestamps: &[i64],
    values: &Column,
    from: i64,
    to: i64,
) -> Vec<(i64, Value)> {
    if from >= to {
        return Vec::new();
    }
    let start = timestamps.partition_point(|&t| t < from);
    let end = timestamps.partition_point(|&t| t < to);
    (start..end)
        .map(|i| (timestamps[i], values.value(i)))
        .collect()
}

fn query_unsorted(timestamps: &[i64], values: &Column, from: i64, to: i64) -> Vec<(i64, Value)> {
    if from >= to {
        return Vec::new();
    }
    let in_range = (0..timestamps.len()).filter(|&i| (from..to).contains(&timestamps[i]));
    sort_dedup_last(timestamps, in_range)
        .into_iter()
        .map(|i| (timestamps[i], values.value(i)))
        .collect()
}

/// The indexes among `indexes` (ascending) that win: sorted by timestamp, and for each timestamp
/// the last index written.
fn sort_dedup_last(timestamps: &[i64], indexes: impl Iterator<Item = usize>) -> Vec<usize> {
    // (timestamp, index) pairs are distinct, so an unstable sort orders them exactly as a stable
    // sort by timestamp would: by insertion order within a timestamp.
    let mut keyed: Vec<(i64, usize)> = indexes.map(|i| (timestamps[i], i)).collect();
    keyed.sort_unstable();
    let mut winners: Vec<usize> = Vec::with_capacity(keyed.len());
    for (k, &(t, i)) in keyed.iter().enumerate() {
        match keyed.get(k + 1) {
            Some(&(next, _)) if next == t => {}
            _ => winners.push(i),
        }
    }
    winners
}

/// Moves the values at `indexes` out of `values`, in order. Each index appears at most once.
fn take_at<T: Default>(values: &mut [T], indexes: &[usize]) -> Vec<T> {
    indexes.iter().map(|&i| mem::take(&mut values[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_dedup_keeps_the_last_write_per_timestamp() {
        let timestamps = [5, 1, 5, 3, 1, 9];
        assert_eq!(sort_dedup_last(&timestamps, 0..6), vec![4, 3, 2, 5]);
        assert_eq!(
            sort_dedup_last(&timestamps, [0, 1, 3].into_iter()),
            vec![1, 3, 0]
        );
        assert!(sort_dedup_last(&timestamps, std::iter::empty()).is_empty());
    }

    #[test]
    fn point_bytes_follow_the_value_width() {
        assert_eq!(estimated_point_bytes(&Value::Boolean(true)), 9);
        assert_eq!(estimated_point_bytes(&Value::Int32(1)), 12);
        assert_eq!(estimated_point_bytes(&Value::Float(1.0)), 12);
        assert_eq!(estimated_point_bytes(&Value::Int64(1)), 16);
        assert_eq!(estimated_point_bytes(&Value::Double(1.0)), 16);
        assert_eq!(
            estimated_point_bytes(&Value::Text("abc".into())),
            8 + 3 + TEXT_VALUE_OVERHEAD_BYTES
        );
    }
}
