//! What reads answer inside a node: the points of one series as two columns, timestamps and
//! values of the series' type, in time order ([`SeriesBatch`]), named by a [`SeriesPath`].
//!
//! The region host answers these, the coordinator merges them, and only the services turn them
//! into wire values: a query of a million points is two vectors, not a million enum values.

use crate::{Column, DataType, Value};

/// A series by its device and measurement (or an alias of the measurement, when asked).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesPath {
    /// The device path, `root.` included.
    pub device: String,
    /// The measurement (or its alias).
    pub measurement: String,
}

impl SeriesPath {
    /// A path from its two parts.
    pub fn new(device: impl Into<String>, measurement: impl Into<String>) -> SeriesPath {
        SeriesPath {
            device: device.into(),
            measurement: measurement.into(),
        }
    }
}

impl std::fmt::Display for SeriesPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.device, self.measurement)
    }
}

/// Points of one series in strictly increasing time order: `timestamps[i]` holds
/// `values[i]`. No null rows: a series' point always has a value.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesBatch {
    timestamps: Vec<i64>,
    values: Column,
}

impl SeriesBatch {
    /// No points, of `data_type`.
    pub fn new(data_type: DataType) -> SeriesBatch {
        SeriesBatch {
            timestamps: Vec::new(),
            values: Column::with_capacity(data_type, 0),
        }
    }

    /// The points of `points` (in strictly increasing time order, every value of `data_type`).
    /// Panics on a value of another type; out-of-order times are a bug (debug builds panic).
    pub fn from_points(
        data_type: DataType,
        points: impl IntoIterator<Item = (i64, Value)>,
    ) -> SeriesBatch {
        let mut batch = SeriesBatch::new(data_type);
        for (t, v) in points {
            batch.push(t, v);
        }
        batch
    }

    /// A batch from its two columns. `None` when their lengths differ or the times are not
    /// strictly increasing (a peer's malformed answer).
    pub fn from_columns(timestamps: Vec<i64>, values: Column) -> Option<SeriesBatch> {
        let ordered = timestamps.windows(2).all(|w| w[0] < w[1]);
        (ordered && timestamps.len() == values.len()).then_some(SeriesBatch { timestamps, values })
    }

    /// Appends a point newer than every point held. Panics when the value's type differs.
    pub fn push(&mut self, time: i64, value: Value) {
        debug_assert!(
            self.timestamps.last().is_none_or(|last| *last < time),
            "points in strictly increasing time order"
        );
        let (expected, got) = (self.values.data_type(), value.data_type());
        assert!(
            self.values.push(value),
            "a {got} value in a {expected} series"
        );
        self.timestamps.push(time);
    }

    /// The series' type.
    pub fn data_type(&self) -> DataType {
        self.values.data_type()
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.timestamps.len()
    }

    /// True when there is no point.
    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// The timestamps, increasing.
    pub fn timestamps(&self) -> &[i64] {
        &self.timestamps
    }

    /// The values, one per timestamp.
    pub fn values(&self) -> &Column {
        &self.values
    }

    /// The two columns.
    pub fn into_columns(self) -> (Vec<i64>, Column) {
        (self.timestamps, self.values)
    }

    /// The point at `row`. Panics when out of range.
    pub fn point(&self, row: usize) -> (i64, Value) {
        (self.timestamps[row], self.values.value(row))
    }

    /// The newest point.
    pub fn last(&self) -> Option<(i64, Value)> {
        self.len().checked_sub(1).map(|row| self.point(row))
    }

    /// The points in time order.
    pub fn points(&self) -> impl DoubleEndedIterator<Item = (i64, Value)> + '_ {
        (0..self.len()).map(|row| self.point(row))
    }

    /// The first `rows` points.
    pub fn head(&self, rows: usize) -> SeriesBatch {
        let rows = rows.min(self.len());
        SeriesBatch {
            timestamps: self.timestamps[..rows].to_vec(),
            values: self.values.slice(0..rows),
        }
    }
}

