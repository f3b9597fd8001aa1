//! The public entry points: timestamps, and columns with their codec byte, chosen by [`Choice`].

use common::{Column, DataType};

use crate::bits::{put_uvarint, ByteReader};
use crate::decimal::Scaled;
use crate::error::{CodecError, Result};
use crate::names::{Choice, CodecId, Encoding};
use crate::scalar::{Float, Scalar};
use crate::{boolean, decimal, int, text, xor};

/// The most values one call encodes or decodes. Encoding more is a bug in the caller (the storage
/// engine splits a series into chunks far below it); decoding a larger `count` is refused, which
/// bounds what a decoder allocates (at most 128 MiB of `i64`).
pub const COUNT_MAX: usize = 1 << 24;

/// Panics unless `n` values may be encoded.
fn assert_count(n: usize) {
    assert!(n <= COUNT_MAX, "{n} values exceed COUNT_MAX {COUNT_MAX}");
}

/// Refuses a `count` past [`COUNT_MAX`].
fn check_count(count: usize) -> Result<()> {
    if count > COUNT_MAX {
        return Err(CodecError::new(
            0,
            format!("count {count} exceeds COUNT_MAX {COUNT_MAX}"),
        ));
    }
    Ok(())
}

/// Appends timestamps: their count, then delta bit-packing (TS_2DIFF; no codec byte). Regular
/// intervals cost about 0.02 bytes a point, jitter a few bits. Any sequence round-trips, ascending
/// or not.
pub fn encode_timestamps(ts: &[i64], out: &mut Vec<u8>) {
    assert_count(ts.len());
    put_uvarint(out, ts.len() as u64);
    int::encode_delta_bitpack(ts, out);
}

/// Decodes exactly `count` timestamps from all of `input`.
pub fn decode_timestamps(input: &[u8], count: usize) -> Result<Vec<i64>> {
    check_count(count)?;
    let mut r = ByteReader::new(input, 0);
    check_stored_count(&mut r, count)?;
    let (body, base) = r.take_rest();
    int::decode_delta_bitpack(body, base, count)
}

/// Reads the stored count and checks it is the caller's.
fn check_stored_count(r: &mut ByteReader, count: usize) -> Result<()> {
    let offset = r.offset();
    let stored = r.uvarint()?;
    if stored != count as u64 {
        return Err(CodecError::new(
            offset,
            format!("{stored} values stored, {count} expected"),
        ));
    }
    Ok(())
}

/// Appends a column's header: the codec byte and the count.
fn header(out: &mut Vec<u8>, codec: CodecId, count: usize) {
    out.push(codec.byte());
    put_uvarint(out, count as u64);
}

/// Appends a self-describing encoded column (first byte: the codec actually used) and returns it.
///
/// `Choice::Fixed` maps IoTDB's encodings to codecs: `PLAIN` → Plain; `TS_2DIFF` on integers →
/// DeltaBitPack, on floats → ScaledDecimal over DeltaBitPack when the values are short decimals
/// (lossless: see below), else adaptive; `RLE` on integers → Rle, on floats → ScaledDecimal over Rle or Rle of
/// the bit patterns, on booleans → BoolRle; `ZIGZAG` → Zigzag; `GORILLA` → Gorilla; `CHIMP` →
/// Chimp; `DICTIONARY` → Dictionary (Plain past [`DICTIONARY_TEXT_BYTES_MAX`](crate::DICTIONARY_TEXT_BYTES_MAX)). An encoding the type
/// does not support is treated as `Choice::Adaptive`, which picks:
/// - booleans: BoolRle, or Plain (a bitmap) when that is smaller;
/// - integers: Rle or RunBitPack (the smaller) when there is at most one run per 8 values, else
///   DeltaBitPack;
/// - floats: ScaledDecimal when the values are decimals of at most 15 (DOUBLE) or 10 (FLOAT)
///   fractional digits (but for at most 8 + n/16 exceptions stored raw: NaN, ±inf, -0.0, longer
///   decimals; the integers under DeltaBitPack, or under the smaller of Rle and RunBitPack when
///   runs are long), else Rle or RunBitPack of the bit patterns when runs are long, else Chimp;
/// - text: Dictionary when at most a quarter of the values are distinct, else Plain;
///
/// and for numbers falls back to Plain whenever its pick came out larger. An empty column under
/// `Choice::Adaptive` is Plain with an empty body.
pub fn encode_column(column: &Column, choice: Choice, out: &mut Vec<u8>) -> CodecId {
    assert_count(column.len());
    let choice = match choice {
        Choice::Fixed(e) if !e.supports(column.data_type()) => Choice::Adaptive,
        choice => choice,
    };
    let start = out.len();
    let codec = match column {
        Column::Boolean(v) => encode_booleans(v, choice, out),
        Column::Int32(v) | Column::Date(v) => encode_ints(v, choice, out),
        Column::Int64(v) | Column::Timestamp(v) => encode_ints(v, choice, out),
        Column::Float(v) => encode_floats(v, choice, out),
        Column::Double(v) => encode_floats(v, choice, out),
        Column::Text(v) | Column::String(v) => encode_text(v, choice, out),
        Column::Blob(v) => encode_text(v, choice, out),
    };
    assert!(
        out.get(start) == Some(&codec.byte()) && codec.encodes(column.data_type()),
        "encoded a {} column as {codec} but wrote codec byte {:?}",
        column.data_type(),
        out.get(start)
    );
    debug_assert!(
        decode_column(&out[start..], column.data_type(), column.len())
            .is_ok_and(|decoded| bit_identical(&decoded, column)),
        "{codec} did not round-trip a {} column of {} values",
        column.data_type(),
        column.len()
    );
    codec
}

