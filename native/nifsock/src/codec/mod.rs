//! Erlang terms <-> Rust values: argument decoders (`args`), addresses
//! (`addr`), option values (`sockopt`), nifsock_tcp's terms (`tcp`), and the
//! reply encoders (`reply`). The types that cross this boundary (decoded
//! arguments, the outcomes operations return) are declared here beside their
//! codecs: `codec` sits below `ops`, which returns them and `nif` encodes.
//! No system calls and no socket state changes here.

pub mod addr;
pub mod args;
pub mod reply;
pub mod sockopt;
pub mod tcp;
