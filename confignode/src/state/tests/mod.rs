//! Tests of [`MetadataState`], one module per concern of `state/`; the harness and helpers
//! they share are here.

use super::*;
use crate::command::tests::arb_command;
use common::StatusCode;
use proptest::prelude::*;

mod accounts;
mod operations;
mod placement;
mod registry;
mod series;
mod snapshot;
mod tables;

struct Harness {
    state: MetadataState,
    index: u64,
}

impl Harness {
    fn new() -> Self {
        Harness {
            state: MetadataState::new(),
            index: 0,
        }
    }
    fn apply(&mut self, command: Command) -> Result<CommandResult, MetadataError> {
        self.index += 1;
        self.state.apply(self.index, &command)
    }
    fn register(&mut self, id: u64, address: &str) -> (u64, u64) {
        match self
            .apply(Command::RegisterDataNode {
                data_node_id: id,
                internal_address: address.into(),
                rpc_address: format!("{address}-rpc"),
            })
            .unwrap()
        {
            CommandResult::Registered {
                data_node_id,
                incarnation_epoch,
            } => (data_node_id, incarnation_epoch),
            other => panic!("{other:?}"),
        }
    }
}

/// A version-9 snapshot with no confirmed incarnation and no table-model database as version 7
/// wrote it: without the two (empty) tables, under its magic, with its CRC.
fn as_version_7(v9: &[u8]) -> Vec<u8> {
    assert_eq!(&v9[..8], b"FPCNSNP9");
    assert_eq!(
        &v9[v9.len() - 12..v9.len() - 4],
        &[0; 8],
        "confirmed incarnations, table-model databases"
    );
    let mut v7 = v9[..v9.len() - 12].to_vec();
    v7[..8].copy_from_slice(b"FPCNSNP7");
    let crc = crc32fast::hash(&v7);
    v7.extend_from_slice(&crc.to_le_bytes());
    v7
}

fn spec(device: &str, measurement: &str, data_type: DataType) -> SeriesSpec {
    SeriesSpec {
        device: device.into(),
        measurement: measurement.into(),
        data_type,
        codec: SeriesCodec::default(),
        meta: SeriesMeta::default(),
    }
}

fn begun(result: Result<CommandResult, MetadataError>) -> u64 {
    match result {
        Ok(CommandResult::OperationBegun(id)) => id,
        other => panic!("{other:?}"),
    }
}
