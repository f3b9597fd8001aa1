//! Partial aggregates: what a region answers for an aggregate query of one series over one time
//! window, merged across time partitions and regions at the coordinator, then finished into
//! IoTDB's functions (`COUNT`, `SUM`, `AVG`, `MIN_VALUE`, `MAX_VALUE`, `EXTREME`, `FIRST_VALUE`,
//! `LAST_VALUE`, `MIN_TIME`, `MAX_TIME`, and from the second moment `STDDEV`, `VARIANCE` and
//! their population and sample forms).
//!
//! A partial is built from points ([`Partial::push`]) or from a sealed page's statistics
//! ([`Partial::of_page`]) without decoding it; the two give the same partial for the same
//! points, which the engine's model test checks. Minimum and maximum skip NaN (as a page's
//! statistics do); the sum takes every value (a NaN makes it NaN). BOOLEAN values count as 0 and
//! 1 for the sum, minimum and maximum; TEXT, STRING and BLOB values only count and take part in
//! first and last.
//!
//! The second moment ([`Partial::m2`]) is kept point by point (Welford's update) and merged
//! with Chan's formula; page statistics do not carry it, so a partial made from them has none
//! (0), and windows that ask for it ([`Windows::moments`]) have every page decoded.

use std::ops::Range;

use crate::Value;

/// One series' aggregate state over one window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partial {
    /// Points.
    pub count: u64,
    /// Sum of the numeric values but TIMESTAMP and DATE ones (0 for none).
    pub sum: f64,
    /// Smallest value, NaN skipped.
    pub min: Option<Value>,
    /// Greatest value, NaN skipped.
    pub max: Option<Value>,
    /// The point with the smallest timestamp.
    pub first: Option<(i64, Value)>,
    /// The point with the greatest timestamp.
    pub last: Option<(i64, Value)>,
    /// The sum of the squared differences between the values the sum takes and their mean
    /// (NaN once one is NaN); 0 in a partial made from page statistics.
    pub m2: f64,
}

/// What a sealed page's index says about its points (the engine's page statistics, in the
/// terms a partial needs).
#[derive(Clone, Debug, PartialEq)]
pub struct PageFacts<'a> {
    /// Points in the page.
    pub count: u64,
    /// Smallest and greatest timestamp.
    pub min_time: i64,
    /// Greatest timestamp.
    pub max_time: i64,
    /// Values at `min_time` and `max_time`.
    pub first: &'a Value,
    /// The value at `max_time`.
    pub last: &'a Value,
    /// Smallest and greatest value, NaN skipped (`None`: every value is NaN).
    pub min: Option<&'a Value>,
    /// Greatest value, NaN skipped.
    pub max: Option<&'a Value>,
    /// Sum of the values.
    pub sum: f64,
}

impl Partial {
    /// Takes one point.
    pub fn push(&mut self, time: i64, value: &Value) {
        self.count += 1;
        if let Some(x) = numeric(value) {
            if !matches!(value, Value::Timestamp(_) | Value::Date(_)) {
                // Welford: the mean before and after this point.
                let n = self.count as f64;
                let before = if self.count > 1 {
                    self.sum / (n - 1.0)
                } else {
                    0.0
                };
                self.sum += x;
                self.m2 += (x - before) * (x - self.sum / n);
            }
            if !x.is_nan() {
                self.take_min(value);
                self.take_max(value);
            }
        }
        if self.first.as_ref().is_none_or(|(t, _)| time < *t) {
            self.first = Some((time, value.clone()));
        }
        if self.last.as_ref().is_none_or(|(t, _)| time > *t) {
            self.last = Some((time, value.clone()));
        }
    }

    /// The partial of a whole page, from its statistics.
    pub fn of_page(page: &PageFacts<'_>) -> Partial {
        debug_assert!(page.count > 0 && page.min_time <= page.max_time);
        Partial {
            count: page.count,
            sum: page.sum,
            min: page.min.cloned(),
            max: page.max.cloned(),
            first: Some((page.min_time, page.first.clone())),
            last: Some((page.max_time, page.last.clone())),
            m2: 0.0,
        }
    }

    /// Takes `other`'s points too (a disjoint set: another page, partition or region).
    pub fn merge(&mut self, other: &Partial) {
        if self.count > 0 && other.count > 0 {
            // Chan et al.: the two moments plus the spread of the two means.
            let (a, b) = (self.count as f64, other.count as f64);
            let delta = other.sum / b - self.sum / a;
            self.m2 += other.m2 + delta * delta * a * b / (a + b);
        } else if other.count > 0 {
            self.m2 = other.m2;
        }
        self.count += other.count;
        self.sum += other.sum;
        if let Some(v) = &other.min {
            self.take_min(v);
        }
        if let Some(v) = &other.max {
            self.take_max(v);
        }
        if let Some((t, v)) = &other.first {
            if self.first.as_ref().is_none_or(|(mine, _)| t < mine) {
                self.first = Some((*t, v.clone()));
            }
        }
        if let Some((t, v)) = &other.last {
            if self.last.as_ref().is_none_or(|(mine, _)| t > mine) {
                self.last = Some((*t, v.clone()));
            }
        }
    }

