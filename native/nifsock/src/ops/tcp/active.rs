//! Active mode: delivery from the pump (one `{Data, S, Bytes}` message
//! per packet, tagged with the socket's `tags`, straight from the NIF), turning a socket active (an inline
//! read first) or passive (`pause`, controlling_process's first step).

use super::{close_ended, failed_read, frame, noted, read_into, scratch_outcome, Read};
use crate::codec::args::Sock;
use crate::codec::reply;
use crate::codec::tcp::{self as codec, ActiveArg};
use crate::core::limits::MAX_DELIVERY_READS;
use crate::core::packet::Found;
use crate::core::packet::Packet;
use crate::error::{Error, Result};
use crate::lifecycle;
use crate::ops::scratch_read;
use crate::readiness;
use crate::socket::TcpOpts;
use crate::socket::{Active, Phase, Socket, State, Tags};
use crate::stats;
use crate::sys::drvsend::{DrvBin, Spec};
use crate::sys::msg;
use crate::sys::resource::Obj;
use crate::sys::select::Dir;
use crate::sys::syscall;
use rustler::sys::ErlNifPid;
use rustler::{Atom, Encoder, Env, OwnedBinary, Term};
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a delivery runs.
enum Via<'a, 'm, 'o> {
    /// A NIF call (the pump's, or `set_active`'s), with the socket term.
    Nif(Env<'a>, Term<'a>),
    /// A readiness drain (the driver's `ready_input` or the pump source's
    /// NIF), with the socket's slot key.
    Drain(&'m readiness::Out<'o>, u64),
}

/// An active-mode message.
#[derive(Clone, Copy)]
enum Msg<'b> {
    /// `{Data, S, Packet}`.
    Data(&'b [u8]),
    /// `{Tag, S}`: closed or passive.
    Tagged(Atom),
    /// `{Error, S, Reason}` of an OS error.
    Error(Atom, i32),
}

fn msg_term<'b>(env: Env<'b>, sock: Term<'b>, opts: &TcpOpts, m: Msg) -> Term<'b> {
    match m {
        Msg::Data(bytes) => codec::data_msg(env, sock, bytes, opts),
        Msg::Tagged(tag) => codec::tagged(env, tag, sock),
        Msg::Error(tag, e) => codec::error_msg(env, tag, sock, Error::Os(e)),
    }
}

impl Via<'_, '_, '_> {
    /// Sends the owner the message `f` builds (given an env and the socket
    /// term), with enif_send.
    fn emit(
        &self,
        obj: Obj<'_, Socket>,
        pid: &ErlNifPid,
        f: impl for<'b> FnOnce(Env<'b>, Term<'b>) -> Term<'b>,
    ) {
        match self {
            Via::Nif(env, sock) => {
                msg::send(*env, pid, f(*env, *sock));
            }
            Via::Drain(out, _) => {
                out.emit(pid, |env| {
                    let sock = lifecycle::sock_term(env, obj);
                    f(env, sock)
                });
            }
        }
    }

    /// Sends the owner `m`: from the readiness port when the drain runs in
    /// its `ready_input` (every message of such a delivery: one sender, so
    /// ERTS keeps their order), else with enif_send.
    fn send(&self, obj: Obj<'_, Socket>, pid: &ErlNifPid, opts: &TcpOpts, m: Msg) {
        if let Via::Drain(out, key) = self {
            let sent = out.via_port(*key, obj, |port, ext, env| {
                let mut spec = Spec::default();
                match m {
                    Msg::Data(bytes) => codec::data_spec(&mut spec, ext, bytes, opts),
                    Msg::Tagged(tag) => codec::tagged_spec(&mut spec, tag, ext),
                    Msg::Error(tag, e) => codec::error_spec(&mut spec, env, tag, ext, e),
                }
                spec.send(port, pid)
            });
            if sent.is_some() {
                return;
            }
        }
        self.emit(obj, pid, |env, sock| msg_term(env, sock, opts, m));
    }
}

