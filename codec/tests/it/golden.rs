//! Golden vectors: the exact bytes of small inputs under every codec, written out by hand from
//! the format in the crate doc. If one of these fails, the on-disk format changed: add a new
//! codec byte (or a format version) and keep decoding these.

use codec::{
    decode_column, decode_timestamps, decompress, encode_column, encode_timestamps, Choice,
    CodecId, Compressor, Encoding,
};
use common::Column;

/// Encodes under `choice`, checks codec and bytes, and decodes the golden bytes back.
fn golden(column: Column, choice: Choice, codec: CodecId, bytes: &[u8]) {
    let mut out = Vec::new();
    assert_eq!(
        encode_column(&column, choice, &mut out),
        codec,
        "{column:?}"
    );
    assert_eq!(out, bytes, "{codec} bytes of {column:?}");
    let decoded = decode_column(bytes, column.data_type(), column.len()).expect("golden decodes");
    assert!(
        codec::bit_identical(&decoded, &column),
        "{codec}: {decoded:?}"
    );
}

fn fixed(e: Encoding) -> Choice {
    Choice::Fixed(e)
}

#[test]
fn codec_bytes_are_stable() {
    let bytes: Vec<u8> = CodecId::ALL.iter().map(|c| c.byte()).collect();
    assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert_eq!(CodecId::from_byte(0), None);
    assert_eq!(CodecId::from_byte(11), None);
}

#[test]
fn regular_timestamps_over_several_blocks_are_counted_not_stored() {
    // count 300 = AC 02; first 0; 299 deltas of 1000 in blocks of 128, 128, 43: the first
    // block's min 1000 (D0 0F) with the repeat flag 0x80 and 2 more blocks.
    let ts: Vec<i64> = (0..300).map(|i| i * 1000).collect();
    let golden = [0xAC, 0x02, 0x00, 0xD0, 0x0F, 0x80, 0x02];
    let mut out = Vec::new();
    encode_timestamps(&ts, &mut out);
    assert_eq!(out, golden);
    assert_eq!(decode_timestamps(&golden, 300), Ok(ts.clone()));
    // A repeat count beyond the blocks left, or of zero, is refused.
    assert!(decode_timestamps(&[0xAC, 0x02, 0x00, 0xD0, 0x0F, 0x80, 0x03], 300).is_err());
    assert!(decode_timestamps(&[0xAC, 0x02, 0x00, 0xD0, 0x0F, 0x80, 0x00], 300).is_err());
    // One irregular step ends the run: the blocks around it are written out.
    let mut jitter = ts.clone();
    jitter[200] += 1;
    let mut out = Vec::new();
    encode_timestamps(&jitter, &mut out);
    assert_eq!(decode_timestamps(&out, 300), Ok(jitter));
}

#[test]
fn timestamps() {
    // count 3; zigzag(1000) = 2000 = D0 0F; one block: min delta 1000 (D0 0F), width 0.
    let ts = [1000, 2000, 3000];
    let golden = [0x03, 0xD0, 0x0F, 0xD0, 0x0F, 0x00];
    let mut out = Vec::new();
    encode_timestamps(&ts, &mut out);
    assert_eq!(out, golden);
    assert_eq!(decode_timestamps(&golden, 3), Ok(ts.to_vec()));
    let mut empty = Vec::new();
    encode_timestamps(&[], &mut empty);
    assert_eq!(empty, [0x00]);
}

#[test]
fn plain() {
    golden(
        Column::Int64(vec![1, -1]),
        fixed(Encoding::Plain),
        CodecId::Plain,
        &[
            1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ],
    );
    golden(
        Column::Float(vec![-0.0]),
        fixed(Encoding::Plain),
        CodecId::Plain,
        &[1, 1, 0x00, 0x00, 0x00, 0x80],
    );
    // Bitmap: bits 0 and 2 → 0x05.
    golden(
        Column::Boolean(vec![true, false, true]),
        fixed(Encoding::Plain),
        CodecId::Plain,
        &[1, 3, 0x05],
    );
    golden(
        Column::Text(vec!["hi".into()]),
        fixed(Encoding::Plain),
        CodecId::Plain,
        &[1, 1, 2, 0, 0, 0, b'h', b'i'],
    );
    golden(
        Column::Double(vec![]),
        Choice::Adaptive,
        CodecId::Plain,
        &[1, 0],
    );
}

#[test]
fn delta_bitpack() {
    // First 10 → zigzag 20 = 0x14; deltas 2, -1: min -1 → zigzag 1; offsets 3, 0 in 2 bits each
    // → 0b0000_0011.
    golden(
        Column::Int32(vec![10, 12, 11]),
        fixed(Encoding::Ts2Diff),
        CodecId::DeltaBitPack,
        &[2, 3, 0x14, 0x01, 0x02, 0x03],
    );
}

#[test]
fn rle() {
    // Run (5 - 0 → zigzag 10, ×3), run (7 - 5 → zigzag 4, ×1).
    golden(
        Column::Int64(vec![5, 5, 5, 7]),
        fixed(Encoding::Rle),
        CodecId::Rle,
        &[3, 4, 0x0A, 0x03, 0x04, 0x01],
    );
    // Floats that are no short decimal: runs of bit patterns. 0.1 + 0.2 = 0x3FD3333333333334
    // → zigzag = 0x7FA6666666666668 as a 9-byte varint.
    golden(
        Column::Double(vec![0.1 + 0.2; 2]),
        fixed(Encoding::Rle),
        CodecId::Rle,
        &[
            3, 2, 0xE8, 0xCC, 0x99, 0xB3, 0xE6, 0xCC, 0x99, 0xD3, 0x7F, 0x02,
        ],
    );
}

