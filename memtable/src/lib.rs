//! In-memory columnar series buffers. See ARCHITECTURE.md.