/// How a delivery ended.
enum End {
    /// Closed meanwhile: nothing to do.
    Nothing,
    /// No longer active (or nothing more may come): stop waiting.
    /// `drained`: its last read emptied the receive queue (a short read, no
    /// hang-up), so no edge needs keeping for the next wait: bytes that come
    /// later make their own.
    Done { drained: bool },
    /// Wait for more; `more`: it stopped at its read bound, data may be left.
    Rearm { more: bool },
    /// The stream ended and `exit_on_close` closes the socket; the messages
    /// that end the stream are sent to `owner` after the close (see [`Ending`]).
    Close {
        ending: Ending,
        owner: ErlNifPid,
        opts: TcpOpts,
    },
}

/// The messages that end an active stream: `{Error, S, Reason}` (when there
/// is one), then `{Closed, S}`. With `exit_on_close` (the default) they are
/// sent once the socket is closed, so an owner that has `{Closed, S}` finds
/// it closed (`send` is `{error, closed}`), as gen_tcp's port is gone by
/// then; with `{exit_on_close, false}` at once, the socket staying open.
/// The tags are the delivery's `opts.tags`.
#[derive(Clone, Copy)]
struct Ending {
    /// The OS error reported before the close, if any.
    error: Option<i32>,
}

impl Ending {
    fn send(self, via: &Via, obj: Obj<'_, Socket>, owner: &ErlNifPid, opts: &TcpOpts) {
        if let Some(e) = self.error {
            via.send(obj, owner, opts, Msg::Error(opts.tags.error, e));
        }
        via.send(obj, owner, opts, Msg::Tagged(opts.tags.closed));
    }
}

