//! The generator's shapes and golden values, the clients' share of the load, latency
//! percentiles, and the flags' limits.

use super::*;
use std::collections::HashSet;

fn spec(devices: u32, measurements: u32, rows: u32, clients: u32, t: DataType) -> LoadSpec {
    LoadSpec {
        devices,
        measurements,
        rows_per_tablet: rows,
        clients,
        data_type: t,
        database: "root.bench".into(),
        start_time_ms: 1_700_000_000_000,
        step_ms: 1,
        seed: 7,
        values: ValueShape::Uniform2dp,
        stop: StopAfter::Tablets(100),
        rate_pts_per_s: None,
    }
}

#[test]
fn tablets_have_the_requested_shape_and_type() {
    for t in DataType::ALL {
        let g = Generator::new(spec(5, 3, 17, 2, t));
        let tablet = g.tablet(4, 2);
        assert_eq!(tablet.device, "root.bench.d4");
        assert_eq!(tablet.measurements, ["s0", "s1", "s2"]);
        assert_eq!(tablet.data_types, [t; 3]);
        assert_eq!(tablet.row_count(), 17);
        assert_eq!(tablet.point_count(), 51);
        assert!(tablet
            .columns
            .iter()
            .all(|c| c.data_type() == t && c.len() == 17));
        tablet
            .validate(&common::TabletLimits::default())
            .unwrap_or_else(|e| panic!("{t}: {e}"));
        // The columnar fast path and the point-wise `value` agree.
        for row in [0, 9, 16] {
            for m in 0..3u32 {
                assert_eq!(
                    tablet.columns[m as usize].value(row),
                    g.value(4, m, tablet.timestamps[row])
                );
            }
        }
    }
}

#[test]
fn the_same_spec_gives_the_same_points_and_the_seed_changes_them() {
    let a = Generator::new(spec(10, 4, 100, 3, DataType::Double));
    let b = Generator::new(spec(10, 4, 100, 3, DataType::Double));
    assert_eq!(a.tablet(3, 5), b.tablet(3, 5));
    let mut other = spec(10, 4, 100, 3, DataType::Double);
    other.seed = 8;
    let c = Generator::new(other);
    let (ta, tc) = (a.tablet(3, 5), c.tablet(3, 5));
    assert_eq!(ta.timestamps, tc.timestamps);
    assert_ne!(ta.columns, tc.columns);
    // Values vary across devices, measurements and rows.
    let Column::Double(v) = &ta.columns[0] else {
        panic!("a DOUBLE column: {:?}", ta.columns[0])
    };
    assert!(
        v.iter().map(|x| x.to_bits()).collect::<HashSet<_>>().len() > 50,
        "{v:?}"
    );
    assert_ne!(a.tablet(3, 5).columns, a.tablet(4, 5).columns);
}

#[test]
fn golden_values_pin_the_generator() {
    // Peers and Fencepost are compared on these exact points; a change here changes every
    // published figure's workload, so it must be deliberate.
    let g = Generator::new(spec(10, 4, 100, 3, DataType::Double));
    assert_eq!(g.timestamp(0, 0), 1_700_000_000_000);
    assert_eq!(g.timestamp(2, 5), 1_700_000_000_205);
    let golden: Vec<Value> = (0..3).map(|m| g.value(1, m, 1_700_000_000_000)).collect();
    assert_eq!(golden, GOLDEN_D1_T0.map(Value::Double));
}
const GOLDEN_D1_T0: [f64; 3] = [130.28, 873.02, 310.03];

fn shaped(values: ValueShape, rows: u32, step_ms: i64) -> Generator {
    let mut s = spec(10, 4, rows, 3, DataType::Double);
    s.values = values;
    s.step_ms = step_ms;
    Generator::new(s)
}

/// Device 1's `s0` and `s1` at rows 0, 1, 2 and 150, point-wise.
fn first_values(g: &Generator) -> Vec<f64> {
    let mut out = Vec::new();
    for m in 0..2 {
        for row in [0, 1, 2, 150] {
            let t = g.timestamp(0, 0) + row * g.spec().step_ms;
            let Value::Double(v) = g.value(1, m, t) else {
                panic!("a DOUBLE value")
            };
            out.push(v);
        }
    }
    out
}

#[test]
fn golden_values_pin_every_shape() {
    // As GOLDEN_D1_T0: the storage figures of every system are measured on these points.
    // The shaped values are functions of the row, so the interval does not change them.
    for (shape, golden) in [
        (ValueShape::Walk2dp, GOLDEN_WALK2DP),
        (ValueShape::Noise, GOLDEN_NOISE),
        (ValueShape::Steps, GOLDEN_STEPS),
    ] {
        for step_ms in [1, 1000] {
            let got = first_values(&shaped(shape, 100, step_ms));
            assert_eq!(got, golden, "{shape:?} every {step_ms} ms");
        }
    }
}
const GOLDEN_WALK2DP: [f64; 8] = [16.86, 17.1, 17.02, 12.23, 29.13, 29.55, 29.15, 34.79];
const GOLDEN_NOISE: [f64; 8] = [
    58.36383169873227,
    89.09225998133985,
    25.510263858972102,
    24.179604121715748,
    23.21993174068213,
    5.587790870513887,
    11.426154175379322,
    37.21092077042233,
];
const GOLDEN_STEPS: [f64; 8] = [23.97, 23.97, 23.97, 44.96, 59.88, 59.88, 59.88, 53.71];

