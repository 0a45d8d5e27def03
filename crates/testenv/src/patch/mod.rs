//! Patch types (placeholder).
