//! raft-rs logs through `slog`; this drain forwards its records to `tracing`.

use std::fmt::Write as _;

/// A `slog` drain that emits each record as a `tracing` event (target `raft`), its key-value
/// pairs (the group, raft-rs's `raft_id`, and whatever a record carries) appended as `k=v`.
pub(crate) struct TracingDrain;

/// Collects a record's key-value pairs as ` k=v` text.
struct Pairs(String);

impl slog::Serializer for Pairs {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        values: &slog::OwnedKVList,
    ) -> Result<Self::Ok, Self::Err> {
        let level = match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::Level::ERROR,
            slog::Level::Warning => tracing::Level::WARN,
            slog::Level::Info => tracing::Level::INFO,
            slog::Level::Debug => tracing::Level::DEBUG,
            slog::Level::Trace => tracing::Level::TRACE,
        };
        // Formatting costs only for enabled levels: disabled ones cost the checks below.
        let enabled = match level {
            tracing::Level::ERROR => tracing::enabled!(target: "raft", tracing::Level::ERROR),
            tracing::Level::WARN => tracing::enabled!(target: "raft", tracing::Level::WARN),
            tracing::Level::INFO => tracing::enabled!(target: "raft", tracing::Level::INFO),
            tracing::Level::DEBUG => tracing::enabled!(target: "raft", tracing::Level::DEBUG),
            tracing::Level::TRACE => tracing::enabled!(target: "raft", tracing::Level::TRACE),
        };
        if !enabled {
            return Ok(());
        }
        let mut pairs = Pairs(String::new());
        let _ = slog::KV::serialize(&record.kv(), record, &mut pairs);
        let _ = slog::KV::serialize(values, record, &mut pairs);
        let message = record.msg();
        let pairs = pairs.0;
        match level {
            tracing::Level::ERROR => tracing::error!(target: "raft", "{message}{pairs}"),
            tracing::Level::WARN => tracing::warn!(target: "raft", "{message}{pairs}"),
            tracing::Level::INFO => tracing::info!(target: "raft", "{message}{pairs}"),
            tracing::Level::DEBUG => tracing::debug!(target: "raft", "{message}{pairs}"),
            tracing::Level::TRACE => tracing::trace!(target: "raft", "{message}{pairs}"),
        }
        Ok(())
    }
}

pub(crate) fn raft_logger(node: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!("node" => node))
}
