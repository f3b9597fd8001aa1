//! Per-page and per-chunk statistics of a sealed file: count, time range, first and last value,
//! minimum and maximum, sum. Aggregations and time-range pruning read them from the file index
//! without decoding a page.
//!
//! Encoding (after the count and time range, which the index entry holds): `u8 flags`
//! (bit 0 first/last present, bit 1 min/max present, bit 2 sum present), then first, last, min,
//! max as values of the series' type (BOOLEAN u8, INT32 and DATE i32, INT64 and TIMESTAMP i64,
//! FLOAT f32 bits, DOUBLE f64 bits, little-endian), then sum as f64 bits. TEXT, STRING and BLOB
//! pages carry no values (a value of up to 64 KiB in the index would cost more than it saves);
//! TIMESTAMP and DATE pages no sum (it means nothing). Minimum and maximum skip NaN; a page of
//! NaNs only has none.

use common::codec::{DecodeResult, Reader, Writer};
use common::{Column, DataType, Value};

const HAS_ENDS: u8 = 1;
const HAS_RANGE: u8 = 2;
const HAS_SUM: u8 = 4;

/// What the index says about a page's (or a chunk's) values.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Value of the smallest timestamp (not for TEXT).
    pub first: Option<Value>,
    /// Value of the greatest timestamp (not for TEXT).
    pub last: Option<Value>,
    /// Smallest value, NaN skipped (not for TEXT).
    pub min: Option<Value>,
    /// Greatest value, NaN skipped (not for TEXT).
    pub max: Option<Value>,
    /// Sum of the values (BOOLEAN counts `true`), as f64; not for TEXT.
    pub sum: Option<f64>,
}

impl Stats {
    /// The statistics of a non-empty column.
    pub fn of(values: &Column) -> Stats {
        assert!(!values.is_empty(), "statistics of an empty page");
        match values {
            Column::Boolean(v) => {
                let trues = v.iter().filter(|b| **b).count();
                Stats {
                    first: Some(Value::Boolean(v[0])),
                    last: Some(Value::Boolean(v[v.len() - 1])),
                    min: Some(Value::Boolean(trues == v.len())),
                    max: Some(Value::Boolean(trues > 0)),
                    sum: Some(trues as f64),
                }
            }
            Column::Int32(v) => ints(v, |x| Value::Int32(x as i32)),
            Column::Int64(v) => ints(v, Value::Int64),
            Column::Float(v) => floats(v, |x| Value::Float(x as f32)),
            Column::Double(v) => floats(v, Value::Double),
            Column::Timestamp(v) => Stats {
                sum: None,
                ..ints(v, Value::Timestamp)
            },
            Column::Date(v) => Stats {
                sum: None,
                ..ints(v, |x| Value::Date(x as i32))
            },
            Column::Text(_) | Column::String(_) | Column::Blob(_) => Stats::none(),
        }
    }

    fn none() -> Stats {
        Stats {
            first: None,
            last: None,
            min: None,
            max: None,
            sum: None,
        }
    }

    /// The statistics of pages `a` then `b` (`b` later in time).
    pub fn merge(a: &Stats, b: &Stats) -> Stats {
        let pick = |x: &Option<Value>, y: &Option<Value>, keep_x: fn(f64, f64) -> bool| match (x, y)
        {
            (Some(x), Some(y)) => Some(if keep_x(as_f64(x), as_f64(y)) {
                x.clone()
            } else {
                y.clone()
            }),
            (x, None) => x.clone(),
            (None, y) => y.clone(),
        };
        Stats {
            first: a.first.clone().or_else(|| b.first.clone()),
            last: b.last.clone().or_else(|| a.last.clone()),
            min: pick(&a.min, &b.min, |x, y| x <= y),
            max: pick(&a.max, &b.max, |x, y| x >= y),
            sum: match (a.sum, b.sum) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            },
        }
    }

    /// Appends the encoding.
    pub fn encode(&self, w: &mut Writer) {
        let mut flags = 0;
        if self.first.is_some() && self.last.is_some() {
            flags |= HAS_ENDS;
        }
        if self.min.is_some() && self.max.is_some() {
            flags |= HAS_RANGE;
        }
        if self.sum.is_some() {
            flags |= HAS_SUM;
        }
        w.u8(flags);
        let values = [&self.first, &self.last, &self.min, &self.max];
        let present = [HAS_ENDS, HAS_ENDS, HAS_RANGE, HAS_RANGE];
        for (value, bit) in values.into_iter().zip(present) {
            if flags & bit != 0 {
                put_value(w, value.as_ref().expect("flagged values are present"));
            }
        }
        if let Some(sum) = self.sum {
            w.u64(sum.to_bits());
        }
    }

    /// Decodes statistics of a `data_type` page.
    pub fn decode(r: &mut Reader<'_>, data_type: DataType) -> DecodeResult<Stats> {
        let flags = r.u8()?;
        if flags & !(HAS_ENDS | HAS_RANGE | HAS_SUM) != 0 {
            return r.error(format!("unknown statistics flags {flags:#x}"));
        }
        if !carries_values(data_type) && flags != 0 {
            return r.error(format!("statistics of a {data_type} page carry values"));
        }
        let mut stats = Stats::none();
        if flags & HAS_ENDS != 0 {
            stats.first = Some(get_value(r, data_type)?);
            stats.last = Some(get_value(r, data_type)?);
        }
        if flags & HAS_RANGE != 0 {
            stats.min = Some(get_value(r, data_type)?);
            stats.max = Some(get_value(r, data_type)?);
        }
        if flags & HAS_SUM != 0 {
            stats.sum = Some(f64::from_bits(r.u64()?));
        }
        Ok(stats)
    }
}

