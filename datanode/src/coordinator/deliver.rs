//! One attempt of a region write: proposed to the local replica when the target is this node,
//! else forwarded to the replica at the target address. The command carries its tokens into
//! the region's log, so the region judges them however late it arrives.
//!
//! Failpoint `datanode::write::deliver_late` (`return(ms)`; `deleteData` commands only) makes
//! the attempt reach the region `ms` late, delivered even if the coordinator has given up on it
//! meanwhile: a message held in the network. Fault scenario 8d uses it to deliver a deletion
//! resolved before a DELETE TIMESERIES after the drop and the series' re-creation, the late
//! delivery the region's tokens refuse (REVIEW N6).

use std::sync::Arc;
use std::time::Duration;

use common::{Status, StatusCode};
use engine::RegionCommand;

use super::Coordinator;
use crate::metrics::inc;

impl Coordinator {
    /// One attempt at `address` (on time, or late under the failpoint).
    pub(super) async fn deliver(
        self: &Arc<Self>,
        region: u64,
        address: String,
        command: &RegionCommand,
    ) -> Status {
        let Some(late) = late_delivery(command) else {
            return self.deliver_now(region, &address, command).await;
        };
        tracing::warn!(region, ?late, "failpoint: this region write arrives late");
        let (this, command) = (self.clone(), command.clone());
        // Spawned, so the delivery happens even when this attempt's caller is dropped.
        let delivery = tokio::spawn(async move {
            tokio::time::sleep(late).await;
            let s = this.deliver_now(region, &address, &command).await;
            tracing::warn!(
                region,
                code = s.code.code(),
                "failpoint: late region write answered"
            );
            s
        });
        delivery.await.unwrap_or_else(|e| {
            Status::new(
                StatusCode::InternalServerError,
                format!("late delivery task: {e}"),
            )
        })
    }

    async fn deliver_now(&self, region: u64, address: &str, command: &RegionCommand) -> Status {
        if address == self.internal_address {
            return if self.local.hosts(region) {
                match self.local.propose(region, command).await {
                    Ok(()) => Status::ok(),
                    Err(refused) => refused,
                }
            } else {
                Status::new(StatusCode::RegionLeaderChangeError, "no local replica")
            };
        }
        inc(&self.metrics.writes.forwarded_writes);
        self.peers
            .rpc()
            .forward_region_write(address, region, command)
            .await
    }
}

/// How late the failpoint makes this command's delivery (never, without it).
fn late_delivery(command: &RegionCommand) -> Option<Duration> {
    if !matches!(command, RegionCommand::DeleteData { .. }) {
        return None;
    }
    fail::fail_point!("datanode::write::deliver_late", |ms| ms
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis));
    None
}
