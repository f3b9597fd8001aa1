//! The integer codecs — `PLAIN`, delta bit-packing (TS_2DIFF), run lengths, zigzag varints — over
//! the integer view of any [`Scalar`]. Each decoder consumes its whole input and returns exactly
//! `count` values or an error.

use crate::bits::{
    bit_width, low_mask, put_uvarint, put_zigzag, unzigzag, zigzag, BitWriter, ByteReader,
};
use crate::error::{CodecError, Result};
use crate::scalar::Scalar;

/// Deltas per delta-bitpack block.
pub(crate) const BLOCK: usize = 128;

/// `PLAIN`: each value's `BITS / 8` bytes, little-endian.
pub(crate) fn encode_plain<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    let bytes = (S::BITS / 8) as usize;
    out.reserve(values.len() * bytes);
    for v in values {
        out.extend_from_slice(&v.to_word().to_le_bytes()[..bytes]);
    }
}

/// Decodes [`encode_plain`].
pub(crate) fn decode_plain<S: Scalar>(input: &[u8], base: usize, count: usize) -> Result<Vec<S>> {
    let bytes = (S::BITS / 8) as usize;
    if Some(input.len()) != count.checked_mul(bytes) {
        return Err(CodecError::new(
            base,
            format!(
                "plain {}: {} bytes for {count} values of {bytes} bytes",
                S::TYPE_NAME,
                input.len()
            ),
        ));
    }
    let values = input
        .chunks_exact(bytes)
        .map(|chunk| {
            let mut word = [0u8; 8];
            word[..bytes].copy_from_slice(chunk);
            S::from_word(u64::from_le_bytes(word))
        })
        .collect();
    Ok(values)
}

/// TS_2DIFF: the first value as a zigzag varint, then blocks of up to [`BLOCK`] deltas, each
/// `{zigzag varint min delta, u8 width, packed (delta - min) in width bits}`.
pub(crate) fn encode_delta_bitpack<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    let Some((first, rest)) = values.split_first() else {
        return;
    };
    let mut previous = first.to_i64();
    put_zigzag(out, previous);
    let mut deltas = [0i64; BLOCK];
    let blocks: Vec<&[S]> = rest.chunks(BLOCK).collect();
    let mut next = 0;
    while next < blocks.len() {
        let block = blocks[next];
        next += 1;
        let deltas = &mut deltas[..block.len()];
        let mut min = i64::MAX;
        for (delta, v) in deltas.iter_mut().zip(block) {
            let v = v.to_i64();
            *delta = v.wrapping_sub(previous);
            previous = v;
            min = min.min(*delta);
        }
        // The OR of the offsets has the bit width of their maximum.
        let any_bits = deltas
            .iter()
            .fold(0u64, |acc, d| acc | d.wrapping_sub(min) as u64);
        let width = bit_width(any_bits);
        put_zigzag(out, min);
        if width == 0 {
            // Constant steps: the blocks after this one with the same step are only counted.
            let mut repeats = 0;
            while let Some(later) = blocks.get(next + repeats) {
                let before = blocks[next + repeats - 1];
                if !steps_by(later, before[before.len() - 1].to_i64(), min) {
                    break;
                }
                repeats += 1;
            }
            if repeats > 0 {
                for later in &blocks[next..next + repeats] {
                    previous = later[later.len() - 1].to_i64();
                }
                next += repeats;
                out.push(REPEAT_FLAG);
                put_uvarint(out, repeats as u64);
                continue;
            }
        }
        out.push(width as u8);
        let mut writer = BitWriter::new(out);
        for delta in deltas.iter() {
            writer.write(delta.wrapping_sub(min) as u64, width);
        }
        writer.finish();
    }
}

/// The width byte's flag for "width 0, and this many further blocks of the same step follow"
/// (a varint after it): regular timestamps cost a few bytes per column, not per block.
const REPEAT_FLAG: u8 = 0x80;

/// True when every value of `block` is `step` above the one before it (starting from `previous`).
fn steps_by<S: Scalar>(block: &[S], mut previous: i64, step: i64) -> bool {
    block.iter().all(|v| {
        let v = v.to_i64();
        let ok = v.wrapping_sub(previous) == step;
        previous = v;
        ok
    })
}

/// The most values a delta-bitpack input of `len` bytes can hold: a block costs at least 2 bytes
/// (a 1-byte minimum and a zero width) for up to [`BLOCK`] values.
fn delta_bitpack_values_max(len: usize) -> usize {
    1 + len.saturating_mul(BLOCK / 2)
}

