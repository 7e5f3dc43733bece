//! nifsock: TCP sockets for the BEAM with the fewest system calls, scheduler
//! hops and bytes held per connection. This file is the NIF library's entry:
//! it registers the socket resource type and, when `NIFSOCK_LOG` is set,
//! a tracing subscriber on stderr.
//!
//! # Module map
//!
//! Imports run one way, `nif -> ops -> lifecycle -> readiness -> socket ->
//! sys`; above `sys/` anything may use `core/`, `codec/`, `atoms`, `error`
//! and `stats` (`codec` sits beside `lifecycle`). `core/` and `sys/` import only
//! themselves. `scripts/check-layers` (run by `make test-rust`) fails on an
//! import cycle or an import against this order.
//!
//! - `nif/`: the `#[rustler::nif]` functions: decode, call `ops`, encode.
//! - `ops/`: one file per operation: `conn` (open, adopt, bind, listen,
//!   accept4, connect, shutdown), `recv` + `scratch_read`, `send` (writev),
//!   `sendfile`, `sockopt` (the IP_TOS/SO_PRIORITY rule), `owner`
//!   (controlling_process, info, names); `ops/tcp/` the gen_tcp layer
//!   (`active` delivery, framed `recv`, `accept`, `format`, `opts`, `send`).
//! - `lifecycle/`: `waiters` (arm, queue, promote, done, cancel), `close`
//!   (the close protocol, the linger rule, `close_fd`), `closer` (the closer
//!   thread), `callbacks` (ERTS stop, down = owner death, dtor), `notice`
//!   (select/abort messages), `ctx`.
//! - `readiness/`: the opt-in readiness source (application env `readiness`:
//!   `driver` or `pump`; off by default): nifsock's own epoll set with
//!   generation-tagged slots (`set`), the per-socket read arm (`arm`) that
//!   `lifecycle` calls, and the batch (`drain`), which serves active sockets
//!   through the delivery `ops::tcp::active` hands it at load (the one call
//!   upwards, made through a function pointer so imports stay one way).
//! - `socket/`: the resource's state (`Socket`, `State`, `Phase`, waiters,
//!   partial reads); `socket/tcp.rs` the gen_tcp layer's (`Active`, `TcpOpts`).
//! - `codec/`: terms <-> Rust: argument decoders (`args`), addresses, option
//!   values (`sockopt`), nifsock_tcp's terms and messages (`tcp`), replies;
//!   with the outcome types `ops` returns and `nif` encodes through it.
//! - `core/`: pure Rust, unit-tested by `native/nifsock_unit`: errno names,
//!   family, fd cell, option table, packet framing, scratch buffer, traffic
//!   counters, unix paths, `limits` (the tuning constants).
//! - `sys/`: the only `unsafe`: a generic resource type (`Kind`, `Owned<T>`,
//!   `Obj<'a, T>`), selects, monitors and messages, saved handles, iovecs,
//!   and the system calls (through socket2 and nix where they have them);
//!   `driver` (a minimal ERTS driver in the same object, for the readiness
//!   set's port), `epoll` (the set), `setres` (the resource the pump source's
//!   `enif_select` on the set's fd needs).

#![deny(unsafe_op_in_unsafe_fn)]

mod atoms;
mod codec;
mod core;
mod error;
mod lifecycle;
mod nif;
mod ops;
mod readiness;
mod socket;
mod stats;
mod sys;

use rustler::{Env, Term};

fn load(env: Env, _info: Term) -> bool {
    init_tracing();
    // The readiness layer serves active sockets through ops/tcp/active (it
    // sits below ops, so the delivery is handed to it here); it stays off
    // unless `nifsock_readiness` starts a source.
    readiness::install(ops::tcp::active::deliver_from_drain);
    sys::setres::register(env) && sys::resource::register::<socket::Socket>(env)
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
