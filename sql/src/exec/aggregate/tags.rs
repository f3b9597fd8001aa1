//! GROUP BY TAGS(k, ...): the series an aggregation reads are grouped by their values of the
//! tag keys (a series without a key is NULL there), and each group's partials merged, as IoTDB
//! does. The result has `Time` with GROUP BY time, then one column per tag key, then one column
//! per aggregation of a measurement name (`avg(temperature)`); a row per window (time first) and
//! combination of values that some series has, in the values' order.

use std::collections::{BTreeMap, HashMap};

use common::aggregate::Partial;
use common::{DataType, Value};

use super::super::{Backend, ExecResult, Outcome, TIME_COLUMN};
use super::{finish, Cut, Key, Plan};
use crate::PathPattern;

/// The tag values of each of a plan's columns.
pub(super) struct TagGroups {
    keys: Vec<String>,
    /// Combination of values → the plan's columns with it.
    groups: BTreeMap<Vec<Option<String>>, Vec<usize>>,
}

impl TagGroups {
    /// Reads the tags of the series `plan` aggregates (a listing per FROM pattern) and groups
    /// its columns by their values of `keys`.
    pub(super) async fn new<B: Backend>(
        backend: &B,
        from: &[PathPattern],
        plan: &Plan,
        keys: &[String],
    ) -> ExecResult<TagGroups> {
        let mut prefixes: Vec<String> = from.iter().map(PathPattern::fixed_prefix).collect();
        prefixes.sort();
        prefixes.dedup();
        let mut tags: HashMap<(String, String), BTreeMap<String, String>> = HashMap::new();
        for prefix in prefixes {
            for series in backend.show_timeseries(&prefix).await? {
                tags.insert((series.device, series.measurement), series.meta.tags);
            }
        }
        let mut groups: BTreeMap<Vec<Option<String>>, Vec<usize>> = BTreeMap::new();
        for (i, column) in plan.columns.iter().enumerate() {
            let (device, measurements) = &plan.reads[column.device];
            let of_series = tags.get(&(device.clone(), measurements[column.series].clone()));
            let values = keys
                .iter()
                .map(|k| of_series.and_then(|t| t.get(k)).cloned())
                .collect();
            groups.entry(values).or_default().push(i);
        }
        Ok(TagGroups {
            keys: keys.to_vec(),
            groups,
        })
    }

    /// The result over `partials` (`[device][series][row]`), each key of `columns` (the plan's
    /// columns by function and measurement name) a column.
    // `row` names a window and indexes the partials of many series at once.
    #[allow(clippy::needless_range_loop)]
    pub(super) fn finish(
        &self,
        plan: &Plan,
        columns: &[Key],
        cut: &Cut,
        partials: &[Vec<Vec<Partial>>],
    ) -> Outcome {
        let mut header: Vec<(String, DataType)> = Vec::new();
        if cut.windows.is_some() {
            header.push((TIME_COLUMN.to_string(), DataType::Int64));
        }
        header.extend(self.keys.iter().map(|k| (k.clone(), DataType::Text)));
        header.extend(
            columns
                .iter()
                .map(|(f, label, t, _)| (format!("{}({label})", f.name()), *t)),
        );
        let mut rows = Vec::new();
        for row in 0..cut.rows() {
            for (values, members) in &self.groups {
                let mut cells = Vec::with_capacity(header.len());
                if let Some(w) = cut.windows {
                    cells.push(Some(Value::Int64(cut.row_time(&w, row))));
                }
                cells.extend(values.iter().map(|v| v.clone().map(Value::Text)));
                for (function, label, _, _) in columns {
                    let mut merged = Partial::default();
                    let mut data_type = None;
                    for &i in members {
                        let c = &plan.columns[i];
                        if c.function == *function && c.label == *label {
                            merged.merge(&partials[c.device][c.series][row]);
                            data_type = Some(c.data_type);
                        }
                    }
                    cells.push(data_type.and_then(|t| finish(*function, t, &merged)));
                }
                rows.push(cells);
            }
        }
        Outcome::query(header, rows)
    }
}
