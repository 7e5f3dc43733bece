//! The batch: `epoll_wait(timeout 0)` on the set, then the backlog; each
//! event tells a passive waiter (its select message; a blocking `recv(S, 0)`
//! gets its result instead, read through the hook `ops::recv` installs) or
//! delivers an active socket's data through the hook `ops::tcp::active`
//! installs, and tells an armed writer (send, sendfile or connect) its socket
//! is writable.

use std::os::fd::RawFd;
use std::sync::{Mutex, OnceLock};

use rustler::sys::ErlNifPid;
use rustler::{Atom, Encoder, Env, Term};

use super::arm::{leave_stopped, push};
use super::direct;
use super::set::{self, lock, EFD_KEY};
use crate::atoms;
use crate::core::backlog;
use crate::core::read_edge::Edge;
use crate::socket::{Active, Phase, Socket, State, Waiter};
use crate::sys::driver::{self, Hooks};
use crate::sys::drvsend::{Ext, PortId, Spec};
use crate::sys::env::EnvRef;
use crate::sys::epoll;
use crate::sys::handles::{HandleStore, Saved};
use crate::sys::msg::{self, ReusedEnv};
use crate::sys::resource::{self, Kept, Obj};

/// Most events one drain serves, and most backlog entries: with each
/// delivery bounded by its read bound, one drain's work is bounded, so a
/// flooding connection cannot hold a scheduler (the rest waits for a later
/// drain, after other work).
pub const BATCH: usize = 64;

/// Delivers an active socket's data from a drain (`ops::tcp::active`); the
/// pid is the socket's current read waiter (its pump). Returns the bytes read.
/// `u64` is the socket's slot key.
pub type Deliver =
    for<'o, 'p, 'e, 'm> fn(Obj<'o, Socket>, u64, &'p ErlNifPid, &'m Out<'e>) -> usize;

/// Bytes one drain reads before it leaves the rest of its events to later
/// drains (each delivery reads at most `MAX_DELIVERY_READS` buffers, so a
/// drain ends within one delivery of this).
pub const BATCH_BYTES: usize = 1 << 20;

static DELIVER: OnceLock<Deliver> = OnceLock::new();

/// What a drain's read for an eager waiter (a blocking `recv(S, 0)`, see
/// `socket::Waiter::eager`) came to.
pub enum Taken {
    /// The result (data, the end of the stream or an error) was sent to the
    /// waiter; `usize` bytes were read. Its wait is over.
    Sent(usize),
    /// Nothing to read after all (EAGAIN): the waiter stays armed.
    Empty,
    /// Not read (a streaming socket, EINTR): tell the waiter with its select
    /// message as usual.
    Declined,
}

/// Reads for an eager waiter `pid` from a drain, with the socket's state
/// locked by the drain (`ops::recv` installs it); `isize` is the wait's
/// integer handle.
pub type Take = for<'o, 'p, 'e> fn(Obj<'o, Socket>, &'p ErlNifPid, isize, &Out<'e>) -> Taken;

static TAKE: OnceLock<Take> = OnceLock::new();

/// The driver hooks.
static HOOKS: Hooks = Hooks {
    start: set::on_port_start,
    ready,
    stop: on_port_stop,
    released: direct::released,
};

/// Installs the driver hooks, the active delivery, the eager read and the
/// close of the fds the port held, and makes (or, in an upgrade, finds) the
/// shared state (from the NIF's `load` or `upgrade`). False if the state
/// can't be kept.
pub fn install(deliver: Deliver, take: Take, close: direct::Close) -> bool {
    let _ = DELIVER.set(deliver);
    let _ = TAKE.set(take);
    direct::install(close);
    let ok = set::init();
    driver::set_hooks(&HOOKS);
    ok
}

/// Where a drain's messages are built and how they are sent.
pub struct Out<'a> {
    menv: ReusedEnv,
    caller: Option<Env<'a>>,
    /// The readiness port, when this drain runs in its `ready_input`: the
    /// active messages are then all sent from the port (see `via_port`).
    port: Option<PortId>,
}

