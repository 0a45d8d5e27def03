//! aws-operator (work in progress).
fn main() {}
