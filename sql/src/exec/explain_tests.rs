//! EXPLAIN and EXPLAIN ANALYZE over the in-memory backend: the plan of each query family
//! without reading data, and the run's rows and fragments with ANALYZE; both models.

use common::{DataType, Value};

use super::backend_tests::{strings, table};
use super::memory_backend::{run, Memory};

/// Two devices of root.sg with s1 (DOUBLE) at times 0..10.
fn two_devices() -> Memory {
    let m = Memory::default();
    for d in ["d1", "d2"] {
        let values: Vec<String> = (0..10).map(|t| format!("({t}, {t}.5)")).collect();
        run(
            &m,
            &format!(
                "INSERT INTO root.sg.{d}(time, s1) VALUES {}",
                values.join(", ")
            ),
        )
        .unwrap();
    }
    m
}

fn lines(o: &super::Outcome) -> Vec<String> {
    strings(o)
        .into_iter()
        .map(|mut row| row.remove(0))
        .collect()
}

#[test]
fn explain_prints_the_plan_and_reads_no_data() {
    let m = two_devices();
    let before = *m.calls.lock().unwrap();
    let o = run(
        &m,
        "EXPLAIN SELECT avg(s1) FROM root.sg.* WHERE time >= 0 AND time < 10 AND s1 > 2 \
         GROUP BY ([0, 10), 5ms) HAVING avg(s1) > 1 LIMIT 3",
    )
    .unwrap();
    assert_eq!(o.columns, ["distribution plan"]);
    assert_eq!(o.types, [DataType::Text]);
    assert_eq!(
        lines(&o),
        [
            "Aggregate query  ALIGN BY TIME",
            "└─ Page  LIMIT 3",
            "   └─ Having  avg(s1) > 1",
            "      └─ Finish  avg(s1)  over 2 windows of 5 ms from 0",
            "         └─ Fold  the kept rows into each window's partials",
            "            └─ Filter  s1 > 2  (on the joined rows)",
            "               └─ TimeJoin  FROM root.sg.*  (the aggregated and filtered series)",
            "                  └─ RegionRead raw  time [0, 10)  on each region's leader, a chunk \
             of points per series at a time",
        ]
    );
    assert_eq!(*m.calls.lock().unwrap(), before, "EXPLAIN reads nothing");
    let o = run(&m, "EXPLAIN SELECT LAST s1 FROM root.sg.**").unwrap();
    let plan = lines(&o);
    assert_eq!(plan[0], "Last query");
    assert!(plan[1].starts_with("└─ RegionRead last  SELECT LAST s1 FROM root.sg.**"));
}

#[test]
fn explain_analyze_runs_the_query_and_lists_its_fragments() {
    let m = two_devices();
    let o = run(
        &m,
        "EXPLAIN ANALYZE SELECT count(s1) FROM root.sg.d1, root.sg.d2",
    )
    .unwrap();
    assert_eq!(o.columns, ["Explain Analyze"]);
    let text = lines(&o);
    assert_eq!(text[0], "Aggregate query  ALIGN BY TIME");
    let execution = text
        .iter()
        .find(|l| l.starts_with("Execution: "))
        .expect("an execution line");
    assert!(execution.contains(", 1 rows, "), "{execution}");
    // One aggregate call of both series: one fragment of the in-memory map.
    let fragments: Vec<&String> = text.iter().filter(|l| l.contains("FRAGMENT")).collect();
    assert_eq!(fragments.len(), 1, "{text:?}");
    assert!(
        fragments[0]
            .contains("[aggregate] region 0 on memory (this DataNode): 1 calls, 2 series, 2 rows"),
        "{}",
        fragments[0]
    );
    // A raw query's chunks: one fragment, its calls and points summed.
    let o = run(
        &m,
        "EXPLAIN ANALYZE VERBOSE SELECT s1 FROM root.sg.* WHERE s1 > 5",
    )
    .unwrap();
    let text = lines(&o);
    assert!(
        text.iter()
            .any(|l| l.contains("Execution: ") && l.contains(", 5 rows, ")),
        "{text:?}"
    );
    let raw: Vec<&String> = text
        .iter()
        .filter(|l| l.contains("FRAGMENT [raw]"))
        .collect();
    assert_eq!(raw.len(), 1, "{text:?}");
    assert!(raw[0].contains("2 series, 20 rows"), "{}", raw[0]);
    // A failing query fails EXPLAIN ANALYZE with its status.
    run(&m, "INSERT INTO root.sg.d3(time, s1) VALUES (1, 'text')").unwrap();
    let e = run(&m, "EXPLAIN ANALYZE SELECT sum(s1) FROM root.sg.d3").unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
}

#[test]
fn explain_takes_only_queries() {
    let text = "EXPLAIN INSERT INTO root.sg.d1(time, s1) VALUES (1, 1)";
    let e = crate::parse_script(text, crate::Position::START)
        .pop()
        .unwrap()
        .result
        .unwrap_err();
    assert!(e.message.contains("a query (SELECT) to explain"), "{e}");
    assert_eq!(super::ExecError::Parse(e).code(), 700);
}

#[test]
fn explain_in_the_table_model() {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    table(
        &m,
        Some("db"),
        "CREATE TABLE t (plant STRING TAG, v DOUBLE FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO t(time, plant, v) VALUES (0, 'a', 1), (1000, 'a', 2), (0, 'b', 3)",
    )
    .unwrap();
    let o = table(
        &m,
        Some("db"),
        "EXPLAIN SELECT plant, avg(v) FROM t WHERE plant = 'a' GROUP BY plant ORDER BY 2 DESC",
    )
    .unwrap()
    .outcome;
    let plan = lines(&o);
    assert_eq!(plan[0], "Table aggregate  db.t");
    assert_eq!(plan[1], "└─ Page  ORDER BY 2 DESC");
    assert_eq!(plan[2], "   └─ Group  GROUP BY plant");
    assert_eq!(plan[3], "      └─ Finish  avg(v)");
    let o = table(
        &m,
        Some("db"),
        "EXPLAIN ANALYZE SELECT * FROM t WHERE v > 1",
    )
    .unwrap()
    .outcome;
    let text = lines(&o);
    assert_eq!(text[0], "Table query  db.t");
    assert!(text.iter().any(|l| l.contains(", 2 rows, ")), "{text:?}");
    assert!(
        text.iter().any(|l| l.contains("FRAGMENT [raw]")),
        "{text:?}"
    );
    assert_eq!(o.rows[0][0], Some(Value::Text("Table query  db.t".into())));
}
