//! The text codecs: `PLAIN` (length-prefixed values) and a dictionary of distinct values with
//! bit-packed indexes. TEXT and STRING values are UTF-8, checked when decoded; BLOB values are
//! any bytes, in the same layouts.

use std::collections::HashMap;

use crate::bits::{bit_width, BitReader, BitWriter, ByteReader};
use crate::error::{CodecError, Result};

/// The most bytes of text a dictionary-encoded column may decode to. A dictionary repeats its
/// entries, so this, not the input length, bounds what a decode allocates; the encoder writes a
/// larger column as `PLAIN`, whose output never exceeds its input.
pub const DICTIONARY_TEXT_BYTES_MAX: usize = 256 << 20;

/// A value's length as the u32 on disk; past u32 it is a bug (tablets limit values to far less).
fn len32(v: &[u8]) -> u32 {
    u32::try_from(v.len()).unwrap_or_else(|_| panic!("text value of {} bytes", v.len()))
}

/// A value of a text-like column: a `String` (TEXT, STRING) or a `Vec<u8>` (BLOB).
pub(crate) trait TextValue: AsRef<[u8]> + Sized {
    /// The value of `bytes`, read at `offset`; a string refuses bytes that are not UTF-8.
    fn from_bytes(bytes: &[u8], offset: usize) -> Result<Self>;
}

impl TextValue for String {
    fn from_bytes(bytes: &[u8], offset: usize) -> Result<String> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| CodecError::new(offset + e.valid_up_to(), "text is not valid UTF-8"))
    }
}

impl TextValue for Vec<u8> {
    fn from_bytes(bytes: &[u8], _offset: usize) -> Result<Vec<u8>> {
        Ok(bytes.to_vec())
    }
}

/// `PLAIN`: per value `u32 length, bytes`.
pub(crate) fn encode_plain<V: AsRef<[u8]>>(values: &[V], out: &mut Vec<u8>) {
    for v in values {
        let v = v.as_ref();
        out.extend_from_slice(&len32(v).to_le_bytes());
        out.extend_from_slice(v);
    }
}

/// One `u32 length, bytes` value and the offset of its bytes.
fn read_value<'a>(r: &mut ByteReader<'a>) -> Result<(&'a [u8], usize)> {
    let len = r.u32()? as usize;
    let offset = r.offset();
    Ok((r.take(len)?, offset))
}

/// Decodes [`encode_plain`].
pub(crate) fn decode_plain<V: TextValue>(
    input: &[u8],
    base: usize,
    count: usize,
) -> Result<Vec<V>> {
    let mut r = ByteReader::new(input, base);
    if count > input.len() / 4 {
        return Err(r.error(format!(
            "{count} strings cannot fit in {} bytes",
            input.len()
        )));
    }
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let (bytes, offset) = read_value(&mut r)?;
        values.push(V::from_bytes(bytes, offset)?);
    }
    r.finish()?;
    Ok(values)
}

/// The distinct values in first-seen order and each value's index, or `None` when there are more
/// than `distinct_max` distinct values or the column's text exceeds [`DICTIONARY_TEXT_BYTES_MAX`].
pub(crate) fn build_dictionary<V: AsRef<[u8]>>(
    values: &[V],
    distinct_max: usize,
) -> Option<(Vec<&[u8]>, Vec<u32>)> {
    let text_bytes: usize = values.iter().map(|v| v.as_ref().len()).sum();
    if text_bytes > DICTIONARY_TEXT_BYTES_MAX {
        return None;
    }
    let mut index_of: HashMap<&[u8], u32> = HashMap::new();
    let mut distinct = Vec::new();
    let mut indexes = Vec::with_capacity(values.len());
    for v in values {
        let next = distinct.len() as u32;
        let index = *index_of.entry(v.as_ref()).or_insert(next);
        if index == next {
            if distinct.len() == distinct_max {
                return None;
            }
            distinct.push(v.as_ref());
        }
        indexes.push(index);
    }
    Some((distinct, indexes))
}

/// Dictionary: `u32 distinct count d, d × {u32 length, bytes}, u8 width, packed indexes` with
/// width = the bits of d - 1 (0 when d ≤ 1).
pub(crate) fn encode_dictionary(distinct: &[&[u8]], indexes: &[u32], out: &mut Vec<u8>) {
    let d = u32::try_from(distinct.len()).unwrap_or_else(|_| panic!("{} entries", distinct.len()));
    out.extend_from_slice(&d.to_le_bytes());
    for entry in distinct {
        out.extend_from_slice(&len32(entry).to_le_bytes());
        out.extend_from_slice(entry);
    }
    let width = bit_width(u64::from(d.saturating_sub(1)));
    out.push(width as u8);
    let mut bits = BitWriter::new(out);
    for &i in indexes {
        assert!(i < d, "index {i} of {d} entries");
        bits.write(u64::from(i), width);
    }
    bits.finish();
}

/// Decodes [`encode_dictionary`].
pub(crate) fn decode_dictionary<V: TextValue + Clone>(
    input: &[u8],
    base: usize,
    count: usize,
) -> Result<Vec<V>> {
    let mut r = ByteReader::new(input, base);
    let d = r.u32()? as usize;
    if d > count || (d == 0) != (count == 0) || d > r.remaining() / 4 {
        return Err(CodecError::new(
            base,
            format!("dictionary of {d} entries for {count} values"),
        ));
    }
    let mut distinct = Vec::with_capacity(d);
    for _ in 0..d {
        let (bytes, offset) = read_value(&mut r)?;
        distinct.push(V::from_bytes(bytes, offset)?);
    }
    let width = u32::from(r.u8()?);
    if width > 32 {
        return Err(r.error(format!("dictionary index width {width} exceeds 32")));
    }
    let offset = r.offset();
    let packed = r.take(count.saturating_mul(width as usize).div_ceil(8))?;
    r.finish()?;
    let mut bits = BitReader::new(packed, offset);
    let mut values = Vec::with_capacity(count);
    let mut text_bytes = 0usize;
    for _ in 0..count {
        let i = bits.read(width)? as usize;
        let entry = distinct
            .get(i)
            .ok_or_else(|| bits.error(format!("dictionary index {i} of {d} entries")))?;
        text_bytes += entry.as_ref().len();
        if text_bytes > DICTIONARY_TEXT_BYTES_MAX {
            return Err(bits.error(format!(
                "dictionary column decodes to more than {DICTIONARY_TEXT_BYTES_MAX} bytes"
            )));
        }
        values.push(entry.clone());
    }
    Ok(values)
}