/// The external format of each registered socket's resource term, by slot index,
/// with the slot key it was made for (a later socket in the slot has
/// another key and makes its own). Used by this copy's port drains only.
static EXTS: Mutex<Vec<Option<(u64, Ext)>>> = Mutex::new(Vec::new());

impl<'a> Out<'a> {
    /// A drain's messages: with the caller's env (the pump's NIF call), or,
    /// with none, from the readiness port when its `ready_input` runs here.
    fn new(caller: Option<Env<'a>>) -> Option<Out<'a>> {
        let menv = ReusedEnv::take()?;
        let port = caller.is_none().then(driver::ready_port).flatten();
        Some(Out { menv, caller, port })
    }
}

impl Out<'_> {
    /// Builds a message in the drain's env and sends it to `pid`.
    pub fn emit(&self, pid: &ErlNifPid, f: impl for<'b> FnOnce(Env<'b>) -> Term<'b>) -> bool {
        self.menv.emit_from(self.caller, pid, f)
    }

    /// Runs `f` with the readiness port and the external format of the
    /// socket's resource term (made at its first message; the socket term
    /// `{'$nifsock', Resource}` is built around it, so no atom is decoded), when this drain runs in
    /// the port's `ready_input`; None otherwise (send with [`Out::emit`]).
    /// Whether a socket's messages come from the port is the same for all of
    /// one drain's messages, so the messages of one delivery have one sender
    /// and keep their order (ERTS orders signals per sender).
    pub fn via_port<R>(
        &self,
        key: u64,
        obj: Obj<'_, Socket>,
        f: impl for<'e> FnOnce(PortId, &Ext, Env<'e>) -> R,
    ) -> Option<R> {
        let port = self.port?;
        let ix = usize::try_from(key & 0xffff_ffff).ok()?;
        let mut exts = lock(&EXTS);
        if exts.len() <= ix {
            exts.resize_with(ix + 1, || None);
        }
        let slot = exts.get_mut(ix)?;
        if !matches!(slot, Some((k, _)) if *k == key) {
            let ext = self.menv.scratch(|env| Ext::of(obj.make_term(env)))?;
            *slot = Some((key, ext));
        }
        let (_, ext) = slot.as_ref()?;
        Some(self.menv.scratch(|env| f(port, ext, env)))
    }

    /// This drain runs in the readiness port's `ready_input` ([`Out::via_port`]
    /// sends from the port, unless the socket term can't be encoded).
    pub fn on_port(&self) -> bool {
        self.port.is_some()
    }

    /// Sends `pid` a message with no socket term in it: from the readiness
    /// port, as the driver term `spec` builds, when this drain runs in its
    /// `ready_input` (ERTS builds it on the receiver's heap); otherwise, or
    /// when ERTS refuses the spec, as the term `term` builds, with enif_send.
    /// False if `pid` is not alive.
    pub fn send_plain<'s>(
        &self,
        pid: &ErlNifPid,
        spec: impl for<'e> FnOnce(&mut Spec<'s>, Env<'e>),
        term: impl for<'b> FnOnce(Env<'b>) -> Term<'b>,
    ) -> bool {
        if let Some(port) = self.port {
            let sent = self.menv.scratch(|env| {
                let mut sp = Spec::default();
                spec(&mut sp, env);
                sp.send(port, pid)
            });
            if sent {
                return true;
            }
        }
        self.emit(pid, term)
    }

    /// The readiness port, when this drain runs in its `ready_input`.
    fn port(&self) -> Option<PortId> {
        self.port
    }

    /// The drain's env as the caller env of lifecycle calls (monitors, aborts).
    pub fn caller_env(&self) -> EnvRef {
        match self.caller {
            Some(env) => EnvRef::of(env),
            None => self.menv.caller(),
        }
    }
}

/// The pump's NIF call: drains a batch (messages sent with the pump's env as
/// caller env), then re-arms one enif_select on the set's fd for the pump.
pub fn pump_drain<'a>(env: Env<'a>, pump: &ErlNifPid, msg: Term<'a>) -> bool {
    let Some(set) = set::get() else { return false };
    drain_with(Some(env));
    resource::arm_set(env, set.epfd, pump, msg)
}