#[test]
fn tablets_and_points_agree_for_every_shape_in_any_order() {
    for shape in [
        ValueShape::Uniform2dp,
        ValueShape::Walk2dp,
        ValueShape::Noise,
        ValueShape::Steps,
    ] {
        let g = shaped(shape, 30, 1000);
        // Out of order: the walk's cursor must start over when asked for an earlier row.
        for round in [3, 1, 2, 2, 0, 7] {
            let tablet = g.tablet(2, round);
            for row in [0, 1, 29] {
                for m in 0..4u32 {
                    assert_eq!(
                        tablet.columns[m as usize].value(row),
                        g.value(2, m, tablet.timestamps[row]),
                        "{shape:?} round {round} row {row} s{m}"
                    );
                }
            }
        }
    }
}

/// Series `s0` of device 0 over 10,000 rows, as the tablets give it.
fn series_values(shape: ValueShape) -> Vec<f64> {
    let g = shaped(shape, 1000, 1000);
    (0..10)
        .flat_map(|round| {
            let Column::Double(v) = g.tablet(0, round).columns.swap_remove(0) else {
                panic!("a DOUBLE column")
            };
            v
        })
        .collect()
}

fn is_2dp(v: f64) -> bool {
    (v * 100.0).round() / 100.0 == v
}

#[test]
fn walk2dp_is_a_two_decimal_walk_with_half_unit_steps() {
    let v = series_values(ValueShape::Walk2dp);
    assert!((10.0..=30.0).contains(&v[0]), "{}", v[0]);
    assert!(
        v.iter().all(|&x| is_2dp(x)),
        "a value with more than 2 decimals"
    );
    let diffs: Vec<f64> = v.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
    let sd = (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / diffs.len() as f64).sqrt();
    assert!((0.47..0.53).contains(&sd), "step σ {sd}");
    assert!(mean.abs() < 0.02, "step mean {mean}");
    // A step is at most 196,605 / 131,072 ≈ 1.5, plus the rounding on both sides.
    assert!(diffs.iter().all(|d| d.abs() <= 1.51), "a step over 1.51");
    assert!(
        v.windows(2).any(|w| w[0] == w[1]),
        "a walk never standing still"
    );
}

#[test]
fn noise_has_full_precision_and_steps_hold_each_level_for_its_rows() {
    let noise = series_values(ValueShape::Noise);
    assert!(noise.iter().all(|x| (0.0..100.0).contains(x)));
    assert!(noise.iter().filter(|&&x| is_2dp(x)).count() < 10);
    let distinct: HashSet<u64> = noise.iter().map(|x| x.to_bits()).collect();
    assert_eq!(distinct.len(), noise.len());

    let steps = series_values(ValueShape::Steps);
    assert!(steps
        .iter()
        .all(|&x| is_2dp(x) && (0.0..100.0).contains(&x)));
    for (row, w) in steps.windows(2).enumerate() {
        let boundary = (row as u64 + 1).is_multiple_of(STEPS_ROWS);
        if !boundary {
            assert_eq!(
                w[0],
                w[1],
                "level changed inside a block at row {}",
                row + 1
            );
        }
    }
    let levels: HashSet<u64> = steps.iter().map(|x| x.to_bits()).collect();
    assert!(levels.len() > 90, "{} levels in 100 blocks", levels.len());
}

#[test]
fn every_device_and_timestamp_is_written_once() {
    for (devices, clients) in [(10, 3), (7, 7), (100, 4), (5, 1)] {
        let mut s = spec(devices, 2, 4, clients, DataType::Int64);
        let total = 3 * u64::from(devices) + 2; // not a multiple of anything
        s.stop = StopAfter::Tablets(total);
        let g = Generator::new(s.clone());
        let mut seen = HashSet::new();
        let mut owner = vec![None; devices as usize];
        let mut tablets = 0;
        for client in 0..clients {
            let n = s.tablets_of_client(client).expect("tablet mode");
            for i in 0..n {
                let (device, round) = s.slot(client, i);
                // A device belongs to one client only.
                assert_eq!(*owner[device as usize].get_or_insert(client), client);
                for &t in &g.tablet(device, round).timestamps {
                    assert!(seen.insert((device, t)), "({device}, {t}) written twice");
                }
                tablets += 1;
            }
        }
        assert_eq!(tablets, total, "{devices} devices, {clients} clients");
        assert!(
            owner.iter().all(Option::is_some),
            "an idle device: {owner:?}"
        );
    }
}

