//! Compaction: files per partition shrink, deleted data leaves the disk, content and digest stay.

use std::time::{Duration, Instant};

use common::Value;
use engine::{CompactionConfig, OpenGate, RegionCommand, StorageConfig, StorageError};

use crate::support::{apply_to_model, config, content, tablet, LoggedRegion, Model};

/// Eight flushes into one partition (slot 0), one series deleted, then compaction.
fn eight_flushes(dir: &std::path::Path) -> (LoggedRegion, Model) {
    let region = LoggedRegion::open(dir);
    let mut model = Model::new();
    for round in 0..8i64 {
        for device in ["root.sg.d1", "root.sg.d2"] {
            // Overlapping timestamps across rounds: the newest write must win the merge.
            let t = tablet(device, &[round, round + 1, round + 2], round as f64 * 10.0);
            region
                .write(&RegionCommand::insert(t.clone()), &OpenGate)
                .unwrap();
            apply_to_model(&mut model, &t);
        }
        region.flush();
    }
    (region, model)
}

fn sealed_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("region/sealed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn compaction_merges_a_partition_and_reclaims_deleted_data() {
    let dir = tempfile::tempdir().unwrap();
    let (region, mut model) = eight_flushes(dir.path());
    assert_eq!(region.region.storage_stats().sealed_files, 8);
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let digest = region.region.digest().unwrap();

    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].inputs, 8);
    let stats = region.region.storage_stats();
    assert_eq!((stats.sealed_files, stats.pending_compactions), (1, 0));
    assert_eq!(sealed_names(dir.path()).len(), 1, "inputs deleted");
    assert_eq!(region.region.digest().unwrap(), digest);
    assert_eq!(content(&region.region), model);
    assert_eq!(
        region.region.query("root.sg.d1", "s1", 7, 8).unwrap(),
        vec![(7, Value::Double(70.0))],
        "the newest write of t=7 won"
    );

    // A deletion masks d2 in the merged file; the next compaction rewrites it without d2.
    let key = ("root.sg.d2".to_string(), "s1".to_string());
    region
        .write(&RegionCommand::delete_series(vec![key.clone()]), &OpenGate)
        .unwrap();
    model.remove(&key);
    assert_eq!(
        region.region.storage_stats().pending_compactions,
        0,
        "a deletion is applied to files only once a flush made it durable"
    );
    region.flush();
    let before = region.region.storage_stats().sealed_bytes;
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].dropped_series, 1);
    assert!(region.region.storage_stats().sealed_bytes < before);
    assert_eq!(content(&region.region), model);

    // Everything holds across a restart.
    let digest = region.region.digest().unwrap();
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(region.region.digest().unwrap(), digest);
    assert_eq!(content(&region.region), model);
    assert_eq!(region.region.storage_stats().pending_compactions, 0);
}

