//! Table-model aggregation over an in-memory backend: groups by TAG columns and `date_bin`,
//! the one row of a query without GROUP BY, WHERE on any column, HAVING, ORDER BY, OFFSET and
//! LIMIT, and the refusals.

use common::{DataType, StatusCode};

use super::backend_tests::{strings, table};
use super::memory_backend::Memory;

/// Five temperatures and three humidities on three devices of two regions, in two hours.
fn sensors() -> Memory {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    table(
        &m,
        Some("db"),
        "CREATE TABLE sensors (region STRING TAG, plant STRING TAG, model STRING ATTRIBUTE, \
         temperature DOUBLE FIELD, humidity INT32 FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO sensors(time, region, plant, model, temperature, humidity) VALUES \
         (0, 'north', 'p1', 'a', 10, 1), (1000, 'north', 'p1', 'a', 20, NULL), \
         (3600000, 'north', 'p1', 'a', 30, 3), (500, 'north', 'p2', 'b', 40, NULL), \
         (0, 'south', 'p3', 'a', 5, 7)",
    )
    .unwrap();
    m
}

fn query(m: &Memory, text: &str) -> super::Outcome {
    table(m, Some("db"), text).expect(text).outcome
}

#[test]
fn a_query_without_group_by_has_one_row_even_over_nothing() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT count(temperature), avg(temperature), min(temperature), max(temperature), \
         sum(humidity), first(temperature), last(temperature) FROM sensors",
    );
    assert_eq!(
        o.columns,
        ["_col0", "_col1", "_col2", "_col3", "_col4", "_col5", "_col6"]
    );
    assert_eq!(
        o.types,
        [
            DataType::Int64,
            DataType::Double,
            DataType::Double,
            DataType::Double,
            DataType::Double,
            DataType::Double,
            DataType::Double
        ]
    );
    assert_eq!(
        strings(&o),
        [["5", "21.0", "5.0", "40.0", "11.0", "10.0", "30.0"]]
    );

    let o = query(
        &m,
        "SELECT count(temperature) AS n, min(time), max(time) FROM sensors \
         WHERE region = 'north' AND time >= 1000",
    );
    assert_eq!(o.columns, ["n", "_col1", "_col2"]);
    assert_eq!(o.types[1], DataType::Timestamp);
    assert_eq!(strings(&o), [["2", "1000", "3600000"]]);

    let none = query(
        &m,
        "SELECT count(temperature), avg(temperature) FROM sensors WHERE time > 9999999",
    );
    assert_eq!(strings(&none), [["0", "null"]]);
    let grouped = query(
        &m,
        "SELECT region, count(temperature) FROM sensors WHERE time > 9999999 GROUP BY region",
    );
    assert!(grouped.rows.is_empty());
}

#[test]
fn groups_by_tags_attributes_and_date_bin_merge_their_devices() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT region, count(temperature) AS n, max(temperature) FROM sensors \
         GROUP BY region ORDER BY n DESC",
    );
    assert_eq!(o.columns, ["region", "n", "_col2"]);
    assert_eq!(o.types[0], DataType::String);
    assert_eq!(strings(&o), [["north", "4", "40.0"], ["south", "1", "5.0"]]);

    let o = query(
        &m,
        "SELECT date_bin(1h, time) AS hour, region, avg(temperature) FROM sensors \
         GROUP BY 1, region",
    );
    assert_eq!(o.types[0], DataType::Timestamp);
    let rows = strings(&o);
    assert_eq!(rows[0][..2], ["0", "north"]);
    assert!(rows[0][2].starts_with("23.33"), "{rows:?}");
    assert_eq!(
        rows[1..],
        [["3600000", "north", "30.0"], ["0", "south", "5.0"]]
    );

    // An attribute groups too; a bin without a point of the group has no row.
    let o = query(
        &m,
        "SELECT model, date_bin(1h, time), sum(humidity) FROM sensors \
         WHERE time < 7200000 GROUP BY model, date_bin(1h, time) ORDER BY 1, 2",
    );
    assert_eq!(
        strings(&o),
        [
            ["a", "0", "8.0"],
            ["a", "3600000", "3.0"],
            ["b", "0", "null"]
        ]
    );
}