/// The delivery loop shared by the pump's NIF and a readiness drain; also
/// returns the bytes it read. `activated`: `setopts` just turned the socket
/// active (not an edge or a select message): when the last read emptied the
/// receive queue and no edge came since, there is nothing to read, and the
/// delivery only frames what it holds and waits (gen_tcp's `{active, N}`
/// renewal reads nothing either; without this, one EAGAIN read per renewal).
fn deliver_in(via: &Via, obj: Obj<'_, Socket>, activated: bool) -> (End, usize) {
    let s = obj.get();
    let (owner, mut opts, mut pending, hup, idle) = {
        let mut st = s.lock();
        if st.phase != Phase::Open {
            return (End::Nothing, 0);
        }
        if st.tcp.active == Active::Off {
            return (End::Done { drained: false }, 0);
        }
        // before `reads_follow`, which uses up a kept edge
        let idle = activated && readiness::nothing_new(&st) && s.take_drained();
        readiness::reads_follow(&mut st);
        // this delivery's reads take what an owner's read after its reply's
        // yield would have (`read_after_yield` then does nothing)
        st.rd.reply_yield = false;
        (
            st.owner,
            st.tcp,
            std::mem::take(&mut st.pending),
            readiness::hup(&st),
            idle,
        )
    };
    let rcvbuf = s.rcvbuf();
    let mut reads = 0;
    let mut read_bytes = 0;
    let mut rearm = false;
    let mut more = false;
    let mut drained = idle;
    let mut ending = None;
    let mut delivered = false;
    while opts.active != Active::Off {
        match frame(&opts, 0, &pending, rcvbuf) {
            Found::Packet { consumed, payload } => {
                let bytes = pending.get(payload).unwrap_or(&[]);
                via.send(obj, &owner, &opts, Msg::Data(bytes));
                delivered = true;
                pending.drain(..consumed.min(pending.len()));
                opts.active = count_down(via, obj, &owner, &opts);
            }
            Found::TooLarge => {
                // As inet: what was read is dropped with the bad packet.
                pending.clear();
                ending = Some(Ending {
                    error: Some(libc::EMSGSIZE),
                });
                opts.active = Active::Off;
            }
            Found::Incomplete if drained || reads >= MAX_DELIVERY_READS => {
                rearm = true;
                more = !drained;
                break;
            }
            Found::Incomplete => {
                reads += 1;
                let r = if pending.is_empty() && raw_binary(&opts) {
                    // Raw binary mode with nothing buffered: a read is a
                    // packet, built from the read itself (no pass through
                    // `pending`).
                    let (r, n) = read_raw(via, obj, s, &owner, &opts, rcvbuf);
                    read_bytes += n;
                    if n > 0 {
                        delivered = true;
                        opts.active = count_down(via, obj, &owner, &opts);
                    }
                    r
                } else {
                    let before = pending.len();
                    let r = read_into(s, &mut pending, rcvbuf);
                    read_bytes += pending.len().saturating_sub(before);
                    r
                };
                let r = match r {
                    // the end after a send met the peer's reset is that reset
                    Read::Eof if s.peer_reset() => Read::Failed(libc::ECONNRESET),
                    r => r,
                };
                match r {
                    // Short read: the queue is empty; deliver what framed, then
                    // arm without the EAGAIN read. (Not after a hang-up seen by
                    // the readiness set: the end of stream is still to read.)
                    Read::Got(true) => drained = !hup,
                    Read::Got(false) => {}
                    Read::WouldBlock => {
                        rearm = true;
                        break;
                    }
                    // closed during this delivery: the close ends the socket
                    // (an `ebadf` here would be a socket error that never was)
                    Read::Gone => break,
                    // A reset reads as a close, as gen_tcp without show_econnreset
                    // (with it: `{nifsock_error, S, econnreset}`, then closed).
                    Read::Failed(e) if e != libc::ECONNRESET || opts.show_econnreset => {
                        ending = Some(Ending { error: Some(e) });
                        opts.active = Active::Off;
                    }
                    Read::Eof | Read::Failed(_) => {
                        ending = Some(Ending { error: None });
                        opts.active = Active::Off;
                    }
                }
            }
        }
    }
    if idle && reads == 0 {
        // nothing was read: the queue is as the last read left it
        s.set_drained(true);
    }
    {
        let mut st = s.lock();
        st.pending = pending;
        if delivered {
            st.rd.delivered = true;
            st.rd.conversing |= st.rd.replied;
        }
        // setopts may have changed the mode meanwhile: only our own count moves.
        if st.tcp.active != Active::Off {
            st.tcp.active = opts.active;
        }
        if st.tcp.active == Active::Off {
            rearm = false;
        }
    }
    let end = match ending {
        Some(ending) if !opts.keep_open => End::Close {
            ending,
            owner,
            opts,
        },
        Some(ending) => {
            ending.send(via, obj, &owner, &opts);
            End::Done { drained: false }
        }
        None if rearm => End::Rearm { more },
        None => End::Done { drained },
    };
    (end, read_bytes)
}

/// The active mode after one packet was delivered (and the passive message,
/// when that was the count's last).
fn count_down(via: &Via, obj: Obj<'_, Socket>, owner: &ErlNifPid, opts: &TcpOpts) -> Active {
    match opts.active {
        Active::Once => Active::Off,
        Active::Count(n) if n <= 1 => {
            via.send(obj, owner, opts, Msg::Tagged(opts.tags.passive));
            Active::Off
        }
        Active::Count(n) => Active::Count(n - 1),
        other => other,
    }
}

/// `{packet, raw}` in binary mode with no `header`: each read is delivered
/// as one binary, as it came.
fn raw_binary(opts: &TcpOpts) -> bool {
    opts.packet == Packet::Raw && !opts.list && opts.header == 0
}