#[test]
fn a_device_continues_its_timestamps_round_after_round() {
    let s = spec(4, 1, 10, 2, DataType::Boolean);
    let g = Generator::new(s.clone());
    // Client 1 owns devices 1 and 3: d1 r0, d3 r0, d1 r1, …
    assert_eq!(s.devices_of_client(1), 2);
    assert_eq!(
        (0..4).map(|i| s.slot(1, i)).collect::<Vec<_>>(),
        [(1, 0), (3, 0), (1, 1), (3, 1)]
    );
    let r0 = g.tablet(1, 0).timestamps;
    let r1 = g.tablet(1, 1).timestamps;
    assert_eq!(r0.last().map(|t| t + 1), r1.first().copied());
    assert!(r0.windows(2).all(|w| w[1] == w[0] + 1));
}

#[test]
fn nearest_rank_percentiles() {
    assert_eq!(percentile(&[], 50.0), None);
    assert_eq!(percentile(&[7], 0.0), Some(7));
    assert_eq!(percentile(&[7], 99.0), Some(7));
    let hundred: Vec<u32> = (1..=100).collect();
    assert_eq!(percentile(&hundred, 50.0), Some(50));
    assert_eq!(percentile(&hundred, 99.0), Some(99));
    assert_eq!(percentile(&hundred, 100.0), Some(100));
    assert_eq!(percentile(&hundred, 0.0), Some(1));
    assert_eq!(percentile(&[1, 2, 3, 4], 50.0), Some(2));
    assert_eq!(percentile(&[1, 2, 3, 4], 51.0), Some(3));
    let ten: Vec<u32> = (1..=10).collect();
    assert_eq!(percentile(&ten, 99.0), Some(10));
}

#[test]
fn latency_summary_sorts_merges_and_respects_the_limit() {
    let mut a = Latencies::default();
    for us in [3000, 1000, 2000] {
        a.record(Duration::from_micros(us));
    }
    let mut b = Latencies::default();
    b.record(Duration::from_micros(4000));
    a.merge(b);
    let s = a.summary();
    assert_eq!(s.samples, 4);
    assert_eq!(s.p50_ms, 2.0);
    assert_eq!(s.p99_ms, 4.0);
    assert_eq!(s.max_ms, 4.0);
    assert_eq!(s.mean_ms, 2.5);
    assert_eq!(Latencies::default().summary(), LatencySummary::default());

    let mut full = Latencies {
        samples_us: vec![1; LATENCY_SAMPLES_MAX],
        ..Latencies::default()
    };
    full.record(Duration::from_secs(1));
    let mut extra = Latencies::default();
    extra.record(Duration::from_micros(5));
    full.merge(extra);
    let s = full.summary();
    assert_eq!((s.samples, s.dropped), (LATENCY_SAMPLES_MAX as u64, 2));
    assert_eq!(s.max_ms, 1000.0);
}

fn args() -> LoadArgs {
    LoadArgs {
        devices: 100,
        measurements: 10,
        rows_per_tablet: 1000,
        tablets: None,
        duration_s: None,
        clients: 4,
        data_type: DataType::Double,
        database: "root.bench".into(),
        start_time: None,
        step_ms: 1,
        seed: 1,
        values: ValueShape::Uniform2dp,
        rate_pts_per_s: None,
    }
}

#[test]
fn flags_are_checked_against_their_limits() {
    let s = args().to_spec(10_000_000).expect("defaults are valid");
    assert_eq!(s.start_time_ms, 10_000_000 - START_BEFORE_NOW_MS);
    assert_eq!(s.stop, StopAfter::Duration(Duration::from_secs(10)));
    let bad = [
        LoadArgs {
            devices: 0,
            ..args()
        },
        LoadArgs {
            clients: 101,
            ..args()
        },
        LoadArgs {
            clients: 0,
            ..args()
        },
        LoadArgs {
            rows_per_tablet: ROWS_PER_TABLET_MAX + 1,
            ..args()
        },
        LoadArgs {
            measurements: 0,
            ..args()
        },
        LoadArgs {
            step_ms: 0,
            ..args()
        },
        LoadArgs {
            tablets: Some(0),
            ..args()
        },
        LoadArgs {
            duration_s: Some(0),
            ..args()
        },
        LoadArgs {
            database: "bench".into(),
            ..args()
        },
        LoadArgs {
            values: ValueShape::Walk2dp,
            data_type: DataType::Int64,
            ..args()
        },
    ];
    for a in bad {
        assert!(a.to_spec(0).is_err(), "{a:?}");
    }
    let s = LoadArgs {
        tablets: Some(9),
        start_time: Some(5),
        ..args()
    }
    .to_spec(0)
    .expect("valid");
    assert_eq!((s.stop, s.start_time_ms), (StopAfter::Tablets(9), 5));
    assert_eq!(
        (0..4).map(|c| s.tablets_of_client(c)).collect::<Vec<_>>(),
        [Some(3), Some(2), Some(2), Some(2)]
    );
}