    fn take_min(&mut self, v: &Value) {
        let x = numeric(v).unwrap_or(f64::NAN);
        if self
            .min
            .as_ref()
            .is_none_or(|m| x < numeric(m).unwrap_or(f64::NAN))
        {
            self.min = Some(v.clone());
        }
    }

    fn take_max(&mut self, v: &Value) {
        let x = numeric(v).unwrap_or(f64::NAN);
        if self
            .max
            .as_ref()
            .is_none_or(|m| x > numeric(m).unwrap_or(f64::NAN))
        {
            self.max = Some(v.clone());
        }
    }

    /// `AVG`: the mean, `None` without points.
    pub fn avg(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// `VAR_POP`: the population variance, `None` without points.
    pub fn var_pop(&self) -> Option<f64> {
        (self.count > 0).then(|| self.m2 / self.count as f64)
    }

    /// `VAR_SAMP` (and `VARIANCE`): the sample variance, `None` under two points.
    pub fn var_samp(&self) -> Option<f64> {
        (self.count > 1).then(|| self.m2 / (self.count - 1) as f64)
    }

    /// `EXTREME`: the value of greatest magnitude (the maximum on a tie, as IoTDB).
    pub fn extreme(&self) -> Option<Value> {
        let magnitude = |v: &Value| numeric(v).map_or(f64::NAN, f64::abs);
        match (&self.min, &self.max) {
            (Some(min), Some(max)) => Some(if magnitude(min) > magnitude(max) {
                min.clone()
            } else {
                max.clone()
            }),
            (one, other) => one.clone().or_else(|| other.clone()),
        }
    }
}

/// The value as a number, for the sum and the extremes (`None` for TEXT, STRING, BLOB).
pub fn numeric(v: &Value) -> Option<f64> {
    match v {
        Value::Boolean(b) => Some(f64::from(u8::from(*b))),
        Value::Int32(x) | Value::Date(x) => Some(f64::from(*x)),
        Value::Int64(x) | Value::Timestamp(x) => Some(*x as f64),
        Value::Float(x) => Some(f64::from(*x)),
        Value::Double(x) => Some(*x),
        Value::Text(_) | Value::String(_) | Value::Blob(_) => None,
    }
}

/// The time windows of an aggregate query: `[start, end)` cut every `interval` ms from
/// `start` (IoTDB's `GROUP BY ([start, end), interval)`); the last window may be shorter. A
/// query without GROUP BY is one window. Only the points in the visible range (`from..to`, a
/// WHERE clause's or a TTL's bound) are aggregated; the windows keep their boundaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// First timestamp of the first window.
    pub start: i64,
    /// End of the last window (excluded).
    pub end: i64,
    /// Width of a window, > 0.
    pub interval: u64,
    /// First visible timestamp.
    pub from: i64,
    /// End of the visible range (excluded).
    pub to: i64,
    /// The second moment is wanted ([`Partial::m2`]): no partial is made from page statistics.
    pub moments: bool,
}

impl Windows {
    /// Windows of `interval` over `range`; `None` when the range is empty, the interval not
    /// positive, or there would be more than `max` windows.
    pub fn new(range: Range<i64>, interval: u64, max: u64) -> Option<Windows> {
        if range.start >= range.end || interval == 0 {
            return None;
        }
        let windows = Windows {
            start: range.start,
            end: range.end,
            interval,
            from: range.start,
            to: range.end,
            moments: false,
        };
        (windows.count() <= max).then_some(windows)
    }

    /// One window over all of `range` (`None` when it is empty).
    pub fn whole(range: Range<i64>) -> Option<Windows> {
        let width = (range.end as i128 - range.start as i128).max(1) as u64;
        Windows::new(range, width, 1)
    }

    /// The same windows, only the points in `visible` (and what was visible) aggregated.
    pub fn visible(self, visible: Range<i64>) -> Windows {
        Windows {
            from: self.from.max(visible.start),
            to: self.to.min(visible.end),
            ..self
        }
    }

    /// The same windows, their partials with the second moment (`moments`) or without.
    pub fn with_moments(self, moments: bool) -> Windows {
        Windows { moments, ..self }
    }

    /// How many windows.
    pub fn count(&self) -> u64 {
        let span = self.end as i128 - self.start as i128;
        ((span + self.interval as i128 - 1) / self.interval as i128) as u64
    }

    /// The window holding `time`, if any and `time` is visible.
    pub fn index(&self, time: i64) -> Option<usize> {
        if time < self.start || time >= self.end || time < self.from || time >= self.to {
            return None;
        }
        Some(((time as i128 - self.start as i128) / self.interval as i128) as usize)
    }

    /// The first timestamp of window `i`.
    pub fn window_start(&self, i: usize) -> i64 {
        (self.start as i128 + i as i128 * self.interval as i128) as i64
    }

