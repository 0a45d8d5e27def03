//! Server-side apply (placeholder).