#[test]
fn deleted_time_ranges_leave_the_disk_and_their_series_keep_their_types() {
    let dir = tempfile::tempdir().unwrap();
    let (region, mut model) = eight_flushes(dir.path());
    region.region.compact_all().unwrap();
    let d1 = ("root.sg.d1".to_string(), "s1".to_string());
    let d2 = ("root.sg.d2".to_string(), "s1".to_string());
    let delete = |key: &(String, String), start, end| RegionCommand::DeleteData {
        series: vec![key.clone()],
        start,
        end,
        deletion: engine::Deletion::default(),
    };
    region.write(&delete(&d1, 2, 4), &OpenGate).unwrap();
    region
        .write(&delete(&d2, i64::MIN, i64::MAX), &OpenGate)
        .unwrap();
    // A range that holds no point masks nothing: the flush that makes it durable drops it.
    region.write(&delete(&d1, 500, 600), &OpenGate).unwrap();
    model
        .get_mut(&d1)
        .unwrap()
        .retain(|t, _| !(2..=4).contains(t));
    model.remove(&d2);
    assert_eq!(content(&region.region), model);
    assert_eq!(
        region.region.storage_stats().pending_compactions,
        0,
        "a deletion is applied to files only once a flush made it durable"
    );
    region.flush();
    let ranges_in_manifest = || {
        engine::Manifest::load(&dir.path().join("region"))
            .unwrap()
            .unwrap()
            .tombstones
            .iter()
            .filter_map(|t| match t {
                engine::Tombstone::Range { device, start, .. } => Some((device.clone(), *start)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ranges_in_manifest(),
        [
            ("root.sg.d1".to_string(), 2),
            ("root.sg.d2".to_string(), i64::MIN)
        ]
    );
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let before = region.region.storage_stats().sealed_bytes;
    region.region.compact_all().unwrap();
    assert!(region.region.storage_stats().sealed_bytes < before);
    assert_eq!(content(&region.region), model);
    // The tombstones masked nothing any more and d2.s1's type is all that is left of it; only
    // d2.s1's tombstone stays, to record that type.
    let manifest = engine::Manifest::load(&dir.path().join("region"))
        .unwrap()
        .unwrap();
    let ranges: Vec<_> = manifest
        .tombstones
        .iter()
        .filter_map(|t| match t {
            engine::Tombstone::Range { device, .. } => Some(device.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ranges, vec!["root.sg.d2"]);

    // The series keeps its type, across a restart too: a write of another type is refused.
    let keeps_its_type = |region: &LoggedRegion| {
        assert!(region.region.series().contains(&(
            d2.0.clone(),
            d2.1.clone(),
            common::DataType::Double
        )));
        let mut other = common::Tablet::new("root.sg.d2", &[("s1", common::DataType::Int64)]);
        other.push_row(50, vec![Some(Value::Int64(1))]);
        assert!(matches!(
            region.write(&RegionCommand::insert(other), &OpenGate),
            Err(StorageError::DataTypeMismatch { .. })
        ));
        assert_eq!(content(&region.region), model);
    };
    keeps_its_type(&region);
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    keeps_its_type(&region);
}

#[test]
fn a_file_whose_every_series_is_deleted_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let t = tablet("root.sg.d1", &[1, 2], 0.0);
    region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
    region.flush();
    let all = vec![
        ("root.sg.d1".to_string(), "s1".to_string()),
        ("root.sg.d1".to_string(), "s2".to_string()),
    ];
    region
        .write(&RegionCommand::delete_series(all), &OpenGate)
        .unwrap();
    region.flush();
    region.region.compact_all().unwrap();
    assert_eq!(region.region.storage_stats().sealed_files, 0);
    assert!(sealed_names(dir.path()).is_empty());
    assert!(content(&region.region).is_empty());
}

#[test]
fn ttl_expired_points_leave_the_disk_but_each_series_keeps_its_newest() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    // Slots 0 (t 0..10) and 1 (t 10..20) of the tests' 10 ms partitions: one file each.
    let timestamps: Vec<i64> = (0..20).collect();
    for device in ["root.sg.d1", "root.sg.d2"] {
        let t = tablet(device, &timestamps, 0.0);
        region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
    }
    region.flush();
    assert_eq!(region.region.storage_stats().sealed_files, 2);
    assert_eq!(region.region.storage_stats().pending_compactions, 0);
    let before = region.region.storage_stats().sealed_bytes;

    // Slot 0 expired whole; slot 1 only in part, inside a page that straddles the cutoff, so
    // rewriting it would remove less than half its points: it stays as it is.
    region.region.set_ttl_cutoff(Some(15));
    assert_eq!(region.region.ttl_cutoff(), Some(15));
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].time_slot, 0);
    assert!(reports[0].expired_points > 0);
    assert!(region.region.storage_stats().sealed_bytes < before);
    assert!(
        region.region.compact_all().unwrap().is_empty(),
        "what a rewrite keeps never makes the file due again"
    );
    for device in ["root.sg.d1", "root.sg.d2"] {
        assert_eq!(
            region.region.query(device, "s1", 0, 10).unwrap(),
            vec![(9, Value::Double(9.0))],
            "{device}: only the newest expired point of the partition stays"
        );
        assert_eq!(region.region.query(device, "s1", 10, 20).unwrap().len(), 10);
    }

    // After a restart the series and their types are still known: a clashing insert into an
    // expired partition is still refused, as it was before the compaction.
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    let mut clash = common::Tablet::new("root.sg.d1", &[("s1", common::DataType::Int64)]);
    clash.push_row(3, vec![Some(Value::Int64(1))]);
    let refused = region.write(&RegionCommand::insert(clash), &OpenGate);
    assert!(
        matches!(refused, Err(engine::StorageError::DataTypeMismatch { .. })),
        "{refused:?}"
    );
    // Unsetting the TTL brings nothing back.
    region.region.set_ttl_cutoff(None);
    assert!(region.region.compact_all().unwrap().is_empty());
    assert_eq!(
        region
            .region
            .query("root.sg.d1", "s1", 0, 10)
            .unwrap()
            .len(),
        1
    );
}

/// Closing a region stops a running, throttled compaction at its next series: the merge's output
/// is removed, its inputs stay, nothing is lost, and a later compaction (after a reopen) works.
#[test]
fn a_running_compaction_stops_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let slow = StorageConfig {
        compaction: CompactionConfig {
            write_bytes_per_sec: 500,
            ..config().compaction
        },
        ..config()
    };
    let region = LoggedRegion::open_with(dir.path(), slow);
    let mut model = Model::new();
    for round in 0..2i64 {
        for d in 0..100 {
            let t = tablet(&format!("root.sg.d{d}"), &[round, round + 1], d as f64);
            region
                .write(&RegionCommand::insert(t.clone()), &OpenGate)
                .unwrap();
            apply_to_model(&mut model, &t);
        }
        region.flush();
    }
    let before = sealed_names(dir.path());
    assert_eq!(before.len(), 2);

    let started = Instant::now();
    let outcome = std::thread::scope(|s| {
        let compaction = s.spawn(|| region.region.compact_once());
        std::thread::sleep(Duration::from_millis(300));
        region.region.cancel_compactions();
        compaction.join().unwrap()
    });
    // Unthrottled the merge writes its 200 series (~5 KB) in milliseconds; at 500 bytes/s it would
    // take many seconds, so only the cancellation ends it this soon.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(outcome, Err(StorageError::CompactionCancelled)),
        "{outcome:?}"
    );
    assert_eq!(
        sealed_names(dir.path()),
        before,
        "inputs kept, output removed"
    );
    assert_eq!(content(&region.region), model);
    assert!(matches!(
        region.region.compact_once(),
        Err(StorageError::CompactionCancelled)
    ));

    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(region.region.compact_all().unwrap().len(), 1);
    assert_eq!(content(&region.region), model);
}

