//! The operations, one file each: open/adopt/bind/listen/connect/accept
//! (`conn`), recv and its scratch reads, send (writev), sendfile, socket
//! options (the IP_TOS/SO_PRIORITY rule), ownership and info (`owner`), the dist port carrier (`dist`); `tcp/` the gen_tcp layer: active
//! delivery, framed recv, accept with inherited options, its options and
//! its send queue.

pub mod conn;
pub mod dist;
pub mod owner;
pub mod recv;
pub mod scratch_read;
pub mod send;
pub mod sendfile;
pub mod sockopt;
pub mod tcp;
