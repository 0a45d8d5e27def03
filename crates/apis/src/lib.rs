//! Custom resource types.
