//! nifsock: TCP sockets for the BEAM with the fewest system calls, scheduler
//! hops and bytes held per connection. This file is the NIF library's entry:
//! its `nif_init` hands ERTS the entry `sys::entry` builds (load, upgrade and
//! unload callbacks), which registers (or, in an upgrade, takes over) the
//! resource types and, when `NIFSOCK_LOG` is set, a tracing subscriber on
//! stderr.
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
//! - `readiness/`: the readiness source (application env `readiness`:
//!   `driver`, the default on Linux, or `pump`; off with `select`): nifsock's own epoll set with
//!   generation-tagged slots (`set`), the per-socket read arm (`arm`) that
//!   `lifecycle` calls, and the batch (`drain`), which serves active sockets
//!   through the delivery `ops::tcp::active` hands it at load, and blocking
//!   `recv(S, 0)` waits through the read `ops::recv` hands it (the two calls
//!   upwards, made through function pointers so imports stay one way).
//! - `socket/`: the resource's state (`Socket`, `State`, `Phase`, waiters,
//!   partial reads); `socket/tcp.rs` the gen_tcp layer's (`Active`, `TcpOpts`).
//! - `codec/`: terms <-> Rust: argument decoders (`args`), addresses, option
//!   values (`sockopt`), nifsock_tcp's terms and messages (`tcp`), replies;
//!   with the outcome types `ops` returns and `nif` encodes through it.
//! - `core/`: pure Rust, unit-tested by `native/nifsock_unit`: errno names,
//!   family, fd cell, option table, packet framing, scratch buffer, traffic
//!   counters, unix paths, the readiness protocols (`read_edge`, `backlog`,
//!   `promotion`, `yield_read`), `limits` (the tuning constants).
//! - `sys/`: the only `unsafe`: a generic resource type (`Kind`, `Owned<T>`,
//!   `Obj<'a, T>`), selects, monitors and messages, saved handles, iovecs,
//!   and the system calls (through socket2 and nix where they have them);
//!   `driver` (a minimal ERTS driver in the same object, for the readiness
//!   set's port), `epoll` (the set), `entry` (the ErlNifEntry: load,
//!   upgrade, unload) and `carry` (the state an upgrade hands from the old
//!   library to the new: the counters, through `priv_data`).

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

use sys::entry::Callbacks;

/// The library's first load for the module.
fn load(env: Env, _info: Term) -> bool {
    init_tracing();
    start(env)
}

/// A newer library (this one) replaces a loaded one; sockets made by the old
/// one stay open and are served by this code from now on (see `upgrade`
/// in README.md). `sys::entry` has already adopted the old library's
/// counters; the resource types are taken over here.
fn upgrade(env: Env, _info: Term) -> bool {
    init_tracing();
    start(env)
}

fn start(env: Env) -> bool {
    // The readiness layer serves active sockets through ops/tcp/active and
    // blocking recv(S, 0) calls through ops/recv (it sits below ops, so the
    // delivery and the read are handed to it here); it stays off
    // unless `nifsock_readiness` starts a source.
    readiness::install(
        ops::tcp::active::deliver_from_drain,
        ops::recv::take_from_drain,
        lifecycle::close_released,
    ) && ops::dist::install()
        && stats::init()
        && sys::resource::register_set(env)
        && sys::resource::register::<socket::Socket>(env)
}

/// This copy of the library serves no library record any more (the old code
/// of an upgrade was purged): its closer thread finishes the fds it was
/// given and exits before ERTS unmaps the code, the threads' read buffers of
/// this copy are freed, and a readiness port run by another copy's driver
/// stops forwarding here.
fn retire() {
    sys::driver::retire();
    lifecycle::stop_closer();
    let _ = core::scratch::release_all();
}

/// What an upgrade checks before this build's code may run on socket objects
/// an older build allocated and on the readiness state it made: the layout
/// version (`socket::LAYOUT`), the compiler that laid the types out, and
/// their sizes.
fn fingerprint() -> u64 {
    let parts: [&[u8]; 8] = [
        &socket::LAYOUT.to_le_bytes(),
        env!("NIFSOCK_RUSTC").as_bytes(),
        &std::mem::size_of::<socket::Socket>().to_le_bytes(),
        &std::mem::align_of::<socket::Socket>().to_le_bytes(),
        &sys::resource::alloc_size::<socket::Socket>().to_le_bytes(),
        &std::mem::size_of::<sys::carry::Carry>().to_le_bytes(),
        &readiness::shared_size().to_le_bytes(),
        &sys::distdrv::park_size().to_le_bytes(),
    ];
    // FNV-1a.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

static CALLBACKS: Callbacks = Callbacks {
    load,
    upgrade,
    retire,
    fingerprint,
};

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

/// The symbol ERTS looks up in a NIF library: its entry, built by
/// `sys::entry` (rustler's `init!` has no upgrade or unload callback).
#[no_mangle]
pub extern "C" fn nif_init() -> *const rustler::codegen_runtime::ErlNifEntry {
    sys::entry::entry(c"nifsock_nif", &CALLBACKS)
}
