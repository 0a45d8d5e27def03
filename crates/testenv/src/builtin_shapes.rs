//! Shapes of built-in kinds (placeholder).
