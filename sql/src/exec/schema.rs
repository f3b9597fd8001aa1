//! Schema browsing with IoTDB's shapes: `COUNT TIMESERIES [pattern] [GROUP BY LEVEL = n]`
//! (`count(timeseries)`; grouped, `Column` and `count(timeseries)` per prefix of `n + 1` nodes,
//! paths shorter than that left out), `COUNT DEVICES [pattern]` (`count(devices)`), and `SHOW
//! CHILD PATHS|NODES [pattern]` (the nodes one level under every path the pattern matches:
//! `ChildPaths` with `NodeTypes` — `DATABASE`, `DEVICE`, `TIMESERIES`, `SG INTERNAL` above a
//! database, `INTERNAL` below one — or `ChildNodes`, each name once). Series being deleted are
//! left out, as SHOW TIMESERIES leaves them out.

use std::collections::{BTreeMap, BTreeSet};

use common::{DataType, Value};

use super::show::{devices_matching, series_matching, text, texts};
use super::{Backend, ExecResult, Outcome};
use crate::PathPattern;

/// `COUNT TIMESERIES`.
pub(super) async fn count_timeseries<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
    level: Option<usize>,
) -> ExecResult<Outcome> {
    let paths: Vec<String> = series_matching(backend, pattern)
        .await?
        .into_iter()
        .filter(|(_, s)| !s.pending_delete)
        .map(|(path, _)| path)
        .collect();
    let count = |n: usize| Some(Value::Int64(i64::try_from(n).unwrap_or(i64::MAX)));
    let Some(level) = level else {
        return Ok(Outcome::query(
            vec![("count(timeseries)".to_string(), DataType::Int64)],
            vec![vec![count(paths.len())]],
        ));
    };
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for path in &paths {
        let nodes: Vec<&str> = path.split('.').collect();
        if nodes.len() > level {
            *groups.entry(nodes[..=level].join(".")).or_default() += 1;
        }
    }
    Ok(Outcome::query(
        vec![
            ("Column".to_string(), DataType::Text),
            ("count(timeseries)".to_string(), DataType::Int64),
        ],
        groups
            .into_iter()
            .map(|(prefix, n)| vec![text(prefix), count(n)])
            .collect(),
    ))
}

/// `COUNT DEVICES`: the devices with a series that `pattern` matches as a device path.
pub(super) async fn count_devices<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
) -> ExecResult<Outcome> {
    let devices = devices_matching(backend, pattern).await?;
    Ok(Outcome::query(
        vec![("count(devices)".to_string(), DataType::Int64)],
        vec![vec![Some(Value::Int64(
            i64::try_from(devices.len()).unwrap_or(i64::MAX),
        ))]],
    ))
}

/// What a node of the schema tree is, as IoTDB's SHOW CHILD PATHS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NodeType {
    // In order of precedence when a node is several things.
    Timeseries,
    Database,
    Device,
    /// Below a database.
    Internal,
    /// Above a database.
    SgInternal,
}

impl NodeType {
    fn name(self) -> &'static str {
        match self {
            NodeType::Timeseries => "TIMESERIES",
            NodeType::Database => "DATABASE",
            NodeType::Device => "DEVICE",
            NodeType::Internal => "INTERNAL",
            NodeType::SgInternal => "SG INTERNAL",
        }
    }
}

/// `SHOW CHILD PATHS` / `SHOW CHILD NODES`.
pub(super) async fn child<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
    nodes_only: bool,
) -> ExecResult<Outcome> {
    let root = PathPattern::parse("root").expect("root is a pattern");
    let children = pattern.unwrap_or(&root).child("*");
    // Every node of the tree, with what it is: the databases and their ancestors, each series
    // and every prefix of it.
    let mut nodes: BTreeMap<String, NodeType> = BTreeMap::new();
    let mut mark = |path: String, what: NodeType| {
        let entry = nodes.entry(path).or_insert(what);
        *entry = (*entry).min(what);
    };
    for database in super::tree_databases(backend).await? {
        for_each_prefix(&database.name, |p| {
            mark(p.to_string(), NodeType::SgInternal)
        });
        mark(database.name, NodeType::Database);
    }
    let prefix = children.fixed_prefix();
    for s in super::tree_series(backend, &prefix).await? {
        if s.pending_delete {
            continue;
        }
        for_each_prefix(&s.device, |p| mark(p.to_string(), NodeType::Internal));
        mark(s.device.clone(), NodeType::Device);
        mark(
            format!("{}.{}", s.device, s.measurement),
            NodeType::Timeseries,
        );
    }
    let matched = nodes.into_iter().filter(|(path, _)| children.matches(path));
    if nodes_only {
        let names: BTreeSet<String> = matched
            .map(|(path, _)| path.rsplit('.').next().unwrap_or_default().to_string())
            .collect();
        return Ok(Outcome::query(
            texts(&["ChildNodes"]),
            names.into_iter().map(|n| vec![text(n)]).collect(),
        ));
    }
    Ok(Outcome::query(
        texts(&["ChildPaths", "NodeTypes"]),
        matched
            .map(|(path, what)| vec![text(path), text(what.name())])
            .collect(),
    ))
}

