//! The wire form of an aggregate read (`AggregateRegion`) and of its partials.

use common::aggregate::{Partial, Windows};
use common::{SeriesPath, Value};

use super::{value_from_wire, value_to_wire};
use crate::region_read::{RegionAggregate, RegionPartials};

/// The wire form of an aggregate read.
pub(crate) fn region_aggregate_to_wire(read: &RegionAggregate) -> proto::RegionAggregateReq {
    let w = &read.windows;
    proto::RegionAggregateReq {
        region_id: read.region,
        paths: read.paths.iter().cloned().map(Into::into).collect(),
        window_start: w.start,
        window_end: w.end,
        interval: w.interval,
        visible_from: w.from,
        visible_to: w.to,
        moments: w.moments,
    }
}

/// The aggregate read of a wire request, or why it is malformed (its size is the host's to
/// bound).
pub(crate) fn region_aggregate_from_wire(
    req: proto::RegionAggregateReq,
) -> Result<RegionAggregate, String> {
    let windows = Windows::new(req.window_start..req.window_end, req.interval, u64::MAX)
        .ok_or_else(|| {
            format!(
                "no windows in [{}, {}) by {}",
                req.window_start, req.window_end, req.interval
            )
        })?
        .visible(req.visible_from..req.visible_to)
        .with_moments(req.moments);
    Ok(RegionAggregate {
        region: req.region_id,
        paths: req.paths.into_iter().map(Into::into).collect(),
        windows,
    })
}

/// The wire form of one series' partials.
pub(crate) fn partials_to_wire((path, partials): RegionPartials) -> proto::SeriesPartials {
    proto::SeriesPartials {
        path: Some(path.into()),
        partials: partials.iter().map(partial_to_wire).collect(),
    }
}

fn partial_to_wire(p: &Partial) -> proto::Partial {
    let (first_time, first) = split(&p.first);
    let (last_time, last) = split(&p.last);
    proto::Partial {
        count: p.count,
        sum: p.sum,
        min: p.min.as_ref().map(value_to_wire),
        max: p.max.as_ref().map(value_to_wire),
        first_time,
        first,
        last_time,
        last,
        m2: p.m2,
    }
}

fn split(point: &Option<(i64, Value)>) -> (i64, Option<proto::Value>) {
    match point {
        Some((t, v)) => (*t, Some(value_to_wire(v))),
        None => (0, None),
    }
}

/// One series' partials of a peer's answer, or what is malformed in them.
pub(crate) fn partials_from_wire(wire: proto::SeriesPartials) -> Result<RegionPartials, String> {
    let path: SeriesPath = wire.path.ok_or("partials without a path")?.into();
    let partials = wire
        .partials
        .into_iter()
        .map(partial_from_wire)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{path}: {e}"))?;
    Ok((path, partials))
}

fn partial_from_wire(p: proto::Partial) -> Result<Partial, String> {
    let value = |v: Option<proto::Value>| -> Result<Option<Value>, String> {
        v.map(|v| value_from_wire(&v).ok_or_else(|| "an empty value".to_string()))
            .transpose()
    };
    let partial = Partial {
        count: p.count,
        sum: p.sum,
        min: value(p.min)?,
        max: value(p.max)?,
        first: value(p.first)?.map(|v| (p.first_time, v)),
        last: value(p.last)?.map(|v| (p.last_time, v)),
        m2: p.m2,
    };
    if (partial.count > 0) != (partial.first.is_some() && partial.last.is_some()) {
        return Err(format!(
            "a partial of {} points with first {:?} and last {:?}",
            partial.count, partial.first, partial.last
        ));
    }
    Ok(partial)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_partials_round_trip() {
        for moments in [false, true] {
            let windows = Windows::new(0..100, 10, 10)
                .unwrap()
                .visible(5..95)
                .with_moments(moments);
            let read = RegionAggregate {
                region: 3,
                paths: vec![SeriesPath::new("root.sg.d1".to_string(), "s1")],
                windows,
            };
            assert_eq!(
                region_aggregate_from_wire(region_aggregate_to_wire(&read)),
                Ok(read)
            );
        }
        let mut full = Partial::default();
        full.push(7, &Value::Int64(-4));
        full.push(9, &Value::Int64(12));
        assert!(full.m2 > 0.0);
        let series = (
            SeriesPath::new("root.sg.d1".to_string(), "s1"),
            vec![full, Partial::default()],
        );
        assert_eq!(
            partials_from_wire(partials_to_wire(series.clone())),
            Ok(series)
        );
    }

    #[test]
    fn malformed_answers_are_refused() {
        let bad = proto::SeriesPartials {
            path: Some(SeriesPath::new("root.sg.d1".to_string(), "s1").into()),
            partials: vec![proto::Partial {
                count: 2,
                ..Default::default()
            }],
        };
        assert!(partials_from_wire(bad).is_err());
        let empty = proto::RegionAggregateReq {
            window_start: 5,
            window_end: 5,
            interval: 1,
            ..Default::default()
        };
        assert!(region_aggregate_from_wire(empty).is_err());
    }
}
