//! The compressors, applied by the caller to whole encoded chunks.

use crate::error::{CodecError, Result};
use crate::names::Compressor;

/// LZ4 expands at most about 255 times (one literal-length byte of 255 per 255 output bytes);
/// a claimed length beyond this bound is corrupt and is refused before anything is allocated.
const LZ4_EXPANSION_MAX: usize = 255;

/// Appends `input` compressed. `Lz4` writes one raw LZ4 block (no frame, no length prefix): the
/// caller stores the uncompressed length next to it.
pub fn compress(c: Compressor, input: &[u8], out: &mut Vec<u8>) {
    match c {
        Compressor::Uncompressed => out.extend_from_slice(input),
        Compressor::Lz4 => {
            let start = out.len();
            out.resize(
                start + lz4_flex::block::get_maximum_output_size(input.len()),
                0,
            );
            let written = lz4_flex::block::compress_into(input, &mut out[start..])
                .unwrap_or_else(|e| panic!("LZ4 output sized by its own bound: {e}"));
            out.truncate(start + written);
        }
    }
}

/// Appends the `uncompressed_len` bytes that `input` decompresses to; on error `out` is left as
/// it was.
pub fn decompress(
    c: Compressor,
    input: &[u8],
    uncompressed_len: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    match c {
        Compressor::Uncompressed => {
            if input.len() != uncompressed_len {
                return Err(CodecError::new(
                    0,
                    format!(
                        "uncompressed block of {} bytes, {uncompressed_len} expected",
                        input.len()
                    ),
                ));
            }
            out.extend_from_slice(input);
            Ok(())
        }
        Compressor::Lz4 => decompress_lz4(input, uncompressed_len, out),
    }
}

/// Decompresses one LZ4 block of exactly `uncompressed_len` bytes.
fn decompress_lz4(input: &[u8], uncompressed_len: usize, out: &mut Vec<u8>) -> Result<()> {
    if uncompressed_len > input.len().saturating_mul(LZ4_EXPANSION_MAX) + 16 {
        return Err(CodecError::new(
            0,
            format!(
                "LZ4 block of {} bytes cannot expand to {uncompressed_len}",
                input.len()
            ),
        ));
    }
    let start = out.len();
    out.resize(start + uncompressed_len, 0);
    match lz4_flex::block::decompress_into(input, &mut out[start..]) {
        Ok(n) if n == uncompressed_len => Ok(()),
        Ok(n) => {
            out.truncate(start);
            Err(CodecError::new(
                input.len(),
                format!("LZ4 block decompressed to {n} bytes, {uncompressed_len} expected"),
            ))
        }
        Err(e) => {
            out.truncate(start);
            Err(CodecError::new(0, format!("corrupt LZ4 block: {e}")))
        }
    }
}
