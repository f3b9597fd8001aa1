//! One region's part of a read, as the coordinator asks it of the region's leader (locally or
//! over `ReadRegion` / `AggregateRegion`) and as the leader answers it: internal types, the wire
//! form only in the service and the peer client ([`crate::convert`]).

use std::ops::Range;

use common::aggregate::{Partial, Windows};
use common::{SeriesBatch, SeriesPath};

/// What a region read returns: the points of each asked series the region holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadKind {
    /// The points in the range, oldest first.
    Range,
    /// The newest point, if it is not older than the range's start (a TTL's cutoff).
    Last,
}

/// A read of one region.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RegionRead {
    pub region: u64,
    /// Series of the region's database; one the region does not hold is absent from the answer.
    pub paths: Vec<SeriesPath>,
    /// `[start, end)`. With [`ReadKind::Last`] only `start` bounds.
    pub range: Range<i64>,
    /// At most this many points per series (0: the server's own bound).
    pub points_limit: u32,
    pub kind: ReadKind,
}

/// The points of one series a region answered, never empty.
pub(crate) type RegionSeries = (SeriesPath, SeriesBatch);

/// An aggregate read of one region: each path's partial aggregates in each window, computed by
/// the region ([`engine::DataRegion::aggregate`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RegionAggregate {
    pub region: u64,
    /// Series of the region's database; one without a visible point in the region is absent
    /// from the answer.
    pub paths: Vec<SeriesPath>,
    pub windows: Windows,
}

/// The partials of one series a region answered, one per window.
pub(crate) type RegionPartials = (SeriesPath, Vec<Partial>);