/// One read of up to `rcvbuf` bytes sent to the owner as its data message:
/// while the socket streams (its last reads were large) straight into a
/// binary, otherwise through the scratch buffer, copied once. Returns the
/// read's outcome and the bytes delivered.
fn read_raw(
    via: &Via,
    obj: Obj<'_, Socket>,
    s: &Socket,
    owner: &ErlNifPid,
    opts: &TcpOpts,
    rcvbuf: usize,
) -> (Read, usize) {
    let tag = opts.tags.data;
    let r = s.with_fd(|fd| {
        if s.streaming() {
            if let Via::Drain(out, key) = via {
                if let Some(bin) = out.on_port().then(|| DrvBin::new(rcvbuf)).flatten() {
                    return read_stream_port(via, out, *key, obj, s, fd, owner, opts, rcvbuf, bin);
                }
            }
            let mut owned = OwnedBinary::new(rcvbuf);
            return match syscall::recv(fd, owned.as_mut_slice(), 0) {
                Ok(0) => (Read::Eof, 0),
                Ok(n) => {
                    s.count_read(n);
                    s.note_read(n);
                    stats::DIRECT_READS.incr();
                    via.emit(obj, owner, |env, sock| {
                        (tag, sock, reply::read_binary(env, owned, n)).encode(env)
                    });
                    (Read::Got(n < rcvbuf), n)
                }
                Err(e) => (failed_read(e), 0),
            };
        }
        let r = scratch_read::recv(s, fd, rcvbuf, 0, |got| {
            s.note_read(got.len());
            via.send(obj, owner, opts, Msg::Data(got));
        });
        scratch_outcome(r, rcvbuf)
    });
    let (r, n) = r.unwrap_or((Read::Gone, 0));
    (noted(s, r), n)
}

/// The streaming read of [`read_raw`] in a drain on the readiness port:
/// into a driver binary, sent from the port without a copy.
#[allow(clippy::too_many_arguments)]
fn read_stream_port(
    via: &Via,
    out: &readiness::Out,
    key: u64,
    obj: Obj<'_, Socket>,
    s: &Socket,
    fd: std::os::fd::RawFd,
    owner: &ErlNifPid,
    opts: &TcpOpts,
    rcvbuf: usize,
    mut bin: DrvBin,
) -> (Read, usize) {
    match bin.recv(fd, 0) {
        Ok(0) => (Read::Eof, 0),
        Ok(n) => {
            s.count_read(n);
            s.note_read(n);
            stats::DIRECT_READS.incr();
            bin.shrink(n);
            let sent = out.via_port(key, obj, |port, ext, _env| {
                let mut spec = Spec::default();
                codec::data_bin_spec(&mut spec, opts.tags.data, ext, &bin, n);
                spec.send(port, owner)
            });
            if sent.is_none() {
                // not from the port (the socket term could not be encoded):
                // the copy through enif_send that `send` falls back to
                via.emit(obj, owner, |env, sock| {
                    msg_term(env, sock, opts, Msg::Data(bin.filled()))
                });
            }
            (Read::Got(n < rcvbuf), n)
        }
        Err(e) => (failed_read(e), 0),
    }
}

/// Bytes a NIF may copy per 1 % of a time slice (a NIF call counts as one
/// reduction however much it reads; without this a pump delivering a stream
/// could hold its scheduler for thousands of calls).
const BYTES_PER_SLICE_PERCENT: usize = 16 * 1024;

/// Reads and delivers to the owner what the active mode allows; re-arms the
/// select for `pump` when more may come. Called by the pump on readiness and
/// by `set_active` when a socket turns active.
pub fn deliver<'a>(env: Env<'a>, sock: Sock<'a>, pump: &ErlNifPid) {
    deliver_as(env, sock, pump, false);
}

/// Whether an active socket's owner yields after its reply, then reads the
/// peer's next bytes itself (application env `reply_yield`, default false).
static REPLY_YIELD: AtomicBool = AtomicBool::new(false);

/// Turns the yields after replies on or off (from `nifsock_nif`'s load).
pub fn set_reply_yield(on: bool) {
    REPLY_YIELD.store(on, Ordering::Relaxed);
}

