//! Analysis of a tree-model query against the schema: the FROM paths and patterns and the select
//! list's measurements become the series the query reads, with their types. A pattern's
//! wildcards are expanded, an alias is resolved to its series, and a name that matches nothing
//! is left out (IoTDB answers an empty column set, not an error).
//!
//! The order is IoTDB's: for each name of the select list, for each FROM path in the order
//! written, its series (a wildcard's in the server's order). `SELECT s1, s2 FROM root.sg.d1,
//! root.sg.d2` reads `d1.s1, d2.s1, d1.s2, d2.s2`.

use std::collections::{BTreeMap, HashMap};

use common::views::TimeseriesView;
use common::{DataType, StatusCode};

use super::{resolve, Backend, ExecError, ExecResult};
use crate::{PathPattern, Projection, QUERY_SERIES_MAX};

/// One series a query reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Series {
    pub(super) device: String,
    /// The name the query used: the measurement, or its alias.
    pub(super) label: String,
    pub(super) measurement: String,
    pub(super) data_type: DataType,
    /// The column's name the query gave with `AS`, if any.
    pub(super) column: Option<String>,
}

impl Series {
    /// `device.label`, as IoTDB names the series' column.
    pub(super) fn path(&self) -> String {
        format!("{}.{}", self.device, self.label)
    }

    /// The series' column in a result: its `AS` alias, or its path.
    pub(super) fn column_name(&self) -> String {
        self.column.clone().unwrap_or_else(|| self.path())
    }
}

/// A name of the select list: a measurement (or alias), or `*`.
pub(super) const ANY: &str = "*";

/// The series each of `names` reads under `from` (`[name][...]`, in IoTDB's order). 700 when
/// they are more than [`QUERY_SERIES_MAX`].
pub(super) async fn expand<B: Backend>(
    backend: &B,
    from: &[PathPattern],
    names: &[String],
) -> ExecResult<Vec<Vec<Series>>> {
    let mut by_name: Vec<Vec<Series>> = vec![Vec::new(); names.len()];
    for pattern in from {
        let found = if pattern.has_wildcard() {
            expand_pattern(backend, pattern, names).await?
        } else {
            expand_device(backend, &pattern.to_string(), names).await?
        };
        for (all, some) in by_name.iter_mut().zip(found) {
            all.extend(some);
        }
        let total: usize = by_name.iter().map(Vec::len).sum();
        if total > QUERY_SERIES_MAX {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!(
                    "the query reads more than {QUERY_SERIES_MAX} series; narrow its FROM \
                     patterns or its select list"
                ),
            ));
        }
    }
    Ok(by_name)
}

/// The names of a select list: `*`, or the measurements.
pub(super) fn names_of(projection: &Projection) -> Vec<String> {
    projection
        .names()
        .map_or_else(|| vec![ANY.to_string()], <[String]>::to_vec)
}

/// 700: an `AS` alias over `series` series, where it names the column of exactly one (IoTDB
/// refuses it too).
pub(super) fn alias_of_many(alias: &str, series: usize) -> ExecError {
    ExecError::refused(
        StatusCode::IllegalParameter,
        format!(
            "the alias {alias} names {series} series; an alias names the column of exactly one"
        ),
    )
}

/// [`expand`]'s series as one list, for a projection: a measurement with an `AS` alias names its
/// one series' column (700 when it reads more than one, as IoTDB refuses it).
pub(super) async fn expand_projection<B: Backend>(
    backend: &B,
    from: &[PathPattern],
    projection: &Projection,
) -> ExecResult<Vec<Series>> {
    let by_name = expand(backend, from, &names_of(projection)).await?;
    let mut out = Vec::new();
    for (i, group) in by_name.into_iter().enumerate() {
        let Some(alias) = projection.alias(i) else {
            out.extend(group);
            continue;
        };
        if group.len() > 1 {
            return Err(alias_of_many(alias, group.len()));
        }
        out.extend(group.into_iter().map(|s| Series {
            column: Some(alias.to_string()),
            ..s
        }));
    }
    Ok(out)
}