/// A series' pages over the region's sealed files: raw bytes and stored bytes summed, and each
/// page's compressor.
fn series_bytes(dir: &std::path::Path, device: &str) -> (u64, u64, Vec<engine::Compressor>) {
    let cache = engine::FileCache::new(16);
    let (mut raw, mut stored, mut compressors) = (0, 0, Vec::new());
    for name in sealed_names(dir) {
        let file = engine::SealedFile::open(&dir.join("region/sealed").join(name), &cache).unwrap();
        if let Some(chunk) = file.chunk(device, "s1") {
            for page in &chunk.pages {
                raw += page.raw_length as u64;
                stored += page.length as u64;
                compressors.push(page.compressor);
            }
        }
    }
    (raw, stored, compressors)
}

/// `CREATE TIMESERIES ... ENCODING=PLAIN, COMPRESSOR=UNCOMPRESSED` as the region sees it: the
/// declared series is written plain and uncompressed by flushes and by compactions, its
/// undeclared twin (same values) adaptively and compressed, and both read back the same.
#[test]
fn declared_encodings_and_compressors_are_honoured_by_flush_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut codecs = engine::SeriesCodecs::default();
    codecs.insert(
        "root.sg.d1",
        "s1",
        engine::SeriesCodec::parse(
            common::DataType::Double,
            Some("PLAIN"),
            Some("UNCOMPRESSED"),
        )
        .unwrap(),
    );
    region.region.set_series_codecs(std::sync::Arc::new(codecs));
    let mut model = Model::new();
    let rows: Vec<i64> = (0..10).collect();
    for _ in 0..2 {
        for device in ["root.sg.d1", "root.sg.d2"] {
            // Slot 0 only (10 ms partitions): timestamps 0..9, rewritten by the second round.
            let t = tablet(device, &rows, 5.0);
            region
                .write(&RegionCommand::insert(t.clone()), &OpenGate)
                .unwrap();
            apply_to_model(&mut model, &t);
        }
        region.flush();
    }
    let check = |when: &str| {
        let (plain_raw, plain_stored, plain_compressors) = series_bytes(dir.path(), "root.sg.d1");
        let (adaptive_raw, _, _) = series_bytes(dir.path(), "root.sg.d2");
        assert!(
            plain_compressors
                .iter()
                .all(|c| *c == engine::Compressor::Uncompressed),
            "{when}: {plain_compressors:?}"
        );
        assert_eq!(
            plain_stored,
            plain_raw + 4 * plain_compressors.len() as u64,
            "{when}"
        );
        // PLAIN: 8 bytes a value; adaptive: small integers as scaled decimals.
        let files = plain_compressors.len() as u64;
        assert!(plain_raw >= files * 10 * 8, "{when}: {plain_raw}");
        assert!(
            adaptive_raw * 2 < plain_raw,
            "{when}: {adaptive_raw} vs {plain_raw}"
        );
    };
    check("after the flushes");
    assert_eq!(region.region.compact_all().unwrap().len(), 1);
    assert_eq!(sealed_names(dir.path()).len(), 1);
    check("after the compaction");
    assert_eq!(content(&region.region), model);
}

