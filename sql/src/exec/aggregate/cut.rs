//! The rows of an aggregate query ([`Cut`]): GROUP BY's windows (or one row without it), the
//! units a sliding step aggregates in ([`Slide`]), and the one backend call covering the points
//! aggregated.

use std::ops::Range;
use std::sync::Arc;

use common::aggregate::{Partial, Windows};

use super::super::{ExecError, ExecResult, RESULT_ROWS_MAX};
use crate::{GroupByTime, TimeRange};
use common::StatusCode;

/// The rows of an aggregate query and the points they take.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Cut {
    /// GROUP BY's windows, one row each; `None`: one row, without GROUP BY. With a sliding step,
    /// the units the rows are made of ([`Slide`]).
    pub(super) windows: Option<Windows>,
    /// GROUP BY's step differs from its interval: each row merges the units its window covers.
    pub(super) slide: Option<Slide>,
    /// GROUP BY was written left-open: a row is labelled with its window's right end.
    pub(super) left_open: bool,
    /// The points aggregated: the WHERE range, within GROUP BY's.
    pub(super) span: Range<i64>,
    /// A function needs the second moment: the backend decodes every page.
    pub(super) moments: bool,
}

impl Cut {
    /// The cut of a query; 700 when GROUP BY makes more than [`RESULT_ROWS_MAX`] windows.
    pub(super) fn new(range: TimeRange, group_by: Option<GroupByTime>) -> ExecResult<Cut> {
        let Some(g) = group_by else {
            return Ok(Cut {
                windows: None,
                slide: None,
                left_open: false,
                span: range.from..range.to,
                moments: false,
            });
        };
        let positive = |months: u32, ms: u64| months > 0 || ms > 0;
        if g.start >= g.end
            || !positive(g.interval_months, g.interval_ms)
            || !positive(g.step_months, g.step_ms)
        {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!(
                    "GROUP BY ([{}, {}), {}ms, {}ms) has no window: the start must be before the \
                     end, and the interval and the step positive",
                    g.start, g.end, g.interval_ms, g.step_ms
                ),
            ));
        }
        let span = (i128::from(g.end) - i128::from(g.start)) as u128;
        let slide = if g.interval_months > 0 || g.step_months > 0 {
            Some(Slide::calendar(&g)?)
        } else if g.step_ms == g.interval_ms {
            None
        } else {
            Some(Slide::new(&g, span)?)
        };
        let unit = slide.as_ref().map_or(g.interval_ms, |s| s.unit);
        let Some(windows) = Windows::new(g.start..g.end, unit, RESULT_ROWS_MAX as u64) else {
            let count = span.div_ceil(u128::from(unit));
            let message = match &slide {
                None => format!(
                    "GROUP BY ([{}, {}), {}ms) makes {count} windows, more than the \
                     {RESULT_ROWS_MAX} rows a query may return; widen the interval or narrow \
                     the range",
                    g.start, g.end, g.interval_ms
                ),
                Some(_) => format!(
                    "GROUP BY ([{}, {}), {}ms, {}ms) is aggregated in units of {unit}ms (the \
                     greatest common divisor of the interval and the step): {count} of them, \
                     more than {RESULT_ROWS_MAX}; choose an interval and a step with a larger \
                     common divisor, or narrow the range",
                    g.start, g.end, g.interval_ms, g.step_ms
                ),
            };
            return Err(ExecError::refused(StatusCode::IllegalParameter, message));
        };
        Ok(Cut {
            windows: Some(windows),
            slide,
            left_open: g.left_open,
            span: range.from.max(g.start)..range.to.min(g.end),
            moments: false,
        })
    }

    /// The time of row `row` of a GROUP BY result: its window's start, or, written left-open, the
    /// window's last millisecond (its right end as written).
    pub(super) fn row_time(&self, w: &Windows, row: usize) -> i64 {
        let (start, end) = match &self.slide {
            Some(slide) => slide.window(row),
            None => {
                let start = row as i128 * i128::from(w.interval);
                (start, start + i128::from(w.interval))
            }
        };
        let at = if self.left_open {
            (i128::from(w.start) + end).min(i128::from(w.end)) - 1
        } else {
            i128::from(w.start) + start
        };
        i64::try_from(at).expect("a window lies within i64")
    }

    /// Partials the backend answers per series: one per window, or per unit when sliding.
    pub(super) fn call_rows(&self) -> usize {
        self.windows.map_or(1, |w| {
            usize::try_from(w.count()).expect("at most RESULT_ROWS_MAX windows")
        })
    }

    /// Each series' per-unit partials merged into its rows' windows (as they are without a
    /// sliding step).
    pub(super) fn rows_of(&self, partials: Vec<Vec<Vec<Partial>>>) -> Vec<Vec<Vec<Partial>>> {
        let Some(slide) = &self.slide else {
            return partials;
        };
        let per_row = |units: Vec<Partial>| -> Vec<Partial> {
            (0..slide.rows)
                .map(|row| {
                    let mut merged = Partial::default();
                    for unit in &units[slide.units(row, units.len())] {
                        merged.merge(unit);
                    }
                    merged
                })
                .collect()
        };
        partials
            .into_iter()
            .map(|device| device.into_iter().map(per_row).collect())
            .collect()
    }

    /// Rows of the result.
    pub(super) fn rows(&self) -> usize {
        match &self.slide {
            Some(slide) => slide.rows,
            None => self.call_rows(),
        }
    }

    /// The one backend call that covers the span, `None` when the span is empty: GROUP BY's
    /// windows with the span as their visible range, or one window over the span.
    pub(super) fn call(&self) -> Option<Windows> {
        let span = self.span.clone();
        if span.is_empty() {
            return None;
        }
        let windows = match self.windows {
            Some(w) => w.visible(span),
            None => Windows::whole(span).expect("a span that is not empty"),
        };
        Some(windows.with_moments(self.moments))
    }
}