/// After `nifsock_tcp:send/2` sent all of its data on `sock`: whether the
/// caller is to yield, then call [`read_after_yield`].
///
/// The passive `recv(S, 0)`'s yield (`core::yield_read`), for active
/// sockets: a request/response server's owner gets a request as a message,
/// sends the reply, and goes back to its `receive`; on a busy scheduler the
/// peer's next request comes while the other runnable processes run, and a
/// drain then reads it and sends it to the owner. If the owner instead
/// yields after the send and reads then, one read in the owner's own call
/// replaces the drain's read and message from the readiness port: the
/// owner was going to be scheduled for that message anyway. Meanwhile its
/// read wait is disarmed (`readiness::hold_for_reply`), so an edge is kept,
/// not delivered, and the read after the yield uses it up.
///
/// Only for the owner's first send since a delivery to it (a stream of sends
/// yields once per message received), once data came after such a reply
/// before (a connection that closes after its one reply never yields, where
/// the read would find nothing), on an open active socket whose input
/// the readiness set has, armed; and while the socket's reads after yields
/// find data (the score passive reads keep: after two misses in a row it
/// pauses for 32 sends).
///
/// Off by default (`set_reply_yield`): the socket stays in the set, so the
/// edge of the request it reads still reaches a drain (kept there), and the
/// yield and the owner's own message cost about what the drain's delivery
/// from the port saved (doc/readiness-research.md, "How often a busy
/// scheduler polls; replies that yield").
pub fn reply_sent(env: Env, sock: Sock) -> bool {
    if !REPLY_YIELD.load(Ordering::Relaxed) || !readiness::enabled() {
        return false;
    }
    let Some(caller) = msg::self_pid(env) else {
        return false;
    };
    let s = sock.s;
    let mut st = s.lock();
    if !std::mem::replace(&mut st.rd.delivered, false) {
        return false;
    }
    st.rd.replied = true;
    if !st.rd.conversing
        || st.rd.no_reply_yield
        || st.phase != Phase::Open
        || st.tcp.active == Active::Off
        || !msg::same_pid(&st.owner, &caller)
        || !st.rd.edge.armed()
        || !s.yield_first()
    {
        return false;
    }
    if !readiness::hold_for_reply(&mut st) {
        return false;
    }
    stats::REPLY_YIELDS.incr();
    true
}

/// The owner's read after its reply's yield ([`reply_sent`]): delivers what
/// came meanwhile, as the drain would have, from the owner's own call (the
/// messages are the owner's to itself, as `set_active`'s inline delivery),
/// and arms the read wait again. Nothing when a delivery, a mode change or a
/// close came first.
///
/// `on_heap`: the owner's messages are on its heap (`message_queue_data`).
/// Its own messages and the drains' (from the readiness port) then reach its
/// queue in the order they were sent: ERTS links each one into the outer
/// queue under the receiver's queue lock, and the socket's delivery lock
/// orders the sends. An owner with `off_heap` messages may get ERTS's
/// parallel send buffers, one per sender, which it fetches in slot order,
/// not send order: for such an owner the read is not made (the wait is armed
/// again, as [`end_reply_hold`](readiness::end_reply_hold)) and the socket
/// yields no more.
pub fn read_after_yield<'a>(env: Env<'a>, sock: Sock<'a>, on_heap: bool) {
    if !on_heap {
        sock.s.lock().rd.no_reply_yield = true;
        readiness::end_reply_hold(sock.obj);
        return;
    }
    let pump = {
        let mut st = sock.s.lock();
        if !std::mem::replace(&mut st.rd.reply_yield, false) || st.phase != Phase::Open {
            return;
        }
        match st.readers.current.as_ref() {
            Some(w) => w.pid,
            None => return,
        }
    };
    let read = deliver_as(env, sock, &pump, false);
    // scored as a passive read after a yield; such a socket stays in the set
    // (its owner may not send again, and only the set would then see input)
    let _ = sock.s.yielded(read > 0);
}