/// The tests' configuration with one time partition per 1,000,000 ms, so that hundreds of rows
/// share a partition.
fn wide_partitions() -> StorageConfig {
    let mut storage = config();
    storage.partition.time_partition_interval_ms = 1_000_000;
    storage
}

/// Writes `t` through the region's log and into the model.
fn write_both(region: &LoggedRegion, model: &mut Model, t: &common::Tablet) {
    region
        .write(&RegionCommand::insert(t.clone()), &OpenGate)
        .unwrap();
    apply_to_model(model, t);
}

/// A merge under a TTL cutoff reads only the pages that reach the cutoff (and, for a series
/// with nothing after it, the page holding its newest point): pages wholly below are skipped,
/// proved by corrupting them on disk, which any read would report.
#[test]
fn expired_pages_are_not_read_by_a_ttl_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let mut storage = wide_partitions();
    storage.sealed.page_points = 10;
    let region = LoggedRegion::open_with(dir.path(), storage);
    let d1: Vec<i64> = (0..100).collect();
    let d2: Vec<i64> = (0..50).collect();
    for (device, timestamps) in [("root.sg.d1", &d1), ("root.sg.d2", &d2)] {
        let mut t = common::Tablet::new(device, &[("s1", common::DataType::Double)]);
        for &ts in timestamps.iter() {
            t.push_row(ts, vec![Some(Value::Double(ts as f64))]);
        }
        region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
    }
    region.flush();
    let names = sealed_names(dir.path());
    assert_eq!(names.len(), 1);
    let path = dir.path().join("region/sealed").join(&names[0]);
    let cache = engine::FileCache::new(4);
    let file = engine::SealedFile::open(&path, &cache).unwrap();
    let pages_of = |device| file.chunk(device, "s1").unwrap().pages.clone();
    let (p1, p2) = (pages_of("root.sg.d1"), pages_of("root.sg.d2"));
    assert_eq!((p1.len(), p2.len()), (10, 5));
    drop(file);
    // Every page of d1 below 90 and every page of d2 but its last gets a flipped byte.
    let mut bytes = std::fs::read(&path).unwrap();
    for page in p1[..9].iter().chain(&p2[..4]) {
        bytes[page.offset as usize + 1] ^= 0xFF;
    }
    std::fs::write(&path, &bytes).unwrap();

    region.region.set_ttl_cutoff(Some(95));
    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    // d1: 90 points on skipped pages + 5 cut from the page read; d2: 40 skipped + 9 cut.
    assert_eq!(reports[0].expired_points, 95 + 49);
    let d1_left = region.region.query("root.sg.d1", "s1", 0, 100).unwrap();
    assert_eq!(
        d1_left.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        (95..100).collect::<Vec<_>>()
    );
    assert_eq!(
        region.region.query("root.sg.d2", "s1", 0, 100).unwrap(),
        vec![(49, Value::Double(49.0))],
        "a series wholly expired keeps its newest point"
    );
}

