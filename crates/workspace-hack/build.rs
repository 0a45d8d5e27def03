// Cargo resolves a package's build-dependencies only when it has a build script; this one exists
// so that the host-side features in Cargo.toml's [build-dependencies] take part in unification.
fn main() {}
