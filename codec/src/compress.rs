//! The compressors, applied by the caller to whole encoded chunks. Each compressed form is one
//! self-contained block of its format; the caller stores the uncompressed length next to it, and
//! decompression refuses input that does not come back to exactly that length, allocating no
//! more than it.

use std::io::{Read, Write};

use crate::error::{CodecError, Result};
use crate::names::Compressor;

/// LZ4 expands at most about 255 times (one literal-length byte of 255 per 255 output bytes);
/// a claimed length beyond this bound is corrupt and is refused before anything is allocated.
const LZ4_EXPANSION_MAX: usize = 255;

/// zstd's level: its default, the speed/ratio point most deployments use.
const ZSTD_LEVEL: i32 = 3;

/// The xz preset: 0 has a 256 KiB dictionary and needs ~3 MiB to compress, fitting pages of at
/// most a few hundred KiB (higher presets allocate up to ~100 MiB per call and gain nothing on
/// inputs this small).
const XZ_PRESET: u32 = 0;

/// What an xz decoder may allocate: ample for preset 0 to 9 streams, a bound for corrupt ones.
const XZ_MEMORY_MAX: u64 = 128 << 20;

/// Appends `input` compressed. `Lz4` writes one raw LZ4 block (no frame, no length prefix).
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
        Compressor::Snappy => {
            let start = out.len();
            out.resize(start + snap::raw::max_compress_len(input.len()), 0);
            let written = snap::raw::Encoder::new()
                .compress(input, &mut out[start..])
                .unwrap_or_else(|e| panic!("Snappy output sized by its own bound: {e}"));
            out.truncate(start + written);
        }
        Compressor::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            encoder
                .write_all(input)
                .and_then(|()| encoder.finish().map(drop))
                .unwrap_or_else(|e| panic!("gzip into memory: {e}"));
        }
        Compressor::Zstd => {
            let compressed = zstd::bulk::compress(input, ZSTD_LEVEL)
                .unwrap_or_else(|e| panic!("zstd into memory: {e}"));
            out.extend_from_slice(&compressed);
        }
        Compressor::Lzma2 => {
            let stream =
                liblzma::stream::Stream::new_easy_encoder(XZ_PRESET, liblzma::stream::Check::None)
                    .unwrap_or_else(|e| panic!("xz encoder at preset {XZ_PRESET}: {e}"));
            let mut encoder = liblzma::write::XzEncoder::new_stream(out, stream);
            encoder
                .write_all(input)
                .and_then(|()| encoder.finish().map(drop))
                .unwrap_or_else(|e| panic!("xz into memory: {e}"));
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
    let start = out.len();
    let result = match c {
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
        Compressor::Snappy => decompress_snappy(input, uncompressed_len, out),
        Compressor::Gzip => read_exactly(
            flate2::read::GzDecoder::new(input),
            "gzip",
            uncompressed_len,
            out,
        ),
        Compressor::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(input)
                .map_err(|e| CodecError::new(0, format!("zstd decoder: {e}")))?;
            read_exactly(decoder, "zstd", uncompressed_len, out)
        }
        Compressor::Lzma2 => {
            let stream = liblzma::stream::Stream::new_stream_decoder(XZ_MEMORY_MAX, 0)
                .map_err(|e| CodecError::new(0, format!("xz decoder: {e}")))?;
            read_exactly(
                liblzma::read::XzDecoder::new_stream(input, stream),
                "xz",
                uncompressed_len,
                out,
            )
        }
    };
    if result.is_err() {
        out.truncate(start);
    }
    result
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
    decompress_block("LZ4", input, uncompressed_len, out, |dst| {
        lz4_flex::block::decompress_into(input, dst)
    })
}

/// Runs a block decompressor into `uncompressed_len` bytes appended to `out` (the caller has
/// checked the length is plausible), which must all be written.
fn decompress_block<E: std::fmt::Display>(
    format: &str,
    input: &[u8],
    uncompressed_len: usize,
    out: &mut Vec<u8>,
    decompress_into: impl FnOnce(&mut [u8]) -> std::result::Result<usize, E>,
) -> Result<()> {
    let start = out.len();
    out.resize(start + uncompressed_len, 0);
    match decompress_into(&mut out[start..]) {
        Ok(n) if n == uncompressed_len => Ok(()),
        Ok(n) => Err(CodecError::new(
            input.len(),
            format!("{format} block decompressed to {n} bytes, {uncompressed_len} expected"),
        )),
        Err(e) => Err(CodecError::new(0, format!("corrupt {format} block: {e}"))),
    }
}

/// Snappy expands at most about 21 times (a 3-byte copy element emits 64 bytes).
const SNAPPY_EXPANSION_MAX: usize = 32;

/// Decompresses one raw Snappy block, whose header states its length: checked first.
fn decompress_snappy(input: &[u8], uncompressed_len: usize, out: &mut Vec<u8>) -> Result<()> {
    if uncompressed_len > input.len().saturating_mul(SNAPPY_EXPANSION_MAX) + 16 {
        return Err(CodecError::new(
            0,
            format!(
                "Snappy block of {} bytes cannot expand to {uncompressed_len}",
                input.len()
            ),
        ));
    }
    let stated = snap::raw::decompress_len(input)
        .map_err(|e| CodecError::new(0, format!("corrupt Snappy block: {e}")))?;
    if stated != uncompressed_len {
        return Err(CodecError::new(
            0,
            format!("Snappy block of {stated} bytes, {uncompressed_len} expected"),
        ));
    }
    decompress_block("Snappy", input, uncompressed_len, out, |dst| {
        snap::raw::Decoder::new().decompress(input, dst)
    })
}

/// Reads a streaming decoder to its end, which must come at exactly `uncompressed_len` bytes: one
/// byte more is read to tell, and the output grows as bytes arrive, so a corrupt stream or a
/// wrong length never makes this allocate more than the stream really holds.
fn read_exactly(
    decoder: impl Read,
    format: &str,
    uncompressed_len: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    let start = out.len();
    let limit = (uncompressed_len as u64).saturating_add(1);
    match decoder.take(limit).read_to_end(out) {
        Ok(n) if n == uncompressed_len => Ok(()),
        Ok(n) => {
            let n = if n as u64 == limit {
                format!("more than {uncompressed_len}")
            } else {
                n.to_string()
            };
            out.truncate(start);
            Err(CodecError::new(
                0,
                format!("{format} stream decompressed to {n} bytes, {uncompressed_len} expected"),
            ))
        }
        Err(e) => Err(CodecError::new(0, format!("corrupt {format} stream: {e}"))),
    }
}
