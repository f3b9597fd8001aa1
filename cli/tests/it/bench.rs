//! `fencepost bench` end to end: the built binary against an in-process cluster (`testkit`). The
//! report must count exactly what was written, and the cluster must hold exactly the generator's
//! points afterwards; a tablet the cluster refuses must show in `errors_by_code` and exit 1.

use std::process::Output;

use common::DataType;
use fencepost_cli::loadgen::{Generator, LoadSpec, StopAfter, ValueShape};
use session::{Session, SessionConfig};

const START_MS: i64 = 1_700_000_000_000;

async fn bench(endpoints: &[String], args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fencepost"))
        .arg("--endpoints")
        .arg(endpoints.join(","))
        .arg("--json")
        .arg("bench")
        .args(args)
        .output()
        .await
        .expect("the fencepost binary runs")
}

fn report(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_writes_exactly_the_generated_points_and_reports_failures() {
    let cluster = testkit::Cluster::start(3, 3, testkit::LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let start = START_MS.to_string();
    let load = [
        "--devices",
        "5",
        "--measurements",
        "3",
        "--rows-per-tablet",
        "50",
        "--clients",
        "2",
        "--tablets",
        "12",
        "--database",
        "root.benchtest",
        "--start-time",
        &start,
    ];
    let output = bench(&endpoints, &load).await;
    let r = report(&output);
    assert_eq!(output.status.code(), Some(0), "{r}");
    assert_eq!(r["tablets"], 12, "{r}");
    assert_eq!(r["points"], 12 * 50 * 3, "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["latency_samples"], 12, "{r}");
    for key in [
        "points_per_s",
        "tablets_per_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "retries",
    ] {
        assert!(r[key].as_f64().is_some_and(|v| v >= 0.0), "{key}: {r}");
    }
    assert!(r["p50_ms"].as_f64() <= r["p99_ms"].as_f64(), "{r}");
    assert!(r["p99_ms"].as_f64() <= r["max_ms"].as_f64(), "{r}");

    // 12 tablets over 5 devices and 2 clients: client 0 owns d0, d2, d4 and writes 6 tablets
    // (two rounds), client 1 owns d1, d3 and writes 6 (three rounds).
    let generator = Generator::new(LoadSpec {
        devices: 5,
        measurements: 3,
        rows_per_tablet: 50,
        clients: 2,
        data_type: DataType::Double,
        database: "root.benchtest".into(),
        start_time_ms: START_MS,
        step_ms: 1,
        seed: 1,
        values: ValueShape::Uniform2dp,
        stop: StopAfter::Tablets(12),
        rate_pts_per_s: None,
    });
    let session = Session::connect(
        &endpoints.iter().map(String::as_str).collect::<Vec<_>>(),
        SessionConfig::default(),
    )
    .await
    .expect("session");
    for (device, rounds) in [(0, 2), (1, 3), (2, 2), (3, 3), (4, 2)] {
        let name = generator.device_name(device).to_string();
        for m in 0..3u32 {
            let stored = session
                .query_raw(&name, &format!("s{m}"), i64::MIN, i64::MAX)
                .await
                .expect("query");
            let expected: Vec<_> = (0..rounds)
                .flat_map(|round| (0..50).map(move |row| (round, row)))
                .map(|(round, row)| {
                    let t = generator.timestamp(round, row);
                    (t, generator.value(device, m, t))
                })
                .collect();
            assert_eq!(stored, expected, "{name}.s{m}");
        }
    }

    // A shaped load (`--values`, `--interval-ms`) reaches the cluster exactly as generated too:
    // the walk's per-series state gives the same points as the point-wise function.
    let mut walk_load: Vec<&str> = load
        .iter()
        .map(|&a| {
            if a == "root.benchtest" {
                "root.benchwalk"
            } else {
                a
            }
        })
        .collect();
    walk_load.extend(["--values", "walk2dp", "--interval-ms", "1000"]);
    let output = bench(&endpoints, &walk_load).await;
    let r = report(&output);
    assert_eq!(output.status.code(), Some(0), "{r}");
    let walk = Generator::new(LoadSpec {
        database: "root.benchwalk".into(),
        step_ms: 1000,
        values: ValueShape::Walk2dp,
        ..generator.spec().clone()
    });
    for device in 0..5 {
        let name = walk.device_name(device).to_string();
        let stored = session
            .query_raw(&name, "s2", i64::MIN, i64::MAX)
            .await
            .expect("query");
        let expected: Vec<_> = stored
            .iter()
            .map(|(t, _)| (*t, walk.value(device, 2, *t)))
            .collect();
        assert!(stored.len() >= 100, "{name}.s2: {} rows", stored.len());
        assert_eq!(stored, expected, "{name}.s2");
    }

    // The same series as INT64: every tablet is refused with 614, the run exits 1.
    let mut int_load = load.to_vec();
    int_load.extend(["--type", "INT64"]);
    let output = bench(&endpoints, &int_load).await;
    let r = report(&output);
    assert_eq!(output.status.code(), Some(1), "{r}");
    assert_eq!(r["errors"], 12, "{r}");
    assert_eq!(r["errors_by_code"]["614"], 12, "{r}");
    assert_eq!(r["points"], 0, "{r}");
    cluster.stop().await;
}