/// `ready_input` of the set (a batch: at most [`BATCH`] events, then at most
/// [`BATCH`] backlog entries) or of a socket fd the port holds (its input).
fn ready(fd: RawFd) {
    let Some(set) = set::get() else { return };
    if fd == set.epfd {
        drain_with(None);
    } else {
        held_input(fd);
    }
    direct::serve_releases();
}

/// The port stops: the fds it holds are let go, the set's source is off,
/// and the sockets in the set leave it ([`evacuate`]).
fn on_port_stop() {
    direct::release_all();
    set::on_port_stop();
    if let Some(out) = Out::new(None) {
        evacuate(&out);
    }
}

/// The pump source was turned off, in the pump's NIF call (`env`): the
/// sockets in the set leave it ([`evacuate`]).
pub fn pump_stopped(env: Env) {
    if let Some(out) = Out::new(Some(env)) {
        evacuate(&out);
    }
}

/// The set's source is off (its port stopped, or the pump): nothing drains
/// the set any more. Every open socket in it leaves it (its slot freed, its
/// fd taken out), and a wait armed there is told now with the select message
/// the set's next edge would have sent it, as enif_select tells a wait whose
/// socket is ready: its waiter tries again (a reader reads, a writer writes,
/// an active socket's pump delivers), and its next wait, with the set off, is
/// an enif_select, which reports bytes already there. A wait that arms while
/// this runs finds the source off and goes the same way (`arm::arm`). Not
/// while a source is on (the pump's stop when the driver source runs).
fn evacuate(out: &Out) {
    if set::enabled() {
        return;
    }
    for (k, kept) in set::registered() {
        let obj = kept.obj();
        let s = obj.get();
        let mut guard = s.lock();
        let st = &mut *guard;
        // a closing socket leaves the set in its close
        if st.phase != Phase::Open || st.rd.key != Some(k) {
            continue;
        }
        if std::mem::replace(&mut st.rd.w_armed, false) {
            tell(obj, k, st.writers.current.as_mut(), &st.handles, out);
        }
        if st.rd.edge.cancel() {
            tell(obj, k, st.readers.current.as_mut(), &st.handles, out);
        }
        // (`kept` holds the socket: the slot's reference is not the last)
        leave_stopped(st, s.with_fd(|fd| fd).ok());
    }
}

/// Tells the waiter `w` (the current reader or writer of the socket of slot
/// key `key`) its socket is ready ([`select_msg`]), marking it told.
fn tell(obj: Obj<'_, Socket>, key: u64, w: Option<&mut Waiter>, handles: &HandleStore, out: &Out) {
    if let Some(w) = w {
        w.told = true;
        let (pid, handle, internal) = (w.pid, w.handle, w.internal);
        select_msg(obj, key, handles, &pid, handle, internal, out);
    }
}

/// Input on a socket fd the port holds: served as one edge of the set would be.
fn held_input(fd: RawFd) {
    let Some(k) = direct::key_of(fd) else { return };
    let Some(kept) = set::lookup(k) else { return };
    let Some(out) = Out::new(None) else { return };
    fire(&kept, k, HELD, false, &out);
}

/// A held fd's input, as an event of the set (`EPOLLIN` alone: a hang-up is
/// found by the read, the pollset is level-triggered).
const HELD: u32 = libc::EPOLLIN as u32;

fn drain_with(caller: Option<Env>) {
    let Some(set) = set::get() else { return };
    let Some(out) = Out::new(caller) else { return };
    let mut evs = [(0u32, 0u64); BATCH];
    let n = epoll::poll(set.epfd, &mut evs);
    let evs = evs.get(..n).unwrap_or_default();
    // The wake-up is cleared before the backlog is taken (`core::backlog`).
    let woken = evs.iter().any(|&(_, k)| k == EFD_KEY);
    let backlog = set::shared()
        .map(|sh| backlog::take(&sh.backlog, woken, BATCH, &set.wakeup()))
        .unwrap_or_default();
    let sockets = evs.iter().filter(|&&(_, k)| k != EFD_KEY).count() + backlog.len();
    direct::in_batch(sockets, || serve_batch(evs, backlog, &out));
}