    /// The timestamps whose points are aggregated: the windows' span, cut to the visible range
    /// (empty when they do not meet).
    pub fn range(&self) -> Range<i64> {
        let from = self.start.max(self.from);
        from..self.end.min(self.to).max(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushing_points_in_any_order_gives_one_partial() {
        let points = [(5, 2.5), (1, -7.0), (9, f64::NAN), (3, 4.0)];
        let mut forward = Partial::default();
        let mut backward = Partial::default();
        for (t, v) in points {
            forward.push(t, &Value::Double(v));
        }
        for (t, v) in points.iter().rev() {
            backward.push(*t, &Value::Double(*v));
        }
        assert_eq!(forward.count, 4);
        assert!(forward.sum.is_nan(), "a NaN makes the sum NaN");
        assert_eq!(forward.min, Some(Value::Double(-7.0)), "NaN skipped");
        assert_eq!(forward.max, Some(Value::Double(4.0)));
        assert_eq!(forward.first.as_ref().map(|f| f.0), Some(1));
        assert_eq!(forward.last.as_ref().map(|l| l.0), Some(9));
        assert_eq!(forward.extreme(), Some(Value::Double(-7.0)));
        assert_eq!(
            (forward.min.clone(), forward.first.clone(), forward.count),
            (backward.min, backward.first, backward.count)
        );
    }

    #[test]
    fn merging_halves_equals_pushing_all() {
        let values: Vec<(i64, Value)> = (0..50)
            .map(|i| (i, Value::Int64((i * 37) % 23 - 11)))
            .collect();
        let mut all = Partial::default();
        let (mut left, mut right) = (Partial::default(), Partial::default());
        for (i, (t, v)) in values.iter().enumerate() {
            all.push(*t, v);
            if i % 3 == 0 {
                left.push(*t, v)
            } else {
                right.push(*t, v)
            }
        }
        right.merge(&left);
        // The second moment agrees up to rounding; everything else exactly.
        assert!(
            (right.m2 - all.m2).abs() <= 1e-9 * all.m2,
            "{} vs {}",
            right.m2,
            all.m2
        );
        assert_eq!(
            Partial { m2: 0.0, ..right },
            Partial {
                m2: 0.0,
                ..all.clone()
            }
        );
        assert_eq!(all.avg(), Some(all.sum / 50.0));
        assert_eq!(Partial::default().avg(), None);
    }

    /// The two-pass variance of `xs`: what the one-pass moments must give.
    fn two_pass(xs: &[f64]) -> f64 {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        xs.iter().map(|x| (x - mean) * (x - mean)).sum()
    }

    #[test]
    fn the_second_moment_is_exact_pushed_or_merged_and_far_from_zero() {
        // Large values with a small spread: the naive sum of squares loses them all.
        let xs: Vec<f64> = (0..1_000).map(|i| 1e9 + f64::from(i % 7)).collect();
        let want = two_pass(&xs);
        let mut parts = vec![Partial::default(); 3];
        let mut all = Partial::default();
        for (i, x) in xs.iter().enumerate() {
            all.push(i as i64, &Value::Double(*x));
            parts[i % 3].push(i as i64, &Value::Double(*x));
        }
        let mut merged = Partial::default();
        for p in &parts {
            merged.merge(p);
        }
        for got in [all.m2, merged.m2] {
            assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
        }
        let var_pop = all.var_pop().unwrap();
        assert!((var_pop - want / 1_000.0).abs() < 1e-6);
        assert!((all.var_samp().unwrap() - want / 999.0).abs() < 1e-6);
        // One point: a population variance of 0, no sample variance.
        let mut one = Partial::default();
        one.push(0, &Value::Int32(5));
        assert_eq!((one.var_pop(), one.var_samp()), (Some(0.0), None));
        assert_eq!(Partial::default().var_pop(), None);
    }

    #[test]
    fn windows_cut_the_range_and_the_last_may_be_short() {
        let w = Windows::new(0..1_000, 300, 10).expect("4 windows");
        assert_eq!(w.count(), 4);
        assert_eq!(w.index(299), Some(0));
        assert_eq!(w.index(300), Some(1));
        assert_eq!(w.index(999), Some(3));
        assert_eq!(w.index(1_000), None);
        assert_eq!(w.index(-1), None);
        assert_eq!(w.window_start(3), 900);
        assert_eq!(Windows::new(0..1_000, 1, 999), None, "over the limit");
        assert_eq!(Windows::new(5..5, 1, 10), None);
        let cut = w.visible(250..2_000);
        assert_eq!(
            (cut.count(), cut.index(249), cut.index(250)),
            (4, None, Some(0))
        );
        assert_eq!(cut.range(), 250..1_000);
        assert_eq!(w.visible(2_000..3_000).range(), 2_000..2_000, "empty");
        let whole = Windows::whole(i64::MIN..i64::MAX).expect("one window");
        assert_eq!(whole.count(), 1);
        assert_eq!(whole.index(i64::MIN), Some(0));
        assert_eq!(whole.index(i64::MAX - 1), Some(0));
    }
}
