//! Every data type, IoTDB 2.0's among them, through memtable, flush, compaction, restart and
//! snapshot: values and types come back as written.

use common::{DataType, Tablet, Value};
use engine::{DataRegion, OpenGate, RegionCommand};

use crate::support::{apply_to_model, config, content, LoggedRegion, Model};

/// A tablet of every type over `timestamps`, values derived from `seed`, every third cell of a
/// column null (a different row per column).
fn every_type(timestamps: &[i64], seed: i64) -> Tablet {
    let schema: Vec<(String, DataType)> = DataType::ALL
        .iter()
        .map(|t| (t.name().to_lowercase(), *t))
        .collect();
    let schema: Vec<(&str, DataType)> = schema.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let mut t = Tablet::new("root.sg.d1", &schema);
    for (row, &ts) in timestamps.iter().enumerate() {
        let v = seed + ts;
        let values = DataType::ALL
            .iter()
            .enumerate()
            .map(|(col, data_type)| {
                ((row + col) % 3 != 0).then(|| match data_type {
                    DataType::Boolean => Value::Boolean(v % 2 == 0),
                    DataType::Int32 => Value::Int32(v as i32),
                    DataType::Int64 => Value::Int64(v << 33),
                    DataType::Float => Value::Float(v as f32 * 0.5),
                    DataType::Double => Value::Double(v as f64 * 0.25),
                    DataType::Text => Value::Text(format!("text {v}")),
                    DataType::Timestamp => Value::Timestamp(1_700_000_000_000 + v),
                    DataType::Date => Value::Date(20240101 + (v % 28) as i32),
                    DataType::Blob => Value::Blob(vec![0xff, v as u8, 0]),
                    DataType::String => Value::String(format!("string {v}")),
                })
            })
            .collect();
        t.push_row(ts, values);
    }
    t
}

fn types(region: &DataRegion) -> Vec<(String, DataType)> {
    region
        .series()
        .into_iter()
        .map(|(_, measurement, t)| (measurement, t))
        .collect()
}

#[test]
fn every_type_survives_flush_compaction_restart_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    // Three flushes into one partition (interval 10 ms), overlapping, then one left in memory.
    for (round, timestamps) in [[1i64, 2, 3], [2, 3, 4], [3, 5, 6], [6, 7, 8]]
        .iter()
        .enumerate()
    {
        let t = every_type(timestamps, round as i64 * 100);
        region
            .write(&RegionCommand::insert(t.clone()), &OpenGate)
            .unwrap();
        apply_to_model(&mut model, &t);
        assert_eq!(content(&region.region), model, "round {round} in memory");
        if round < 3 {
            region.flush();
        }
    }
    let mut want_types: Vec<(String, DataType)> = DataType::ALL
        .iter()
        .map(|t| (t.name().to_lowercase(), *t))
        .collect();
    want_types.sort();
    assert_eq!(types(&region.region), want_types);
    // t=8 is null in the DATE column; its last point is t=7 of the last round.
    assert_eq!(
        region.region.last("root.sg.d1", "date").unwrap(),
        Some((7, Value::Date(20240101 + 307 % 28)))
    );

    let digest = region.region.digest().unwrap();
    assert!(!region.region.compact_all().unwrap().is_empty());
    assert_eq!(content(&region.region), model, "after compaction");
    assert_eq!(region.region.digest().unwrap(), digest);

    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(content(&region.region), model, "after a restart");
    assert_eq!(types(&region.region), want_types);
    assert_eq!(region.region.digest().unwrap(), digest);

    let snapshot = region.region.export().unwrap();
    let other = tempfile::tempdir().unwrap();
    let copy = DataRegion::open(other.path().join("region"), config()).unwrap();
    copy.reset_to(&snapshot).unwrap();
    assert_eq!(content(&copy), model, "from a snapshot");
    assert_eq!(copy.digest().unwrap(), digest);
}

#[test]
fn a_series_keeps_its_type_against_a_same_width_type() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut t = Tablet::new("root.sg.d1", &[("s", DataType::Timestamp)]);
    t.push_row(1, vec![Some(Value::Timestamp(5))]);
    region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
    // INT64 values share TIMESTAMP's bytes, but the series is a TIMESTAMP series.
    let mut t = Tablet::new("root.sg.d1", &[("s", DataType::Int64)]);
    t.push_row(2, vec![Some(Value::Int64(6))]);
    assert!(region.write(&RegionCommand::insert(t), &OpenGate).is_err());
    assert_eq!(
        region.region.query("root.sg.d1", "s", 0, 10).unwrap(),
        vec![(1, Value::Timestamp(5))]
    );
}
