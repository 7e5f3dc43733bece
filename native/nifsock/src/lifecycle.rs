//! What happens to a socket over its life, driven by NIF calls and by ERTS
//! callbacks: waiting for readiness, handing readiness on to the next waiter,
//! cancelling, closing (inline, or off the normal schedulers when SO_LINGER may
//! block), owner death and destruction.

use std::ffi::CStr;

use rustler::sys::{ErlNifMonitor, ErlNifPid};
use rustler::{Encoder, Env, Term};

use crate::atoms;
use crate::closer;
use crate::error::{Error, Result};
use crate::socket::{Phase, Socket, State, Waiter};
use crate::stats;
use crate::sys::env::EnvRef;
use crate::sys::handles::{HandleStore, Saved};
use crate::sys::msg::{self, same_pid, Monitor, MsgEnv};
use crate::sys::resource::{Kind, Obj, TypeSlot};
use crate::sys::select::{self, Dir, Stop};

/// The socket resource type, registered by `load`.
static SOCKET_TYPE: TypeSlot = TypeSlot::new();

/// The ERTS callbacks of the socket resource.
impl Kind for Socket {
    const NAME: &'static CStr = c"nifsock_socket";
    fn slot() -> &'static TypeSlot {
        &SOCKET_TYPE
    }
    fn dtor(&self) {
        on_dtor(self);
    }
    fn stop(obj: Obj<'_, Socket>, env: EnvRef, direct: bool) {
        on_stop(obj, env, direct);
    }
    fn down(obj: Obj<'_, Socket>, env: EnvRef, pid: ErlNifPid, mon: ErlNifMonitor) {
        on_down(obj, env, pid, mon);
    }
}

/// Where a call comes from: a NIF (a process env) or an ERTS callback.
#[derive(Clone, Copy)]
pub enum Ctx<'a> {
    /// A NIF call.
    Nif(Env<'a>),
    /// A callback, with the env ERTS gave it.
    Callback(EnvRef),
}

impl Ctx<'_> {
    fn raw(self) -> EnvRef {
        match self {
            Ctx::Nif(env) => EnvRef::of(env),
            Ctx::Callback(raw) => raw,
        }
    }
}

/// The socket term users hold: `{'$nifsock', Resource}`.
pub fn sock_term<'a>(env: Env<'a>, obj: Obj<'_, Socket>) -> Term<'a> {
    (atoms::nifsock_tag(), obj.make_term(env)).encode(env)
}

/// What to tell a waiter.
#[derive(Clone, Copy)]
enum Notice {
    /// `{'$nifsock', S, select, Handle}`: try again.
    Select,
    /// `{'$nifsock', S, abort, {Handle, closed}}`.
    AbortClosed,
}

fn build<'a>(env: Env<'a>, obj: Obj<'_, Socket>, handle: Term<'a>, notice: Notice) -> Term<'a> {
    let sock = sock_term(env, obj);
    match notice {
        Notice::Select => (atoms::nifsock_tag(), sock, atoms::select(), handle).encode(env),
        Notice::AbortClosed => (
            atoms::nifsock_tag(),
            sock,
            atoms::abort(),
            (handle, atoms::closed()),
        )
            .encode(env),
    }
}

fn notify(
    ctx: Ctx,
    obj: Obj<'_, Socket>,
    handles: &HandleStore,
    pid: &ErlNifPid,
    handle: Saved,
    notice: Notice,
) {
    match ctx {
        Ctx::Nif(env) => {
            let Some(h) = handles.load(env, handle) else {
                return;
            };
            let m = build(env, obj, h, notice);
            msg::send(env, pid, m);
        }
        Ctx::Callback(raw) => {
            let Some(menv) = MsgEnv::new() else { return };
            let m = menv.with(|env| {
                let h = handles.load(env, handle)?;
                Some(build(env, obj, h, notice).as_c_arg())
            });
            if let Some(m) = m {
                menv.send(raw, pid, m);
            }
        }
    }
}

fn undefined_in(raw: EnvRef) -> rustler::sys::ErlNifTerm {
    msg::with_raw_env(raw, |env| atoms::undefined().encode(env).as_c_arg())
}