/// Decodes exactly `count` values of `data_type` from all of `input` (one encoded column).
pub fn decode_column(input: &[u8], data_type: DataType, count: usize) -> Result<Column> {
    check_count(count)?;
    let mut r = ByteReader::new(input, 0);
    let byte = r.u8()?;
    let codec = CodecId::from_byte(byte)
        .ok_or_else(|| CodecError::new(0, format!("unknown codec byte {byte}")))?;
    check_stored_count(&mut r, count)?;
    let (body, base) = r.take_rest();
    let at = Body { body, base, count };
    let column = match data_type {
        DataType::Boolean => Column::Boolean(decode_booleans(codec, at)?),
        DataType::Int32 => Column::Int32(decode_ints(codec, at)?),
        DataType::Int64 => Column::Int64(decode_ints(codec, at)?),
        DataType::Float => Column::Float(decode_floats(codec, at)?),
        DataType::Double => Column::Double(decode_floats(codec, at)?),
        DataType::Text => Column::Text(decode_text(codec, at)?),
        DataType::Timestamp => Column::Timestamp(decode_ints(codec, at)?),
        DataType::Date => Column::Date(decode_ints(codec, at)?),
        DataType::Blob => Column::Blob(decode_text(codec, at)?),
        DataType::String => Column::String(decode_text(codec, at)?),
    };
    assert_eq!(column.len(), count, "{codec} decoded the wrong count");
    Ok(column)
}

/// Whether two columns hold the same values bit for bit (floats by bit pattern, so NaN equals
/// the same NaN and -0.0 differs from 0.0), which is what every codec preserves.
pub fn bit_identical(a: &Column, b: &Column) -> bool {
    fn words<S: Scalar>(a: &[S], b: &[S]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_word() == y.to_word())
    }
    match (a, b) {
        (Column::Boolean(a), Column::Boolean(b)) => a == b,
        (Column::Int32(a), Column::Int32(b)) => a == b,
        (Column::Int64(a), Column::Int64(b)) => a == b,
        (Column::Float(a), Column::Float(b)) => words(a, b),
        (Column::Double(a), Column::Double(b)) => words(a, b),
        (Column::Text(a), Column::Text(b)) => a == b,
        (Column::Timestamp(a), Column::Timestamp(b)) => a == b,
        (Column::Date(a), Column::Date(b)) => a == b,
        (Column::Blob(a), Column::Blob(b)) => a == b,
        (Column::String(a), Column::String(b)) => a == b,
        _ => false,
    }
}

/// A column's body: its bytes, their offset in the column, and the count of values.
#[derive(Clone, Copy)]
struct Body<'a> {
    body: &'a [u8],
    base: usize,
    count: usize,
}

/// The error for a codec byte that does not encode the type asked for.
fn wrong_codec(codec: CodecId, type_name: &str) -> CodecError {
    CodecError::new(0, format!("codec {codec} does not encode {type_name}"))
}

/// The encoded length of a Plain column of `count` values with a body of `body_bytes`.
fn plain_len(count: usize, body_bytes: usize) -> usize {
    let mut varint = Vec::with_capacity(10);
    put_uvarint(&mut varint, count as u64);
    1 + varint.len() + body_bytes
}

/// Booleans: Plain is a bitmap, Rle is BoolRle.
fn encode_booleans(values: &[bool], choice: Choice, out: &mut Vec<u8>) -> CodecId {
    let codec = match choice {
        Choice::Fixed(Encoding::Plain) => CodecId::Plain,
        Choice::Fixed(Encoding::Rle) => CodecId::BoolRle,
        _ if values.is_empty() => CodecId::Plain,
        _ => {
            let start = out.len();
            header(out, CodecId::BoolRle, values.len());
            boolean::encode_runs(values, out);
            if out.len() - start <= plain_len(values.len(), values.len().div_ceil(8)) {
                return CodecId::BoolRle;
            }
            out.truncate(start);
            CodecId::Plain
        }
    };
    header(out, codec, values.len());
    match codec {
        CodecId::Plain => boolean::encode_bitmap(values, out),
        _ => boolean::encode_runs(values, out),
    }
    codec
}

