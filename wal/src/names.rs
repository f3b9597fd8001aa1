//! The names of the log's files, which the segments and the spare both use.

/// File name suffix of a segment.
pub(crate) const SEGMENT_SUFFIX: &str = ".wal";
/// Suffix of a segment being created (and of a spare being filled); such files are deleted on
/// open.
pub(crate) const TEMP_SUFFIX: &str = ".wal.tmp";