/// Registers `caller` as waiting for `dir` readiness. If it is (or becomes) the
/// current waiter its select is armed; otherwise it queues and will be sent a
/// select message when its turn comes. On an error the caller is not left
/// registered (a later close would send it an abort no one waits for).
pub fn wait<'a>(
    env: Env<'a>,
    obj: Obj<'_, Socket>,
    sock: Term<'a>,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term<'a>,
) -> Result<()> {
    let s = obj.get();
    let mut guard = s.lock();
    let st = &mut *guard;
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    let r = register(env, obj, st, dir, caller, handle).and_then(|arm| {
        if arm {
            let fd = s.with_fd(|fd| fd)?;
            let m = (atoms::nifsock_tag(), sock, atoms::select(), handle).encode(env);
            select::arm(env, obj, fd, dir, caller, m).map_err(|_| Error::Os(libc::EINVAL))?;
            st.selected = true;
            stats::SELECTS.incr();
            tracing::trace!(fd, op = "select", ?dir);
        }
        Ok(())
    });
    if r.is_err() {
        forget(Ctx::Nif(env), obj, st, dir, caller);
    }
    r
}

/// Puts `caller` in `dir`'s waiters; true if it is the current one (its
/// select is to be armed).
fn register(
    env: Env,
    obj: Obj<'_, Socket>,
    st: &mut State,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term,
) -> Result<bool> {
    let internal = handle.is_integer();
    let State {
        readers,
        writers,
        handles,
        ..
    } = st;
    let (q, other) = match dir {
        Dir::Read => (readers, writers),
        Dir::Write => (writers, readers),
    };
    // The caller re-arming is the only waiter: its old handle is dead, so the
    // store can start afresh (100,000 nowait polls keep one handle, not all).
    let alone = q.queue.is_empty() && other.current.is_none() && other.queue.is_empty();
    match &mut q.current {
        None => {
            let saved = handles.save(handle).ok_or(Error::Os(libc::ENOMEM))?;
            q.current = Some(Waiter::new(*caller, saved, internal));
            Ok(true)
        }
        Some(w) if same_pid(&w.pid, caller) => {
            if !handles.equals(w.handle, handle) {
                if alone {
                    handles.clear();
                }
                w.handle = handles.save(handle).ok_or(Error::Os(libc::ENOMEM))?;
                w.internal = internal;
            }
            w.told = false;
            Ok(true)
        }
        Some(w) => {
            // Someone else is armed. They must be watched while others queue,
            // or their death would strand the queue.
            if w.mon.is_none() {
                w.mon = msg::monitor(EnvRef::of(env), obj, &w.pid);
            }
            let saved = handles.save(handle).ok_or(Error::Os(libc::ENOMEM))?;
            if w.mon.is_none() {
                // The current waiter is dead: take its place.
                q.current = Some(Waiter::new(*caller, saved, internal));
                return Ok(true);
            }
            match q.queue.iter_mut().find(|w| same_pid(&w.pid, caller)) {
                Some(queued) => {
                    queued.handle = saved;
                    queued.internal = internal;
                }
                None => q.queue.push_back(Waiter::new(*caller, saved, internal)),
            }
            Ok(false)
        }
    }
}

/// Removes `caller` from `dir`'s waiters (a failed `wait`), handing the turn on.
fn forget(ctx: Ctx, obj: Obj<'_, Socket>, st: &mut State, dir: Dir, caller: &ErlNifPid) {
    let q = st.waiters(dir);
    if q.current.as_ref().is_some_and(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.current.take() {
            unwatch(ctx, obj, &w);
        }
        promote(ctx, obj, st, dir);
    } else if let Some(pos) = q.queue.iter().position(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.queue.remove(pos) {
            unwatch(ctx, obj, &w);
        }
    }
}

/// Hands the turn to the next live queued waiter with a select message.
fn promote(ctx: Ctx, obj: Obj<'_, Socket>, st: &mut State, dir: Dir) {
    let State {
        readers,
        writers,
        handles,
        ..
    } = st;
    let q = match dir {
        Dir::Read => readers,
        Dir::Write => writers,
    };
    while let Some(mut next) = q.queue.pop_front() {
        if !q.queue.is_empty() && next.mon.is_none() {
            next.mon = msg::monitor(ctx.raw(), obj, &next.pid);
            if next.mon.is_none() {
                continue; // died while queued
            }
        }
        notify(ctx, obj, handles, &next.pid, next.handle, Notice::Select);
        next.told = true;
        q.current = Some(next);
        return;
    }
}

