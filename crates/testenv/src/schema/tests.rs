//! Behaviour tests of the public API.
