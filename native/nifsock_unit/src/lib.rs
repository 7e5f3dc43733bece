//! nifsock's pure modules, compiled without Rustler so their unit tests run
//! in a plain test binary: the NIF library itself can only be linked against
//! a running VM (its enif_* symbols resolve against beam.smp).

#[path = "../../nifsock/src/errno.rs"]
pub mod errno;
#[path = "../../nifsock/src/fd_cell.rs"]
pub mod fd_cell;
#[path = "../../nifsock/src/gen_tcp_opts.rs"]
pub mod gen_tcp_opts;
#[path = "../../nifsock/src/opts.rs"]
pub mod opts;
#[path = "../../nifsock/src/packet.rs"]
pub mod packet;
#[path = "../../nifsock/src/scratch.rs"]
pub mod scratch;
#[path = "../../nifsock/src/traffic.rs"]
pub mod traffic;
#[path = "../../nifsock/src/unix_path.rs"]
pub mod unix_path;