/// One batch of the points of `batches`, all of one series and type, in time order. Batches
/// that do not interleave (one per region, each holding its own time partitions) are joined
/// column by column; interleaving ones are merged point by point, a later batch's point winning
/// a timestamp held twice. `None` for no batch.
pub fn merge(mut batches: Vec<SeriesBatch>) -> Option<SeriesBatch> {
    batches.retain(|b| !b.is_empty());
    if batches.len() <= 1 {
        return batches.pop();
    }
    let data_type = batches[0].data_type();
    assert!(
        batches.iter().all(|b| b.data_type() == data_type),
        "batches of one series have one type"
    );
    let mut ranges: Vec<(i64, i64, usize)> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| (b.timestamps[0], b.timestamps[b.len() - 1], i))
        .collect();
    ranges.sort_unstable();
    let disjoint = ranges.windows(2).all(|w| w[0].1 < w[1].0);
    if !disjoint {
        let mut points = std::collections::BTreeMap::new();
        for b in &batches {
            points.extend(b.points());
        }
        return Some(SeriesBatch::from_points(data_type, points));
    }
    let rows = batches.iter().map(SeriesBatch::len).sum();
    let mut joined = SeriesBatch {
        timestamps: Vec::with_capacity(rows),
        values: Column::with_capacity(data_type, rows),
    };
    for (_, _, i) in ranges {
        let b = &batches[i];
        joined.timestamps.extend_from_slice(&b.timestamps);
        let same_type = joined.values.extend_from(&b.values);
        debug_assert!(same_type, "checked above");
    }
    debug_assert!(joined.timestamps.windows(2).all(|w| w[0] < w[1]));
    Some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_keeps_points_as_columns_in_time_order() {
        let mut b = SeriesBatch::new(DataType::Double);
        b.push(1, Value::Double(0.5));
        b.push(3, Value::Double(1.5));
        assert_eq!(b.len(), 2);
        assert_eq!(b.timestamps(), &[1, 3]);
        assert_eq!(b.values(), &Column::Double(vec![0.5, 1.5]));
        assert_eq!(b.last(), Some((3, Value::Double(1.5))));
        assert_eq!(
            b.head(1).points().collect::<Vec<_>>(),
            vec![(1, Value::Double(0.5))]
        );
        assert_eq!(b.head(9), b);
    }

    #[test]
    fn a_value_of_another_type_is_a_bug() {
        let pushed = std::panic::catch_unwind(|| {
            SeriesBatch::new(DataType::Double).push(1, Value::Int64(1));
        });
        let panic = pushed.expect_err("a value of another type panics");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert_eq!(message, "a INT64 value in a DOUBLE series");
    }

    #[test]
    fn merging_joins_disjoint_batches_and_interleaves_the_rest() {
        let b = |ts: &[i64], base: i64| {
            SeriesBatch::from_points(
                DataType::Int64,
                ts.iter().map(|t| (*t, Value::Int64(base + t))),
            )
        };
        assert_eq!(merge(Vec::new()), None);
        let joined = merge(vec![
            b(&[5, 6], 0),
            b(&[1, 2], 0),
            SeriesBatch::new(DataType::Int64),
        ]);
        assert_eq!(joined.unwrap().timestamps(), &[1, 2, 5, 6]);
        // Region A holds time slots 1 and 3, region B slot 2: their ranges interleave.
        let merged = merge(vec![b(&[1, 7], 0), b(&[4, 7], 100)]).unwrap();
        assert_eq!(merged.timestamps(), &[1, 4, 7]);
        assert_eq!(
            merged.last(),
            Some((7, Value::Int64(107))),
            "the later batch wins"
        );
    }

    #[test]
    fn malformed_columns_are_refused() {
        assert!(SeriesBatch::from_columns(vec![1, 2], Column::Int64(vec![1])).is_none());
        assert!(SeriesBatch::from_columns(vec![2, 1], Column::Int64(vec![1, 2])).is_none());
        assert!(SeriesBatch::from_columns(vec![1, 1], Column::Int64(vec![1, 2])).is_none());
        let ok = SeriesBatch::from_columns(vec![1, 2], Column::Int64(vec![5, 6])).unwrap();
        assert_eq!(ok.point(1), (2, Value::Int64(6)));
    }
}