/// Decodes a boolean column's body.
fn decode_booleans(codec: CodecId, Body { body, base, count }: Body) -> Result<Vec<bool>> {
    match codec {
        CodecId::Plain => boolean::decode_bitmap(body, base, count),
        CodecId::BoolRle => boolean::decode_runs(body, base, count),
        _ => Err(wrong_codec(codec, "BOOLEAN")),
    }
}

/// Appends the codec byte and the body of one of the codecs every numeric type has.
fn write_numeric<S: Scalar>(codec: CodecId, values: &[S], out: &mut Vec<u8>) {
    header(out, codec, values.len());
    match codec {
        CodecId::Plain => int::encode_plain(values, out),
        CodecId::DeltaBitPack => int::encode_delta_bitpack(values, out),
        CodecId::Rle => int::encode_rle(values, out),
        CodecId::RunBitPack => int::encode_run_bitpack(values, out),
        CodecId::Zigzag => int::encode_zigzag(values, out),
        CodecId::Gorilla => xor::encode_gorilla(values, out),
        CodecId::Chimp => xor::encode_chimp(values, out),
        other => panic!("{other} is not a codec over numeric words"),
    }
}

/// Writes `codec`, or Plain if that came out larger than Plain would be.
fn write_at_most_plain<S: Scalar>(codec: CodecId, values: &[S], out: &mut Vec<u8>) -> CodecId {
    let start = out.len();
    write_numeric(codec, values, out);
    if out.len() - start <= plain_len(values.len(), values.len() * (S::BITS / 8) as usize) {
        return codec;
    }
    out.truncate(start);
    write_numeric(CodecId::Plain, values, out);
    CodecId::Plain
}

/// INT32 and INT64.
fn encode_ints<S: Scalar>(values: &[S], choice: Choice, out: &mut Vec<u8>) -> CodecId {
    let codec = match choice {
        Choice::Fixed(Encoding::Plain) => CodecId::Plain,
        Choice::Fixed(Encoding::Ts2Diff) => CodecId::DeltaBitPack,
        Choice::Fixed(Encoding::Rle) => CodecId::Rle,
        Choice::Fixed(Encoding::Zigzag) => CodecId::Zigzag,
        Choice::Fixed(Encoding::Gorilla) => CodecId::Gorilla,
        Choice::Fixed(Encoding::Chimp) => CodecId::Chimp,
        Choice::Fixed(Encoding::Dictionary) | Choice::Adaptive => {
            return encode_ints_adaptive(values, out)
        }
    };
    write_numeric(codec, values, out);
    codec
}

/// Rle for few runs, else DeltaBitPack; Plain if smaller.
fn encode_ints_adaptive<S: Scalar>(values: &[S], out: &mut Vec<u8>) -> CodecId {
    if values.is_empty() {
        write_numeric(CodecId::Plain, values, out);
        return CodecId::Plain;
    }
    let codec = if int::count_runs(values) <= values.len() / 8 {
        smaller_run_codec(values)
    } else {
        CodecId::DeltaBitPack
    };
    write_at_most_plain(codec, values, out)
}

/// Rle or RunBitPack, whichever encodes `values` smaller (Rle on a tie): for columns with few
/// runs, where encoding both is cheap.
fn smaller_run_codec<S: Scalar>(values: &[S]) -> CodecId {
    let (mut rle, mut packed) = (Vec::new(), Vec::new());
    int::encode_rle(values, &mut rle);
    int::encode_run_bitpack(values, &mut packed);
    if packed.len() < rle.len() {
        CodecId::RunBitPack
    } else {
        CodecId::Rle
    }
}

/// Decodes an integer column's body.
fn decode_ints<S: Scalar>(codec: CodecId, Body { body, base, count }: Body) -> Result<Vec<S>> {
    match codec {
        CodecId::Plain => int::decode_plain(body, base, count),
        CodecId::DeltaBitPack => int::decode_delta_bitpack(body, base, count),
        CodecId::Rle => int::decode_rle(body, base, count),
        CodecId::RunBitPack => int::decode_run_bitpack(body, base, count),
        CodecId::Zigzag => int::decode_zigzag(body, base, count),
        CodecId::Gorilla => xor::decode_gorilla(body, base, count),
        CodecId::Chimp => xor::decode_chimp(body, base, count),
        _ => Err(wrong_codec(codec, S::TYPE_NAME)),
    }
}