/// The series of one device (a path without wildcards) for each name: one schema lookup for the
/// names, one listing for `*` or an alias.
async fn expand_device<B: Backend>(
    backend: &B,
    device: &str,
    names: &[String],
) -> ExecResult<Vec<Vec<Series>>> {
    let series = |(label, measurement, data_type)| Series {
        device: device.to_string(),
        label,
        measurement,
        data_type,
        column: None,
    };
    let every: Vec<Series> = if names.iter().any(|n| n == ANY) {
        resolve(backend, device, &Projection::All)
            .await?
            .into_iter()
            .map(series)
            .collect()
    } else {
        Vec::new()
    };
    let mut literal: Vec<String> = names.iter().filter(|n| *n != ANY).cloned().collect();
    literal.sort();
    literal.dedup();
    let named: HashMap<String, Series> = if literal.is_empty() {
        HashMap::new()
    } else {
        resolve(backend, device, &Projection::Measurements(literal))
            .await?
            .into_iter()
            .map(|found| (found.0.clone(), series(found)))
            .collect()
    };
    Ok(names
        .iter()
        .map(|name| match name.as_str() {
            ANY => every.clone(),
            _ => named.get(name).cloned().into_iter().collect(),
        })
        .collect())
}

/// The series under a pattern with wildcards for each name: one listing of the pattern's fixed
/// prefix, matched against `pattern.name` (a series matches by its measurement or its alias).
async fn expand_pattern<B: Backend>(
    backend: &B,
    pattern: &PathPattern,
    names: &[String],
) -> ExecResult<Vec<Vec<Series>>> {
    let listed: Vec<TimeseriesView> = backend
        .show_timeseries(&pattern.fixed_prefix())
        .await?
        .into_iter()
        .filter(|s| !s.pending_delete)
        .collect();
    Ok(names
        .iter()
        .map(|name| {
            let full = pattern.child(name);
            listed
                .iter()
                .filter_map(|s| {
                    let label = if full.matches_series(&s.device, &s.measurement) {
                        s.measurement.clone()
                    } else {
                        let alias = s.meta.alias.as_ref()?;
                        full.matches_series(&s.device, alias)
                            .then(|| alias.clone())?
                    };
                    Some(Series {
                        device: s.device.clone(),
                        label,
                        measurement: s.measurement.clone(),
                        data_type: s.data_type,
                        column: None,
                    })
                })
                .collect()
        })
        .collect())
}

/// The series of full `paths` that exist, in the order given, with their types (one lookup per
/// device): IoTDB's raw and last data queries by path.
pub(super) async fn resolve_paths<B: Backend>(
    backend: &B,
    paths: &[String],
) -> ExecResult<Vec<Series>> {
    let mut by_device: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut split = Vec::with_capacity(paths.len());
    for path in paths {
        let Some((device, measurement)) = path.rsplit_once('.') else {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!("{path} is not a series path like root.sg.d1.s1"),
            ));
        };
        by_device
            .entry(device)
            .or_default()
            .push(measurement.to_string());
        split.push((device, measurement));
    }
    let mut types: HashMap<(String, String), DataType> = HashMap::new();
    for (device, measurements) in by_device {
        for (measurement, data_type) in backend.series_types(device, &measurements).await? {
            types.insert((device.to_string(), measurement), data_type);
        }
    }
    Ok(split
        .into_iter()
        .filter_map(|(device, measurement)| {
            let key = (device.to_string(), measurement.to_string());
            let data_type = *types.get(&key)?;
            Some(Series {
                device: key.0,
                label: key.1.clone(),
                measurement: key.1,
                data_type,
                column: None,
            })
        })
        .collect())
}

/// `series` grouped by device, devices in ascending order (IoTDB's ALIGN BY DEVICE order), each
/// device's series in the order given.
pub(super) fn by_device(series: Vec<Series>) -> BTreeMap<String, Vec<Series>> {
    let mut devices: BTreeMap<String, Vec<Series>> = BTreeMap::new();
    for s in series {
        devices.entry(s.device.clone()).or_default().push(s);
    }
    devices
}
