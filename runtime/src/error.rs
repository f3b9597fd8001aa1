//! Errors of the raft host and its driver.

/// Result of a driver call.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a request to the driver did not complete.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The driver thread stopped (shutdown, or a fatal raft log error).
    #[error("the raft driver has stopped")]
    Stopped,
    /// The driver's request queue is full.
    #[error("the raft driver's request queue is full ({0} requests); retry later")]
    Backpressure(usize),
    /// The raft node refused the call.
    #[error(transparent)]
    Consensus(#[from] consensus::Error),
    /// The proposal or read was accepted but did not complete.
    #[error(transparent)]
    Proposal(#[from] consensus::ProposalError),
    /// The result did not arrive in time; the proposal may still commit.
    #[error("no result within {0} ms; the outcome is unknown")]
    Timeout(u64),
    /// The driver thread could not be started.
    #[error("starting the raft driver thread: {0}")]
    Spawn(std::io::Error),
    /// The raft log could not be opened.
    #[error("opening the raft log: {0}")]
    Log(#[from] wal::Error),
}