/// FLOAT and DOUBLE.
fn encode_floats<F: Float>(values: &[F], choice: Choice, out: &mut Vec<u8>) -> CodecId {
    let codec = match choice {
        Choice::Fixed(Encoding::Plain) => CodecId::Plain,
        Choice::Fixed(Encoding::Gorilla) => CodecId::Gorilla,
        Choice::Fixed(Encoding::Chimp) => CodecId::Chimp,
        Choice::Fixed(Encoding::Ts2Diff) if !values.is_empty() => {
            return match decimal::detect(values) {
                Some(scaled) => write_scaled::<F>(&scaled, CodecId::DeltaBitPack, out),
                None => encode_floats_adaptive(values, None, out),
            }
        }
        Choice::Fixed(Encoding::Rle) if !values.is_empty() => match decimal::detect(values) {
            Some(scaled) => return write_scaled::<F>(&scaled, CodecId::Rle, out),
            None => CodecId::Rle,
        },
        _ => return encode_floats_adaptive(values, decimal::detect(values), out),
    };
    write_numeric(codec, values, out);
    codec
}

/// Appends a ScaledDecimal column.
fn write_scaled<F: Float>(scaled: &Scaled, inner: CodecId, out: &mut Vec<u8>) -> CodecId {
    header(out, CodecId::ScaledDecimal, scaled.ints.len());
    decimal::encode_body::<F>(scaled, inner, out);
    CodecId::ScaledDecimal
}

/// ScaledDecimal when `detected`, else Rle for few runs, else Chimp; Plain if smaller.
fn encode_floats_adaptive<F: Float>(
    values: &[F],
    detected: Option<Scaled>,
    out: &mut Vec<u8>,
) -> CodecId {
    if values.is_empty() {
        write_numeric(CodecId::Plain, values, out);
        return CodecId::Plain;
    }
    let plain_bytes = plain_len(values.len(), values.len() * (F::BITS / 8) as usize);
    if let Some(scaled) = detected {
        let start = out.len();
        let inner = match decimal::adaptive_inner(&scaled.ints) {
            CodecId::Rle => smaller_run_codec(&scaled.ints),
            inner => inner,
        };
        write_scaled::<F>(&scaled, inner, out);
        if out.len() - start <= plain_bytes {
            return CodecId::ScaledDecimal;
        }
        out.truncate(start);
    }
    let codec = if int::count_runs(values) <= values.len() / 8 {
        smaller_run_codec(values)
    } else {
        CodecId::Chimp
    };
    write_at_most_plain(codec, values, out)
}

/// Decodes a float column's body.
fn decode_floats<F: Float>(codec: CodecId, Body { body, base, count }: Body) -> Result<Vec<F>> {
    match codec {
        CodecId::Plain => int::decode_plain(body, base, count),
        CodecId::Rle => int::decode_rle(body, base, count),
        CodecId::RunBitPack => int::decode_run_bitpack(body, base, count),
        CodecId::Gorilla => xor::decode_gorilla(body, base, count),
        CodecId::Chimp => xor::decode_chimp(body, base, count),
        CodecId::ScaledDecimal => decimal::decode(body, base, count),
        _ => Err(wrong_codec(codec, F::TYPE_NAME)),
    }
}

/// TEXT.
fn encode_text<V: AsRef<[u8]>>(values: &[V], choice: Choice, out: &mut Vec<u8>) -> CodecId {
    let start = out.len();
    let dictionary = match choice {
        Choice::Fixed(Encoding::Plain) => None,
        Choice::Fixed(Encoding::Dictionary) => text::build_dictionary(values, usize::MAX),
        _ if values.is_empty() => None,
        _ => text::build_dictionary(values, values.len() / 4),
    };
    if let Some((distinct, indexes)) = dictionary {
        header(out, CodecId::Dictionary, values.len());
        text::encode_dictionary(&distinct, &indexes, out);
        let body_bytes: usize = values.iter().map(|v| 4 + v.as_ref().len()).sum();
        let plain_bytes = plain_len(values.len(), body_bytes);
        if choice == Choice::Fixed(Encoding::Dictionary) || out.len() - start <= plain_bytes {
            return CodecId::Dictionary;
        }
        out.truncate(start);
    }
    header(out, CodecId::Plain, values.len());
    text::encode_plain(values, out);
    CodecId::Plain
}

/// Decodes a text column's body.
fn decode_text<V: text::TextValue + Clone>(
    codec: CodecId,
    Body { body, base, count }: Body,
) -> Result<Vec<V>> {
    match codec {
        CodecId::Plain => text::decode_plain(body, base, count),
        CodecId::Dictionary => text::decode_dictionary(body, base, count),
        _ => Err(wrong_codec(codec, "TEXT")),
    }
}
