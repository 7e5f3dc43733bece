//! nifsock_tcp's terms: the arguments its NIFs decode (`args`: active mode,
//! packet mode, send timeout, the layer options, the message tags), the
//! outcomes its operations return and their replies (`reply`), and the
//! packet shapes and active-mode messages (`msg`: built while delivering,
//! from a NIF or a readiness callback, so `ops::tcp::active` calls them).

mod args;
mod msg;
mod reply;

pub use args::*;
pub use msg::*;
pub use reply::*;
