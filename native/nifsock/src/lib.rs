//! nifsock: TCP sockets for the BEAM with the fewest system calls, scheduler
//! hops and bytes held per connection. This file is the NIF library's entry:
//! it registers the socket resource type and, when `NIFSOCK_LOG` is set,
//! a tracing subscriber on stderr.

#![deny(unsafe_op_in_unsafe_fn)]

mod atoms;
mod codec;
mod core;
mod error;
mod lifecycle;
mod nif;
mod ops;
mod socket;
mod stats;
mod sys;

use rustler::{Env, Term};

fn load(env: Env, _info: Term) -> bool {
    init_tracing();
    sys::resource::register::<socket::Socket>(env)
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
