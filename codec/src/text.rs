//! The text codecs: `PLAIN` (length-prefixed UTF-8) and a dictionary of distinct values with
//! bit-packed indexes.

use std::collections::HashMap;

use crate::bits::{bit_width, BitReader, BitWriter, ByteReader};
use crate::error::{CodecError, Result};

/// The most bytes of text a dictionary-encoded column may decode to. A dictionary repeats its
/// entries, so this, not the input length, bounds what a decode allocates; the encoder writes a
/// larger column as `PLAIN`, whose output never exceeds its input.
pub const DICTIONARY_TEXT_BYTES_MAX: usize = 256 << 20;

/// A string's length as the u32 on disk; past u32 it is a bug (tablets limit values to far less).
fn len32(s: &str) -> u32 {
    u32::try_from(s.len()).unwrap_or_else(|_| panic!("text value of {} bytes", s.len()))
}

/// `PLAIN`: per value `u32 length, UTF-8 bytes`.
pub(crate) fn encode_plain(values: &[String], out: &mut Vec<u8>) {
    for v in values {
        out.extend_from_slice(&len32(v).to_le_bytes());
        out.extend_from_slice(v.as_bytes());
    }
}

/// One `u32 length, UTF-8 bytes` string.
fn read_string<'a>(r: &mut ByteReader<'a>) -> Result<&'a str> {
    let len = r.u32()? as usize;
    let offset = r.offset();
    let bytes = r.take(len)?;
    std::str::from_utf8(bytes)
        .map_err(|e| CodecError::new(offset + e.valid_up_to(), "text is not valid UTF-8"))
}

/// Decodes [`encode_plain`].
pub(crate) fn decode_plain(input: &[u8], base: usize, count: usize) -> Result<Vec<String>> {
    let mut r = ByteReader::new(input, base);
    if count > input.len() / 4 {
        return Err(r.error(format!(
            "{count} strings cannot fit in {} bytes",
            input.len()
        )));
    }
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        values.push(read_string(&mut r)?.to_owned());
    }
    r.finish()?;
    Ok(values)
}

/// The distinct values in first-seen order and each value's index, or `None` when there are more
/// than `distinct_max` distinct values or the column's text exceeds [`DICTIONARY_TEXT_BYTES_MAX`].
pub(crate) fn build_dictionary(
    values: &[String],
    distinct_max: usize,
) -> Option<(Vec<&str>, Vec<u32>)> {
    let text_bytes: usize = values.iter().map(String::len).sum();
    if text_bytes > DICTIONARY_TEXT_BYTES_MAX {
        return None;
    }
    let mut index_of: HashMap<&str, u32> = HashMap::new();
    let mut distinct = Vec::new();
    let mut indexes = Vec::with_capacity(values.len());
    for v in values {
        let next = distinct.len() as u32;
        let index = *index_of.entry(v.as_str()).or_insert(next);
        if index == next {
            if distinct.len() == distinct_max {
                return None;
            }
            distinct.push(v.as_str());
        }
        indexes.push(index);
    }
    Some((distinct, indexes))
}

/// Dictionary: `u32 distinct count d, d × {u32 length, UTF-8}, u8 width, packed indexes` with
/// width = the bits of d - 1 (0 when d ≤ 1).
pub(crate) fn encode_dictionary(distinct: &[&str], indexes: &[u32], out: &mut Vec<u8>) {
    let d = u32::try_from(distinct.len()).unwrap_or_else(|_| panic!("{} entries", distinct.len()));
    out.extend_from_slice(&d.to_le_bytes());
    for entry in distinct {
        out.extend_from_slice(&len32(entry).to_le_bytes());
        out.extend_from_slice(entry.as_bytes());
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
pub(crate) fn decode_dictionary(input: &[u8], base: usize, count: usize) -> Result<Vec<String>> {
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
        distinct.push(read_string(&mut r)?);
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
        let entry = *distinct
            .get(i)
            .ok_or_else(|| bits.error(format!("dictionary index {i} of {d} entries")))?;
        text_bytes += entry.len();
        if text_bytes > DICTIONARY_TEXT_BYTES_MAX {
            return Err(bits.error(format!(
                "dictionary column decodes to more than {DICTIONARY_TEXT_BYTES_MAX} bytes"
            )));
        }
        values.push(entry.to_owned());
    }
    Ok(values)
}