#[test]
fn order_by_offset_and_limit_pick_rows_of_the_result() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT plant, max(temperature) FROM sensors GROUP BY plant \
         ORDER BY max(temperature) DESC OFFSET 1 LIMIT 1",
    );
    assert_eq!(strings(&o), [["p1", "30.0"]]);
    let o = query(
        &m,
        "SELECT plant, last(humidity) AS h FROM sensors GROUP BY plant ORDER BY h ASC",
    );
    assert_eq!(
        strings(&o),
        [["p1", "3"], ["p3", "7"], ["p2", "null"]],
        "NULL last"
    );
}

#[test]
fn what_is_not_run_is_refused_with_its_reason() {
    let m = sensors();
    for (text, code) in [
        ("SELECT region, count(temperature) FROM sensors", 700),
        ("SELECT count(region) FROM sensors", 300),
        (
            "SELECT date_bin_gapfill(1h, time), count(*) FROM sensors GROUP BY 1",
            700,
        ),
        ("SELECT sum(time) FROM sensors", 700),
        ("SELECT median(temperature) FROM sensors", 300),
        (
            "SELECT region, count(temperature) FROM sensors GROUP BY region HAVING plant = 'p1'",
            700,
        ),
        (
            "SELECT count(temperature) FROM sensors WHERE count(temperature) > 1",
            700,
        ),
        ("SELECT avg(nope) FROM sensors", 700),
        ("SELECT avg(temperature) FROM nope", 550),
        ("SELECT avg(temperature) FROM sensors ORDER BY region", 700),
        (
            "SELECT date_bin(1h, time), count(temperature) FROM sensors",
            700,
        ),
    ] {
        let e = table(&m, Some("db"), text).unwrap_err();
        assert_eq!(e.code(), code, "{text}: {e}");
    }
    let e = table(&m, Some("db"), "SELECT avg(region) FROM sensors").unwrap_err();
    assert_eq!(e.code(), StatusCode::UnsupportedOperation.wire(), "{e}");
}

#[test]
fn where_takes_any_column_for_raw_rows_and_aggregations() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT time, plant, temperature FROM sensors \
         WHERE temperature > 15 AND humidity IS NULL ORDER BY time",
    );
    assert_eq!(strings(&o), [["500", "p2", "40.0"], ["1000", "p1", "20.0"]]);
    let o = query(
        &m,
        "SELECT time, plant FROM sensors WHERE plant IN ('p2', 'p3') OR temperature = 30 \
         ORDER BY time",
    );
    assert_eq!(strings(&o), [["0", "p3"], ["500", "p2"], ["3600000", "p1"]]);
    let o = query(
        &m,
        "SELECT temperature FROM sensors WHERE region LIKE 'no%' AND temperature > 15 \
         ORDER BY time LIMIT 1",
    );
    assert_eq!(strings(&o), [["40.0"]], "LIMIT applies after the filter");

    let o = query(
        &m,
        "SELECT region, count(temperature), avg(temperature), count(humidity) FROM sensors \
         WHERE temperature >= 20 GROUP BY region",
    );
    assert_eq!(
        strings(&o),
        [["north", "3", "30.0", "1"]],
        "south has no row left"
    );
    let o = query(
        &m,
        "SELECT date_bin(1h, time), count(temperature) FROM sensors \
         WHERE time < 7200000 AND (humidity > 2 OR plant = 'p2') GROUP BY 1",
    );
    assert_eq!(strings(&o), [["0", "2"], ["3600000", "1"]]);
}

#[test]
fn having_keeps_groups_by_aggregations_aliases_and_grouped_columns() {
    let m = sensors();
    let run = |text: &str| strings(&query(&m, text));
    assert_eq!(
        run(
            "SELECT region, count(temperature) AS n FROM sensors GROUP BY region \
             HAVING count(temperature) > 1"
        ),
        [["north", "4"]]
    );
    assert_eq!(
        run("SELECT region, count(temperature) AS n FROM sensors GROUP BY region HAVING n < 2"),
        [["south", "1"]]
    );
    // An aggregation only HAVING names is computed, not shown.
    let o = query(
        &m,
        "SELECT region FROM sensors GROUP BY region HAVING max(temperature) < 10",
    );
    assert_eq!(o.columns, ["region"]);
    assert_eq!(strings(&o), [["south"]]);
    assert_eq!(
        run("SELECT count(temperature) FROM sensors GROUP BY region HAVING region = 'north'"),
        [["4"]]
    );
}