/// GROUP BY's windows when they slide by a step other than their interval, or are laid on the
/// calendar: the backend aggregates units of the greatest common divisor of the windows' bounds'
/// distances from the start, which tile every window, and each row merges its window's units
/// (partials of disjoint points merge exactly).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Slide {
    /// The units' width.
    unit: u64,
    /// Windows: one for every `start + k·step < end`.
    pub(super) rows: usize,
    steps: Steps,
}

/// Where a sliding row's window lies.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Steps {
    /// Row r's window is `[r·step, r·step + interval)` from the start.
    Fixed { interval: u64, step: u64 },
    /// Natural months: row r's window is `bounds[r]`, in ms from the start, its end cut at
    /// GROUP BY's.
    Calendar(Arc<[(i64, i64)]>),
}

impl Slide {
    /// 700 when the windows are more than [`RESULT_ROWS_MAX`].
    fn new(g: &GroupByTime, span: u128) -> ExecResult<Slide> {
        let (interval, step) = (g.interval_ms, g.step_ms);
        let rows = span.div_ceil(u128::from(step));
        if rows > RESULT_ROWS_MAX as u128 {
            return Err(too_many_windows(g, &rows.to_string()));
        }
        Ok(Slide {
            unit: gcd(interval, step),
            rows: rows as usize,
            steps: Steps::Fixed { interval, step },
        })
    }

    /// Windows laid on the calendar: row k's starts `k·step` after the start and ends
    /// `interval` after that, each month added from the start (so the day of the month is
    /// clamped only where a month lacks it). 700 past [`RESULT_ROWS_MAX`] windows.
    fn calendar(g: &GroupByTime) -> ExecResult<Slide> {
        let span = i128::from(g.end) - i128::from(g.start);
        let out_of_range = || {
            ExecError::refused(
                StatusCode::IllegalParameter,
                "GROUP BY's windows run past the last millisecond".to_string(),
            )
        };
        let shift = |k: i64, months: u32, ms: u64, more_months: u32, more_ms: u64| {
            let months = k.checked_mul(i64::from(months))? + i64::from(more_months);
            let ms = i64::try_from(ms).ok()?.checked_mul(k)?;
            let ms = ms.checked_add(i64::try_from(more_ms).ok()?)?;
            crate::time::add_months(g.start, months)?.checked_add(ms)
        };
        let mut bounds = Vec::new();
        let mut unit = 0u64;
        for k in 0.. {
            let start = shift(k, g.step_months, g.step_ms, 0, 0).ok_or_else(out_of_range)?;
            if start >= g.end {
                break;
            }
            if bounds.len() == RESULT_ROWS_MAX {
                return Err(too_many_windows(g, &format!("more than {RESULT_ROWS_MAX}")));
            }
            let end = shift(
                k,
                g.step_months,
                g.step_ms,
                g.interval_months,
                g.interval_ms,
            )
            .ok_or_else(out_of_range)?;
            let (start, end) = (start - g.start, end.min(g.end) - g.start);
            for offset in [start, end] {
                if 0 < offset && i128::from(offset) < span {
                    unit = gcd(unit, offset.unsigned_abs());
                }
            }
            bounds.push((start, end));
        }
        Ok(Slide {
            // One window over the whole span: a unit as wide.
            unit: if unit == 0 { span as u64 } else { unit },
            rows: bounds.len(),
            steps: Steps::Calendar(bounds.into()),
        })
    }

