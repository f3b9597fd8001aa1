//! The DataNode.
