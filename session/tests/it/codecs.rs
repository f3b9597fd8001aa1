//! `CREATE TIMESERIES ... ENCODING=..., COMPRESSOR=...` against a real DataNode: the declaration
//! is checked, kept, shown, and honoured by the sealed files the DataNode writes (read back from
//! its data directory), while reads return the same points either way.

use std::path::{Path, PathBuf};

use common::{DataType, StatusCode, Tablet, Value};
use session::{Session, SessionConfig, SessionError};

use testkit::raw::metric;
use testkit::{wait_for, Cluster, LONG_FENCE_MS};

fn sealed_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sealed_files(&path, out);
        } else if path.parent().is_some_and(|p| p.ends_with("sealed"))
            && path.extension().is_some_and(|e| e == "fps")
        {
            out.push(path);
        }
    }
}

/// A device's `s1` pages over every sealed file under `dir`: (points, raw bytes, stored bytes,
/// whether every page is uncompressed).
fn pages(dir: &Path, device: &str) -> (u64, u64, u64, bool) {
    let cache = engine::FileCache::new(16);
    let mut files = Vec::new();
    sealed_files(dir, &mut files);
    let (mut points, mut raw, mut stored, mut uncompressed) = (0, 0, 0, true);
    for path in files {
        let Ok(file) = engine::SealedFile::open(&path, &cache) else {
            continue; // being replaced by a compaction right now
        };
        if let Some(chunk) = file.chunk(device, "s1") {
            for page in &chunk.pages {
                points += page.count as u64;
                raw += page.raw_length as u64;
                stored += page.length as u64;
                uncompressed &= page.compressor == engine::Compressor::Uncompressed;
            }
        }
    }
    (points, raw, stored, uncompressed)
}

fn walk(device: &str, n: i64) -> Tablet {
    let mut t = Tablet::new(device, &[("s1", DataType::Double)]);
    for i in 0..n {
        // A slow walk with two decimals: adaptive encoding stores it in about a byte a point.
        t.push_row(
            i * 10,
            vec![Some(Value::Double((i % 50) as f64 * 0.25 + 20.0))],
        );
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn declared_encoding_and_compressor_shape_the_sealed_files() {
    let cluster = Cluster::start_with(1, 1, LONG_FENCE_MS, |c| {
        c.storage.memtable_flush_age_ms = 300;
    })
    .await;
    let endpoints = cluster.endpoints();
    let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let config = SessionConfig {
        max_attempts: 60,
        retry_interval_ms: 200,
        ..SessionConfig::default()
    };
    let s = Session::connect(&endpoints, config).await.unwrap();
    s.create_database("root.cd").await.unwrap();
    s.create_timeseries_with(
        "root.cd.plain.s1",
        DataType::Double,
        Some("plain"),
        Some("UNCOMPRESSED"),
    )
    .await
    .unwrap();
    s.create_timeseries("root.cd.auto.s1", DataType::Double)
        .await
        .unwrap();
    for (path, t, encoding, compressor) in [
        ("root.cd.bad.s1", DataType::Text, Some("GORILLA"), None),
        ("root.cd.bad.s2", DataType::Int64, None, Some("BROTLI")),
    ] {
        match s
            .create_timeseries_with(path, t, encoding, compressor)
            .await
        {
            Err(SessionError::Status { code, .. }) => {
                assert_eq!(code, StatusCode::IllegalParameter as i32, "{path}")
            }
            other => panic!("{path}: {other:?}"),
        }
    }
    let shown = s.show_timeseries("root.cd").await.unwrap();
    let view = |m: &str| shown.iter().find(|v| v.device == m).unwrap();
    assert_eq!(
        (
            view("root.cd.plain").encoding.as_str(),
            view("root.cd.plain").compressor.as_str()
        ),
        ("PLAIN", "UNCOMPRESSED")
    );
    assert_eq!(view("root.cd.auto").encoding, "");
    assert_eq!(shown.len(), 2, "refused series were not created: {shown:?}");

    let node = &cluster.nodes[0];
    wait_for("the DataNode learns the declaration", || async {
        metric(&node.metrics_text(), "series_codecs_declared") == 1
    })
    .await;
    let n = 5000;
    s.insert_tablets(&[walk("root.cd.plain", n), walk("root.cd.auto", n)])
        .await
        .unwrap();
    let dir = cluster.dir.path().join("dn0");
    wait_for("both series are flushed", || async {
        pages(&dir, "root.cd.plain").0 == n as u64 && pages(&dir, "root.cd.auto").0 == n as u64
    })
    .await;
    let (_, plain_raw, plain_stored, plain_uncompressed) = pages(&dir, "root.cd.plain");
    let (_, auto_raw, auto_stored, _) = pages(&dir, "root.cd.auto");
    assert!(plain_uncompressed, "declared UNCOMPRESSED");
    assert!(
        plain_raw >= 8 * n as u64,
        "PLAIN: 8 bytes a value, {plain_raw} bytes"
    );
    assert!(plain_stored > plain_raw, "stored as it is (plus CRCs)");
    assert!(
        auto_stored * 4 < plain_stored,
        "undeclared: adaptive + LZ4, {auto_stored} vs {plain_stored} bytes"
    );
    assert!(auto_raw < plain_raw);

    // The same points read back from both.
    let plain = s.query_raw("root.cd.plain", "s1", 0, n * 10).await.unwrap();
    let auto = s.query_raw("root.cd.auto", "s1", 0, n * 10).await.unwrap();
    assert_eq!(plain.len(), n as usize);
    assert_eq!(plain, auto);
    cluster.stop().await;
}
