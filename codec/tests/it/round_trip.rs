//! Round trips: every choice × every type, arbitrary values and realistic shapes.

use codec::{decode_timestamps, encode_column, encode_timestamps, Choice, CodecId, Encoding};
use common::{Column, DataType};
use proptest::prelude::*;

use crate::util::{round_trip, round_trip_all, steps, timestamps, walk2dp, with_specials, CHOICES};

/// The codecs a supported fixed encoding may come out as (`None`: data-dependent, any).
fn fixed_codecs(e: Encoding, t: DataType) -> Option<&'static [CodecId]> {
    let float = matches!(t, DataType::Float | DataType::Double);
    Some(match e {
        Encoding::Plain => &[CodecId::Plain],
        Encoding::Rle if t == DataType::Boolean => &[CodecId::BoolRle],
        Encoding::Rle if float => &[CodecId::ScaledDecimal, CodecId::Rle],
        Encoding::Rle => &[CodecId::Rle],
        Encoding::Ts2Diff if float => return None,
        Encoding::Ts2Diff => &[CodecId::DeltaBitPack],
        Encoding::Zigzag => &[CodecId::Zigzag],
        Encoding::Gorilla => &[CodecId::Gorilla],
        Encoding::Chimp => &[CodecId::Chimp],
        Encoding::Dictionary => &[CodecId::Dictionary],
    })
}

/// Round-trips under every choice and checks what each fixed choice came out as; an unsupported
/// one must write exactly what adaptive writes.
fn check(column: &Column) -> Result<(), TestCaseError> {
    let t = column.data_type();
    let mut adaptive = Vec::new();
    encode_column(column, Choice::Adaptive, &mut adaptive);
    for choice in CHOICES {
        let (codec, bytes) = round_trip(column, choice).map_err(TestCaseError::fail)?;
        let Choice::Fixed(e) = choice else { continue };
        if !e.supports(t) {
            prop_assert_eq!(&bytes, &adaptive, "{:?} on {} is not adaptive", e, t);
        } else if let Some(allowed) = fixed_codecs(e, t) {
            if !column.is_empty() {
                prop_assert!(allowed.contains(&codec), "{:?} on {} gave {}", e, t, codec);
            }
        }
    }
    Ok(())
}

fn any_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => any::<i64>(),
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => -3i64..3,
    ]
}

fn any_i32() -> impl Strategy<Value = i32> {
    prop_oneof![
        6 => any::<i32>(),
        1 => Just(i32::MIN),
        1 => Just(i32::MAX),
        1 => -3i32..3,
    ]
}

/// Any bit pattern (NaN payloads included) or a special value.
fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<u64>().prop_map(f64::from_bits),
        2 => (-1000i64..1000).prop_map(|m| m as f64 / 100.0),
        1 => prop::sample::select(vec![f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, f64::MIN_POSITIVE, f64::MAX]),
    ]
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => any::<u32>().prop_map(f32::from_bits),
        2 => (-1000i32..1000).prop_map(|m| m as f32 / 100.0),
        1 => prop::sample::select(vec![f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0, f32::MIN_POSITIVE, f32::MAX]),
    ]
}

