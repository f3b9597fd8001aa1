//! Decoders fed random bytes and mutated valid encodings answer `Err` or `Ok`, never panic, and
//! refuse counts the input cannot hold before allocating for them.

use codec::{
    compress, decode_column, decode_timestamps, decompress, encode_column, encode_timestamps,
    CodecId, Compressor, COUNT_MAX,
};
use common::{Column, DataType};
use proptest::prelude::*;

use crate::util::{steps, timestamps, walk2dp, with_specials, Rng, CHOICES};

/// Valid encodings of realistic columns of every type under every choice, with their counts.
fn valid_encodings(seed: u64) -> Vec<(DataType, usize, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    let n = rng.below(300) as usize;
    let columns = [
        Column::Int64(timestamps(n, 0, 1000, 2, seed)),
        Column::Int32((0..n).map(|i| (i / 9) as i32 - 5).collect()),
        Column::Double(with_specials(walk2dp(n.max(1), seed), seed)),
        Column::Double(steps(n, seed)),
        Column::Float(walk2dp(n, seed).iter().map(|&v| v as f32).collect()),
        Column::Boolean((0..n).map(|i| (i / 5) % 2 == 0).collect()),
        Column::Text((0..n).map(|i| format!("é{}", i % 3)).collect()),
    ];
    let mut encodings = Vec::new();
    for column in &columns {
        for choice in CHOICES {
            let mut out = Vec::new();
            encode_column(column, choice, &mut out);
            encodings.push((column.data_type(), column.len(), out));
        }
    }
    encodings
}

/// Either answer is fine for garbage; only a panic fails the test.
fn survived<T>(result: codec::Result<T>) {
    std::hint::black_box(result.is_ok());
}

/// Every way to decode `bytes`, none of which may panic.
fn decode_everything(bytes: &[u8], count: usize) {
    for t in DataType::ALL {
        survived(decode_column(bytes, t, count));
    }
    survived(decode_timestamps(bytes, count));
    let mut out = Vec::new();
    survived(decompress(Compressor::Lz4, bytes, count, &mut out));
    survived(decompress(Compressor::Uncompressed, bytes, count, &mut out));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200), count in 0usize..400) {
        decode_everything(&bytes, count);
        // Garbage after a valid codec byte and count reaches the codec's body decoder.
        for codec in CodecId::ALL {
            let mut framed = vec![codec.byte()];
            let mut c = count;
            loop {
                framed.push((c as u8 & 0x7f) | if c >= 0x80 { 0x80 } else { 0 });
                c >>= 7;
                if c == 0 { break }
            }
            framed.extend_from_slice(&bytes);
            decode_everything(&framed, count);
        }
    }

    #[test]
    fn mutated_encodings(seed in any::<u64>(), mutations in prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 1..4)) {
        for (t, n, mut bytes) in valid_encodings(seed) {
            for &(at, value, kind) in &mutations {
                if bytes.is_empty() { break }
                let at = at % bytes.len();
                match kind {
                    0 => bytes[at] = value,
                    1 => bytes[at] ^= 1 << (value % 8),
                    2 => bytes.truncate(at),
                    _ => bytes.insert(at, value),
                }
            }
            survived(decode_column(&bytes, t, n));
            decode_everything(&bytes, n);
        }
    }

    #[test]
    fn mutated_timestamps(seed in any::<u64>(), at in any::<usize>(), value in any::<u8>()) {
        let ts = timestamps(300, 1_700_000_000_000, 1000, 3, seed);
        let mut out = Vec::new();
        encode_timestamps(&ts, &mut out);
        let at = at % out.len();
        out[at] = value;
        survived(decode_timestamps(&out, ts.len()));
    }

    #[test]
    fn compressors_round_trip_and_survive_corruption(data in prop::collection::vec(0u8..4, 0..2000), at in any::<usize>(), value in any::<u8>()) {
        for c in Compressor::ALL {
            let mut compressed = Vec::new();
            compress(c, &data, &mut compressed);
            let mut out = vec![7];
            decompress(c, &compressed, data.len(), &mut out).expect("round trip");
            prop_assert_eq!(&out[1..], &data[..], "{}", c);
            let mut out = vec![7];
            prop_assert!(decompress(c, &compressed, data.len() + 1, &mut out).is_err(), "{}", c);
            prop_assert_eq!(&out, &vec![7], "{}: a failed decompress leaves out as it was", c);
            if !compressed.is_empty() {
                let at = at % compressed.len();
                compressed[at] = value;
                let mut out = vec![7];
                if decompress(c, &compressed, data.len(), &mut out).is_err() {
                    prop_assert_eq!(out, vec![7], "{}: a failed decompress leaves out as it was", c);
                }
            }
        }
    }
}

