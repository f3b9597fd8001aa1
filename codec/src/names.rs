//! The names a user writes (IoTDB's encodings and compressors), what the encoder may choose, and
//! the codec bytes written on disk.

use std::fmt;

use common::DataType;

/// IoTDB's encodings by name (`CREATE TIMESERIES ... ENCODING=...`).
///
/// An encoding is a request; the [`CodecId`] written on disk says what was actually used (see
/// [`encode_column`](crate::encode_column) for how each request maps to a codec).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `PLAIN`: fixed-width little-endian values.
    Plain,
    /// `TS_2DIFF`: deltas minus the block's minimum delta, bit-packed.
    Ts2Diff,
    /// `RLE`: run lengths.
    Rle,
    /// `GORILLA`: Facebook Gorilla's XOR with the previous value.
    Gorilla,
    /// `DICTIONARY`: distinct values and bit-packed indexes.
    Dictionary,
    /// `ZIGZAG`: zigzag varints.
    Zigzag,
    /// `CHIMP`: Chimp128 XOR against one of the last 128 values.
    Chimp,
}

impl Encoding {
    /// Every encoding.
    pub const ALL: [Encoding; 7] = [
        Encoding::Plain,
        Encoding::Ts2Diff,
        Encoding::Rle,
        Encoding::Gorilla,
        Encoding::Dictionary,
        Encoding::Zigzag,
        Encoding::Chimp,
    ];

    /// Parses IoTDB's name, case-insensitively.
    pub fn parse(name: &str) -> Option<Encoding> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(name))
    }

    /// IoTDB's name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Plain => "PLAIN",
            Encoding::Ts2Diff => "TS_2DIFF",
            Encoding::Rle => "RLE",
            Encoding::Gorilla => "GORILLA",
            Encoding::Dictionary => "DICTIONARY",
            Encoding::Zigzag => "ZIGZAG",
            Encoding::Chimp => "CHIMP",
        }
    }

    /// Whether IoTDB accepts this encoding for a type (its compatibility table: `PLAIN` for all;
    /// `RLE` for all but `TEXT`; `TS_2DIFF`, `GORILLA`, `CHIMP` for the four numeric types;
    /// `ZIGZAG` for `INT32`/`INT64`; `DICTIONARY` for `TEXT`).
    /// IoTDB 2.0's types are judged as the classic type they are stored as (TIMESTAMP as INT64,
    /// DATE as INT32, STRING as TEXT); BLOB takes `PLAIN` only.
    pub fn supports(self, t: DataType) -> bool {
        if t == DataType::Blob {
            return self == Encoding::Plain;
        }
        let t = t.physical();
        let numeric = matches!(
            t,
            DataType::Int32 | DataType::Int64 | DataType::Float | DataType::Double
        );
        match self {
            Encoding::Plain => true,
            Encoding::Rle => t != DataType::Text,
            Encoding::Ts2Diff | Encoding::Gorilla | Encoding::Chimp => numeric,
            Encoding::Zigzag => matches!(t, DataType::Int32 | DataType::Int64),
            Encoding::Dictionary => t == DataType::Text,
        }
    }

    /// IoTDB's default encoding for a type.
    pub fn iotdb_default(t: DataType) -> Encoding {
        match t.physical() {
            DataType::Boolean => Encoding::Rle,
            DataType::Int32 | DataType::Int64 => Encoding::Ts2Diff,
            DataType::Float | DataType::Double => Encoding::Gorilla,
            _ => Encoding::Plain,
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// IoTDB's compressors, each from a well-kept crate: `LZ4` (lz4_flex, the default),
/// `SNAPPY` (snap), `GZIP` (flate2 over miniz_oxide), `ZSTD` (zstd, level 3) and `LZMA2`
/// (liblzma, preset 0: a 256 KiB dictionary, as pages are at most a few hundred KiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// `UNCOMPRESSED`: the bytes as they are.
    Uncompressed,
    /// `LZ4`: one LZ4 block (IoTDB's default compressor).
    Lz4,
    /// `SNAPPY`: one raw Snappy block.
    Snappy,
    /// `GZIP`: one gzip member (deflate, level 6).
    Gzip,
    /// `ZSTD`: one Zstandard frame.
    Zstd,
    /// `LZMA2`: one .xz stream without an integrity check (the page has its CRC).
    Lzma2,
}

impl Compressor {
    /// Every compressor.
    pub const ALL: [Compressor; 6] = [
        Compressor::Uncompressed,
        Compressor::Lz4,
        Compressor::Snappy,
        Compressor::Gzip,
        Compressor::Zstd,
        Compressor::Lzma2,
    ];

    /// Parses IoTDB's name, case-insensitively.
    pub fn parse(name: &str) -> Option<Compressor> {
        Compressor::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// IoTDB's name.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Uncompressed => "UNCOMPRESSED",
            Compressor::Lz4 => "LZ4",
            Compressor::Snappy => "SNAPPY",
            Compressor::Gzip => "GZIP",
            Compressor::Zstd => "ZSTD",
            Compressor::Lzma2 => "LZMA2",
        }
    }

    /// The byte a sealed page's index entry stores (a stable on-disk format).
    pub fn byte(self) -> u8 {
        match self {
            Compressor::Uncompressed => 0,
            Compressor::Lz4 => 1,
            Compressor::Snappy => 2,
            Compressor::Gzip => 3,
            Compressor::Zstd => 4,
            Compressor::Lzma2 => 5,
        }
    }

    /// The compressor for a stored byte, if valid.
    pub fn from_byte(byte: u8) -> Option<Compressor> {
        Compressor::ALL.into_iter().find(|c| c.byte() == byte)
    }
}