/// Calls `f` with every proper prefix of `path` of two nodes or more (`root.a.b.c`: `root.a`,
/// `root.a.b`).
fn for_each_prefix(path: &str, mut f: impl FnMut(&str)) {
    let mut ends = path.match_indices('.').map(|(i, _)| i).skip(1);
    for end in ends.by_ref() {
        f(&path[..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::super::memory_backend::{one, Memory};
    use super::super::*;

    fn texts(o: &Outcome) -> Vec<Vec<String>> {
        o.rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| match c {
                        Some(Value::Text(s)) => s.clone(),
                        Some(Value::Int64(i)) => i.to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .collect()
    }

    /// Series root.sg.d1.{s1,s2}, root.sg.d2.s1, root.sg.g.d3.s1 (the memory backend's database
    /// is root.sg for all of them).
    fn tree() -> Memory {
        let m = Memory::default();
        one(&m, "INSERT INTO root.sg.d1(time, s1, s2) VALUES (1, 1, 2)");
        one(&m, "INSERT INTO root.sg.d2(time, s1) VALUES (1, 1)");
        one(&m, "INSERT INTO root.sg.g.d3(time, s1) VALUES (1, 1)");
        m
    }

    #[test]
    fn counts_of_series_and_devices() {
        let m = tree();
        let o = one(&m, "COUNT TIMESERIES");
        assert_eq!(o.columns, ["count(timeseries)"]);
        assert_eq!(texts(&o), [["4"]]);
        assert_eq!(texts(&one(&m, "count timeseries root.sg.*.s1")), [["2"]]);
        let o = one(&m, "COUNT TIMESERIES root.** GROUP BY LEVEL = 2");
        assert_eq!(o.columns, ["Column", "count(timeseries)"]);
        assert_eq!(
            texts(&o),
            [["root.sg.d1", "2"], ["root.sg.d2", "1"], ["root.sg.g", "1"]]
        );
        assert_eq!(
            texts(&one(&m, "COUNT TIMESERIES GROUP BY LEVEL = 4")),
            [["root.sg.g.d3.s1", "1"]],
            "paths shorter than the level are left out"
        );
        let o = one(&m, "COUNT DEVICES");
        assert_eq!(o.columns, ["count(devices)"]);
        assert_eq!(texts(&o), [["3"]]);
        assert_eq!(texts(&one(&m, "COUNT DEVICES root.sg.*")), [["2"]]);
    }

    #[test]
    fn child_paths_and_nodes_with_their_types() {
        let m = tree();
        let o = one(&m, "SHOW CHILD PATHS root.sg");
        assert_eq!(o.columns, ["ChildPaths", "NodeTypes"]);
        assert_eq!(
            texts(&o),
            [
                ["root.sg.d1", "DEVICE"],
                ["root.sg.d2", "DEVICE"],
                ["root.sg.g", "INTERNAL"]
            ]
        );
        assert_eq!(
            texts(&one(&m, "SHOW CHILD PATHS root.sg.*")),
            [
                ["root.sg.d1.s1", "TIMESERIES"],
                ["root.sg.d1.s2", "TIMESERIES"],
                ["root.sg.d2.s1", "TIMESERIES"],
                ["root.sg.g.d3", "DEVICE"]
            ]
        );
        let o = one(&m, "SHOW CHILD NODES root.sg.*");
        assert_eq!(o.columns, ["ChildNodes"]);
        assert_eq!(texts(&o), [["d3"], ["s1"], ["s2"]]);
        assert_eq!(
            texts(&one(&m, "SHOW CHILD NODES root.nothing")),
            Vec::<Vec<String>>::new()
        );
        assert_eq!(
            texts(&one(&m, "SHOW DATABASES root.sg")).len(),
            texts(&one(&m, "SHOW DATABASES")).len()
        );
        assert!(texts(&one(&m, "SHOW DATABASES root.other.**")).is_empty());
    }
}
