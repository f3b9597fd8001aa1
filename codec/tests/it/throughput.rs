//! Values per second of encode and decode, printed. Ignored by default — a timing is not a pass
//! or fail on a shared 2-core machine, and it means something only in release:
//! `cargo test --release -p codec -- --ignored --nocapture`.

use std::hint::black_box;
use std::time::Instant;

use codec::{decode_column, decode_timestamps, encode_column, encode_timestamps, Choice};
use common::Column;

use crate::util::{noise, timestamps, walk2dp};

const N: usize = 100_000;
const ROUNDS: usize = 50;

/// Millions of values per second of `f` run `ROUNDS` times over `N` values (best of 3).
fn mvalues_per_s(mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..ROUNDS {
            f();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    (N * ROUNDS) as f64 / best / 1e6
}

fn column(name: &str, column: &Column) {
    let mut out = Vec::with_capacity(N * 9);
    let encode = mvalues_per_s(|| {
        out.clear();
        black_box(encode_column(black_box(column), Choice::Adaptive, &mut out));
    });
    let t = column.data_type();
    let decode = mvalues_per_s(|| {
        black_box(decode_column(black_box(&out), t, N).expect("decodes"));
    });
    println!("{name:<16} encode {encode:>7.1} M/s  decode {decode:>7.1} M/s");
}

#[test]
#[ignore = "timing; run in release with --ignored --nocapture"]
fn throughput() {
    let ts = timestamps(N, 1_700_000_000_000, 1000, 3, 1);
    let mut out = Vec::with_capacity(N * 9);
    let encode = mvalues_per_s(|| {
        out.clear();
        encode_timestamps(black_box(&ts), &mut out);
    });
    let decode = mvalues_per_s(|| {
        black_box(decode_timestamps(black_box(&out), N).expect("decodes"));
    });
    println!(
        "{:<16} encode {encode:>7.1} M/s  decode {decode:>7.1} M/s",
        "timestamps ±3ms"
    );
    let walk = walk2dp(N, 2);
    column("walk2dp DOUBLE", &Column::Double(walk.clone()));
    column(
        "walk2dp FLOAT",
        &Column::Float(walk.iter().map(|&v| v as f32).collect()),
    );
    column("noise DOUBLE", &Column::Double(noise(N, 3)));
    let ints: Vec<i64> = walk.iter().map(|v| (v * 100.0).round() as i64).collect();
    column("walk INT64", &Column::Int64(ints.clone()));
    column(
        "walk INT32",
        &Column::Int32(ints.iter().map(|&v| v as i32).collect()),
    );
    let bits: Vec<f64> = noise(N, 4);
    let mut chimp = Vec::new();
    let fixed = |e| Choice::Fixed(e);
    let encode = mvalues_per_s(|| {
        chimp.clear();
        black_box(encode_column(
            &Column::Double(bits.clone()),
            fixed(codec::Encoding::Chimp),
            &mut chimp,
        ));
    });
    println!(
        "{:<16} encode {encode:>7.1} M/s (incl. a clone)",
        "chimp noise"
    );
    let mut gorilla = Vec::new();
    let walk_column = Column::Double(walk);
    for e in [codec::Encoding::Gorilla, codec::Encoding::Chimp] {
        let encode = mvalues_per_s(|| {
            gorilla.clear();
            black_box(encode_column(&walk_column, fixed(e), &mut gorilla));
        });
        let decode = mvalues_per_s(|| {
            black_box(decode_column(&gorilla, common::DataType::Double, N).expect("decodes"));
        });
        println!(
            "{:<16} encode {encode:>7.1} M/s  decode {decode:>7.1} M/s",
            format!("{e} walk2dp")
        );
    }
}
