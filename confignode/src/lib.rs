//! Placeholder crate; filled by its own issue (see ARCHITECTURE.md).
