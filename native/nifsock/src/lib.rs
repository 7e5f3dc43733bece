//! nifsock: TCP sockets for the BEAM with the fewest system calls, scheduler
//! hops and bytes held per connection. This file is the NIF library's entry:
//! it registers the socket resource type and, when `NIFSOCK_LOG` is set,
//! a tracing subscriber on stderr.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod addr;
pub mod atoms;
pub mod closer;
pub mod conn;
pub mod errno;
pub mod error;
pub mod fd_cell;
pub mod gen_tcp_opts;
pub mod lifecycle;
pub mod nif;
pub mod opts;
pub mod packet;
pub mod recv;
pub mod scratch;
pub mod scratch_read;
pub mod send;
pub mod sendfile;
pub mod socket;
pub mod sockopt;
pub mod stats;
pub mod sys;
pub mod tcp;
pub mod tcp_opts;
pub mod tcp_send;
pub mod traffic;
pub mod unix_path;

use rustler::{Env, Term};

fn load(env: Env, _info: Term) -> bool {
    init_tracing();
    sys::resource::register(env, &lifecycle::CALLBACKS)
}

/// A stderr subscriber, only when NIFSOCK_LOG is set (e.g. `debug`,
/// `nifsock=trace`): by default tracing costs one relaxed load per event.
fn init_tracing() {
    let Ok(filter) = std::env::var("NIFSOCK_LOG") else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("debug"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

rustler::init!("nifsock_nif", load = load);
