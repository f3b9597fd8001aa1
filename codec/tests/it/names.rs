//! IoTDB's names and compatibility table.

use codec::{Compressor, Encoding};
use common::DataType;

#[test]
fn encodings_parse_case_insensitively_and_print_back() {
    for e in Encoding::ALL {
        assert_eq!(Encoding::parse(e.name()), Some(e));
        assert_eq!(Encoding::parse(&e.name().to_lowercase()), Some(e));
    }
    assert_eq!(Encoding::parse("ts_2diff"), Some(Encoding::Ts2Diff));
    assert_eq!(Encoding::parse("SPRINTZ"), None);
    assert_eq!(Encoding::parse(""), None);
}

#[test]
fn every_iotdb_compressor_parses_and_keeps_its_byte() {
    for (name, c, byte) in [
        ("UNCOMPRESSED", Compressor::Uncompressed, 0),
        ("lz4", Compressor::Lz4, 1),
        ("Snappy", Compressor::Snappy, 2),
        ("GZIP", Compressor::Gzip, 3),
        ("zstd", Compressor::Zstd, 4),
        ("LZMA2", Compressor::Lzma2, 5),
    ] {
        assert_eq!(Compressor::parse(name), Some(c), "{name}");
        assert_eq!(c.byte(), byte, "{name}");
        assert_eq!(Compressor::from_byte(byte), Some(c), "{name}");
    }
    assert_eq!(Compressor::parse("BROTLI"), None);
    assert_eq!(Compressor::from_byte(6), None);
}

#[test]
fn compatibility_table_is_iotdbs() {
    use DataType::*;
    use Encoding::*;
    // IoTDB 2.0's types take their storage type's encodings, BLOB PLAIN only.
    let table: [(Encoding, &[DataType]); 7] = [
        (
            Plain,
            &[
                Boolean, Int32, Int64, Float, Double, Text, Timestamp, Date, Blob, String,
            ],
        ),
        (Ts2Diff, &[Int32, Int64, Float, Double, Timestamp, Date]),
        (
            Rle,
            &[Boolean, Int32, Int64, Float, Double, Timestamp, Date],
        ),
        (Gorilla, &[Int32, Int64, Float, Double, Timestamp, Date]),
        (Dictionary, &[Text, String]),
        (Zigzag, &[Int32, Int64, Timestamp, Date]),
        (Chimp, &[Int32, Int64, Float, Double, Timestamp, Date]),
    ];
    for (e, types) in table {
        for t in DataType::ALL {
            assert_eq!(e.supports(t), types.contains(&t), "{e} {t}");
        }
    }
    for t in DataType::ALL {
        assert!(Encoding::iotdb_default(t).supports(t), "{t}");
    }
    assert_eq!(Encoding::iotdb_default(Boolean), Rle);
    assert_eq!(Encoding::iotdb_default(Int64), Ts2Diff);
    assert_eq!(Encoding::iotdb_default(Double), Gorilla);
    assert_eq!(Encoding::iotdb_default(Text), Plain);
    assert_eq!(Encoding::iotdb_default(Timestamp), Ts2Diff);
    assert_eq!(Encoding::iotdb_default(Blob), Plain);
}
