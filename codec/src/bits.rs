//! Byte and bit primitives: LEB128 varints, zigzag, a bit writer and bit reader over 64-bit words,
//! and a bounds-checked byte reader. Bit streams are least-significant-bit first (see the crate
//! doc, "Conventions").

use crate::error::{CodecError, Result};

/// Maps a signed integer to an unsigned one so that small magnitudes get small codes:
/// 0, -1, 1, -2, … → 0, 1, 2, 3, ….
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub(crate) fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub(crate) fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzagged, as an unsigned LEB128 varint.
#[inline]
pub(crate) fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, zigzag(v));
}

/// The number of bits needed to hold `v` (0 for 0).
#[inline]
pub(crate) fn bit_width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// The low `width` bits set (`width` ≤ 64).
#[inline]
pub(crate) fn low_mask(width: u32) -> u64 {
    debug_assert!(width <= 64, "mask width {width}");
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Appends fields of 0 to 64 bits to a byte vector, least significant bit first, buffering a
/// 64-bit word. [`BitWriter::finish`] pads the last byte with zero bits.
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Bits not yet flushed, in the low `used` bits.
    word: u64,
    /// Bits used in `word`; always < 64.
    used: u32,
}

impl<'a> BitWriter<'a> {
    /// A writer appending to `out` from its current end.
    pub(crate) fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        BitWriter {
            out,
            word: 0,
            used: 0,
        }
    }

    /// Appends the low `width` bits of `value`; the bits above `width` must be zero.
    #[inline]
    pub(crate) fn write(&mut self, value: u64, width: u32) {
        // Checked in debug builds only: this is the innermost loop of every bit-packed codec, and
        // every caller derives `width` from the value itself.
        debug_assert!(
            width <= 64 && value & !low_mask(width) == 0,
            "value {value:#x} does not fit in {width} bits"
        );
        if width == 0 {
            return;
        }
        self.word |= value << self.used;
        let total = self.used + width;
        if total >= 64 {
            self.out.extend_from_slice(&self.word.to_le_bytes());
            self.word = if self.used == 0 {
                0
            } else {
                value >> (64 - self.used)
            };
            self.used = total - 64;
        } else {
            self.used = total;
        }
    }

    /// Flushes the buffered bits, zero-padding to a whole byte.
    pub(crate) fn finish(self) {
        let bytes = self.used.div_ceil(8) as usize;
        self.out
            .extend_from_slice(&self.word.to_le_bytes()[..bytes]);
    }
}

/// Reads fields of 0 to 64 bits from a byte slice, least significant bit first. Every read is
/// bounds-checked: past the end of the slice it is an error, never a panic.
pub(crate) struct BitReader<'a> {
    input: &'a [u8],
    /// Next bit to read.
    position_bits: usize,
    /// `input.len() * 8`.
    len_bits: usize,
    /// Offset of `input` in the caller's slice, for errors.
    base: usize,
}

impl<'a> BitReader<'a> {
    /// A reader over `input`, which starts `base` bytes into the caller's slice.
    pub(crate) fn new(input: &'a [u8], base: usize) -> BitReader<'a> {
        BitReader {
            input,
            position_bits: 0,
            len_bits: input.len() * 8,
            base,
        }
    }

    /// An error at the current position.
    pub(crate) fn error(&self, reason: impl Into<String>) -> CodecError {
        CodecError::new(self.base + self.position_bits / 8, reason)
    }

    /// The 8 bytes from `byte` as a little-endian word, zero-filled past the end of the input.
    #[inline]
    fn load(&self, byte: usize) -> u64 {
        match self.input.get(byte..).and_then(|s| s.first_chunk::<8>()) {
            Some(word) => u64::from_le_bytes(*word),
            None => {
                let mut word = [0u8; 8];
                let tail = self.input.get(byte..).unwrap_or(&[]);
                word[..tail.len()].copy_from_slice(tail);
                u64::from_le_bytes(word)
            }
        }
    }

    /// Reads `width` (≤ 64) bits.
    #[inline]
    pub(crate) fn read(&mut self, width: u32) -> Result<u64> {
        debug_assert!(width <= 64, "read width {width}");
        if self.position_bits + width as usize > self.len_bits {
            return Err(self.error(format!(
                "bit stream truncated: {width} bits wanted, {} left",
                self.len_bits - self.position_bits
            )));
        }
        // One unaligned load covers up to 57 bits after a shift of at most 7; wider fields take two.
        let value = if width <= 56 {
            let shift = (self.position_bits % 8) as u32;
            (self.load(self.position_bits / 8) >> shift) & low_mask(width)
        } else {
            let low = self.read_unchecked(32);
            let high = self.read_unchecked(width - 32);
            return Ok(low | (high << 32));
        };
        self.position_bits += width as usize;
        Ok(value)
    }

    /// Reads `width` ≤ 56 bits already known to be in bounds.
    #[inline]
    fn read_unchecked(&mut self, width: u32) -> u64 {
        let shift = (self.position_bits % 8) as u32;
        let value = (self.load(self.position_bits / 8) >> shift) & low_mask(width);
        self.position_bits += width as usize;
        value
    }

    /// Checks that only padding (fewer than 8 bits) is left.
    pub(crate) fn finish(&self) -> Result<()> {
        let left = self.len_bits - self.position_bits;
        if left >= 8 {
            return Err(self.error(format!("{} trailing bytes after the last value", left / 8)));
        }
        Ok(())
    }
}

/// Reads bytes and varints from a slice, bounds-checked, with offsets for errors.
pub(crate) struct ByteReader<'a> {
    input: &'a [u8],
    position: usize,
    /// Offset of `input` in the caller's slice, for errors.
    base: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader over `input`, which starts `base` bytes into the caller's slice.
    pub(crate) fn new(input: &'a [u8], base: usize) -> ByteReader<'a> {
        ByteReader {
            input,
            position: 0,
            base,
        }
    }

    /// Offset of the next byte in the caller's slice.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.position
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.input.len() - self.position
    }