/// Whether statistics of a `data_type` page hold values (not for TEXT, STRING and BLOB).
fn carries_values(data_type: DataType) -> bool {
    !matches!(
        data_type,
        DataType::Text | DataType::String | DataType::Blob
    )
}

fn ints<T: Copy + Into<i64>>(v: &[T], value: fn(i64) -> Value) -> Stats {
    let (mut min, mut max, mut sum) = (i64::MAX, i64::MIN, 0f64);
    for &x in v {
        let x: i64 = x.into();
        min = min.min(x);
        max = max.max(x);
        sum += x as f64;
    }
    Stats {
        first: Some(value(v[0].into())),
        last: Some(value(v[v.len() - 1].into())),
        min: Some(value(min)),
        max: Some(value(max)),
        sum: Some(sum),
    }
}

fn floats<T: Copy + Into<f64>>(v: &[T], value: fn(f64) -> Value) -> Stats {
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0f64);
    let mut any = false;
    for &x in v {
        let x: f64 = x.into();
        sum += x;
        if x.is_nan() {
            continue;
        }
        any = true;
        min = min.min(x);
        max = max.max(x);
    }
    Stats {
        first: Some(value(v[0].into())),
        last: Some(value(v[v.len() - 1].into())),
        min: any.then(|| value(min)),
        max: any.then(|| value(max)),
        sum: Some(sum),
    }
}

/// A numeric value as f64, for comparisons of minimum and maximum (an INT64 beyond 2^53 compares
/// approximately; the value kept is still exact); NaN for a value that is no number. The same
/// mapping aggregates use ([`common::aggregate::numeric`]).
fn as_f64(v: &Value) -> f64 {
    common::aggregate::numeric(v).unwrap_or(f64::NAN)
}

fn put_value(w: &mut Writer, v: &Value) {
    match v {
        Value::Boolean(b) => w.u8(*b as u8),
        Value::Int32(x) | Value::Date(x) => w.u32(*x as u32),
        Value::Int64(x) | Value::Timestamp(x) => w.i64(*x),
        Value::Float(x) => w.u32(x.to_bits()),
        Value::Double(x) => w.u64(x.to_bits()),
        Value::Text(_) | Value::String(_) | Value::Blob(_) => {
            unreachable!("statistics of text-like pages carry no values")
        }
    }
}

fn get_value(r: &mut Reader<'_>, data_type: DataType) -> DecodeResult<Value> {
    Ok(match data_type {
        DataType::Boolean => match r.u8()? {
            0 => Value::Boolean(false),
            1 => Value::Boolean(true),
            other => return r.error(format!("boolean byte {other}")),
        },
        DataType::Int32 => Value::Int32(r.u32()? as i32),
        DataType::Int64 => Value::Int64(r.i64()?),
        DataType::Float => Value::Float(f32::from_bits(r.u32()?)),
        DataType::Double => Value::Double(f64::from_bits(r.u64()?)),
        DataType::Timestamp => Value::Timestamp(r.i64()?),
        DataType::Date => Value::Date(r.u32()? as i32),
        DataType::Text | DataType::String | DataType::Blob => {
            return r.error(format!("{data_type} statistics carry no values"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_pages_and_their_merge() {
        let a = Stats::of(&Column::Double(vec![2.5, f64::NAN, -1.0]));
        assert_eq!(a.first, Some(Value::Double(2.5)));
        assert_eq!(a.min, Some(Value::Double(-1.0)));
        assert_eq!(a.max, Some(Value::Double(2.5)));
        let b = Stats::of(&Column::Double(vec![7.0]));
        let m = Stats::merge(&a, &b);
        assert_eq!(m.first, Some(Value::Double(2.5)));
        assert_eq!(m.last, Some(Value::Double(7.0)));
        assert_eq!(m.max, Some(Value::Double(7.0)));
        assert!(m.sum.unwrap().is_nan(), "NaN is part of the sum");

        let ints = Stats::of(&Column::Int64(vec![5, i64::MAX, -3]));
        assert_eq!(ints.max, Some(Value::Int64(i64::MAX)), "kept exact");
        let bools = Stats::of(&Column::Boolean(vec![false, true, true]));
        assert_eq!(bools.sum, Some(2.0));
        assert_eq!(Stats::of(&Column::Text(vec!["x".into()])), Stats::none());
        let days = Stats::of(&Column::Date(vec![20240105, 19991231]));
        assert_eq!(days.min, Some(Value::Date(19991231)));
        assert_eq!(days.sum, None, "a sum of days means nothing");
        let nans = Stats::of(&Column::Float(vec![f32::NAN]));
        assert_eq!((nans.min, nans.max), (None, None));
    }

    #[test]
    fn statistics_round_trip() {
        for (column, data_type) in [
            (Column::Int32(vec![-4, 9]), DataType::Int32),
            (Column::Float(vec![f32::NAN]), DataType::Float),
            (Column::Boolean(vec![true]), DataType::Boolean),
            (Column::Text(vec!["t".into()]), DataType::Text),
            (Column::Timestamp(vec![3, -1]), DataType::Timestamp),
            (Column::Date(vec![20240105, 19991231]), DataType::Date),
            (Column::String(vec!["s".into()]), DataType::String),
            (Column::Blob(vec![vec![1]]), DataType::Blob),
        ] {
            let stats = Stats::of(&column);
            let mut w = Writer::new();
            stats.encode(&mut w);
            let mut r = Reader::new(w.as_slice());
            let back = Stats::decode(&mut r, data_type).unwrap();
            r.finish().unwrap();
            assert_eq!(format!("{back:?}"), format!("{stats:?}"));
        }
    }
}