impl fmt::Display for Compressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the encoder may choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Choice {
    /// The series' declared encoding. One the column's type does not support is treated as
    /// [`Choice::Adaptive`].
    Fixed(Encoding),
    /// The encoder looks at the values and picks (see [`encode_column`](crate::encode_column)).
    Adaptive,
}

/// The concrete codec of an encoded column: its first byte. The byte values are a stable on-disk
/// format (the crate doc gives every layout); 0 is never a codec, so zeroed bytes do not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CodecId {
    /// Fixed-width little-endian values; booleans as a bitmap; text u32-length-prefixed.
    Plain = 1,
    /// TS_2DIFF: blocks of 128 deltas, minus the block's minimum, bit-packed.
    DeltaBitPack = 2,
    /// Runs of equal values (floats compared by bit pattern).
    Rle = 3,
    /// Zigzag LEB128 varints.
    Zigzag = 4,
    /// Facebook Gorilla XOR.
    Gorilla = 5,
    /// Chimp128 XOR.
    Chimp = 6,
    /// Floats as integers times 10^-k, the integers [`DeltaBitPack`](CodecId::DeltaBitPack)- or
    /// [`Rle`](CodecId::Rle)-encoded.
    ScaledDecimal = 7,
    /// Booleans as alternating run lengths.
    BoolRle = 8,
    /// Text as distinct values plus bit-packed indexes.
    Dictionary = 9,
    /// Runs of equal values, their values and lengths delta-bit-packed.
    RunBitPack = 10,
}

impl CodecId {
    /// Every codec, in byte order.
    pub const ALL: [CodecId; 10] = [
        CodecId::Plain,
        CodecId::DeltaBitPack,
        CodecId::Rle,
        CodecId::Zigzag,
        CodecId::Gorilla,
        CodecId::Chimp,
        CodecId::ScaledDecimal,
        CodecId::BoolRle,
        CodecId::Dictionary,
        CodecId::RunBitPack,
    ];

    /// The on-disk byte.
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// The codec for a byte, if valid.
    pub fn from_byte(byte: u8) -> Option<CodecId> {
        CodecId::ALL.into_iter().find(|c| c.byte() == byte)
    }

    /// A name for messages and reports.
    pub fn name(self) -> &'static str {
        match self {
            CodecId::Plain => "plain",
            CodecId::DeltaBitPack => "delta-bitpack",
            CodecId::Rle => "rle",
            CodecId::Zigzag => "zigzag",
            CodecId::Gorilla => "gorilla",
            CodecId::Chimp => "chimp128",
            CodecId::ScaledDecimal => "scaled-decimal",
            CodecId::BoolRle => "bool-rle",
            CodecId::Dictionary => "dictionary",
            CodecId::RunBitPack => "run-bitpack",
        }
    }

    /// Whether a column of type `t` may be encoded with this codec.
    pub fn encodes(self, t: DataType) -> bool {
        let t = t.physical();
        let int = matches!(t, DataType::Int32 | DataType::Int64);
        let float = matches!(t, DataType::Float | DataType::Double);
        match self {
            CodecId::Plain => true,
            CodecId::DeltaBitPack | CodecId::Zigzag => int,
            CodecId::Rle | CodecId::RunBitPack | CodecId::Gorilla | CodecId::Chimp => int || float,
            CodecId::ScaledDecimal => float,
            CodecId::BoolRle => t == DataType::Boolean,
            CodecId::Dictionary => t == DataType::Text,
        }
    }
}