/// A partition no flush has touched for `cold_after_ms` is merged whole, though its files are
/// too few for any size rule; one still taking writes is not.
#[test]
fn a_cold_partition_is_merged_into_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut storage = config();
    storage.compaction.files_min = 4;
    storage.compaction.cold_after_ms = 200;
    let region = LoggedRegion::open_with(dir.path(), storage);
    let mut model = Model::new();
    // Three files in slot 0 (t 0..10), one in slot 1.
    for round in 0..3i64 {
        write_both(
            &region,
            &mut model,
            &tablet("root.sg.d1", &[round, round + 3], round as f64),
        );
        region.flush();
    }
    write_both(&region, &mut model, &tablet("root.sg.d1", &[15], 9.0));
    region.flush();
    assert!(
        region.region.compact_all().unwrap().is_empty(),
        "not cold yet"
    );
    // Slot 0 stays written to (buffered, unflushed): it is not cold however long it waits.
    write_both(&region, &mut model, &tablet("root.sg.d1", &[8], 7.0));
    std::thread::sleep(Duration::from_millis(250));
    assert!(region.region.compact_all().unwrap().is_empty());
    region.flush();
    std::thread::sleep(Duration::from_millis(250));
    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!((reports[0].time_slot, reports[0].inputs), (0, 4));
    let stats = region.region.storage_stats();
    assert_eq!((stats.sealed_files, stats.pending_compactions), (2, 0));
    assert_eq!(content(&region.region), model);
}

/// Every IoTDB compressor a series declares is what its pages are stored with (when it saves
/// an eighth), through flush and compaction, and the points read back the same.
#[test]
fn every_declared_compressor_stores_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open_with(dir.path(), wide_partitions());
    let compressors = [
        engine::Compressor::Snappy,
        engine::Compressor::Gzip,
        engine::Compressor::Zstd,
        engine::Compressor::Lzma2,
    ];
    let mut codecs = engine::SeriesCodecs::default();
    let device = |c: engine::Compressor| format!("root.sg.{}", c.name().to_lowercase());
    for c in compressors {
        let declared =
            engine::SeriesCodec::parse(common::DataType::Double, Some("PLAIN"), Some(c.name()))
                .unwrap();
        codecs.insert(&device(c), "s1", declared);
    }
    region.region.set_series_codecs(std::sync::Arc::new(codecs));
    let mut model = Model::new();
    for round in 0..2i64 {
        for c in compressors {
            // PLAIN doubles of a slow ramp: plenty for any compressor to save an eighth.
            let rows: Vec<i64> = (round * 500..round * 500 + 500).collect();
            write_both(&region, &mut model, &tablet(&device(c), &rows, 1.0));
        }
        region.flush();
    }
    let check = |when: &str| {
        for c in compressors {
            let (raw, stored, used) = series_bytes(dir.path(), &device(c));
            assert!(
                !used.is_empty() && used.iter().all(|u| *u == c),
                "{when}: {c} {used:?}"
            );
            assert!(stored < raw, "{when}: {c} {stored} vs {raw}");
        }
        assert_eq!(content(&region.region), model, "{when}");
    };
    check("after the flushes");
    assert_eq!(region.region.compact_all().unwrap().len(), 1);
    check("after the compaction");
    drop(region);
    let region = LoggedRegion::open_with(dir.path(), wide_partitions());
    region.replay(&OpenGate).unwrap();
    assert_eq!(content(&region.region), model, "after a restart");
}

/// A snapshot install deletes the files it replaced and nothing else: a compaction writes its
/// output in `sealed/` without the region's lock and installs it later, and an install that
/// deleted every file its manifest did not name took such an output away from a compaction
/// that then installed it (scenario 11b: "No such file" on every later read of the region).
#[test]
fn a_checkpoint_install_leaves_a_compaction_output_being_written_alone() {
    let source_dir = tempfile::tempdir().unwrap();
    let (source, _) = eight_flushes(source_dir.path());
    let links = source_dir.path().join("checkpoint");
    let manifest = source.region.checkpoint_into(&links).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (replica, _) = eight_flushes(dir.path());
    let replaced = sealed_names(dir.path());
    // Named as a compaction names its output: the next sequence of the region's own.
    let in_progress = dir.path().join("region/sealed/0-9999999999999999.fps");
    std::fs::write(&in_progress, b"a merge being written").unwrap();
    replica
        .region
        .install_checkpoint(&manifest, &links)
        .unwrap();
    assert!(
        in_progress.exists(),
        "the output being written is left alone"
    );
    let names = sealed_names(dir.path());
    assert!(
        replaced.iter().all(|n| !names.contains(n)),
        "the replaced files are gone"
    );
    assert_eq!(names.len(), manifest.files.len() + 1);
    assert_eq!(
        replica.region.digest().unwrap(),
        source.region.digest().unwrap()
    );
}

