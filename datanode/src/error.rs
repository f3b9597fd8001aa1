//! Errors of the DataNode service (the storage engine has its own, `engine::StorageError`).

use engine::StorageError;

pub use runtime::ConfigError;

/// `pub type Result<T>` of the DataNode service.
pub type Result<T> = std::result::Result<T, Error>;

/// A failure that stops the DataNode from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The node's identity file is damaged.
    #[error("identity file {path}: {reason}")]
    Identity {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// No ConfigNode accepted the registration.
    #[error("registering with the ConfigNode: {0}")]
    Registration(String),
    /// A region could not be opened.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The raft driver failed.
    #[error(transparent)]
    Runtime(#[from] runtime::Error),
    /// The region was removed from this node (its database was dropped): it is not created
    /// again in this run.
    #[error("region {0} was dropped and removed from this node")]
    RegionRemoved(u64),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
