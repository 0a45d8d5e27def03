//! # workspace-hack
//!
//! Holds no code. It makes every command a person types build each third-party crate with one set
//! of features, so that one command never rebuilds what another has built.
//!
//! Cargo unifies a crate's features over the packages of one build. `make test` builds the whole
//! workspace, tests included, so its build of, say, `uuid` carries every feature that testenv
//! asks for; `cargo run -p aws-operator` builds only the operator's own graph, with fewer
//! features, so Cargo compiles `uuid` again, then everything above it up to the AWS SDK: minutes
//! of work for a `--help`. Every package that people run (binaries and examples) depends on this
//! crate, and this crate asks for the features that the whole workspace's build unifies to.
//!
//! `tests/unified.rs` compares, through `cargo tree`, the features of every crate in each runnable
//! package's graph with the workspace's, and names what to add here when they differ.
#![forbid(unsafe_code)]
