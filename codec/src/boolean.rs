//! The boolean codecs: `PLAIN` (a bitmap) and alternating run lengths.

use crate::bits::{put_uvarint, ByteReader};
use crate::error::{CodecError, Result};

/// `PLAIN`: value `i` is bit `i % 8` of byte `i / 8`; padding bits are zero.
pub(crate) fn encode_bitmap(values: &[bool], out: &mut Vec<u8>) {
    out.reserve(values.len().div_ceil(8));
    for chunk in values.chunks(8) {
        let byte = chunk
            .iter()
            .enumerate()
            .fold(0u8, |byte, (i, &v)| byte | (u8::from(v) << i));
        out.push(byte);
    }
}

/// Decodes [`encode_bitmap`].
pub(crate) fn decode_bitmap(input: &[u8], base: usize, count: usize) -> Result<Vec<bool>> {
    if input.len() != count.div_ceil(8) {
        return Err(CodecError::new(
            base,
            format!("bitmap of {} bytes for {count} booleans", input.len()),
        ));
    }
    if !count.is_multiple_of(8) && input[input.len() - 1] >> (count % 8) != 0 {
        return Err(CodecError::new(
            base + input.len() - 1,
            "bitmap padding bits are not zero",
        ));
    }
    Ok((0..count)
        .map(|i| input[i / 8] >> (i % 8) & 1 == 1)
        .collect())
}

/// Alternating runs: `u8 first value (0 or 1)`, then varint run lengths ≥ 1, the first of the
/// first value, the next of its negation and so on. Empty for no values.
pub(crate) fn encode_runs(values: &[bool], out: &mut Vec<u8>) {
    let Some(&first) = values.first() else {
        return;
    };
    out.push(u8::from(first));
    let mut current = first;
    let mut run = 0u64;
    for &v in values {
        if v != current {
            put_uvarint(out, run);
            current = v;
            run = 0;
        }
        run += 1;
    }
    put_uvarint(out, run);
}

/// Decodes [`encode_runs`].
pub(crate) fn decode_runs(input: &[u8], base: usize, count: usize) -> Result<Vec<bool>> {
    let mut r = ByteReader::new(input, base);
    let mut values = Vec::with_capacity(count.min(input.len().saturating_mul(8)));
    if count == 0 {
        r.finish()?;
        return Ok(values);
    }
    let mut current = match r.u8()? {
        0 => false,
        1 => true,
        other => return Err(CodecError::new(base, format!("first boolean byte {other}"))),
    };
    while values.len() < count {
        let run = r.uvarint()?;
        let left = count - values.len();
        if run == 0 || run > left as u64 {
            return Err(r.error(format!("run of {run} booleans with {left} left to decode")));
        }
        values.resize(values.len() + run as usize, current);
        current = !current;
    }
    r.finish()?;
    Ok(values)
}
