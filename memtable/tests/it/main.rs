//! The memtable's integration tests: one binary, one module per concern.

mod api;
mod model;

use common::{DataType, Tablet, Value};

/// A tablet of `device` with the given schema and rows (`None` is a null).
pub fn tablet(
    device: &str,
    schema: &[(&str, DataType)],
    rows: &[(i64, Vec<Option<Value>>)],
) -> Tablet {
    let mut tablet = Tablet::new(device, schema);
    for (timestamp, values) in rows {
        tablet.push_row(*timestamp, values.clone());
    }
    tablet
}

/// Every row index of a tablet, in order.
pub fn all_rows(tablet: &Tablet) -> Vec<u32> {
    (0..tablet.row_count() as u32).collect()
}