#[test]
fn count_star_counts_rows_and_gapfill_fills_the_bins_of_the_range() {
    let m = sensors();
    let run = |text: &str| strings(&query(&m, text));
    // Five rows, though humidity has three points and temperature five at other times.
    assert_eq!(
        run("SELECT count(*), count(time), count(humidity) FROM sensors"),
        [["5", "5", "3"]]
    );
    assert_eq!(
        run("SELECT region, count(*) FROM sensors WHERE humidity IS NULL GROUP BY region"),
        [["north", "2"]]
    );
    // One FIELD column: rows are its points, counted from statistics.
    table(
        &m,
        Some("db"),
        "CREATE TABLE one (k STRING TAG, v INT64 FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO one(time, k, v) VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 3)",
    )
    .unwrap();
    assert_eq!(
        run("SELECT k, count(*) FROM one GROUP BY k ORDER BY k"),
        [["a", "2"], ["b", "1"]]
    );

    let o = query(
        &m,
        "SELECT date_bin_gapfill(1h, time) AS hour, region, count(temperature), \
         avg(temperature) FROM sensors WHERE time >= 0 AND time < 10800000 GROUP BY 1, 2",
    );
    assert_eq!(o.types[0], DataType::Timestamp);
    let rows = strings(&o);
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert_eq!(rows[0][..3], ["0", "north", "3"]);
    assert_eq!(
        rows[1..],
        [
            ["3600000", "north", "1", "30.0"],
            ["7200000", "north", "0", "null"],
            ["0", "south", "1", "5.0"],
            ["3600000", "south", "0", "null"],
            ["7200000", "south", "0", "null"],
        ]
    );
}

#[test]
fn first_by_and_last_by_read_a_fields_value_in_the_groups_first_and_last_rows() {
    let m = sensors();
    let run = |text: &str| strings(&query(&m, text));
    let o = query(
        &m,
        "SELECT plant, last_by(humidity, time), last_by(time, humidity), \
         first_by(humidity, time) FROM sensors GROUP BY plant ORDER BY plant",
    );
    assert_eq!(o.types[1], DataType::Int32);
    assert_eq!(o.types[2], DataType::Timestamp);
    assert_eq!(
        strings(&o),
        [
            ["p1", "3", "3600000", "1"],
            // Its only row has no humidity.
            ["p2", "null", "null", "null"],
            ["p3", "7", "0", "7"],
        ]
    );
    // Per bin: p1's last row of the first hour (t = 1000) has no humidity.
    assert_eq!(
        run(
            "SELECT date_bin(1h, time), last_by(humidity, time), first_by(humidity, time) \
             FROM sensors WHERE plant = 'p1' GROUP BY 1"
        ),
        [["0", "null", "1"], ["3600000", "3", "3"]]
    );
    // Across a group's devices, and under a row filter.
    assert_eq!(
        run("SELECT region, last_by(temperature, time) FROM sensors GROUP BY region"),
        [["north", "30.0"], ["south", "5.0"]]
    );
    assert_eq!(
        run("SELECT last_by(temperature, time) FROM sensors WHERE humidity IS NULL"),
        [["20.0"]]
    );
    let e = table(
        &m,
        Some("db"),
        "SELECT last_by(temperature, humidity) FROM sensors",
    )
    .unwrap_err();
    assert_eq!(e.code(), StatusCode::UnsupportedOperation.wire(), "{e}");
}

