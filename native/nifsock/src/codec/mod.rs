//! Erlang terms <-> Rust values: argument decoders, addresses, and the reply
//! encoders. No system calls and no socket state changes here.

pub mod addr;
pub mod args;
pub mod reply;
pub mod tcp;