/// Counts the input cannot justify are refused without allocating for them.
#[test]
fn huge_counts_are_refused() {
    for count in [COUNT_MAX + 1, usize::MAX, u32::MAX as usize] {
        for t in DataType::ALL {
            assert!(decode_column(&[1, 0x80, 0x80, 0x80, 0x08], t, count).is_err());
        }
        assert!(decode_timestamps(&[0], count).is_err());
    }
    // A count the header matches but the body cannot hold: each codec fails fast.
    let mut header = vec![0u8];
    let count = COUNT_MAX;
    let mut c = count;
    while c >= 0x80 {
        header.push((c as u8) | 0x80);
        c >>= 7;
    }
    header.push(c as u8);
    for codec in CodecId::ALL {
        header[0] = codec.byte();
        for t in DataType::ALL {
            let mut bytes = header.clone();
            bytes.extend_from_slice(&[0x01, 0x02, 0x03]);
            assert!(decode_column(&bytes, t, count).is_err(), "{codec} {t}");
        }
    }
    for c in Compressor::ALL {
        let mut out = Vec::new();
        let mut small = Vec::new();
        compress(c, b"hello", &mut small);
        assert!(decompress(c, &small, usize::MAX, &mut out).is_err(), "{c}");
        assert!(
            decompress(c, &[0x50, 1, 2, 3, 4, 5], usize::MAX, &mut out).is_err(),
            "{c}"
        );
        assert!(out.is_empty(), "{c}");
    }
}

/// Targeted corruptions each decoder must name.
#[test]
fn specific_corruptions_are_errors() {
    let cases: [(&[u8], DataType, usize, &str); 10] = [
        (&[], DataType::Int64, 0, "no codec byte"),
        (&[0, 0], DataType::Int64, 0, "codec byte 0"),
        (&[2, 2, 0, 0, 65], DataType::Int64, 2, "bit width 65"),
        (&[3, 2, 2, 3], DataType::Int64, 2, "run past count"),
        (&[3, 1, 2, 0], DataType::Int64, 1, "run of 0"),
        (&[8, 2, 2, 2], DataType::Boolean, 2, "first boolean byte 2"),
        (
            &[9, 1, 1, 0, 0, 0, 1, 0, 0, 0, b'a', 1, 0x01],
            DataType::Text,
            1,
            "index 1 of 1",
        ),
        (
            &[1, 1, 2, 0, 0, 0, 0xC3, 0x28],
            DataType::Text,
            1,
            "invalid UTF-8",
        ),
        (&[1, 3, 0, 0, 0, 0], DataType::Int32, 1, "count mismatch"),
        (
            &[4, 1, 0x80, 0x80, 0x80, 0x80, 0x10],
            DataType::Int32,
            1,
            "INT32 out of range",
        ),
    ];
    for (bytes, t, count, what) in cases {
        assert!(decode_column(bytes, t, count).is_err(), "{what}: {bytes:?}");
    }
    // Gorilla's window reuse before any window; Chimp's slot not yet written.
    let mut gorilla = vec![5, 2];
    gorilla.extend_from_slice(&[0; 8]);
    gorilla.push(0b01);
    assert!(decode_column(&gorilla, DataType::Double, 2).is_err());
    let mut chimp = vec![6, 2];
    chimp.extend_from_slice(&[0; 8]);
    chimp.extend_from_slice(&[0b0000_0100, 0]); // flag 0, slot 1
    assert!(decode_column(&chimp, DataType::Double, 2).is_err());
    // ScaledDecimal with k past the type's maximum.
    assert!(decode_column(&[7, 1, 16, 0, 2, 0], DataType::Double, 1).is_err());
    assert!(decode_column(&[7, 1, 11, 0, 2, 0], DataType::Float, 1).is_err());
    assert!(decode_column(&[7, 1, 2, 0, 2, 0], DataType::Double, 1).is_ok());
    // Exceptions: more than the count, past the count, or out of order.
    assert!(decode_column(&[7, 1, 2, 2, 0, 0, 0, 0, 0, 2, 0], DataType::Float, 1).is_err());
    assert!(decode_column(&[7, 1, 2, 1, 1, 0, 0, 0, 0, 2, 0], DataType::Float, 1).is_err());
    assert!(decode_column(&[7, 1, 2, 1, 0, 0, 0, 0xC0, 0x7F, 2, 0], DataType::Float, 1).is_ok());
}