#[test]
fn run_bitpack() {
    // Eight runs of 8 (one run per 8 values: adaptive looks at runs), levels 1000 to 1007: Rle
    // would spend 17 bytes on varints. 8 runs, 4 bytes of values (zigzag(1000) = 2000 = D0 0F;
    // one block of deltas 1: min zigzag 2, width 0), lengths (zigzag(8) = 16; min 0, width 0).
    golden(
        Column::Int64((0..64).map(|i| 1000 + i / 8).collect()),
        Choice::Adaptive,
        CodecId::RunBitPack,
        &[10, 64, 8, 4, 0xD0, 0x0F, 0x02, 0x00, 0x10, 0x00, 0x00],
    );
}

#[test]
fn zigzag() {
    golden(
        Column::Int32(vec![0, -1, 64]),
        fixed(Encoding::Zigzag),
        CodecId::Zigzag,
        &[4, 3, 0x00, 0x01, 0x80, 0x01],
    );
}

#[test]
fn gorilla() {
    // 1.0 raw; 1.0 again: bit 0; 2.0: XOR 0x7FF0000000000000 (lz 1, tz 52, len 11) → bits 1, 1,
    // lz 00001, len 001011, then 0x7FF in 11 bits.
    golden(
        Column::Double(vec![1.0, 1.0, 2.0]),
        fixed(Encoding::Gorilla),
        CodecId::Gorilla,
        &[5, 3, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x0E, 0xCB, 0xFF, 0x01],
    );
}

#[test]
fn chimp() {
    // 1.0 raw; 1.0: flag 0, slot 0; 2.0: the last value with its low 14 bits (slot 1) XORs to
    // 0x7FF0000000000000 with 52 trailing zeros > 13: flag 1, slot 1, lz code 0, 12 significant
    // bits, then 0x7FF in 12 bits.
    golden(
        Column::Double(vec![1.0, 1.0, 2.0]),
        fixed(Encoding::Chimp),
        CodecId::Chimp,
        &[
            6, 3, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x00, 0x0A, 0x80, 0xF9, 0x3F,
        ],
    );
}

#[test]
fn scaled_decimal() {
    // k = 2, no exceptions, ints 2150, 2125, 2125 under DeltaBitPack: zigzag(2150) = 4300 = CC 21; deltas
    // -25, 0: min -25 → zigzag 49 = 0x31, width 5, offsets 0 and 25 → 0x20 0x03.
    golden(
        Column::Double(vec![21.5, 21.25, 21.25]),
        Choice::Adaptive,
        CodecId::ScaledDecimal,
        &[7, 3, 2, 0, 2, 0xCC, 0x21, 0x31, 0x05, 0x20, 0x03],
    );
    // Sixteen equal FLOATs at k = 1: two runs or fewer per 8 values → inner Rle: zigzag(15) = 30.
    golden(
        Column::Float(vec![1.5; 16]),
        Choice::Adaptive,
        CodecId::ScaledDecimal,
        &[7, 16, 1, 0, 3, 30, 16],
    );
    // One exception (gap 1, the NaN's 8 bytes) whose integer repeats the previous one: ints 15,
    // 15, 25 → first 30, deltas 0 and 10: min 0, width 4, offsets 0 and 10 → 0xA0.
    golden(
        Column::Double(vec![1.5, f64::NAN, 2.5]),
        Choice::Adaptive,
        CodecId::ScaledDecimal,
        &[
            7, 3, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0xF8, 0x7F, 2, 0x1E, 0x00, 0x04, 0xA0,
        ],
    );
}

#[test]
fn bool_rle() {
    golden(
        Column::Boolean(vec![true, true, false]),
        fixed(Encoding::Rle),
        CodecId::BoolRle,
        &[8, 3, 0x01, 0x02, 0x01],
    );
}

#[test]
fn dictionary() {
    // Two entries "a", "b"; width 1; indexes 0, 1, 0, 0 → 0b0010.
    golden(
        Column::Text(["a", "b", "a", "a"].map(String::from).to_vec()),
        fixed(Encoding::Dictionary),
        CodecId::Dictionary,
        &[
            9, 4, 2, 0, 0, 0, 1, 0, 0, 0, b'a', 1, 0, 0, 0, b'b', 1, 0x02,
        ],
    );
}

/// The LZ4 block format, pinned by decoding hand-made blocks (compressor output may legitimately
/// change between lz4_flex versions; what it must decode may not).
#[test]
fn lz4_block() {
    // Token 0x50: 5 literals, no match.
    let mut out = Vec::new();
    decompress(
        Compressor::Lz4,
        &[0x50, b'h', b'e', b'l', b'l', b'o'],
        5,
        &mut out,
    )
    .expect("lz4");
    assert_eq!(out, b"hello");
    // Token 0x1F: 1 literal "a", then a match at offset 1 of 4 + 15 + 0 bytes; then the block's
    // last 5 bytes as literals (token 0x50).
    out.clear();
    let block = [
        0x1F, b'a', 0x01, 0x00, 0x00, 0x50, b'b', b'b', b'b', b'b', b'b',
    ];
    decompress(Compressor::Lz4, &block, 1 + 19 + 5, &mut out).expect("lz4");
    assert_eq!(out, [b"a".repeat(20), b"b".repeat(5)].concat());
}