fn unwatch(ctx: Ctx, obj: Obj<'_, Socket>, w: &Waiter) {
    if let Some(m) = &w.mon {
        msg::demonitor(ctx.raw(), obj, m);
    }
}

/// `caller` completed an operation in `dir`: it no longer waits.
pub fn done(env: Env, obj: Obj<'_, Socket>, dir: Dir, caller: &ErlNifPid) {
    let s = obj.get();
    let mut st = s.lock();
    let q = st.waiters(dir);
    if q.current.is_none() && q.queue.is_empty() {
        return;
    }
    let ctx = Ctx::Nif(env);
    if q.current.as_ref().is_some_and(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.current.take() {
            unwatch(ctx, obj, &w);
        }
        promote(ctx, obj, &mut st, dir);
    } else if let Some(pos) = q.queue.iter().position(|w| same_pid(&w.pid, caller)) {
        if let Some(w) = q.queue.remove(pos) {
            unwatch(ctx, obj, &w);
        }
    }
    st.compact();
}

/// Result of `cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// Removed before any message was sent.
    Ok,
    /// A select message was already sent: the caller must flush it.
    SelectSent,
    /// No such wait.
    NotFound,
}

/// Cancels `caller`'s wait in `dir` with `handle`.
pub fn cancel(
    env: Env,
    obj: Obj<'_, Socket>,
    dir: Dir,
    caller: &ErlNifPid,
    handle: Term,
) -> Result<Cancelled> {
    let s = obj.get();
    let mut guard = s.lock();
    let st = &mut *guard;
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    let ctx = Ctx::Nif(env);
    let State {
        readers,
        writers,
        handles,
        ..
    } = st;
    let q = match dir {
        Dir::Read => readers,
        Dir::Write => writers,
    };
    let matches = |w: &Waiter| same_pid(&w.pid, caller) && handles.equals(w.handle, handle);
    let outcome = if q.current.as_ref().is_some_and(matches) {
        if let Some(w) = q.current.take() {
            unwatch(ctx, obj, &w);
        }
        let fd = s.with_fd(|fd| fd)?;
        let undefined = atoms::undefined().encode(env).as_c_arg();
        let was_armed = select::cancel(EnvRef::of(env), obj, fd, dir, undefined);
        promote(ctx, obj, st, dir);
        if was_armed {
            Cancelled::Ok
        } else {
            Cancelled::SelectSent
        }
    } else if let Some(pos) = q.queue.iter().position(matches) {
        if let Some(w) = q.queue.remove(pos) {
            unwatch(ctx, obj, &w);
        }
        Cancelled::Ok
    } else {
        Cancelled::NotFound
    };
    st.compact();
    Ok(outcome)
}

/// How a close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The fd is closed, or will be by a scheduled stop callback.
    Done,
    /// close(2) may block (lingering): the fd waits in `pending_close` for the
    /// caller to close it off the normal schedulers.
    Lingering,
}

/// Closes the socket: every waiter gets an abort message, the fd leaves the
/// poll set (STOP) and is closed exactly once.
pub fn close(ctx: Ctx, obj: Obj<'_, Socket>) -> Result<Closed> {
    let s = obj.get();
    let selected = {
        let mut st = s.lock();
        if st.phase != Phase::Open {
            return Err(Error::Closed);
        }
        st.phase = Phase::Closing;
        if let Some(m) = st.owner_mon.take() {
            msg::demonitor(ctx.raw(), obj, &m);
        }
        let State {
            readers,
            writers,
            handles,
            ..
        } = &mut *st;
        for (dir, q) in [(Dir::Read, readers), (Dir::Write, writers)] {
            if let Some(w) = q.current.take() {
                unwatch(ctx, obj, &w);
                if !told_to_retry(ctx, obj, s, dir, &w) {
                    notify(ctx, obj, handles, &w.pid, w.handle, Notice::AbortClosed);
                }
            }
            for w in q.queue.drain(..) {
                unwatch(ctx, obj, &w);
                notify(ctx, obj, handles, &w.pid, w.handle, Notice::AbortClosed);
            }
        }
        st.handles.clear();
        st.send_rest = None;
        st.selected
    };
    let mut stop_scheduled = false;
    if selected {
        let fd = s.with_fd(|fd| fd)?;
        match select::stop(ctx.raw(), obj, fd, undefined_in(ctx.raw())) {
            Stop::Called => {}
            Stop::Scheduled => stop_scheduled = true,
            Stop::Failed(e) => {
                tracing::debug!(fd, op = "close", e, "stop refused; closing directly");
                if let Some(fd) = s.take_and_close_nonblocking() {
                    s.lock().pending_close = Some(fd);
                }
            }
        }
    } else if let Some(fd) = s.take_and_close_nonblocking() {
        s.lock().pending_close = Some(fd);
    }
    let mut st = s.lock();
    if !stop_scheduled {
        st.phase = Phase::Closed;
    }
    Ok(if st.pending_close.is_some() {
        Closed::Lingering
    } else {
        Closed::Done
    })
}

