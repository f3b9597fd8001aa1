//! Segmented append-only log. See ARCHITECTURE.md.