/// Serves one drain's events `evs` of the set, then its backlog entries.
fn serve_batch(evs: &[(u32, u64)], backlog: Vec<u64>, out: &Out) {
    let mut read = 0;
    for &(events, k) in evs {
        if k == EFD_KEY {
            continue; // cleared before the backlog was taken
        }
        if let Some(kept) = set::lookup(k) {
            if read < BATCH_BYTES {
                read += fire(&kept, k, events, false, out);
            } else {
                // over the byte bound: keep the edge, serve it from the backlog
                defer(&kept, k, events, out);
            }
        }
    }
    for k in backlog {
        if let Some(kept) = set::lookup(k) {
            if read < BATCH_BYTES {
                read += fire(&kept, k, BACKLOG, true, out);
            } else {
                // still queued: stays for the next drain
                push(k);
            }
        }
    }
}

/// A backlog entry's events: a read edge (the write side has none).
const BACKLOG: u32 = libc::EPOLLIN as u32;

/// An edge the drain has no budget left for: its write part is served (a
/// message, no read); its read part is kept as sticky readiness, or, when a
/// reader is armed, queued in the backlog for the next drain (kicked).
fn defer(kept: &Kept<Socket>, key: u64, events: u32, out: &Out) {
    let obj = kept.obj();
    let s = obj.get();
    let mut st = s.lock();
    if st.phase != Phase::Open {
        return;
    }
    write_edge(obj, key, &mut st, events, out);
    if events & epoll::IN == 0 {
        return;
    }
    if !st.rd.edge.edge_deferred(events & epoll::HUP != 0) {
        return;
    }
    let Some(k) = st.rd.key else { return };
    if !std::mem::replace(&mut st.rd.queued, true) {
        drop(st);
        push(k);
    }
}

/// The write part of an edge (`EPOLLOUT`, error or hang-up, on a socket in
/// the set for writes): the armed writer gets its select message, as
/// enif_select would send it; with nobody armed the edge is kept for the
/// next write arm.
fn write_edge(obj: Obj<'_, Socket>, key: u64, st: &mut State, events: u32, out: &Out) {
    if !st.rd.out || events & epoll::WR == 0 {
        return;
    }
    st.rd.w_hup |= events & epoll::WHUP != 0;
    if !std::mem::replace(&mut st.rd.w_armed, false) {
        st.rd.w_ready = true;
        return;
    }
    tell(obj, key, st.writers.current.as_mut(), &st.handles, out);
}

/// Tells a waiter its socket is ready, as enif_select would: `{'$nifsock',
/// S, select, Handle}`, or, for an `internal` wait (one of nifsock's own
/// blocking calls, whose handle is a node-unique integer that alone names
/// the wait), `{'$nifsock', select, Handle}`: no socket term to build, or,
/// from the port, to decode from its external format (`nifsock_wait:await/4`
/// takes both shapes). From the readiness port when the drain runs in its
/// `ready_input` and the handle is an immediate (internal waits' integers,
/// the pump's atom), so ERTS builds the message on the waiter's heap;
/// otherwise (the pump's drains, a caller's reference) through the drain's env.
fn select_msg(
    obj: Obj<'_, Socket>,
    key: u64,
    handles: &HandleStore,
    pid: &ErlNifPid,
    handle: Saved,
    internal: bool,
    out: &Out,
) {
    if internal {
        if let Some(h) = int_handle(out, handles, handle) {
            out.send_plain(
                pid,
                |spec, _| {
                    spec.atom(atoms::nifsock_tag())
                        .atom(atoms::select())
                        .int(h)
                        .tuple(3);
                },
                |env| (atoms::nifsock_tag(), atoms::select(), h).encode(env),
            );
            return;
        }
    }
    if !internal && out.port().is_some() {
        let sent = out
            .via_port(key, obj, |port, ext, env| {
                let h = handles.immediate(env, handle)?;
                let mut spec = Spec::default();
                spec.atom(atoms::nifsock_tag())
                    .atom(atoms::nifsock_tag())
                    .ext(ext)
                    .tuple(2)
                    .atom(atoms::select());
                if let Ok(a) = Atom::from_term(h) {
                    spec.atom(a);
                } else {
                    spec.int(h.decode::<isize>().ok()?);
                }
                spec.tuple(4);
                spec.send(port, pid).then_some(())
            })
            .flatten();
        if sent.is_some() {
            return;
        }
        // not sent from the port (no immediate handle, or ERTS refused the
        // spec): enif_send it, so no wait goes untold
    }
    out.emit(pid, |env| {
        let h = handles
            .load(env, handle)
            .unwrap_or_else(|| atoms::undefined().encode(env));
        if internal {
            (atoms::nifsock_tag(), atoms::select(), h).encode(env)
        } else {
            (
                atoms::nifsock_tag(),
                sock_term(env, obj),
                atoms::select(),
                h,
            )
                .encode(env)
        }
    });
}

