//! The XOR codecs over the word view of any [`Scalar`]: Facebook Gorilla (Pelkonen et al., VLDB
//! 2015) and Chimp128 (Liakos, Papakonstantinopoulou, Kotidis, VLDB 2022). The crate doc gives
//! both bit layouts field by field.

use crate::bits::{low_mask, BitReader, BitWriter};
use crate::error::Result;
use crate::scalar::Scalar;

/// Bits of Gorilla's meaningful-length field: 6 for 64-bit words, 5 for 32-bit ones (a length
/// equal to the word width is written as 0).
fn gorilla_length_bits<S: Scalar>() -> u32 {
    if S::BITS == 64 {
        6
    } else {
        5
    }
}

/// Gorilla: the first word raw, then per value a XOR with the previous word as `0` (equal),
/// `1 0 bits` (inside the previous window) or `1 1 lz(5) len bits` (a new window).
pub(crate) fn encode_gorilla<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    let Some((first, rest)) = values.split_first() else {
        return;
    };
    let word_bits = S::BITS;
    let length_bits = gorilla_length_bits::<S>();
    out.reserve(values.len() * 2 + 8);
    let mut bits = BitWriter::new(out);
    let mut previous = first.to_word();
    bits.write(previous, word_bits);
    // No window before the first new-window record: `u32::MAX` leading zeros never fit.
    let (mut window_lz, mut window_tz) = (u32::MAX, 0);
    for v in rest {
        let word = v.to_word();
        let xor = word ^ previous;
        previous = word;
        if xor == 0 {
            bits.write(0, 1);
            continue;
        }
        let lz = xor.leading_zeros() - (64 - word_bits);
        let tz = xor.trailing_zeros();
        if lz >= window_lz && tz >= window_tz {
            bits.write(0b01, 2);
            bits.write(xor >> window_tz, word_bits - window_lz - window_tz);
        } else {
            let lz = lz.min(31);
            let len = word_bits - lz - tz;
            let header = 0b11 | u64::from(lz) << 2 | (u64::from(len) & low_mask(length_bits)) << 7;
            bits.write(header, 7 + length_bits);
            bits.write(xor >> tz, len);
            (window_lz, window_tz) = (lz, tz);
        }
    }
    bits.finish();
}

/// Decodes [`encode_gorilla`].
pub(crate) fn decode_gorilla<S: Scalar>(input: &[u8], base: usize, count: usize) -> Result<Vec<S>> {
    let word_bits = S::BITS;
    let length_bits = gorilla_length_bits::<S>();
    let mut r = BitReader::new(input, base);
    // Every value after the first costs at least one bit.
    let mut values = Vec::with_capacity(count.min(input.len().saturating_mul(8) + 1));
    if count == 0 {
        r.finish()?;
        return Ok(values);
    }
    let mut previous = r.read(word_bits)?;
    values.push(S::from_word(previous));
    // (trailing zeros, meaningful length) of the current window.
    let mut window: Option<(u32, u32)> = None;
    for _ in 1..count {
        if r.read(1)? == 1 {
            let (tz, len) = if r.read(1)? == 0 {
                window.ok_or_else(|| r.error("gorilla: window reused before any was set"))?
            } else {
                let header = r.read(5 + length_bits)?;
                let lz = (header & 31) as u32;
                let len = match (header >> 5) as u32 {
                    0 => word_bits,
                    len => len,
                };
                if lz + len > word_bits {
                    return Err(r.error(format!(
                        "gorilla: {lz} leading zeros and {len} meaningful bits exceed {word_bits}"
                    )));
                }
                window = Some((word_bits - lz - len, len));
                (word_bits - lz - len, len)
            };
            previous ^= r.read(len)? << tz;
        }
        values.push(S::from_word(previous));
    }
    r.finish()?;
    Ok(values)
}

/// Chimp128 remembers this many previous values.
const RING: usize = 128;
/// Bits of a ring index.
const RING_INDEX_BITS: u32 = 7;
/// Leading-zero counts Chimp can state, by their 3-bit code.
const LZ_ROUNDED: [u32; 8] = [0, 8, 12, 16, 18, 20, 22, 24];

/// The 3-bit code of the largest [`LZ_ROUNDED`] entry not above `lz`.
#[inline]
fn lz_code(lz: u32) -> u32 {
    match lz {
        0..=7 => 0,
        8..=11 => 1,
        12..=15 => 2,
        16..=17 => 3,
        18..=19 => 4,
        20..=21 => 5,
        22..=23 => 6,
        _ => 7,
    }
}

/// Chimp128's trailing-zero threshold (a XOR against a ring entry is worth its index only past it)
/// and the width of its significant-bits field: 13 and 6 for 64-bit words, 12 and 5 for 32-bit.
fn chimp_params<S: Scalar>() -> (u32, u32) {
    if S::BITS == 64 {
        (13, 6)
    } else {
        (12, 5)
    }
}