/// Decodes [`encode_delta_bitpack`].
pub(crate) fn decode_delta_bitpack<S: Scalar>(
    input: &[u8],
    base: usize,
    count: usize,
) -> Result<Vec<S>> {
    let mut r = ByteReader::new(input, base);
    let mut values = Vec::with_capacity(count.min(delta_bitpack_values_max(input.len())));
    if count == 0 {
        r.finish()?;
        return Ok(values);
    }
    let mut previous = r.zigzag()?;
    values.push(checked::<S>(previous, &r)?);
    let mut left = count - 1;
    while left > 0 {
        let len = left.min(BLOCK);
        let min = r.zigzag()?;
        let width_byte = r.u8()?;
        if width_byte == REPEAT_FLAG {
            let repeats = r.uvarint()?;
            // This block and `repeats` more, each BLOCK long but the last, which may be shorter.
            let blocks_left = (left - len).div_ceil(BLOCK) as u64;
            if repeats == 0 || repeats > blocks_left {
                return Err(r.error(format!(
                    "delta-bitpack repeats {repeats} blocks, {blocks_left} are left"
                )));
            }
            let covered = (len + repeats as usize * BLOCK).min(left);
            values.reserve(covered);
            for _ in 0..covered {
                previous = previous.wrapping_add(min);
                values.push(checked::<S>(previous, &r)?);
            }
            left -= covered;
            continue;
        }
        let width = u32::from(width_byte);
        if width > 64 {
            return Err(r.error(format!("delta-bitpack bit width {width} exceeds 64")));
        }
        let packed = r.take((len * width as usize).div_ceil(8))?;
        let mut offsets = [0u64; BLOCK];
        unpack(packed, width, &mut offsets[..len]);
        values.reserve(len);
        for &offset in &offsets[..len] {
            previous = previous.wrapping_add(min.wrapping_add(offset as i64));
            values.push(checked::<S>(previous, &r)?);
        }
        left -= len;
    }
    r.finish()?;
    Ok(values)
}

/// Unpacks `offsets.len()` fields of `width` bits from `packed`, which holds exactly
/// `ceil(len × width / 8)` bytes. Copying into a zero-padded buffer lets every field be read with
/// one unaligned load and no bounds check against the end of the input.
fn unpack(packed: &[u8], width: u32, offsets: &mut [u64]) {
    debug_assert!(width <= 64 && offsets.len() <= BLOCK);
    debug_assert_eq!(packed.len(), (offsets.len() * width as usize).div_ceil(8));
    if width == 0 {
        offsets.fill(0);
        return;
    }
    // 128 fields of 64 bits, plus the 9 bytes a load at the last field's byte may touch.
    let mut buffer = [0u8; BLOCK * 8 + 9];
    buffer[..packed.len()].copy_from_slice(packed);
    let mask = low_mask(width);
    for (i, offset) in offsets.iter_mut().enumerate() {
        let bit = i * width as usize;
        let (byte, shift) = (bit / 8, (bit % 8) as u32);
        let mut word = [0u8; 8];
        word.copy_from_slice(&buffer[byte..byte + 8]);
        let mut field = u64::from_le_bytes(word) >> shift;
        if width + shift > 64 {
            field |= u64::from(buffer[byte + 8]) << (64 - shift);
        }
        *offset = field & mask;
    }
}

/// `v` as `S`, or an error naming the type.
#[inline]
fn checked<S: Scalar>(v: i64, r: &ByteReader) -> Result<S> {
    S::from_i64(v).ok_or_else(|| r.error(format!("value {v} is out of range for {}", S::TYPE_NAME)))
}

/// The number of runs of equal values (compared in the integer view, so floats by bit pattern).
pub(crate) fn count_runs<S: Scalar>(values: &[S]) -> usize {
    match values.split_first() {
        None => 0,
        Some((first, rest)) => {
            let mut previous = first.to_i64();
            let mut runs = 1;
            for v in rest {
                let v = v.to_i64();
                runs += usize::from(v != previous);
                previous = v;
            }
            runs
        }
    }
}

/// The runs of equal values (compared in the integer view), in order: (value, length ≥ 1).
fn runs<S: Scalar>(values: &[S]) -> impl Iterator<Item = (i64, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let v = values.get(i)?.to_i64();
        let start = i;
        i += 1;
        while i < values.len() && values[i].to_i64() == v {
            i += 1;
        }
        Some((v, i - start))
    })
}

/// RLE: runs of `{zigzag varint (value - previous run's value), varint length ≥ 1}`; the value
/// before the first run is 0.
pub(crate) fn encode_rle<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    let mut previous_run = 0i64;
    for (v, length) in runs(values) {
        put_zigzag(out, v.wrapping_sub(previous_run));
        put_uvarint(out, length as u64);
        previous_run = v;
    }
}

