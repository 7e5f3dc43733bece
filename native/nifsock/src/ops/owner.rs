//! Ownership and introspection: controlling_process (the owner monitor moves
//! with it), per-socket info, local and peer names.

use rustler::sys::ErlNifPid;
use rustler::Env;
use socket2::SockAddr;

use crate::codec::args::Sock;
use crate::core::family::Family;
use crate::core::traffic::Traffic;
use crate::error::{Error, Result};
use crate::socket::{Active, Phase, State, Waiters};
use crate::sys::env::EnvRef;
use crate::sys::msg;
use crate::sys::syscall;

/// Moves ownership (and the owner monitor) to `new`. Only the owner may.
pub fn controlling_process(env: Env, sock: Sock, new: &ErlNifPid) -> Result<()> {
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    // Wait for an active delivery in progress: after this returns, active
    // messages go to the new owner only.
    let _serial = sock.s.delivery_lock();
    let mut st = sock.s.lock();
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    if !msg::same_pid(&st.owner, &caller) {
        return Err(Error::NotOwner);
    }
    if msg::same_pid(new, &caller) {
        return Ok(());
    }
    transfer(env, sock, &mut st, new)
}

/// Makes `new` the owner of the socket whose state `st` is (locked by the
/// caller, the owner, who holds the delivery lock too): the owner monitor
/// moves to it. `esrch` for a dead `new` (then nothing changes).
pub fn transfer(env: Env, sock: Sock, st: &mut State, new: &ErlNifPid) -> Result<()> {
    let Some(mon) = msg::monitor(EnvRef::of(env), sock.obj, new) else {
        return Err(Error::Os(libc::ESRCH));
    };
    if let Some(old) = st.owner_mon.replace(mon) {
        msg::demonitor(EnvRef::of(env), sock.obj, &old);
    }
    st.owner = *new;
    Ok(())
}

/// What `nifsock:info/1` reports of one socket.
pub struct Info<'a> {
    /// Open, closing or closed.
    pub phase: Phase,
    /// listen/2 succeeded.
    pub listening: bool,
    /// A select was armed at least once (the fd is in the poll set).
    pub selected: bool,
    /// The address family.
    pub family: Family,
    /// The owner.
    pub owner: ErlNifPid,
    /// Processes waiting to read (0 on a listener).
    pub readers: usize,
    /// Processes waiting to write.
    pub writers: usize,
    /// Processes waiting to accept (listeners only).
    pub acceptors: usize,
    /// close(2) may block (SO_LINGER on, timeout > 0).
    pub close_may_block: bool,
    /// The per-socket counters.
    pub traffic: &'a Traffic,
    /// Where its reads and writes wait (readiness set, port), by name.
    pub readiness: [(&'static str, bool); 11],
    /// `nifsock_tcp`'s active mode: `false`, `true`, `once` or the count left.
    pub active: Active,
    /// Bytes read and held for `nifsock_tcp`'s framing.
    pub pending: usize,
}

/// A snapshot of the socket's state, under its lock.
pub fn info<'a>(sock: Sock<'a>) -> Info<'a> {
    let st = sock.s.lock();
    let count = |w: &Waiters| usize::from(w.current.is_some()) + w.queue.len();
    let (readers, acceptors) = if st.listening {
        (0, count(&st.readers))
    } else {
        (count(&st.readers), 0)
    };
    Info {
        phase: st.phase,
        listening: st.listening,
        selected: st.selected,
        family: sock.s.family,
        owner: st.owner,
        readers,
        writers: count(&st.writers),
        acceptors,
        close_may_block: sock.s.close_may_block(),
        traffic: sock.s.traffic(),
        readiness: [
            ("in_set", st.rd.key.is_some()),
            ("read_armed", st.rd.edge.armed()),
            ("read_kept", st.rd.edge.kept()),
            ("hup", st.rd.edge.hup()),
            (
                "reader_told",
                st.readers.current.as_ref().is_some_and(|w| w.told),
            ),
            ("port_held", st.rd.direct),
            ("queued", st.rd.queued),
            ("write_in_set", st.rd.out),
            ("write_armed", st.rd.w_armed),
            ("write_kept", st.rd.w_ready),
            ("write_hup", st.rd.w_hup),
        ],
        active: st.tcp.active,
        pending: st.pending.len(),
    }
}

/// getsockname(2).
pub fn sockname(sock: Sock) -> Result<SockAddr> {
    sock.s.with_fd(syscall::sockname)?.map_err(Error::Os)
}

/// getpeername(2).
pub fn peername(sock: Sock) -> Result<SockAddr> {
    sock.s.with_fd(syscall::peername)?.map_err(Error::Os)
}