/// Chimp128: the first word raw, then per value a 2-bit flag: 0 `index` (equal to a ring entry),
/// 1 `index lz-code significant-bits bits` (XOR with a ring entry, trailing zeros dropped),
/// 2 `bits` (XOR with the previous value, previous leading-zero code), 3 `lz-code bits`.
pub(crate) fn encode_chimp<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    let Some((first, rest)) = values.split_first() else {
        return;
    };
    debug_assert!(values.len() < u32::MAX as usize, "{} values", values.len());
    let word_bits = S::BITS;
    let (threshold, significant_bits) = chimp_params::<S>();
    let key_mask = low_mask(threshold + 1);
    // Position + 1 of the last value with each key (its low threshold + 1 bits); 0 = none.
    let mut last_with_key = vec![0u32; 1 << (threshold + 1)];
    let mut ring = [0u64; RING];
    out.reserve(values.len() * 2 + 8);
    let mut bits = BitWriter::new(out);
    ring[0] = first.to_word();
    bits.write(ring[0], word_bits);
    last_with_key[(ring[0] & key_mask) as usize] = 1;
    let mut stored_lz = u32::MAX;
    for (i, v) in rest.iter().enumerate().map(|(i, v)| (i + 1, v)) {
        let word = v.to_word();
        let previous_slot = (i - 1) % RING;
        let key = (word & key_mask) as usize;
        let (slot, xor, tz) =
            chimp_reference(word, previous_slot, &ring, last_with_key[key], i, threshold);
        if xor == 0 {
            bits.write((slot as u64) << 2, 2 + RING_INDEX_BITS);
            stored_lz = u32::MAX;
        } else if tz > threshold {
            let code = lz_code(xor.leading_zeros() - (64 - word_bits));
            let len = word_bits - LZ_ROUNDED[code as usize] - tz;
            let header = 1 | (slot as u64) << 2 | u64::from(code) << 9 | u64::from(len) << 12;
            bits.write(header, 12 + significant_bits);
            bits.write(xor >> tz, len);
            stored_lz = u32::MAX;
        } else {
            let code = lz_code(xor.leading_zeros() - (64 - word_bits));
            let lz = LZ_ROUNDED[code as usize];
            if lz == stored_lz {
                bits.write(2, 2);
            } else {
                bits.write(3 | u64::from(code) << 2, 5);
                stored_lz = lz;
            }
            bits.write(xor, word_bits - lz);
        }
        ring[i % RING] = word;
        last_with_key[key] = (i + 1) as u32;
    }
    bits.finish();
}

/// The ring slot value `i` is XORed with, the XOR, and its trailing zeros when it is taken from a
/// ring entry other than the previous value (else 0): the previous value when equal, else the
/// last value with the same key if still in the ring and the XOR has more than `threshold`
/// trailing zeros, else the previous value. Flags 2 and 3 XOR with the previous value, so a ring
/// entry is only ever returned with `tz > threshold` (flag 1) or a zero XOR (flag 0).
#[inline]
fn chimp_reference(
    word: u64,
    previous_slot: usize,
    ring: &[u64; RING],
    last_with_key: u32,
    i: usize,
    threshold: u32,
) -> (usize, u64, u32) {
    let previous_xor = word ^ ring[previous_slot];
    if previous_xor == 0 || last_with_key == 0 || i - (last_with_key as usize - 1) > RING {
        return (previous_slot, previous_xor, 0);
    }
    let slot = (last_with_key as usize - 1) % RING;
    let xor = word ^ ring[slot];
    let tz = xor.trailing_zeros();
    if tz > threshold {
        (slot, xor, tz)
    } else {
        (previous_slot, previous_xor, 0)
    }
}

/// Decodes [`encode_chimp`].
pub(crate) fn decode_chimp<S: Scalar>(input: &[u8], base: usize, count: usize) -> Result<Vec<S>> {
    let word_bits = S::BITS;
    let (_, significant_bits) = chimp_params::<S>();
    let mut r = BitReader::new(input, base);
    // Every value after the first costs at least two bits.
    let mut values = Vec::with_capacity(count.min(input.len().saturating_mul(4) + 1));
    if count == 0 {
        r.finish()?;
        return Ok(values);
    }
    let mut ring = [0u64; RING];
    ring[0] = r.read(word_bits)?;
    values.push(S::from_word(ring[0]));
    let mut stored_lz: Option<u32> = None;
    for i in 1..count {
        let previous = ring[(i - 1) % RING];
        let word = match r.read(2)? {
            0 => {
                let slot = ring_slot(r.read(RING_INDEX_BITS)?, i, &r)?;
                stored_lz = None;
                ring[slot]
            }
            1 => {
                let header = r.read(RING_INDEX_BITS + 3 + significant_bits)?;
                let slot = ring_slot(header & 127, i, &r)?;
                let lz = LZ_ROUNDED[((header >> 7) & 7) as usize];
                let len = (header >> 10) as u32;
                if len == 0 || lz + len > word_bits {
                    return Err(r.error(format!(
                        "chimp: {lz} leading zeros and {len} significant bits in a {word_bits}-bit word"
                    )));
                }
                stored_lz = None;
                ring[slot] ^ (r.read(len)? << (word_bits - lz - len))
            }
            2 => {
                let lz = stored_lz
                    .ok_or_else(|| r.error("chimp: leading zeros reused before any were set"))?;
                previous ^ r.read(word_bits - lz)?
            }
            _ => {
                let lz = LZ_ROUNDED[r.read(3)? as usize];
                stored_lz = Some(lz);
                previous ^ r.read(word_bits - lz)?
            }
        };
        ring[i % RING] = word;
        values.push(S::from_word(word));
    }
    r.finish()?;
    Ok(values)
}

/// `slot` as a ring index holding one of the `i` values decoded so far.
#[inline]
fn ring_slot(slot: u64, i: usize, r: &BitReader) -> Result<usize> {
    let slot = slot as usize;
    if slot >= i.min(RING) {
        return Err(r.error(format!(
            "chimp: ring slot {slot} not yet written at value {i}"
        )));
    }
    Ok(slot)
}
