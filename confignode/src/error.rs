//! Typed errors of the ConfigNode.

use common::StatusCode;

/// Result of a ConfigNode call.
pub type Result<T> = std::result::Result<T, Error>;

pub use common::codec::DecodeError;

/// A command that the metadata state machine refuses. Deterministic: every replica refuses it
/// alike, so it is the entry's result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// A path that is not `root.<name>...` with valid components.
    #[error("illegal path {path:?}: {reason}")]
    IllegalPath {
        /// The path.
        path: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// No database covers the path.
    #[error("no database covers {0}")]
    DatabaseNotFound(String),
    /// The database exists already.
    #[error("database {0} already exists")]
    DatabaseExists(String),
    /// The path lies in a database of the other model: a tree series or write in a table-model
    /// database, or a table in a tree database (the models keep their namespaces apart).
    #[error("{0}")]
    WrongModel(String),
    /// A database would nest inside another one.
    #[error("database {0} overlaps database {1}")]
    DatabaseOverlap(String, String),
    /// The database, series or node is being deleted.
    #[error("{0} is being deleted")]
    PendingDelete(String),
    /// The series exists with another type.
    #[error("series {path} exists with type {existing}, not {requested}")]
    TypeMismatch {
        /// The series path.
        path: String,
        /// Its type.
        existing: common::DataType,
        /// The requested type.
        requested: common::DataType,
    },
    /// The series does not exist.
    #[error("series {0} does not exist")]
    SeriesNotFound(String),
    /// Fewer Running DataNodes than the replication factor.
    #[error("{running} Running DataNodes, replication factor {replication_factor}")]
    NotEnoughDataNodes {
        /// Running DataNodes.
        running: usize,
        /// Wanted replicas.
        replication_factor: u32,
    },
    /// The DataNode id is unknown.
    #[error("DataNode {0} is not registered")]
    DataNodeNotFound(u64),
    /// The fence operation is unknown (already finished).
    #[error("operation {0} is not pending")]
    OperationNotFound(u64),
    /// A limit of the metadata state.
    #[error("limit reached: {0}")]
    Limit(String),
    /// An allocation would take a database past the cap its command carries
    /// (`cn_database_partitions_max` of the leader that proposed it).
    #[error(
        "database {database} holds {held} partitions and the write needs {wanted} more; \
         cn_database_partitions_max is {max}"
    )]
    PartitionsLimit {
        /// The database.
        database: String,
        /// Partitions it holds.
        held: u64,
        /// New partitions the allocation asked for.
        wanted: u64,
        /// The cap.
        max: u64,
    },
    /// A region migration that does not fit the region's replicas or a migration in progress.
    #[error("region {region_id}: migration refused: {reason}")]
    MigrationRefused {
        /// The region.
        region_id: u64,
        /// Why.
        reason: String,
    },
    /// SET TTL with a time to live that is not positive.
    #[error("TTL {0} ms: a TTL must be positive")]
    IllegalTtl(i64),
    /// A user name or password hash that breaks the rules (`users::check_username`).
    #[error("{0}")]
    IllegalUser(String),
    /// CREATE USER of a user that exists.
    #[error("user {0} already exists")]
    UserExists(String),
    /// DROP USER or ALTER USER of a user that does not exist.
    #[error("user {0} does not exist")]
    UserNotFound(String),
    /// A user statement the issuer may not run, or nobody may (dropping root): why.
    #[error("No permission: {0}")]
    NoPermission(String),
    /// A table-model table or column that breaks the rules.
    #[error("{0}")]
    IllegalTable(String),
    /// CREATE TABLE of a table that exists.
    #[error("table {0} already exists")]
    TableExists(String),
    /// The table does not exist.
    #[error("table {0} does not exist")]
    TableNotFound(String),
    /// A column exists with another category or type.
    #[error("{0}")]
    ColumnMismatch(String),
    /// A DataNode's data directory holds an incarnation older than one the registry saw it run:
    /// it was restored from an older backup (REVIEW H3).
    #[error(
        "DataNode {data_node_id}'s data directory holds incarnation {stored_epoch}, but incarnation \
         {confirmed_epoch} of it ran since: the directory was restored from an older backup (or \
         a VM was rolled back), and its raft logs and votes are older than what the node did \
         since, so it may not rejoin as DataNode {data_node_id}. Empty the data directory to \
         rejoin as a new node (its regions then migrate to it)"
    )]
    StaleIncarnation {
        /// The DataNode.
        data_node_id: u64,
        /// The incarnation its directory holds.
        stored_epoch: u64,
        /// The highest incarnation it ran.
        confirmed_epoch: u64,
    },
    /// The command did not decode.
    #[error("undecodable command: {0}")]
    Decode(#[from] DecodeError),
}

impl MetadataError {
    /// The IoTDB status code reported for this refusal.
    pub fn status_code(&self) -> StatusCode {
        match self {
            MetadataError::TypeMismatch { .. } | MetadataError::ColumnMismatch(_) => {
                StatusCode::DataTypeMismatch
            }
            MetadataError::TableExists(_) => StatusCode::TableAlreadyExists,
            MetadataError::TableNotFound(_) => StatusCode::TableNotExists,
            MetadataError::IllegalTable(_) => StatusCode::IllegalParameter,
            // A full database is final for the write, like a tablet over its DataNode's
            // partition cap: retrying elsewhere cannot help (606 would be retried) and nothing is
            // missing from the metadata (507 reads as "no such database" to a DataNode).
            MetadataError::IllegalPath { .. }
            | MetadataError::Decode(_)
            | MetadataError::PartitionsLimit { .. }
            | MetadataError::IllegalTtl(_)
            | MetadataError::WrongModel(_)
            | MetadataError::IllegalUser(_) => StatusCode::IllegalParameter,
            MetadataError::UserExists(_) => StatusCode::UserAlreadyExist,
            MetadataError::UserNotFound(_) => StatusCode::UserNotExist,
            MetadataError::NoPermission(_) => StatusCode::NoPermission,
            _ => StatusCode::MetadataError,
        }
    }
}

pub use runtime::ConfigError;

/// A failure of the running ConfigNode.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The metadata state machine refused a command.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// The raft layer failed.
    #[error("consensus: {0}")]
    Consensus(#[from] consensus::Error),
    /// The threaded raft driver failed.
    #[error("raft driver: {0}")]
    Runtime(#[from] runtime::Error),
    /// A proposal did not complete.
    #[error("proposal: {0}")]
    Proposal(#[from] consensus::ProposalError),
    /// Serving or connecting failed.
    #[error("transport: {0}")]
    Transport(String),
    /// Local I/O failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// This ConfigNode is not the leader (the leader's address when known).
    #[error("not the ConfigNode leader (leader: {leader:?})")]
    NotLeader {
        /// The leader's address, if known.
        leader: Option<String>,
    },
    /// An operation took longer than its limit.
    #[error("timed out: {0}")]
    Timeout(String),
}