/// Whether the current waiter `w` of `dir` already has (or is being sent) its
/// select message, when it belongs to one of nifsock's blocking calls: that
/// call will try again, meet the closed socket and return, so an abort would
/// stay behind in its mailbox. Its select is cancelled here when still armed
/// (then it is not told, and gets the abort). Users' nowait waits get their
/// abort regardless, as socket sends it, and pay no cancel.
fn told_to_retry(ctx: Ctx, obj: Obj<'_, Socket>, s: &Socket, dir: Dir, w: &Waiter) -> bool {
    if !w.internal {
        return false;
    }
    if w.told {
        return true;
    }
    match s.with_fd(|fd| fd) {
        Ok(fd) => !select::cancel(ctx.raw(), obj, fd, dir, undefined_in(ctx.raw())),
        Err(_) => false,
    }
}

/// The blocking half of a lingering close; runs on a dirty I/O scheduler.
pub fn finish_lingering_close(obj: Obj<'_, Socket>) {
    let fd = obj.get().lock().pending_close.take();
    if let Some(fd) = fd {
        tracing::debug!(fd, op = "close", "lingering close on a dirty scheduler");
        crate::sys::syscall::close(fd);
        stats::CLOSES_DIRTY.incr();
        stats::FDS.down();
    }
}

fn on_stop(obj: Obj<'_, Socket>, _env: EnvRef, direct: bool) {
    let s = obj.get();
    if let Some(fd) = s.take_and_close_nonblocking() {
        if direct {
            // We are inside close/1 or the down callback: they take it from here.
            s.lock().pending_close = Some(fd);
        } else {
            closer::close_later(fd);
        }
    }
    s.lock().phase = Phase::Closed;
}

fn on_down(obj: Obj<'_, Socket>, env: EnvRef, pid: ErlNifPid, mon: ErlNifMonitor) {
    let s = obj.get();
    let mon = Monitor::from_raw(mon);
    let ctx = Ctx::Callback(env);
    let owner_died = {
        let mut st = s.lock();
        if st.owner_mon == Some(mon) {
            st.owner_mon = None;
            true
        } else {
            waiter_died(ctx, obj, &mut st, &pid, &mon);
            false
        }
    };
    if owner_died {
        tracing::debug!(op = "close", "owner died");
        if let Ok(Closed::Lingering) = close(ctx, obj) {
            if let Some(fd) = s.lock().pending_close.take() {
                closer::close_later(fd);
            }
        }
    }
}

fn waiter_died(ctx: Ctx, obj: Obj<'_, Socket>, st: &mut State, pid: &ErlNifPid, mon: &Monitor) {
    for dir in [Dir::Read, Dir::Write] {
        let q = st.waiters(dir);
        if q.current
            .as_ref()
            .is_some_and(|w| w.mon.as_ref() == Some(mon) && same_pid(&w.pid, pid))
        {
            q.current = None;
            if st.phase == Phase::Open {
                if let Ok(fd) = obj.get().with_fd(|fd| fd) {
                    select::cancel(ctx.raw(), obj, fd, dir, undefined_in(ctx.raw()));
                }
                promote(ctx, obj, st, dir);
            }
        } else if let Some(pos) = q.queue.iter().position(|w| w.mon.as_ref() == Some(mon)) {
            q.queue.remove(pos);
        }
    }
    st.compact();
}

fn on_dtor(s: &Socket) {
    if let Some(fd) = s.fd.take() {
        if s.close_may_block() {
            closer::close_later(fd);
        } else {
            crate::sys::syscall::close(fd);
            stats::CLOSES_INLINE.incr();
            stats::FDS.down();
        }
    }
    if let Some(fd) = s.lock().pending_close.take() {
        closer::close_later(fd);
    }
}
