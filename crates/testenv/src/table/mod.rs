//! Table output (placeholder).