/// [`deliver`]; `activated`: called by `set_active` (see [`deliver_in`]).
/// Returns the bytes read.
fn deliver_as<'a>(env: Env<'a>, sock: Sock<'a>, pump: &ErlNifPid, activated: bool) -> usize {
    let _serial = sock.s.delivery_lock();
    let via = Via::Nif(env, sock.term);
    let (end, read_bytes) = deliver_in(&via, sock.obj, activated);
    let percent = (read_bytes / BYTES_PER_SLICE_PERCENT).min(100);
    if percent > 0 {
        // true means the slice is used up: the pump is scheduled out once
        // this call returns, which is what is wanted
        let _ = rustler::schedule::consume_timeslice(env, percent as i32);
    }
    match end {
        End::Nothing => {}
        End::Done { drained } => {
            if !drained {
                readiness::keep_ready(sock.obj);
            }
            lifecycle::done(env, sock.obj, Dir::Read, pump)
        }
        End::Close {
            ending,
            owner,
            opts,
        } => {
            lifecycle::done(env, sock.obj, Dir::Read, pump);
            close_ended(env, sock);
            ending.send(&via, sock.obj, &owner, &opts);
        }
        End::Rearm { more } => {
            let handle = codec::active_handle(env);
            match lifecycle::wait(env, sock.obj, sock.term, Dir::Read, pump, handle) {
                // On the readiness set the rest goes to a later drain.
                Ok(()) if more && readiness::enabled() => readiness::defer_armed(sock.obj),
                Ok(()) => {}
                Err(e) => tracing::debug!(op = "select", ?e, "active re-arm failed"),
            }
        }
    }
    read_bytes
}

/// A readiness drain's delivery for an active socket whose read waiter is its
/// pump `pump`: the same as the pump's, without the pump hop (installed as
/// the readiness layer's `Deliver` hook by `load`); returns the bytes it read.
pub fn deliver_from_drain(
    obj: Obj<'_, Socket>,
    key: u64,
    pump: &ErlNifPid,
    out: &readiness::Out,
) -> usize {
    let _serial = obj.get().delivery_lock();
    let ctx = lifecycle::Ctx::Callback(out.caller_env());
    let via = Via::Drain(out, key);
    let (end, read_bytes) = deliver_in(&via, obj, false);
    match end {
        End::Nothing => {}
        End::Done { drained } => {
            if !drained {
                readiness::keep_ready(obj);
            }
            lifecycle::done_ctx(ctx, obj, Dir::Read, pump)
        }
        End::Close {
            ending,
            owner,
            opts,
        } => {
            lifecycle::done_ctx(ctx, obj, Dir::Read, pump);
            lifecycle::close_never_blocking(ctx, obj);
            ending.send(&via, obj, &owner, &opts);
        }
        End::Rearm { more } => readiness::rearm_direct(obj, more),
    }
    read_bytes
}

