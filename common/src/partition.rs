//! Partition math (design §2): series slots by BKDR hash of the device path, time slots by floor
//! division from an origin. Every node must compute the same numbers, so these functions are the
//! only place the formulas live.

use std::collections::BTreeSet;

/// Most time slots one FetchPartitions request may name (the ConfigNode refuses a larger one
/// with 700). A DataNode keeps its per-tablet cap at or below it and refuses a write request
/// whose tablets together span more (series slot, time slot) partitions, so no write needs a
/// partition request the ConfigNode would refuse.
pub const FETCH_PARTITIONS_SLOTS_MAX: usize = 100_000;

/// Cluster-wide partitioning parameters, handed out by the ConfigNode at registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionConfig {
    /// Number of series slots (`series_slot_num`, default 1000).
    pub series_slot_num: u32,
    /// Width of a time partition in milliseconds (`time_partition_interval_ms`, default 604800000).
    pub time_partition_interval_ms: i64,
    /// Start of time slot 0, in milliseconds since the epoch (default 0).
    pub time_partition_origin_ms: i64,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            series_slot_num: 1000,
            time_partition_interval_ms: 604_800_000,
            time_partition_origin_ms: 0,
        }
    }
}

impl PartitionConfig {
    /// The time slot of a timestamp.
    pub fn time_slot(&self, timestamp_ms: i64) -> i64 {
        time_slot(
            timestamp_ms,
            self.time_partition_origin_ms,
            self.time_partition_interval_ms,
        )
    }

    /// The series slot of a device path.
    pub fn series_slot(&self, device: &str) -> u32 {
        series_slot(device, self.series_slot_num)
    }

    /// The distinct time slots of `timestamps`, or `None` as soon as there are more than `max`:
    /// the set never holds more than `max + 1` slots, whatever the number of rows.
    pub fn time_slots_at_most(&self, timestamps: &[i64], max: usize) -> Option<BTreeSet<i64>> {
        let mut slots = BTreeSet::new();
        let mut previous = None;
        for &t in timestamps {
            let slot = self.time_slot(t);
            // Rows mostly come in time order: a run of rows in one slot costs no set lookup.
            if previous == Some(slot) {
                continue;
            }
            previous = Some(slot);
            if slots.insert(slot) && slots.len() > max {
                return None;
            }
        }
        debug_assert!(slots.len() <= max);
        Some(slots)
    }
}

/// `floor((t − origin) / interval)`; correct for timestamps before the origin too.
pub fn time_slot(timestamp_ms: i64, origin_ms: i64, interval_ms: i64) -> i64 {
    assert!(
        interval_ms > 0,
        "time partition interval {interval_ms} must be positive"
    );
    // i128 so that `t - origin` cannot overflow for any pair of i64 values.
    let delta = timestamp_ms as i128 - origin_ms as i128;
    delta.div_euclid(interval_ms as i128) as i64
}

/// BKDR hash (seed 131, as IoTDB) of the device path, modulo the slot count.
pub fn series_slot(device: &str, series_slot_num: u32) -> u32 {
    assert!(series_slot_num > 0, "series_slot_num must be positive");
    let mut hash: u32 = 0;
    for byte in device.bytes() {
        hash = hash.wrapping_mul(131).wrapping_add(byte as u32);
    }
    (hash & 0x7fff_ffff) % series_slot_num
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn time_slot_floors_towards_negative_infinity() {
        assert_eq!(time_slot(0, 0, 10), 0);
        assert_eq!(time_slot(9, 0, 10), 0);
        assert_eq!(time_slot(10, 0, 10), 1);
        assert_eq!(time_slot(-1, 0, 10), -1);
        assert_eq!(time_slot(-10, 0, 10), -1);
        assert_eq!(time_slot(-11, 0, 10), -2);
        assert_eq!(time_slot(5, 5, 10), 0);
        assert_eq!(time_slot(i64::MIN, 0, 1), i64::MIN);
        assert_eq!(time_slot(i64::MAX, i64::MIN, i64::MAX), 2);
    }

    #[test]
    fn series_slot_golden_values() {
        // Golden values: changing them moves every device to another region.
        assert_eq!(series_slot("root.sg.d1", 1000), 107);
        assert_eq!(series_slot("root.sg.d2", 1000), 108);
        assert_eq!(series_slot("", 1000), 0);
    }

    #[test]
    fn time_slots_at_most_stops_past_the_cap() {
        let p = PartitionConfig {
            time_partition_interval_ms: 10,
            ..PartitionConfig::default()
        };
        assert_eq!(
            p.time_slots_at_most(&[0, 5, 10, 35, 31, -1], 4),
            Some(BTreeSet::from([-1, 0, 1, 3]))
        );
        assert_eq!(p.time_slots_at_most(&[0, 5, 10, 35, 31, -1], 3), None);
        assert_eq!(p.time_slots_at_most(&[], 0), Some(BTreeSet::new()));
        assert_eq!(p.time_slots_at_most(&[7], 0), None);
    }

    proptest! {
        #[test]
        fn time_slots_at_most_is_the_set_of_slots_up_to_the_cap(
            timestamps in prop::collection::vec(-1000i64..1000, 0..50),
            max in 0usize..20,
        ) {
            let p = PartitionConfig {
                time_partition_interval_ms: 100,
                ..PartitionConfig::default()
            };
            let all: BTreeSet<i64> = timestamps.iter().map(|t| p.time_slot(*t)).collect();
            let capped = p.time_slots_at_most(&timestamps, max);
            prop_assert_eq!(capped, (all.len() <= max).then_some(all));
        }

        #[test]
        fn time_slot_contains_its_timestamp(t in any::<i64>(), origin in -1_000_000i64..1_000_000, interval in 1i64..10_000_000) {
            let slot = time_slot(t, origin, interval) as i128;
            let start = origin as i128 + slot * interval as i128;
            prop_assert!(start <= t as i128 && (t as i128) < start + interval as i128);
        }

        #[test]
        fn series_slot_in_range(device in ".*", n in 1u32..5000) {
            prop_assert!(series_slot(&device, n) < n);
        }
    }
}
