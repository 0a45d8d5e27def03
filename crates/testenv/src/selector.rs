//! Label and field selectors (placeholder).
