//! raft-rs logs through `slog`; this drain forwards its records to `tracing`.

/// A `slog` drain that emits each record as a `tracing` event (target `raft`). Key-value pairs
/// are dropped: raft-rs puts the useful values into the message itself.
pub(crate) struct TracingDrain;

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        _values: &slog::OwnedKVList,
    ) -> Result<Self::Ok, Self::Err> {
        // The macros check the level before formatting, so disabled levels cost one compare.
        match record.level() {
            slog::Level::Critical | slog::Level::Error => {
                tracing::error!(target: "raft", "{}", record.msg())
            }
            slog::Level::Warning => tracing::warn!(target: "raft", "{}", record.msg()),
            slog::Level::Info => tracing::info!(target: "raft", "{}", record.msg()),
            slog::Level::Debug => tracing::debug!(target: "raft", "{}", record.msg()),
            slog::Level::Trace => tracing::trace!(target: "raft", "{}", record.msg()),
        }
        Ok(())
    }
}

pub(crate) fn raft_logger(node: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!("node" => node))
}
