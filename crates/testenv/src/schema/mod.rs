//! Structural schemas (placeholder).