#[test]
fn a_raw_query_orders_by_any_column_nulls_last() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT time, plant, temperature FROM sensors ORDER BY temperature DESC LIMIT 3",
    );
    assert_eq!(
        strings(&o),
        [
            ["500", "p2", "40.0"],
            ["3600000", "p1", "30.0"],
            ["1000", "p1", "20.0"]
        ]
    );
    // A key need not be selected; NULL sorts last either way; ties keep device and time order.
    let o = query(
        &m,
        "SELECT time, plant FROM sensors ORDER BY humidity ASC NULLS LAST, time DESC",
    );
    assert_eq!(
        strings(&o),
        [
            ["0", "p1"],
            ["3600000", "p1"],
            ["0", "p3"],
            ["1000", "p1"],
            ["500", "p2"]
        ]
    );
    let o = query(
        &m,
        "SELECT plant, temperature FROM sensors WHERE temperature < 35 ORDER BY 1 DESC, 2 \
         OFFSET 1 LIMIT 2",
    );
    assert_eq!(strings(&o), [["p1", "10.0"], ["p1", "20.0"]]);
    for (text, says) in [
        ("SELECT * FROM sensors ORDER BY nope", "does not exist"),
        (
            "SELECT * FROM sensors ORDER BY 2",
            "positions need the columns",
        ),
        (
            "SELECT plant FROM sensors ORDER BY plant NULLS FIRST",
            "NULLS FIRST",
        ),
    ] {
        let e = table(&m, Some("db"), text).unwrap_err();
        assert!(e.to_string().contains(says), "{text}: {e}");
    }
}

#[test]
fn group_by_a_field_groups_rows_by_their_values() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT humidity, count(*), avg(temperature) FROM sensors GROUP BY humidity \
         ORDER BY humidity",
    );
    assert_eq!(o.types[0], DataType::Int32, "a FIELD key keeps its type");
    assert_eq!(
        strings(&o),
        [
            ["1", "1", "10.0"],
            ["3", "1", "30.0"],
            ["7", "1", "5.0"],
            ["null", "2", "30.0"]
        ]
    );
    // With a TAG and date_bin, under a WHERE on fields.
    let o = query(
        &m,
        "SELECT region, humidity, count(temperature) FROM sensors \
         WHERE temperature > 5 GROUP BY region, humidity ORDER BY 1, 2",
    );
    assert_eq!(
        strings(&o),
        [
            ["north", "1", "1"],
            ["north", "3", "1"],
            ["north", "null", "2"]
        ]
    );
    let o = query(
        &m,
        "SELECT date_bin(1h, time), temperature, count(*) FROM sensors \
         WHERE plant = 'p1' GROUP BY 1, temperature ORDER BY 2",
    );
    assert_eq!(
        strings(&o),
        [
            ["0", "10.0", "1"],
            ["0", "20.0", "1"],
            ["3600000", "30.0", "1"]
        ]
    );
}

#[test]
fn count_if_max_by_and_min_by_judge_each_row() {
    let m = sensors();
    let o = query(
        &m,
        "SELECT region, count_if(temperature > 15 AND humidity IS NULL), \
         max_by(plant, temperature), min_by(time, temperature), max_by(humidity, temperature) \
         FROM sensors GROUP BY region ORDER BY region",
    );
    assert_eq!(
        o.types[1..],
        [
            DataType::Int64,
            DataType::String,
            DataType::Timestamp,
            DataType::Int32
        ]
    );
    assert_eq!(
        strings(&o),
        [
            ["north", "2", "p2", "0", "null"],
            ["south", "0", "p3", "0", "7"]
        ],
        "north's hottest row (p2, 40) has no humidity"
    );
    // Per date_bin, and a tie of y goes to the earliest row.
    table(
        &m,
        Some("db"),
        "INSERT INTO sensors(time, region, plant, model, temperature, humidity) VALUES \
         (7200000, 'west', 'p9', 'c', 1, 11), (7200001, 'west', 'p9', 'c', 1, 12)",
    )
    .unwrap();
    let o = query(
        &m,
        "SELECT date_bin(1h, time), max_by(humidity, temperature), count_if(humidity > 2) \
         FROM sensors WHERE time >= 3600000 GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(strings(&o), [["3600000", "3", "1"], ["7200000", "11", "2"]]);
}
