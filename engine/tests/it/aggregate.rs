//! Aggregates from page statistics: the pages they may answer for are answered without decoding,
//! the others are decoded, and either way the answer is the fold of the visible points
//! (`check_aggregates`, which the model test runs after every step).

use std::collections::BTreeMap;

use common::aggregate::{Partial, Windows};
use common::Value;
use engine::{DataRegion, OpenGate, RegionCommand};
use proptest::prelude::*;

use crate::support::{tablet, LoggedRegion, Model};

/// The windows every check asks: the whole span, and two cuts that split pages.
fn windows() -> Vec<Windows> {
    vec![
        Windows::whole(-10..80).expect("one window"),
        Windows::new(-10..80, 7, 100).expect("13 windows"),
        Windows::new(5..50, 3, 100).expect("15 windows"),
        Windows::new(-10..80, 8, 100)
            .expect("12 windows")
            .visible(13..61),
        // STDDEV / VARIANCE: every page decoded, the second moment exact.
        Windows::new(-10..80, 7, 100)
            .expect("13 windows")
            .with_moments(true),
    ]
}

/// The fold of `points` into `windows`, point by point: what the statistics path must equal.
fn folded(points: &BTreeMap<i64, Value>, windows: &Windows) -> Vec<Partial> {
    let mut out = vec![Partial::default(); windows.count() as usize];
    for (t, v) in points {
        if let Some(w) = windows.index(*t) {
            out[w].push(*t, v);
        }
    }
    out
}

/// Sums (and, when the windows ask for them, second moments) agree up to the rounding their
/// different orders give.
fn same(a: &Partial, b: &Partial, moments: bool) -> bool {
    let near = |x: f64, y: f64| {
        (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs()))
    };
    near(a.sum, b.sum)
        && (!moments || near(a.m2, b.m2))
        && a.count == b.count
        && a.min == b.min
        && a.max == b.max
        && a.first == b.first
        && a.last == b.last
}

/// Every series of `held` (the region's visible points) aggregated by the region equals the
/// fold of its points.
pub fn check_aggregates(
    region: &DataRegion,
    held: &Model,
    step: usize,
) -> Result<(), TestCaseError> {
    for ((device, measurement), points) in held {
        for windows in windows() {
            let (got, _) = region.aggregate(device, measurement, &windows).unwrap();
            let want = folded(points, &windows);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                prop_assert!(
                    same(g, w, windows.moments),
                    "{}.{} window {} of {:?} after step {}: {:?} != {:?}",
                    device,
                    measurement,
                    i,
                    windows,
                    step,
                    g,
                    w
                );
            }
        }
    }
    Ok(())
}

fn flushed_region(dir: &std::path::Path) -> LoggedRegion {
    let mut config = crate::support::config();
    config.sealed.page_points = 4;
    let region = LoggedRegion::open_with(dir, config);
    let times: Vec<i64> = (0..40).collect();
    region
        .write(
            &RegionCommand::insert(tablet("root.sg.d1", &times, 0.5)),
            &OpenGate,
        )
        .unwrap();
    region.flush();
    region
}

#[test]
fn a_clean_page_is_answered_from_its_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let region = flushed_region(dir.path());
    let whole = Windows::whole(0..40).unwrap();
    let (partials, work) = region.region.aggregate("root.sg.d1", "s1", &whole).unwrap();
    // Time partitions of 10 ms hold pages of 4, 4 and 2 points.
    assert_eq!((work.pages_from_stats, work.pages_decoded), (12, 0));
    assert_eq!(partials[0].count, 40);
    assert_eq!(partials[0].first, Some((0, Value::Double(0.5))));
    assert_eq!(partials[0].last, Some((39, Value::Double(39.5))));
    // Windows of 5: the page of 4..=7 in each partition straddles a border.
    let fives = Windows::new(0..40, 5, 10).unwrap();
    let (partials, work) = region.region.aggregate("root.sg.d1", "s1", &fives).unwrap();
    assert_eq!((work.pages_from_stats, work.pages_decoded), (8, 4));
    assert!(partials.iter().all(|p| p.count == 5));
    // The second moment is in no page's statistics: every page decoded.
    let moments = whole.with_moments(true);
    let (partials, work) = region
        .region
        .aggregate("root.sg.d1", "s1", &moments)
        .unwrap();
    assert_eq!((work.pages_from_stats, work.pages_decoded), (0, 12));
    // 0.5, 1.5, … 39.5: a population variance of (40² − 1) / 12.
    let var = partials[0].var_pop().unwrap();
    assert!((var - (1600.0 - 1.0) / 12.0).abs() < 1e-9, "{var}");
}

#[test]
fn a_page_a_newer_point_or_a_deletion_meets_is_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let region = flushed_region(dir.path());
    // An overwrite of t = 5 in the memtable, and a deletion of t = 20..=21.
    region
        .write(
            &RegionCommand::insert(tablet("root.sg.d1", &[5], 100.0)),
            &OpenGate,
        )
        .unwrap();
    let delete = RegionCommand::DeleteData {
        series: vec![("root.sg.d1".into(), "s1".into())],
        start: 20,
        end: 21,
        deletion: engine::Deletion::default(),
    };
    region.write(&delete, &OpenGate).unwrap();
    let whole = Windows::whole(0..40).unwrap();
    let (partials, work) = region.region.aggregate("root.sg.d1", "s1", &whole).unwrap();
    assert_eq!((work.pages_from_stats, work.pages_decoded), (10, 2));
    assert_eq!(partials[0].count, 38);
    assert_eq!(
        partials[0].max,
        Some(Value::Double(100.0)),
        "the newer point wins"
    );
}

#[test]
fn a_series_no_file_or_memtable_holds_has_empty_windows() {
    let dir = tempfile::tempdir().unwrap();
    let region = flushed_region(dir.path());
    let w = Windows::new(-100..100, 50, 10).unwrap();
    let (partials, work) = region.region.aggregate("root.sg.d9", "s1", &w).unwrap();
    assert!(partials.iter().all(|p| *p == Partial::default()));
    assert_eq!(partials.len(), 4);
    assert_eq!(work.pages_decoded, 0);
}