/// Values that repeat: runs of up to 40 copies of few distinct values.
fn runs_of<T: Clone + std::fmt::Debug>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Vec<T>> {
    prop::collection::vec((s, 1usize..40), 0..20).prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(v, n)| std::iter::repeat_n(v, n))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn int64_arbitrary(v in prop::collection::vec(any_i64(), 0..300)) {
        check(&Column::Int64(v))?;
    }

    #[test]
    fn int64_runs(v in runs_of(any_i64())) {
        check(&Column::Int64(v))?;
    }

    #[test]
    fn int32_arbitrary(v in prop::collection::vec(any_i32(), 0..300)) {
        check(&Column::Int32(v))?;
    }

    #[test]
    fn int32_runs(v in runs_of(any_i32())) {
        check(&Column::Int32(v))?;
    }

    #[test]
    fn double_arbitrary(v in prop::collection::vec(any_f64(), 0..300)) {
        check(&Column::Double(v))?;
    }

    #[test]
    fn double_runs(v in runs_of(any_f64())) {
        check(&Column::Double(v))?;
    }

    #[test]
    fn float_arbitrary(v in prop::collection::vec(any_f32(), 0..300)) {
        check(&Column::Float(v))?;
    }

    #[test]
    fn float_runs(v in runs_of(any_f32())) {
        check(&Column::Float(v))?;
    }

    #[test]
    fn boolean_arbitrary(v in prop::collection::vec(any::<bool>(), 0..300)) {
        check(&Column::Boolean(v))?;
    }

    #[test]
    fn boolean_runs(v in runs_of(any::<bool>())) {
        check(&Column::Boolean(v))?;
    }

    #[test]
    fn text_arbitrary(v in prop::collection::vec("\\PC{0,12}", 0..100)) {
        check(&Column::Text(v))?;
    }

    #[test]
    fn text_few_distinct(v in prop::collection::vec(prop::sample::select(vec!["", "on", "off", "fault ✗"]), 0..300)) {
        check(&Column::Text(v.into_iter().map(String::from).collect()))?;
    }

    #[test]
    fn timestamp_and_date_columns(v in prop::collection::vec(any_i64(), 0..300)) {
        check(&Column::Timestamp(v.clone()))?;
        check(&Column::Date(v.iter().map(|&x| 20000101 + (x % 28) as i32).collect()))?;
    }

    #[test]
    fn string_arbitrary(v in prop::collection::vec("\\PC{0,12}", 0..100)) {
        check(&Column::String(v))?;
    }

    /// BLOB values are any bytes, UTF-8 or not; few distinct ones take the dictionary.
    #[test]
    fn blob_arbitrary(v in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..100)) {
        check(&Column::Blob(v))?;
    }

    #[test]
    fn blob_few_distinct(v in prop::collection::vec(prop::sample::select(vec![vec![], vec![0xff, 0xfe], vec![0]]), 0..300)) {
        check(&Column::Blob(v))?;
    }

    /// Timestamps: any sequence, ascending or not.
    #[test]
    fn timestamps_arbitrary(ts in prop::collection::vec(any_i64(), 0..400)) {
        let mut out = Vec::new();
        encode_timestamps(&ts, &mut out);
        prop_assert_eq!(decode_timestamps(&out, ts.len()), Ok(ts.clone()));
        prop_assert!(decode_timestamps(&out, ts.len() + 1).is_err());
    }

    /// Regular timestamps with jitter, as timestamps and as an INT64 column.
    #[test]
    fn timestamps_regular(
        seed in any::<u64>(),
        n in 0usize..1000,
        step in prop::sample::select(vec![1i64, 1000, 1_000_000_000]),
        jitter in 0i64..5,
    ) {
        let ts = timestamps(n, 1_700_000_000_000, step, jitter.min(step / 2), seed);
        let mut out = Vec::new();
        encode_timestamps(&ts, &mut out);
        prop_assert_eq!(decode_timestamps(&out, n), Ok(ts.clone()));
        check(&Column::Int64(ts))?;
    }

    /// Random walks at 2 decimals, steps and constants, plain and with specials mixed in, as
    /// DOUBLE and FLOAT.
    #[test]
    fn realistic_floats(seed in any::<u64>(), n in 0usize..1000, shape in 0u8..4, specials in any::<bool>()) {
        let mut v = match shape {
            0 => walk2dp(n, seed),
            1 => steps(n, seed),
            2 => vec![21.5; n],
            _ => crate::util::noise(n, seed),
        };
        if specials && n > 0 {
            v = with_specials(v, seed);
        }
        check(&Column::Float(v.iter().map(|&x| x as f32).collect()))?;
        check(&Column::Double(v))?;
    }

    /// Integer steps and walks.
    #[test]
    fn realistic_ints(seed in any::<u64>(), n in 0usize..1000) {
        let walk: Vec<i64> = walk2dp(n, seed).iter().map(|v| (v * 100.0).round() as i64).collect();
        let stepped: Vec<i64> = steps(n, seed).iter().map(|v| (v * 100.0).round() as i64).collect();
        check(&Column::Int32(walk.iter().map(|&v| v as i32).collect()))?;
        check(&Column::Int64(walk))?;
        check(&Column::Int64(stepped))?;
    }
}

/// Longer columns than the property tests make: several hundred blocks, every choice.
#[test]
fn long_columns_round_trip() {
    let n = 50_000;
    let columns = [
        Column::Int64(timestamps(n, 0, 1000, 3, 1)),
        Column::Double(with_specials(walk2dp(n, 2), 3)),
        Column::Double(steps(n, 4)),
        Column::Float(walk2dp(n, 5).iter().map(|&v| v as f32).collect()),
        Column::Boolean((0..n).map(|i| (i / 7) % 3 == 0).collect()),
        Column::Text((0..n).map(|i| format!("s{}", i % 17)).collect()),
    ];
    for column in &columns {
        round_trip_all(column).unwrap_or_else(|e| panic!("{e}"));
    }
}