    /// An error at the current position.
    pub(crate) fn error(&self, reason: impl Into<String>) -> CodecError {
        CodecError::new(self.offset(), reason)
    }

    /// The next `n` bytes.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "truncated: {n} bytes wanted, {} left",
                self.remaining()
            )));
        }
        let bytes = &self.input[self.position..self.position + n];
        self.position += n;
        Ok(bytes)
    }

    /// The rest of the input, with the offset it starts at.
    pub(crate) fn take_rest(&mut self) -> (&'a [u8], usize) {
        let offset = self.offset();
        let rest = &self.input[self.position..];
        self.position = self.input.len();
        (rest, offset)
    }

    /// One byte.
    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u32.
    pub(crate) fn u32(&mut self) -> Result<u32> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// An unsigned LEB128 varint of at most 10 bytes whose value fits in 64 bits.
    #[inline]
    pub(crate) fn uvarint(&mut self) -> Result<u64> {
        let start = self.position;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.input.get(self.position) else {
                self.position = start;
                return Err(self.error("truncated varint"));
            };
            self.position += 1;
            if i == 9 && byte > 1 {
                self.position = start;
                return Err(self.error("varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        self.position = start;
        Err(self.error("varint longer than 10 bytes"))
    }

    /// A zigzagged LEB128 varint.
    #[inline]
    pub(crate) fn zigzag(&mut self) -> Result<i64> {
        self.uvarint().map(unzigzag)
    }

    /// Checks that every byte was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(self.error(format!(
                "{} trailing bytes after the last value",
                self.remaining()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_extremes() {
        for v in [0, 1, -1, 2, -2, i64::MAX, i64::MIN, 63, -64] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        let mut out = Vec::new();
        for v in [0, 127, 128, 300, u64::MAX] {
            out.clear();
            put_uvarint(&mut out, v);
            let mut r = ByteReader::new(&out, 0);
            assert_eq!(r.uvarint(), Ok(v));
            assert!(r.finish().is_ok());
        }
        assert_eq!(out.len(), 10);
        let mut overflow = out.clone();
        overflow[9] = 0x02;
        assert!(ByteReader::new(&overflow, 0).uvarint().is_err());
        assert!(ByteReader::new(&[0x80; 11], 0).uvarint().is_err());
        assert!(ByteReader::new(&[0x80], 0).uvarint().is_err());
    }

    #[test]
    fn bits_round_trip_at_every_width_and_alignment() {
        let mut out = Vec::new();
        let mut w = BitWriter::new(&mut out);
        let mut fields = Vec::new();
        for width in 0..=64u32 {
            for salt in [0u64, u64::MAX, 0x5555_5555_5555_5555] {
                let v = salt & low_mask(width);
                w.write(v, width);
                fields.push((v, width));
            }
        }
        w.finish();
        let total: u32 = fields.iter().map(|f| f.1).sum();
        assert_eq!(out.len(), total.div_ceil(8) as usize);
        let mut r = BitReader::new(&out, 0);
        for (v, width) in fields {
            assert_eq!(r.read(width), Ok(v), "width {width}");
        }
        assert!(r.finish().is_ok());
        assert!(r.read(9).is_err());
    }
}
