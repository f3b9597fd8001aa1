//! Bytes per point for 100,000-point series, printed (`--nocapture`), with loose upper bounds
//! only: the figures are for reading, the bounds catch a codec that stopped working.

use codec::{encode_column, encode_timestamps, Choice, CodecId, Encoding};
use common::Column;

use crate::util::{noise, steps, timestamps, walk2dp};

const N: usize = 100_000;

/// Encodes and returns (codec, bytes per point).
fn per_point(column: &Column, choice: Choice) -> (CodecId, f64) {
    let mut out = Vec::new();
    let codec = encode_column(column, choice, &mut out);
    (codec, out.len() as f64 / column.len() as f64)
}

fn report(name: &str, column: &Column, bound: f64) {
    let (codec, adaptive) = per_point(column, Choice::Adaptive);
    let fixed: Vec<String> = [
        Encoding::Plain,
        Encoding::Ts2Diff,
        Encoding::Rle,
        Encoding::Gorilla,
        Encoding::Chimp,
    ]
    .into_iter()
    .filter(|e| e.supports(column.data_type()))
    .map(|e| format!("{}={:.3}", e.name(), per_point(column, Choice::Fixed(e)).1))
    .collect();
    println!(
        "{name:<24} adaptive {adaptive:>7.3} B/pt ({codec}); {}",
        fixed.join(" ")
    );
    assert!(
        adaptive < bound,
        "{name}: {adaptive:.3} B/pt under {codec}, bound {bound}"
    );
}

#[test]
fn bytes_per_point() {
    for (name, step, jitter) in [
        ("timestamps 1 s", 1000, 0),
        ("timestamps 1 ms", 1, 0),
        ("timestamps 1 s ±5 ms", 1000, 5),
    ] {
        let ts = timestamps(N, 1_700_000_000_000, step, jitter, 7);
        let mut out = Vec::new();
        encode_timestamps(&ts, &mut out);
        let bpp = out.len() as f64 / N as f64;
        println!("{name:<24} timestamps {bpp:>5.3} B/pt");
        let bound = if jitter == 0 { 0.1 } else { 1.5 };
        assert!(bpp < bound, "{name}: {bpp:.3} B/pt");
    }
    let walk = walk2dp(N, 11);
    report("walk2dp DOUBLE", &Column::Double(walk.clone()), 1.6);
    report(
        "walk2dp FLOAT",
        &Column::Float(walk.iter().map(|&v| v as f32).collect()),
        1.6,
    );
    report("noise DOUBLE", &Column::Double(noise(N, 12)), 8.2);
    report("steps/100 DOUBLE", &Column::Double(steps(N, 13)), 0.1);
    report("constant DOUBLE", &Column::Double(vec![21.5; N]), 0.05);
    report(
        "constant 0.1+0.2 DOUBLE",
        &Column::Double(vec![0.1 + 0.2; N]),
        0.05,
    );
    let ints: Vec<i64> = walk.iter().map(|v| (v * 100.0).round() as i64).collect();
    report("walk INT64", &Column::Int64(ints), 1.6);
    report("constant INT32", &Column::Int32(vec![7; N]), 0.05);
    report(
        "steps/100 INT64",
        &Column::Int64(steps(N, 14).iter().map(|v| (v * 100.0) as i64).collect()),
        0.1,
    );
    report(
        "bool runs of 50",
        &Column::Boolean((0..N).map(|i| (i / 50) % 2 == 0).collect()),
        0.05,
    );
    report(
        "text 10 states",
        &Column::Text((0..N).map(|i| format!("state-{}", (i / 3) % 10)).collect()),
        0.6,
    );
}
