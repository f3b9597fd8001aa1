//! Lossless column encodings for time series: what the storage engine writes for one series' chunk
//! in a sealed file (typically 1 to 100,000 points), and the compressor applied around it.
//!
//! Every codec round-trips every value bit for bit: `i64::MIN`/`MAX`, NaN payloads, -0.0, ±inf,
//! any timestamp sequence (ascending or not: all arithmetic wraps). Decoders take the exact bytes
//! of one column and the `count` the caller stored, and answer garbage, truncation, a count that
//! does not match, trailing bytes, bit widths over 64, runs past `count`, dictionary indexes out of
//! range or invalid UTF-8 with a [`CodecError`], never a panic; they allocate no more than `count`
//! (at most [`COUNT_MAX`]) and the input's length justify.
//!
//! Architecture invariant: pure functions over byte slices. No I/O, no async, no dependency on
//! the storage engine; the engine stores lengths, counts, CRCs and the compressor around these
//! bytes.
//!
//! # Format, version 1
//!
//! ## Conventions
//! - Integers on disk are little-endian. `varint` is unsigned LEB128 (7 bits a byte, low group
//!   first, high bit = more follows; at most 10 bytes, the value fits in 64 bits). `zigzag varint`
//!   is the varint of `(v << 1) ^ (v >> 63)` (0, -1, 1, -2 → 0, 1, 2, 3).
//! - A bit stream is read from the least significant bit of byte 0 upward, then byte 1, and so
//!   on; a field of width `w` takes the next `w` bits and its least significant bit comes first.
//!   The stream ends zero-padded to a whole byte and must end within the last byte.
//! - Every numeric value has an *integer view* (INT32/INT64: the value; FLOAT/DOUBLE: the bit
//!   pattern as a signed i32/i64, widened to i64) and a *word view* of `W` = 32 or 64 bits (the
//!   two's-complement or IEEE-754 bit pattern). Integer arithmetic wraps modulo 2^64; an INT32 or
//!   FLOAT integer view that decodes outside i32 is an error.
//! - All of a column's input is consumed: trailing bytes are an error.
//!
//! ## Timestamps
//! [`encode_timestamps`] writes `varint count`, then a
//! [DeltaBitPack](#2-deltabitpack-ts_2diff) body (no codec byte).
//!
//! ## Columns
//! [`encode_column`] writes `u8 codec` ([`CodecId`]), `varint count`, then the codec's body. The
//! count repeats the caller's (which the decoder checks it against) because a bit stream's
//! padding could otherwise decode as one value more.
//!
//! | byte | codec | types |
//! |---|---|---|
//! | 1 | Plain | all |
//! | 2 | DeltaBitPack (TS_2DIFF) | INT32, INT64 |
//! | 3 | Rle | INT32, INT64, FLOAT, DOUBLE |
//! | 4 | Zigzag | INT32, INT64 |
//! | 5 | Gorilla | INT32, INT64, FLOAT, DOUBLE |
//! | 6 | Chimp (Chimp128) | INT32, INT64, FLOAT, DOUBLE |
//! | 7 | ScaledDecimal | FLOAT, DOUBLE |
//! | 8 | BoolRle | BOOLEAN |
//! | 9 | Dictionary | TEXT |
//! | 10 | RunBitPack | INT32, INT64, FLOAT, DOUBLE |
//!
//! Byte 0 and bytes 11 to 255 are not codecs. With count 0 every body is empty, except
//! Dictionary (`u32 0, u8 0`) and ScaledDecimal (`u8 k, varint 0, u8 inner`; never written).
//!
//! ### 1 Plain
//! - INT32/FLOAT: count × 4 bytes; INT64/DOUBLE: count × 8 bytes (the word view, LE).
//! - BOOLEAN: a bitmap of `ceil(count / 8)` bytes, value `i` = bit `i % 8` of byte `i / 8`;
//!   padding bits are zero.
//! - TEXT: count × `{u32 length, length bytes of UTF-8}`.
//!
//! ### 2 DeltaBitPack (TS_2DIFF)
//! Over the integer view, for count ≥ 1: `zigzag varint first value`, then the `count - 1`
//! deltas `d[i] = v[i] - v[i-1]` in blocks of 128 (the last block may be shorter), each block
//! `{zigzag varint m, u8 width w ≤ 64, ceil(len × w / 8) bytes}` where `m` is the block's minimum
//! delta and the bytes are a bit stream of `len` fields of `w` bits holding `d[i] - m` (as u64).
//! Decoding: `v[i] = v[i-1] + m + field` (wrapping). Constant intervals give `w = 0`. A width
//! byte of `0x80` instead means width 0 for this block and for the `varint n ≥ 1` blocks that
//! follow it (no bytes of their own; each full but the last): regular timestamps cost a few
//! bytes per column.
//!
//! ### 3 Rle
//! Over the integer view (floats compare by bit pattern): runs `{zigzag varint (value - previous
//! run's value), varint length ≥ 1}`, the value before the first run being 0; lengths sum to
//! `count`.
//!
//! ### 4 Zigzag
//! count × `zigzag varint value`.
//!
//! ### 5 Gorilla
//! Over the word view, one bit stream: the first value in `W` bits; then per value, with `x` its
//! XOR with the previous value:
//! - `0` (1 bit): `x = 0`.
//! - `1, 0`: `x` lies in the current window `(lz, len)`: `len` bits holding `x >> (W - lz - len)`.
//!   An error before any window was set.
//! - `1, 1, lz (5 bits), len (6 bits if W = 64, 5 if W = 32; 0 stands for W), len bits`: a new
//!   window, `lz + len ≤ W`; the bits hold `x >> (W - lz - len)`.
//!
//! The encoder reuses the window when `x` has at least its leading and trailing zeros, else
//! writes a new one (leading zeros capped at 31).
//!
//! ### 6 Chimp (Chimp128)
//! Over the word view, one bit stream, with a ring of the last 128 values (value `i` in slot
//! `i % 128`): the first value in `W` bits; then per value `i` a 2-bit flag:
//! - `0, slot (7 bits)`: the value equals ring slot `slot`.
//! - `1, slot (7), lz code (3), s (6 bits if W = 64, 5 if W = 32), s bits`: the value is ring
//!   slot `slot` XOR `bits << (W - LZ[code] - s)`; `1 ≤ s`, `LZ[code] + s ≤ W`.
//! - `2, W - L bits`: the value is the previous value XOR these bits, `L` the leading-zero count
//!   of the last flag-3 record; an error if a flag 0 or 1 came after it, or none came before.
//! - `3, lz code (3), W - LZ[code] bits`: as flag 2 with `L = LZ[code]`, which later flag-2
//!   records reuse.
//!
//! `LZ = [0, 8, 12, 16, 18, 20, 22, 24]`; a slot must hold one of the values decoded so far. The
//! encoder (after Liakos et al., VLDB 2022) looks up the last value whose low 14 bits (13 for
//! W = 32) match in a table and uses flag 1 when the XOR with it has more than 13 (12) trailing
//! zeros; flag 2 or 3 otherwise, against the previous value, with the leading zeros rounded down
//! to an `LZ` entry.
//!
//! ### 7 ScaledDecimal
//! `u8 k, varint e, e × {varint gap, W/8 bytes raw word (LE)}, u8 inner codec (2 DeltaBitPack,
//! 3 Rle or 10 RunBitPack), inner body over count i64 integers m`. Value `i` is the float nearest
//! `(m[i] as f64) / 10^k` (computed in f64, then rounded to f32 for FLOAT), except at the `e`
//! exception positions (`e ≤ count`), ascending, where it is the raw word: the first exception
//! is at position `gap`, each next one at the previous position + 1 + `gap`, all below count.
//! `k ≤ 15` for DOUBLE, `≤ 10` for FLOAT. The encoder picks the smallest `k` for which the
//! values come back bit for bit this way with `|m| ≤ 2^53`, makes the values that never do (NaN,
//! ±inf, -0.0, longer decimals; at most 8 + count/16 of them) exceptions, and writes the
//! previous integer (0 for the first) as their `m`.
//!
//! ### 8 BoolRle
//! For count ≥ 1: `u8 first value (0 or 1)`, then varint run lengths ≥ 1 alternating between
//! the first value and its negation, summing to `count`.
//!
//! ### 9 Dictionary
//! `u32 d` (distinct values, `1 ≤ d ≤ count`, or 0 when count is 0), `d × {u32 length, UTF-8}`,
//! `u8 width ≤ 32`, then a bit stream of `count` fields of `width` bits, each an index `< d`
//! (the encoder writes width = bits of `d - 1`). A column that would decode to more than
//! [`DICTIONARY_TEXT_BYTES_MAX`] bytes of text is an error; the encoder writes Plain instead.
//!
//! ### 10 RunBitPack
//! Over the integer view, the runs of equal values (as Rle): `varint r` (runs; 0 exactly when
//! count is 0, at most count), `varint v`, then `v` bytes holding a DeltaBitPack body (as §2,
//! without count) of the `r` run values, then a DeltaBitPack body of the `r` run lengths (each
//! ≥ 1, summing to count) filling the rest. Rle spends at least a byte per run on each varint;
//! this packs a run's value change and length into the bits their block needs, so levels that
//! last a regular number of rows cost about their value bits alone. Adaptive encoding writes
//! whichever of Rle and RunBitPack is smaller.
//!
//! ## Compressors
//! [`compress`] writes one self-contained block; the caller stores the uncompressed length and
//! the compressor's byte ([`Compressor::byte`]):
//!
//! | byte | compressor | block |
//! |---|---|---|
//! | 0 | UNCOMPRESSED | the bytes |
//! | 1 | LZ4 | one raw LZ4 block (the block format: no frame, no checksum, no length) |
//! | 2 | SNAPPY | one raw Snappy block (its varint length, then elements; no framing) |
//! | 3 | GZIP | one gzip member (RFC 1952), deflate level 6 |
//! | 4 | ZSTD | one Zstandard frame, level 3 |
//! | 5 | LZMA2 | one .xz stream, LZMA2 preset 0, no integrity check |
//!
//! [`decompress`] refuses a block that does not come back to exactly the stored length.
#![deny(missing_docs)]

mod bits;
mod boolean;
mod column;
mod compress;
mod decimal;
mod error;
mod int;
mod names;
mod scalar;
mod text;
mod xor;

pub use column::{
    bit_identical, decode_column, decode_timestamps, encode_column, encode_timestamps, COUNT_MAX,
};
pub use compress::{compress, decompress};
pub use error::{CodecError, Result};
pub use names::{Choice, CodecId, Compressor, Encoding, SeriesCodec};
pub use text::DICTIONARY_TEXT_BYTES_MAX;