impl fmt::Display for CodecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a series declared in `CREATE TIMESERIES ... ENCODING=..., COMPRESSOR=...`; `None` where
/// it declared nothing. Sealed files honour it: a declared encoding is written as
/// [`Choice::Fixed`] (an undeclared one as [`Choice::Adaptive`]), a declared compressor is
/// used for its pages (an undeclared one is the file's default, LZ4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeriesCodec {
    /// The declared encoding.
    pub encoding: Option<Encoding>,
    /// The declared compressor.
    pub compressor: Option<Compressor>,
}

impl SeriesCodec {
    /// Parses and checks the names a statement gave for a series of type `t` (empty or `None`
    /// for undeclared); the error is a message for an ILLEGAL_PARAMETER status.
    pub fn parse(
        t: DataType,
        encoding: Option<&str>,
        compressor: Option<&str>,
    ) -> Result<SeriesCodec, String> {
        let encoding = match encoding.filter(|n| !n.is_empty()) {
            None => None,
            Some(name) => {
                let e = Encoding::parse(name).ok_or_else(|| {
                    format!(
                        "unknown encoding {name}; give one of {}",
                        names(Encoding::ALL.map(Encoding::name))
                    )
                })?;
                if !e.supports(t) {
                    return Err(format!("encoding {e} does not support {}", t.name()));
                }
                Some(e)
            }
        };
        let compressor = match compressor.filter(|n| !n.is_empty()) {
            None => None,
            Some(name) => Some(Compressor::parse(name).ok_or_else(|| {
                format!(
                    "unknown compressor {name}; give one of {}",
                    names(Compressor::ALL.map(Compressor::name))
                )
            })?),
        };
        Ok(SeriesCodec {
            encoding,
            compressor,
        })
    }

    /// Whether anything was declared.
    pub fn is_declared(self) -> bool {
        self.encoding.is_some() || self.compressor.is_some()
    }

    /// What the encoder may choose for the series' values.
    pub fn choice(self) -> Choice {
        self.encoding.map_or(Choice::Adaptive, Choice::Fixed)
    }

    /// The declared encoding's name, or `""`.
    pub fn encoding_name(self) -> &'static str {
        self.encoding.map_or("", Encoding::name)
    }

    /// The declared compressor's name, or `""`.
    pub fn compressor_name(self) -> &'static str {
        self.compressor.map_or("", Compressor::name)
    }
}

fn names<const N: usize>(all: [&'static str; N]) -> String {
    all.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_parse_against_iotdb_s_compatibility_table() {
        let c = SeriesCodec::parse(DataType::Double, Some("gorilla"), Some("LZ4")).unwrap();
        assert_eq!(c.encoding, Some(Encoding::Gorilla));
        assert_eq!(c.compressor, Some(Compressor::Lz4));
        assert_eq!(c.choice(), Choice::Fixed(Encoding::Gorilla));
        let none = SeriesCodec::parse(DataType::Text, None, Some("")).unwrap();
        assert!(!none.is_declared());
        assert_eq!(none.choice(), Choice::Adaptive);
        let e = SeriesCodec::parse(DataType::Text, Some("TS_2DIFF"), None).unwrap_err();
        assert!(e.contains("does not support TEXT"), "{e}");
        let e = SeriesCodec::parse(DataType::Int64, Some("FOO"), None).unwrap_err();
        assert!(e.contains("unknown encoding FOO"), "{e}");
        let e = SeriesCodec::parse(DataType::Int64, None, Some("BROTLI")).unwrap_err();
        assert!(
            e.contains("UNCOMPRESSED, LZ4, SNAPPY, GZIP, ZSTD, LZMA2"),
            "{e}"
        );
        let snappy = SeriesCodec::parse(DataType::Int64, None, Some("snappy")).unwrap();
        assert_eq!(snappy.compressor, Some(Compressor::Snappy));
    }
}