/// Decodes [`encode_rle`].
pub(crate) fn decode_rle<S: Scalar>(input: &[u8], base: usize, count: usize) -> Result<Vec<S>> {
    let mut r = ByteReader::new(input, base);
    // Runs make the output larger than the input; the length of each run is checked against
    // `count` before any of it is allocated.
    let mut values = Vec::with_capacity(count.min(input.len()));
    let mut previous_run = 0i64;
    while values.len() < count {
        let delta = r.zigzag()?;
        let run = r.uvarint()?;
        let left = count - values.len();
        if run == 0 || run > left as u64 {
            return Err(r.error(format!("run of {run} values with {left} left to decode")));
        }
        previous_run = previous_run.wrapping_add(delta);
        let v = checked::<S>(previous_run, &r)?;
        values.resize(values.len() + run as usize, v);
    }
    r.finish()?;
    Ok(values)
}

/// RUN-BITPACK: `varint runs`, `varint v` (bytes of the next part), the runs' values as a
/// delta-bitpack body of `runs` values (`v` bytes), then their lengths (each ≥ 1, summing to
/// the count) as a delta-bitpack body of `runs` values. Where [`encode_rle`] spends a byte or
/// more per run on varints, this packs each run's value change and length into the bits their
/// block needs: levels that last a regular number of rows cost their value bits only.
pub(crate) fn encode_run_bitpack<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    let (run_values, lengths): (Vec<i64>, Vec<i64>) =
        runs(values).map(|(v, length)| (v, length as i64)).unzip();
    put_uvarint(out, run_values.len() as u64);
    let mut packed = Vec::new();
    encode_delta_bitpack(&run_values, &mut packed);
    put_uvarint(out, packed.len() as u64);
    out.extend_from_slice(&packed);
    encode_delta_bitpack(&lengths, out);
}

/// Decodes [`encode_run_bitpack`].
pub(crate) fn decode_run_bitpack<S: Scalar>(
    input: &[u8],
    base: usize,
    count: usize,
) -> Result<Vec<S>> {
    let mut r = ByteReader::new(input, base);
    let runs = r.uvarint()?;
    if runs > count as u64 || (runs == 0) != (count == 0) {
        return Err(r.error(format!("run-bitpack: {runs} runs for {count} values")));
    }
    let runs = runs as usize;
    let packed_len = r.uvarint()?;
    let packed_base = r.offset();
    let packed = r.take(usize::try_from(packed_len).unwrap_or(usize::MAX))?;
    let run_values: Vec<i64> = decode_delta_bitpack(packed, packed_base, runs)?;
    let (rest, rest_base) = r.take_rest();
    let lengths: Vec<i64> = decode_delta_bitpack(rest, rest_base, runs)?;
    // Each run's length is checked against `count` before it is allocated.
    let mut values = Vec::with_capacity(count.min(input.len()));
    for (&v, &length) in run_values.iter().zip(&lengths) {
        let left = count - values.len();
        if length < 1 || length as u64 > left as u64 {
            return Err(CodecError::new(
                rest_base,
                format!("run-bitpack: run of {length} values with {left} left to decode"),
            ));
        }
        let v = S::from_i64(v).ok_or_else(|| {
            CodecError::new(
                packed_base,
                format!("value {v} is out of range for {}", S::TYPE_NAME),
            )
        })?;
        values.resize(values.len() + length as usize, v);
    }
    if values.len() != count {
        return Err(CodecError::new(
            rest_base,
            format!(
                "run-bitpack: runs hold {} values, {count} expected",
                values.len()
            ),
        ));
    }
    Ok(values)
}

/// ZIGZAG: each value as a zigzag varint.
pub(crate) fn encode_zigzag<S: Scalar>(values: &[S], out: &mut Vec<u8>) {
    out.reserve(values.len());
    for v in values {
        put_uvarint(out, zigzag(v.to_i64()));
    }
}

/// Decodes [`encode_zigzag`].
pub(crate) fn decode_zigzag<S: Scalar>(input: &[u8], base: usize, count: usize) -> Result<Vec<S>> {
    let mut r = ByteReader::new(input, base);
    if count > input.len() {
        return Err(r.error(format!(
            "zigzag: {count} values cannot fit in {} bytes",
            input.len()
        )));
    }
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let v = unzigzag(r.uvarint()?);
        values.push(checked::<S>(v, &r)?);
    }
    r.finish()?;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpack_reads_what_the_bit_writer_wrote_at_every_width() {
        for width in 0..=64u32 {
            for len in [1, 7, 64, 127, BLOCK] {
                let fields: Vec<u64> = (0..len as u64)
                    .map(|i| {
                        i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(i as u32)
                            & low_mask(width)
                    })
                    .collect();
                let mut packed = Vec::new();
                let mut writer = BitWriter::new(&mut packed);
                for &f in &fields {
                    writer.write(f, width);
                }
                writer.finish();
                let mut offsets = vec![0; len];
                unpack(&packed, width, &mut offsets);
                assert_eq!(offsets, fields, "width {width}, {len} fields");
            }
        }
    }
}
