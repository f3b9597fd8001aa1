//! The scaled-decimal codec: floats that are decimals with at most `k` fractional digits, stored as
//! the integers `v × 10^k` under an integer codec. Lossless by construction: a scale is accepted
//! only if the decoder's own formula, `int as f64 / 10^k`, gives back every value bit for bit.

use crate::bits::{put_uvarint, ByteReader};
use crate::error::{CodecError, Result};
use crate::int::{
    count_runs, decode_delta_bitpack, decode_rle, decode_run_bitpack, encode_delta_bitpack,
    encode_rle, encode_run_bitpack,
};
use crate::names::CodecId;
use crate::scalar::Float;

/// Powers of ten up to 10^15, each exact in f64.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Scaled values must stay within ±2^53, where every integer is exact in f64.
const SCALED_ABS_MAX: f64 = 9_007_199_254_740_992.0;

/// The integer `v × 10^k` if it decodes back to `v` bit for bit.
#[inline]
fn scale<F: Float>(v: F, k: u32) -> Option<i64> {
    let x = v.to_f64() * POW10[k as usize];
    // Also rejects ±inf.
    if x.is_nan() || x.abs() > SCALED_ABS_MAX {
        return None;
    }
    // Round half away from zero without a libm call; a value this misrounds is no short decimal
    // and fails the check below, which is what makes the codec lossless.
    let m = (x + 0.5f64.copysign(x)) as i64;
    (unscale::<F>(m, k).to_word() == v.to_word()).then_some(m)
}

/// The decoder's formula: the float nearest `m / 10^k`.
#[inline]
fn unscale<F: Float>(m: i64, k: u32) -> F {
    F::from_f64(m as f64 / POW10[k as usize])
}

/// A column as scaled integers: `values[i]` is `ints[i] / 10^k` except at the exception
/// positions, whose words are stored raw (their `ints` entry repeats the previous integer, so it
/// costs nothing under delta or run-length coding).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Scaled {
    /// The decimal scale.
    pub k: u32,
    /// One integer per value.
    pub ints: Vec<i64>,
    /// Ascending positions of the values that do not scale, with their words.
    pub exceptions: Vec<(usize, u64)>,
}

/// The most exceptions a scaled column of `n` values may carry: a few anywhere (a NaN, a -0.0
/// where a walk crosses zero), then one in 16; never half of the values.
fn exceptions_max(n: usize) -> usize {
    8 + n / 16
}

/// The integer for `v` at the smallest scale from `*k` up that accepts it, raising `*k`; `None`
/// (and `*k` unchanged) when no scale up to `F::SCALE_MAX` does.
#[inline]
fn scale_from<F: Float>(v: F, k: &mut u32) -> Option<i64> {
    (*k..=F::SCALE_MAX)
        .find_map(|k2| scale(v, k2).map(|m| (k2, m)))
        .map(|(k2, m)| {
            *k = k2;
            m
        })
}

/// The smallest scale that all values but at most [`exceptions_max`] (and fewer than half)
/// accept, with the scaled
/// integers, or `None` when there are more exceptions than that (no short decimals).
///
/// Each value is tried from the scale so far upward, so the pass costs O(n + SCALE_MAX) scalings
/// plus SCALE_MAX per exception, and stops early on data that is no decimal; only the prefix
/// scaled before the last increase of the scale is scaled again.
pub(crate) fn detect<F: Float>(values: &[F]) -> Option<Scaled> {
    assert!(F::SCALE_MAX < POW10.len() as u32);
    let mut k = 0;
    let mut ints = Vec::with_capacity(values.len());
    let mut exceptions = Vec::new();
    // Values before `stale` were scaled at a smaller k.
    let mut stale = 0;
    for (i, &v) in values.iter().enumerate() {
        let k_before = k;
        match scale_from(v, &mut k) {
            Some(m) => ints.push(m),
            None => {
                exceptions.push((i, v.to_word()));
                if exceptions.len() > exceptions_max(i + 1) {
                    return None;
                }
                ints.push(ints.last().copied().unwrap_or(0));
            }
        }
        if k != k_before {
            stale = i;
        }
    }
    if stale > 0 {
        rescale_prefix(values, k, stale, &mut ints, &mut exceptions);
    }
    // Exceptions are the minority or this is no decimal column.
    if exceptions.len() > exceptions_max(values.len()).min(values.len() / 2) {
        return None;
    }
    Some(Scaled {
        k,
        ints,
        exceptions,
    })
}

/// Scales `values[..stale]` again at the final `k`, replacing their integers and exceptions.
fn rescale_prefix<F: Float>(
    values: &[F],
    k: u32,
    stale: usize,
    ints: &mut [i64],
    exceptions: &mut Vec<(usize, u64)>,
) {
    let mut prefix_exceptions = Vec::new();
    let mut previous = 0;
    for (i, &v) in values[..stale].iter().enumerate() {
        ints[i] = match scale(v, k) {
            Some(m) => m,
            None => {
                prefix_exceptions.push((i, v.to_word()));
                previous
            }
        };
        previous = ints[i];
    }
    // The value at `stale` raised the scale, so it scaled: it is no exception.
    debug_assert!(
        !exceptions.iter().any(|&(i, _)| i == stale),
        "exception at {stale}"
    );
    exceptions.retain(|&(i, _)| i >= stale);
    prefix_exceptions.append(exceptions);
    *exceptions = prefix_exceptions;
}

