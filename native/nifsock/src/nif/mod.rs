//! The `#[rustler::nif]` entry points of `nifsock_nif`: decode, call, encode.

pub mod conn;
pub mod dist;
pub mod io;
pub mod misc;
pub mod opt;
pub mod readiness;
pub mod tcp;
