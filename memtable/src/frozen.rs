//! The frozen memtable: an immutable, sorted and deduplicated snapshot for flushing.

use common::{Column, DataType, Value};

use crate::series::{empty_series_bytes, points_bytes, query_sorted, Series};

/// One series of a [`FrozenMemTable`], as the flush writes it.
#[derive(Clone, Copy, Debug)]
pub struct SeriesData<'a> {
    /// Device path, e.g. `root.sg.d1`.
    pub device: &'a str,
    /// Measurement name, e.g. `s1`.
    pub measurement: &'a str,
    /// The values' type.
    pub data_type: DataType,
    /// Strictly ascending: sorted, one point per timestamp (the value written last). Never empty.
    pub timestamps: &'a [i64],
    /// One value per timestamp: `values.len() == timestamps.len()`.
    pub values: &'a Column,
}

#[derive(Debug)]
struct FrozenSeries {
    device: String,
    measurement: String,
    timestamps: Vec<i64>,
    values: Column,
}

impl FrozenSeries {
    fn data(&self) -> SeriesData<'_> {
        SeriesData {
            device: &self.device,
            measurement: &self.measurement,
            data_type: self.values.data_type(),
            timestamps: &self.timestamps,
            values: &self.values,
        }
    }
}

/// An immutable memtable, made by [`MemTable::freeze`](crate::MemTable::freeze): every series
/// sorted by timestamp with one point per timestamp, the series sorted by (device,
/// measurement). `Send` and `Sync`: readers share it while the flush writes it out.
#[derive(Debug)]
pub struct FrozenMemTable {
    /// Sorted by (device, measurement).
    series: Vec<FrozenSeries>,
    memory_bytes: usize,
    point_count: usize,
    distinct_point_count: usize,
}

impl FrozenMemTable {
    /// Sorts and deduplicates every series once. `point_count` is the memtable's.
    pub(crate) fn new(series: Vec<Series>, point_count: usize) -> FrozenMemTable {
        let mut frozen: Vec<FrozenSeries> = series
            .into_iter()
            .map(|s| {
                let (device, measurement, timestamps, values) = s.into_sorted();
                debug_assert!(timestamps.windows(2).all(|w| w[0] < w[1]));
                debug_assert_eq!(timestamps.len(), values.len());
                FrozenSeries {
                    device,
                    measurement,
                    timestamps,
                    values,
                }
            })
            .collect();
        frozen
            .sort_unstable_by(|a, b| (&a.device, &a.measurement).cmp(&(&b.device, &b.measurement)));
        let memory_bytes = frozen
            .iter()
            .map(|s| {
                empty_series_bytes(&s.device, &s.measurement)
                    + points_bytes(&s.timestamps, &s.values)
            })
            .sum();
        let distinct_point_count = frozen.iter().map(|s| s.timestamps.len()).sum();
        FrozenMemTable {
            series: frozen,
            memory_bytes,
            point_count,
            distinct_point_count,
        }
    }

    fn get(&self, device: &str, measurement: &str) -> Option<&FrozenSeries> {
        self.series
            .binary_search_by(|s| {
                (s.device.as_str(), s.measurement.as_str()).cmp(&(device, measurement))
            })
            .ok()
            .map(|i| &self.series[i])
    }

    /// The points of a series with a timestamp in `[from, to)`, ascending. Empty when the series
    /// does not exist.
    pub fn query(&self, device: &str, measurement: &str, from: i64, to: i64) -> Vec<(i64, Value)> {
        self.get(device, measurement).map_or_else(Vec::new, |s| {
            query_sorted(&s.timestamps, &s.values, from, to)
        })
    }

    /// The point of a series with the greatest timestamp.
    pub fn last(&self, device: &str, measurement: &str) -> Option<(i64, Value)> {
        let s = self.get(device, measurement)?;
        let i = s.timestamps.len().checked_sub(1)?;
        Some((s.timestamps[i], s.values.value(i)))
    }

    /// The type of a series, if it exists.
    pub fn series_type(&self, device: &str, measurement: &str) -> Option<DataType> {
        self.get(device, measurement).map(|s| s.values.data_type())
    }

    /// Every series as (device, measurement, type), sorted.
    pub fn series_keys(&self) -> Vec<(String, String, DataType)> {
        self.series
            .iter()
            .map(|s| {
                (
                    s.device.clone(),
                    s.measurement.clone(),
                    s.values.data_type(),
                )
            })
            .collect()
    }

    /// Every series, sorted by (device, measurement).
    pub fn series(&self) -> impl Iterator<Item = SeriesData<'_>> {
        self.series.iter().map(FrozenSeries::data)
    }

    /// The number of series.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Estimated heap bytes held, by the rules of
    /// [`MemTable::memory_bytes`](crate::MemTable::memory_bytes). Duplicate timestamps are
    /// resolved and the undo log is gone, so this may be less than the memtable's figure at
    /// freeze; a caller that charged the memtable's figure should release that one.
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// The memtable's [`point_count`](crate::MemTable::point_count) at freeze: points written,
    /// duplicate timestamps counted.
    pub fn point_count(&self) -> usize {
        self.point_count
    }

    /// Points held after deduplication: the sum of the series' lengths.
    pub fn distinct_point_count(&self) -> usize {
        self.distinct_point_count
    }

    /// True when it holds no series.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}