/// The inner codec adaptive encoding picks for scaled integers: RLE when they have at most one
/// run per 8 values, else delta bit-packing.
pub(crate) fn adaptive_inner(ints: &[i64]) -> CodecId {
    if count_runs(ints) <= ints.len() / 8 {
        CodecId::Rle
    } else {
        CodecId::DeltaBitPack
    }
}

/// Writes the body `{u8 k, varint e, e × {varint gap, word}, u8 inner codec, inner body}`;
/// `inner` is RLE or delta bit-packing.
pub(crate) fn encode_body<F: Float>(scaled: &Scaled, inner: CodecId, out: &mut Vec<u8>) {
    assert!(scaled.k <= F::SCALE_MAX, "scale {}", scaled.k);
    out.push(scaled.k as u8);
    put_uvarint(out, scaled.exceptions.len() as u64);
    let mut next = 0;
    for &(i, word) in &scaled.exceptions {
        assert!(i >= next, "exception positions not ascending at {i}");
        put_uvarint(out, (i - next) as u64);
        out.extend_from_slice(&word.to_le_bytes()[..(F::BITS / 8) as usize]);
        next = i + 1;
    }
    out.push(inner.byte());
    match inner {
        CodecId::Rle => encode_rle(&scaled.ints, out),
        CodecId::RunBitPack => encode_run_bitpack(&scaled.ints, out),
        CodecId::DeltaBitPack => encode_delta_bitpack(&scaled.ints, out),
        other => panic!("scaled decimals have no inner codec {other}"),
    }
}

/// Reads the exception list: ascending positions below `count`, with their words.
fn decode_exceptions<F: Float>(r: &mut ByteReader, count: usize) -> Result<Vec<(usize, u64)>> {
    let word_bytes = (F::BITS / 8) as usize;
    let e = r.uvarint()?;
    if e > count as u64 || e > (r.remaining() / (1 + word_bytes)) as u64 {
        return Err(r.error(format!("scaled decimal: {e} exceptions for {count} values")));
    }
    let mut exceptions = Vec::with_capacity(e as usize);
    let mut next = 0u64;
    for _ in 0..e {
        let position = next.saturating_add(r.uvarint()?);
        if position >= count as u64 {
            return Err(r.error(format!(
                "scaled decimal: exception at {position} of {count} values"
            )));
        }
        let mut word = [0u8; 8];
        word[..word_bytes].copy_from_slice(r.take(word_bytes)?);
        exceptions.push((position as usize, u64::from_le_bytes(word)));
        next = position + 1;
    }
    Ok(exceptions)
}

/// Decodes a body written by [`encode_body`].
pub(crate) fn decode<F: Float>(input: &[u8], base: usize, count: usize) -> Result<Vec<F>> {
    let mut r = ByteReader::new(input, base);
    let k = u32::from(r.u8()?);
    if k > F::SCALE_MAX {
        return Err(r.error(format!(
            "scaled decimal: scale {k} exceeds {} for {}",
            F::SCALE_MAX,
            F::TYPE_NAME
        )));
    }
    let exceptions = decode_exceptions::<F>(&mut r, count)?;
    let inner_offset = r.offset();
    let inner = r.u8()?;
    let (rest, offset) = r.take_rest();
    let ints: Vec<i64> = match CodecId::from_byte(inner) {
        Some(CodecId::DeltaBitPack) => decode_delta_bitpack(rest, offset, count)?,
        Some(CodecId::Rle) => decode_rle(rest, offset, count)?,
        Some(CodecId::RunBitPack) => decode_run_bitpack(rest, offset, count)?,
        _ => {
            return Err(CodecError::new(
                inner_offset,
                format!(
                "scaled decimal: inner codec byte {inner} is not delta-bitpack, rle or run-bitpack"
            ),
            ))
        }
    };
    let mut values: Vec<F> = ints.into_iter().map(|m| unscale::<F>(m, k)).collect();
    for (i, word) in exceptions {
        values[i] = F::from_word(word);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled(k: u32, ints: &[i64], exceptions: &[(usize, u64)]) -> Option<Scaled> {
        Some(Scaled {
            k,
            ints: ints.to_vec(),
            exceptions: exceptions.to_vec(),
        })
    }

    #[test]
    fn detects_the_smallest_scale() {
        assert_eq!(detect(&[1.0f64, 2.0, -3.0]), scaled(0, &[1, 2, -3], &[]));
        assert_eq!(detect(&[0.1f64, 0.25, 1.5]), scaled(2, &[10, 25, 150], &[]));
        assert_eq!(detect(&[21.37f32, 0.5]), scaled(2, &[2137, 50], &[]));
        assert_eq!(detect::<f64>(&[]), scaled(0, &[], &[]));
    }

    #[test]
    fn values_that_do_not_scale_are_exceptions() {
        for bad in [f64::NAN, f64::INFINITY, -0.0, 0.1 + 0.2, 1e300, 1.0 / 3.0] {
            let expected = scaled(1, &[15, 15, 25], &[(1, bad.to_bits())]);
            assert_eq!(detect(&[1.5, bad, 2.5]), expected, "{bad:?}");
        }
        // An exception before the scale rises is kept, and its placeholder follows the rescale.
        let expected = scaled(2, &[100, 100, 125], &[(1, f64::NAN.to_bits())]);
        assert_eq!(detect(&[1.0, f64::NAN, 1.25]), expected);
    }

    #[test]
    fn too_many_exceptions_is_no_decimal_column() {
        let noise: Vec<f64> = (1..100).map(|i| 1.0 / f64::from(i * 7 + 3)).collect();
        assert_eq!(detect(&noise), None);
    }
}