#[test]
fn a_digest_from_a_ttl_cutoff_is_that_of_the_points_at_or_after_it() {
    // One replica's compaction removed the expired points (below 14), the other's not yet:
    // above the cutoff, their digests agree.
    let dir = tempfile::tempdir().unwrap();
    let all = LoggedRegion::open(&dir.path().join("all"));
    let late = LoggedRegion::open(&dir.path().join("late"));
    let t = tablet("root.sg.d1", &[1, 2, 3, 14, 25], 0.5);
    all.write(&RegionCommand::insert(t.clone()), &OpenGate)
        .unwrap();
    let rows: Vec<usize> = (0..t.row_count())
        .filter(|&r| t.timestamps[r] >= 14)
        .collect();
    late.write(&RegionCommand::insert(t.select_rows(&rows)), &OpenGate)
        .unwrap();
    all.flush();
    let full = all.region.digest().unwrap();
    assert_ne!(full.hash, late.region.digest().unwrap().hash);
    let cut = all.region.digest_visible_from(14).unwrap();
    assert_eq!(cut, late.region.digest_visible_from(14).unwrap());
    assert_eq!(cut, late.region.digest().unwrap());
    assert_eq!(all.region.digest_visible_from(i64::MIN).unwrap(), full);
}

#[test]
fn a_digest_is_the_same_whatever_the_sources_of_its_points() {
    // One replica keeps everything in memory; the other flushes after every write (several
    // files per partition), then compacts (one file each: the digest's lone-file path), with a
    // time range deleted from one file and a series in a file and a memtable at once.
    let dir = tempfile::tempdir().unwrap();
    let memory = LoggedRegion::open(&dir.path().join("memory"));
    let files = LoggedRegion::open(&dir.path().join("files"));
    let commands = [
        RegionCommand::insert(tablet("root.sg.d1", &[1, 2, 3, 11, 12], 0.5)),
        RegionCommand::insert(tablet("root.sg.d2", &[4, 5, 13], 1.5)),
        RegionCommand::insert(tablet("root.sg.d1", &[2, 6, 14], 2.5)),
        RegionCommand::DeleteData {
            series: vec![("root.sg.d2".into(), "s1".into())],
            start: 5,
            end: 5,
            deletion: engine::Deletion::default(),
        },
        RegionCommand::insert(tablet("root.sg.d2", &[7, 15], 3.5)),
    ];
    for (i, command) in commands.iter().enumerate() {
        memory.write(command, &OpenGate).unwrap();
        files.write(command, &OpenGate).unwrap();
        if i + 1 < commands.len() {
            files.flush();
        }
        assert_eq!(
            memory.region.digest().unwrap().hash,
            files.region.digest().unwrap().hash,
            "after command {i}"
        );
    }
    files.flush();
    files.region.compact_all().unwrap();
    assert_eq!(files.region.storage_stats().pending_compactions, 0);
    assert_eq!(
        memory.region.digest().unwrap().hash,
        files.region.digest().unwrap().hash
    );
    assert_eq!(
        memory.region.digest_visible_from(6).unwrap().hash,
        files.region.digest_visible_from(6).unwrap().hash
    );
}

/// A TTL merge keeps each series' newest point in its output, even one a `deleteData` not yet in
/// the manifest masks, and drops the older visible ones: the visible newest point changes, and
/// the last-value cache must not keep answering the old one.
#[test]
fn a_ttl_merge_that_drops_the_visible_newest_point_is_not_answered_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    for time in [1, 5] {
        let t = tablet("root.sg.d1", &[time], 1.0);
        region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
        region.flush();
    }
    let delete = RegionCommand::DeleteData {
        series: vec![("root.sg.d1".to_string(), "s1".to_string())],
        start: 4,
        end: 6,
        deletion: engine::Deletion::default(),
    };
    region.write(&delete, &OpenGate).unwrap();
    let before = region.region.last("root.sg.d1", "s1").unwrap();
    assert_eq!(before.map(|(t, _)| t), Some(1), "t=5 is deleted");

    region.region.set_ttl_cutoff(Some(3));
    let reports = region.region.compact_all().unwrap();
    assert!(reports.iter().any(|r| r.expired_points > 0), "{reports:?}");
    let fresh = region.region.last_uncached("root.sg.d1", "s1").unwrap();
    assert_eq!(fresh, None, "the merge kept t=5 (masked) and dropped t=1");
    assert_eq!(region.region.last("root.sg.d1", "s1").unwrap(), fresh);
}