/// Sets the active mode (`true`, `false`, `once`, or N, additive as inet's;
/// `value` as decoded: a bad value's error comes after a closed socket's)
/// and, when active, starts delivering for `pump`.
pub fn set_active<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    value: Result<ActiveArg>,
    pump: &ErlNifPid,
) -> Result<()> {
    // Wait for a delivery in progress: once this returns, no message of the
    // old mode can still be sent (a passive caller must not see late data).
    let serial = sock.s.delivery_lock();
    let now = {
        let mut st = sock.s.lock();
        if st.phase != Phase::Open {
            return Err(Error::Closed);
        }
        let next = match value? {
            ActiveArg::Flag(true) => Active::Forever,
            ActiveArg::Flag(false) => Active::Off,
            ActiveArg::Once => Active::Once,
            ActiveArg::Add(n) => {
                if !(-32768..=32767).contains(&n) {
                    return Err(Error::Invalid("active"));
                }
                // A listener counts the mode it passes on to accepted sockets.
                let listening = st.listening;
                let slot = if listening {
                    &mut st.tcp.accept_active
                } else {
                    &mut st.tcp.active
                };
                let base = match *slot {
                    Active::Count(c) => c,
                    _ => 0,
                };
                let total = base + n;
                if total > 32767 {
                    return Err(Error::Invalid("active"));
                }
                if total <= 0 {
                    *slot = Active::Off;
                    let passive = st.tcp.tags.passive;
                    drop(st);
                    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
                    msg::send(env, &caller, codec::tagged(env, passive, sock.term));
                    return Ok(());
                }
                Active::Count(total)
            }
        };
        if st.listening {
            // A listener doesn't read: it passes the mode on to accepted sockets.
            st.tcp.accept_active = next;
            return Ok(());
        }
        st.tcp.active = next;
        next
    };
    drop(serial);
    if now != Active::Off {
        deliver_as(env, sock, pump, true);
    } else {
        readiness::end_reply_hold(sock.obj);
    }
    Ok(())
}

/// The socket's tags, read once no delivery is in progress. A delivery that
/// meets the end of the stream closes the socket (`exit_on_close`) and then
/// sends `{Closed, S}` ([`Ending`]): `nifsock_tcp:close/1`, which asks for the
/// tags after its own close to take that message out of the mailbox, must
/// find it there, not get it after it returned (gen_tcp's close, serialised
/// with its port's input, leaves no closed message behind either).
pub fn tags_after_delivery(sock: Sock) -> Tags {
    drop(sock.s.delivery_lock());
    sock.s.lock().tcp.tags
}

/// `nifsock_tcp:controlling_process/2` when the caller's mailbox is empty
/// (no message of the socket to hand over): a passive socket is moved to
/// `new` at once (None: done, or `esrch` for a dead `new`); an active one is
/// paused, as by [`pause`], for the caller to go on as it does after it.
pub fn pause_or_move(env: Env, sock: Sock, new: &ErlNifPid) -> Result<Option<(Active, Tags)>> {
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    let _serial = sock.s.delivery_lock();
    let mut guard = sock.s.lock();
    let st = &mut *guard;
    let slot = owned_mode(st, &caller)?;
    if *slot == Active::Off {
        if msg::same_pid(new, &caller) {
            return Ok(None);
        }
        return crate::ops::owner::transfer(env, sock, st, new).map(|()| None);
    }
    let old = std::mem::replace(slot, Active::Off);
    Ok(Some((old, st.tcp.tags)))
}

/// The first step of `nifsock_tcp:controlling_process/2`, as gen_tcp's: the
/// owner makes the socket passive (waiting out a delivery in progress), so
/// no message arrives while it hands over the ones already in its mailbox,
/// and learns the mode to restore afterwards (a listener's: the mode it
/// passes on) and the tags of the messages to hand over. `not_owner` or
/// `closed` otherwise.
pub fn pause(env: Env, sock: Sock) -> Result<(Active, Tags)> {
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    let _serial = sock.s.delivery_lock();
    let mut guard = sock.s.lock();
    let st = &mut *guard;
    let old = std::mem::replace(owned_mode(st, &caller)?, Active::Off);
    Ok((old, st.tcp.tags))
}

/// The active mode `pause` and `pause_or_move` change (a listener's: the
/// mode it passes on), once the socket is open and `caller` owns it.
fn owned_mode<'s>(st: &'s mut State, caller: &ErlNifPid) -> Result<&'s mut Active> {
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    if !msg::same_pid(&st.owner, caller) {
        return Err(Error::NotOwner);
    }
    Ok(if st.listening {
        &mut st.tcp.accept_active
    } else {
        &mut st.tcp.active
    })
}
