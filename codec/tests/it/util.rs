//! Seeded data generators and the round-trip helper the other modules share.

use codec::{bit_identical, decode_column, encode_column, Choice, CodecId, Encoding};
use common::Column;

/// Every choice the encoder takes.
pub const CHOICES: [Choice; 8] = [
    Choice::Adaptive,
    Choice::Fixed(Encoding::Plain),
    Choice::Fixed(Encoding::Ts2Diff),
    Choice::Fixed(Encoding::Rle),
    Choice::Fixed(Encoding::Gorilla),
    Choice::Fixed(Encoding::Dictionary),
    Choice::Fixed(Encoding::Zigzag),
    Choice::Fixed(Encoding::Chimp),
];

/// xorshift64*: a seeded generator, so every shape is reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    /// A generator; seed 0 is mapped to a fixed non-zero state.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1) ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Approximately normal with mean 0 and standard deviation `sigma` (Irwin–Hall, 12 terms).
    pub fn gaussian(&mut self, sigma: f64) -> f64 {
        ((0..12).map(|_| self.unit()).sum::<f64>() - 6.0) * sigma
    }
}

/// `n` timestamps from `start`, `step` apart, each moved by up to ±`jitter`.
pub fn timestamps(n: usize, start: i64, step: i64, jitter: i64, seed: u64) -> Vec<i64> {
    let mut rng = Rng::new(seed);
    (0..n as i64)
        .map(|i| {
            let j = if jitter == 0 {
                0
            } else {
                rng.below(2 * jitter as u64 + 1) as i64 - jitter
            };
            start + i * step + j
        })
        .collect()
}

/// A random walk `v += N(0, 0.5)` from 20, rounded to 2 decimals.
pub fn walk2dp(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let mut v = 20.0f64;
    (0..n)
        .map(|_| {
            v += rng.gaussian(0.5);
            (v * 100.0).round() / 100.0
        })
        .collect()
}

/// Full-precision noise in [0, 100).
pub fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.unit() * 100.0).collect()
}

/// A 2-decimal value that changes every 100 rows.
pub fn steps(n: usize, seed: u64) -> Vec<f64> {
    let walk = walk2dp(n.div_ceil(100), seed);
    (0..n).map(|i| walk[i / 100]).collect()
}

/// `values` with NaN (two payloads), ±inf and -0.0 written over some positions.
pub fn with_specials(mut values: Vec<f64>, seed: u64) -> Vec<f64> {
    const SPECIALS: [f64; 6] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        f64::MIN,
    ];
    let mut rng = Rng::new(seed);
    let n = values.len() as u64;
    for _ in 0..(n / 10).max(1).min(n) {
        let at = rng.below(n) as usize;
        values[at] = match rng.below(7) {
            6 => f64::from_bits(0x7ff0_0000_dead_beef),
            k => SPECIALS[k as usize],
        };
    }
    values
}

/// Encodes under `choice` after a one-byte prefix (encoding appends), decodes, and checks the
/// values come back bit for bit, the codec byte is the one returned and fits the type, and the
/// wrong count is refused. Returns the codec and the encoded bytes.
pub fn round_trip(column: &Column, choice: Choice) -> Result<(CodecId, Vec<u8>), String> {
    let mut out = vec![0xA5];
    let codec = encode_column(column, choice, &mut out);
    let encoded = out.split_off(1);
    let t = column.data_type();
    let n = column.len();
    if out != [0xA5] || encoded.first() != Some(&codec.byte()) || !codec.encodes(t) {
        return Err(format!("{choice:?} on {t}: bad header, codec {codec}"));
    }
    let decoded =
        decode_column(&encoded, t, n).map_err(|e| format!("{choice:?} {codec} {t}: {e}"))?;
    if !bit_identical(&decoded, column) {
        return Err(format!("{choice:?} {codec} on {t} did not round-trip"));
    }
    for wrong in [n + 1, n.wrapping_sub(1)] {
        if wrong <= codec::COUNT_MAX && decode_column(&encoded, t, wrong).is_ok() {
            return Err(format!(
                "{choice:?} {codec} on {t} decoded with count {wrong} ≠ {n}"
            ));
        }
    }
    Ok((codec, encoded))
}

/// [`round_trip`] under every choice.
pub fn round_trip_all(column: &Column) -> Result<(), String> {
    for choice in CHOICES {
        round_trip(column, choice)?;
    }
    Ok(())
}
