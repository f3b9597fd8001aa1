//! The schema statements a session and the DataNode's SQL executor both send
//! (`SchemaStatementReq.statement`), built in one place.

use common::views::SeriesMeta;
use common::DataType;

use crate as proto;
use crate::schema_statement_req::Statement;

/// `root.sg.d1.s1` as device `root.sg.d1` and measurement `s1`; `None` when it has no dot or
/// an empty side.
pub fn split_series_path(path: &str) -> Option<(String, String)> {
    match path.rsplit_once('.') {
        Some((device, measurement)) if !device.is_empty() && !measurement.is_empty() => {
            Some((device.to_string(), measurement.to_string()))
        }
        _ => None,
    }
}

/// `CREATE DATABASE`: of the table model (a database only tables live in) with `table_model`.
pub fn create_database(database: &str, table_model: bool) -> Statement {
    Statement::CreateDatabase(proto::CreateDatabaseReq {
        database: database.into(),
        table_model,
    })
}

/// `DROP DATABASE`.
pub fn drop_database(database: &str) -> Statement {
    Statement::DropDatabase(proto::DropDatabaseReq {
        database: database.into(),
    })
}

/// `SET TTL`; a `ttl_ms` of 0 is `UNSET TTL` (the caller refuses other non-positive ones).
pub fn set_ttl(database: &str, ttl_ms: i64) -> Statement {
    Statement::SetTtl(proto::SetTtlReq {
        database: database.into(),
        ttl_ms,
    })
}

/// `CREATE TABLE` (the table model), or (`extend`) an insert's creation of a table and of the
/// columns it lacks.
pub fn create_table(
    database: &str,
    table: &common::table::TableSchema,
    if_not_exists: bool,
    extend: bool,
) -> Statement {
    Statement::CreateTable(proto::CreateTableReq {
        database: database.into(),
        table: table.name.clone(),
        columns: table
            .columns
            .iter()
            .map(crate::table_column_to_wire)
            .collect(),
        ttl_ms: table.ttl_ms.unwrap_or(0),
        if_not_exists,
        extend,
    })
}

/// `DROP TABLE` (the table model).
pub fn drop_table(database: &str, table: &str) -> Statement {
    Statement::DropTable(proto::DropTableReq {
        database: database.into(),
        table: table.into(),
    })
}

/// The attributes of devices of a table, derived from its incarnation `table_version` (0: any).
pub fn set_device_attributes(
    database: &str,
    table: &str,
    table_version: u64,
    devices: &[common::table::DeviceAttributes],
) -> Statement {
    Statement::SetDeviceAttributes(proto::SetDeviceAttributesReq {
        database: database.into(),
        table: table.into(),
        table_version,
        devices: devices
            .iter()
            .map(|(tags, attributes)| crate::table_device_to_wire(tags, attributes))
            .collect(),
    })
}

/// `REMOVE DATANODE`.
pub fn remove_data_node(data_node_id: u64) -> Statement {
    Statement::RemoveDataNode(proto::RemoveDataNodeReq { data_node_id })
}

/// `CREATE TIMESERIES` of one series: IoTDB's encoding and compressor names, empty for the
/// storage engine's choice.
pub fn create_timeseries(
    device: String,
    measurement: String,
    data_type: DataType,
    encoding: Option<&str>,
    compressor: Option<&str>,
    meta: &SeriesMeta,
) -> Statement {
    Statement::CreateTimeseries(proto::CreateTimeseriesReq {
        series: vec![proto::TimeseriesSpec {
            device,
            measurement,
            data_type: proto::data_type_to_wire(data_type) as i32,
            encoding: encoding.unwrap_or_default().to_string(),
            compressor: compressor.unwrap_or_default().to_string(),
            alias: meta.alias.clone().unwrap_or_default(),
            tags: meta.tags.clone(),
            attributes: meta.attributes.clone(),
        }],
    })
}

/// `DELETE TIMESERIES` of one series.
pub fn delete_timeseries(device: String, measurement: String) -> Statement {
    Statement::DeleteTimeseries(proto::DeleteTimeseriesReq {
        series: vec![proto::SeriesPath {
            device,
            measurement,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_paths_split_at_the_last_dot() {
        assert_eq!(
            split_series_path("root.sg.d1.s1"),
            Some(("root.sg.d1".into(), "s1".into()))
        );
        for bad in ["s1", "root.sg.", ".s1", ""] {
            assert_eq!(split_series_path(bad), None, "{bad}");
        }
    }
}
