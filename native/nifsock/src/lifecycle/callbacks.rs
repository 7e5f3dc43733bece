//! The ERTS callbacks of the socket resource: stop (the fd left the poll
//! set), down (the owner or a queued waiter died), dtor.

use std::ffi::CStr;

use rustler::sys::{ErlNifMonitor, ErlNifPid};

use super::close::{
    close_fd, close_never_blocking, pending_to_closer, take_and_close_nonblocking, How,
};
use super::ctx::Ctx;
use super::notice::undefined_in;
use super::waiters::promote;
use crate::readiness;
use crate::socket::{Phase, Socket, State};
use crate::sys::env::EnvRef;
use crate::sys::msg::{same_pid, Monitor};
use crate::sys::resource::{Kind, Obj, TypeSlot};
use crate::sys::select::{self, Dir};

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

fn on_stop(obj: Obj<'_, Socket>, _env: EnvRef, direct: bool) {
    let s = obj.get();
    if let Some(fd) = take_and_close_nonblocking(s) {
        if direct {
            // We are inside close/1 or the down callback: they take it from here.
            s.lock().pending_close = Some(fd);
        } else {
            close_fd(fd, How::Closer);
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
        close_never_blocking(ctx, obj);
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
                if readiness::cancel(st, dir).is_none() {
                    if let Ok(fd) = obj.get().with_fd(|fd| fd) {
                        select::cancel(ctx.raw(), obj, fd, dir, undefined_in(ctx.raw()));
                    }
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
    if let Some(fd) = take_and_close_nonblocking(s) {
        close_fd(fd, How::Closer);
    }
    pending_to_closer(s);
}