    /// Row `row`'s window, in ms from the start (its end perhaps past GROUP BY's).
    pub(super) fn window(&self, row: usize) -> (i128, i128) {
        match &self.steps {
            Steps::Fixed { interval, step } => {
                let start = row as i128 * i128::from(*step);
                (start, start + i128::from(*interval))
            }
            Steps::Calendar(bounds) => {
                let (start, end) = bounds[row];
                (i128::from(start), i128::from(end))
            }
        }
    }

    /// The rows whose windows hold the time `since` ms after the start (`since >= 0`).
    pub(super) fn rows_at(&self, since: i128) -> Range<usize> {
        match &self.steps {
            Steps::Fixed { interval, step } => {
                let (step, interval) = (i128::from(*step), i128::from(*interval));
                // Row r's window is [r·step, r·step + interval).
                let last = since / step;
                let first = ((since - interval + 1).max(0) + step - 1) / step;
                let clamp = |r: i128| usize::try_from(r).unwrap_or(usize::MAX).min(self.rows);
                clamp(first)..clamp(last + 1)
            }
            // Starts and ends both grow with the row: the rows that started by `since` are a
            // prefix, those not yet ended a suffix.
            Steps::Calendar(bounds) => {
                let started = bounds.partition_point(|&(s, _)| i128::from(s) <= since);
                let ended = bounds.partition_point(|&(_, e)| i128::from(e) <= since);
                ended..started.max(ended)
            }
        }
    }

    /// The units of row `row`'s window among `count`.
    pub(super) fn units(&self, row: usize, count: usize) -> Range<usize> {
        let (start, end) = self.window(row);
        let unit = i128::from(self.unit);
        let at = |ms: i128| usize::try_from(ms / unit).unwrap_or(usize::MAX).min(count);
        at(start)..at(end + unit - 1)
    }
}

/// 700: GROUP BY makes `rows` windows, more than a query may return.
fn too_many_windows(g: &GroupByTime, rows: &str) -> ExecError {
    ExecError::refused(
        StatusCode::IllegalParameter,
        format!(
            "GROUP BY ([{}, {}), ...) makes {rows} windows, more than the {RESULT_ROWS_MAX} rows \
             a query may return; widen the step or narrow the range",
            g.start, g.end
        ),
    )
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_by(start: i64, end: i64, interval_ms: u64) -> Option<GroupByTime> {
        Some(GroupByTime {
            start,
            end,
            interval_ms,
            step_ms: interval_ms,
            interval_months: 0,
            step_months: 0,
            left_open: false,
        })
    }

    fn calls(range: TimeRange, g: Option<GroupByTime>) -> Vec<(Range<i64>, u64, usize)> {
        Cut::new(range, g)
            .expect("a cut")
            .call()
            .into_iter()
            .map(|w| (w.range(), w.interval, 0))
            .collect()
    }

    #[test]
    fn a_where_range_is_the_visible_part_of_group_by_windows() {
        let r = |from, to| TimeRange { from, to };
        // No WHERE: one call over GROUP BY's windows.
        assert_eq!(
            calls(TimeRange::ALL, group_by(0, 1000, 100)),
            [(0..1000, 100, 0)]
        );
        // WHERE cuts the windows' visible range; they keep their boundaries (row 0 is the
        // window at 0 whatever WHERE says).
        assert_eq!(
            calls(r(150, 750), group_by(0, 1000, 100)),
            [(150..750, 100, 0)]
        );
        let cut = Cut::new(r(150, 750), group_by(0, 1000, 100)).unwrap();
        let w = cut.call().expect("a call");
        assert_eq!(
            (w.index(149), w.index(150), w.index(750)),
            (None, Some(1), None)
        );
        // Nothing in common: no call; without GROUP BY, the WHERE range whole.
        assert_eq!(calls(r(5000, 6000), group_by(0, 1000, 100)), []);
        assert_eq!(calls(r(3, 9), None), [(3..9, 6, 0)]);
        assert_eq!(calls(r(9, 3), None), []);
    }

    #[test]
    fn windows_past_the_row_bound_are_refused_naming_it() {
        let e = Cut::new(TimeRange::ALL, group_by(0, 2_000_001, 2)).unwrap_err();
        assert_eq!(e.code(), 700);
        assert!(e.to_string().contains("1000001 windows"), "{e}");
        assert!(e.to_string().contains(&RESULT_ROWS_MAX.to_string()), "{e}");
        let at_bound = Cut::new(TimeRange::ALL, group_by(0, 2_000_000, 2)).unwrap();
        assert_eq!(at_bound.rows(), RESULT_ROWS_MAX);
        assert!(Cut::new(TimeRange::ALL, group_by(5, 5, 1)).is_err());
        assert!(Cut::new(TimeRange::ALL, group_by(0, 5, 0)).is_err());
    }
}