/// One edge (or backlog entry) for the socket of slot key `key`; returns
/// the bytes read.
fn fire(kept: &Kept<Socket>, key: u64, events: u32, from_backlog: bool, out: &Out) -> usize {
    let obj = kept.obj();
    let s = obj.get();
    let mut guard = s.lock();
    let st = &mut *guard;
    if from_backlog {
        st.rd.queued = false;
    }
    if st.phase != Phase::Open {
        return 0;
    }
    write_edge(obj, key, st, events, out);
    if events & epoll::IN == 0 {
        return 0;
    }
    if st.rd.edge.edge(events & epoll::HUP != 0) == Edge::Kept {
        if st.rd.direct && direct::unarmed_too_long(st) {
            // reported again and again with no reader: back to the set
            direct::demote(obj, st, key);
        }
        return 0;
    }
    st.rd.unarmed_since = 0;
    let Some(w) = st.readers.current.as_ref() else {
        return 0;
    };
    let (pid, handle, internal) = (w.pid, w.handle, w.internal);
    if st.tcp.active != Active::Off {
        // The waiter is the socket's pump: deliver here, no pump hop.
        drop(guard);
        // (a delivery that rearms counts as served: `rearm_direct`)
        return DELIVER
            .get()
            .map_or(0, |deliver| deliver(obj, key, &pid, out));
    }
    // Eager: alone (no queue behind it, so no monitor to drop and no one to
    // promote), nothing of a recv(S, N) kept, and alive: the bytes of a
    // reader that died waiting stay in the kernel for the next one (checked
    // last, as it looks the process up).
    let eager = w.eager
        && w.mon.is_none()
        && st.readers.queue.is_empty()
        && st.partial.is_none()
        && msg::is_alive(&pid);
    if eager {
        if let (Some(take), Some(h)) = (TAKE.get(), int_handle(out, &st.handles, handle)) {
            // Under the state lock: a cancel or close waits for the outcome.
            match take(obj, &pid, h, out) {
                Taken::Sent(n) => {
                    st.readers.current = None;
                    st.compact();
                    direct::served(obj, st, key);
                    return n;
                }
                Taken::Empty => {
                    st.rd.edge.rearm();
                    return 0;
                }
                Taken::Declined => {}
            }
        }
    }
    if let Some(w) = st.readers.current.as_mut() {
        w.told = true;
    }
    select_msg(obj, key, &st.handles, &pid, handle, internal, out);
    0
}

/// An internal wait's integer handle. Decoding an immediate allocates nothing
/// in the env, so it is not cleared after (the message built next clears it).
fn int_handle(out: &Out, handles: &HandleStore, saved: Saved) -> Option<isize> {
    out.menv
        .with(|env| handles.immediate(env, saved)?.decode::<isize>().ok())
}

/// The socket term users hold, `{'$nifsock', Resource}` (as
/// `lifecycle::sock_term`, which sits above this layer).
fn sock_term<'a>(env: Env<'a>, obj: Obj<'_, Socket>) -> Term<'a> {
    (atoms::nifsock_tag(), obj.make_term(env)).encode(env)
}
