//! nifsock's pure modules (`native/nifsock/src/core/`), compiled without
//! Rustler so their unit tests run in a plain test binary: the NIF library
//! itself can only be linked against a running VM (its enif_* symbols resolve
//! against beam.smp).

#[path = "../../nifsock/src/core/mod.rs"]
pub mod core;
