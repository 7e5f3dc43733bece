//! Pure Rust, no Rustler: the readiness drain's backlog and its wake-up,
//! the distribution's framing, errno names, the fd cell, the option table,
//! packet framing, when a hot socket's input moves to the readiness port, the
//! read-edge protocol of the readiness set, the scratch buffer, traffic
//! counters, unix paths, when a blocking recv yields before it reads, and the
//! tuning constants. `native/nifsock_unit` compiles this folder alone to run
//! its unit tests, so nothing here names `crate::`.

pub mod backlog;
pub mod distframe;
pub mod errno;
pub mod family;
pub mod fd_cell;
pub mod gen_tcp_opts;
pub mod limits;
pub mod opts;
pub mod packet;
pub mod promotion;
pub mod read_edge;
pub mod scratch;
pub mod traffic;
pub mod unix_path;
pub mod yield_read;
