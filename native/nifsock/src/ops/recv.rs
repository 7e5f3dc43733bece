//! recv: read into the per-thread scratch buffer and copy exactly the bytes
//! read into a right-sized binary; an exact-length read that doesn't complete
//! at once continues straight into its result binary, allocated once.
//! Returns a `Recv` outcome; `codec::reply::recv` makes the reply term.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use rustler::sys::ErlNifPid;
use rustler::{Atom, Binary, Encoder, Env, NewBinary, OwnedBinary, Term};

use crate::atoms;
use crate::codec::args::{Mode, Sock};
use crate::codec::reply::{self, Recv};
use crate::core::errno::is_would_block;
use crate::core::limits::{MAX_EXACT_LEN, MAX_READS_PER_CALL, SCRATCH_CAP, STREAM_THRESHOLD};
use crate::error::Error;
use crate::lifecycle;
use crate::ops::scratch_read::{self, ScratchRead};
use crate::readiness::{self, Taken};
use crate::socket::{Partial, Phase, Socket};
use crate::stats;
use crate::sys::msg;
use crate::sys::resource::Obj;
use crate::sys::select::Dir;
use crate::sys::syscall;

enum Read<'a> {
    Complete(Binary<'a>, usize),
    Progress,
    WouldBlock,
    Eof,
    Failed(i32),
}

/// A stream that keeps filling large reads is read straight into a fresh
/// binary, shrunk to what arrived: one copy (the kernel's) instead of two.
/// Other reads go through the scratch buffer, so nothing is allocated for an
/// EAGAIN and small results get right-sized binaries.
fn read_direct<'a>(
    env: Env<'a>,
    s: &Socket,
    fd: RawFd,
    want: usize,
    flags: i32,
    drained: &mut bool,
) -> Read<'a> {
    let mut owned = OwnedBinary::new(want);
    match syscall::recv(fd, owned.as_mut_slice(), flags) {
        Ok(0) => Read::Eof,
        Ok(n) => {
            s.count_read(n);
            stats::DIRECT_READS.incr();
            *drained = is_drained(n, want);
            Read::Complete(reply::read_binary(env, owned, n), n)
        }
        Err(e) if is_would_block(e) => Read::WouldBlock,
        Err(libc::EINTR) => Read::Progress,
        Err(e) => Read::Failed(e),
    }
}

/// A short read means the receive queue was empty a moment ago: the same call
/// can arm its select without an EAGAIN read (the select fires at once if
/// bytes came in between). Only within one call: by the next call data may
/// have arrived, and a nowait recv must then return it, not a select. Not for
/// large reads: a stream's sender is still writing, and reading again at once
/// beats a trip through the poll thread (measured: bulk throughput halved
/// when streams skipped the read).
fn is_drained(n: usize, asked: usize) -> bool {
    n < asked && n < STREAM_THRESHOLD
}

enum Fitted<'a> {
    /// The partial bytes already answer the call (and what is left over).
    Ready(Binary<'a>, Option<Partial>),
    /// Keep reading into this buffer, of exactly the call's length.
    Continue(Partial),
}

/// Fits a partial read to a recv of `len` bytes (0: whatever is there).
fn fit_partial<'a>(env: Env<'a>, mut p: Partial, len: usize) -> Fitted<'a> {
    let filled = p.filled;
    if len == 0 || filled >= len {
        let take = if len == 0 { filled } else { len };
        let mut bin = NewBinary::new(env, take);
        bin.as_mut_slice()
            .copy_from_slice(p.buf.as_slice().get(..take).unwrap_or(&[]));
        let rest = if filled > take {
            p.buf.as_mut_slice().copy_within(take..filled, 0);
            p.filled = filled - take;
            Some(p)
        } else {
            None
        };
        return Fitted::Ready(bin.into(), rest);
    }
    if p.buf.len() != len && !p.buf.realloc(len) {
        let mut fresh = OwnedBinary::new(len);
        if let (Some(dst), Some(src)) = (
            fresh.as_mut_slice().get_mut(..filled),
            p.buf.as_slice().get(..filled),
        ) {
            dst.copy_from_slice(src);
        }
        p.buf = fresh;
    }
    Fitted::Continue(p)
}

#[allow(clippy::too_many_arguments)]
fn read_once<'a>(
    env: Env<'a>,
    s: &Socket,
    fd: RawFd,
    len: usize,
    flags: i32,
    rcvbuf: usize,
    streaming: bool,
    partial: &mut Option<Partial>,
    drained: &mut bool,
) -> Read<'a> {
    if let Some(p) = partial {
        let Some(dst) = p.buf.as_mut_slice().get_mut(p.filled..) else {
            return Read::Failed(libc::EINVAL);
        };
        let dst_len = dst.len();
        return match syscall::recv(fd, dst, flags) {
            Ok(0) => Read::Eof,
            Ok(n) => {
                s.count_read(n);
                *drained = is_drained(n, dst_len);
                p.filled += n;
                if p.filled >= len {
                    match partial.take() {
                        Some(p) => Read::Complete(Binary::from_owned(p.buf, env), len),
                        None => Read::Failed(libc::EINVAL),
                    }
                } else {
                    Read::Progress
                }
            }
            Err(e) if is_would_block(e) => Read::WouldBlock,
            Err(libc::EINTR) => Read::Progress,
            Err(e) => Read::Failed(e),
        };
    }
    let want = if len == 0 {
        rcvbuf
    } else {
        len.min(SCRATCH_CAP)
    };
    if len == 0 && streaming && flags & libc::MSG_PEEK == 0 {
        return read_direct(env, s, fd, want, flags, drained);
    }
    let peek = flags & libc::MSG_PEEK != 0;
    match scratch_read::recv(s, fd, want, flags, |got| {
        if len == 0 || got.len() >= len || peek {
            let mut bin = NewBinary::new(env, got.len());
            bin.as_mut_slice().copy_from_slice(got);
            Ok(bin.into())
        } else {
            let mut owned = OwnedBinary::new(len);
            stats::EXACT_ALLOCS.incr();
            if let Some(dst) = owned.as_mut_slice().get_mut(..got.len()) {
                dst.copy_from_slice(got);
            }
            Err(Partial {
                buf: owned,
                filled: got.len(),
            })
        }
    }) {
        ScratchRead::Bytes(Ok(t), n) => {
            *drained = is_drained(n, want);
            Read::Complete(t, n)
        }
        ScratchRead::Bytes(Err(p), n) => {
            *drained = is_drained(n, want);
            *partial = Some(p);
            Read::Progress
        }
        ScratchRead::WouldBlock => Read::WouldBlock,
        ScratchRead::Eof => Read::Eof,
        ScratchRead::Interrupted => Read::Progress,
        ScratchRead::Failed(e) => Read::Failed(e),
    }
}

/// The bytes of a partial read as a binary.
pub fn partial_bin<'a>(env: Env<'a>, p: Option<Partial>) -> Option<Binary<'a>> {
    let p = p.filter(|p| p.filled > 0)?;
    let filled = p.filled;
    let bin = Binary::from_owned(p.buf, env);
    Some(bin.make_subbinary(0, filled).unwrap_or(bin))
}

/// recv(Sock, Len, Flags, Handle, Mode). See nifsock.erl for the protocol.
pub fn recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: usize,
    flags: i32,
    handle: Term<'a>,
    mode: Mode,
) -> Recv<'a> {
    let s = sock.s;
    let Some(caller) = msg::self_pid(env) else {
        return Recv::Failed(Error::BadArg, None);
    };
    let peek = flags & libc::MSG_PEEK != 0;
    if len > MAX_EXACT_LEN {
        return Recv::Failed(Error::Os(libc::ENOMEM), None);
    }
    let mut partial = if peek { None } else { s.lock().partial.take() };
    // A partial read made for another length (a timed-out recv(S, N), or
    // another process's): fit it to this call, never exposing bytes not received.
    if let Some(p) = partial.take().filter(|p| p.filled > 0) {
        match fit_partial(env, p, len) {
            Fitted::Ready(b, rest) => {
                s.lock().partial = rest;
                lifecycle::done(env, sock.obj, Dir::Read, &caller);
                return Recv::Data(b);
            }
            Fitted::Continue(p) => partial = Some(p),
        }
    }
    let mut reads = 0;
    // Set by a short read (see `is_drained`).
    let mut drained = false;
    // The previous call's last read was short. A blocking call may then arm
    // its select without an EAGAIN read: its wait is internal, and the select
    // fires at once if bytes came in since, so no caller can tell. A nowait
    // or timeout-0 call must read: data that arrived since is its result,
    // never a select.
    // After the `yield` reply: this call's first read scores the yield.
    let mut after_yield = mode == Mode::Yielded;
    if mode == Mode::Wait && !peek && s.take_drained() {
        if len == 0
            && flags == 0
            && partial.is_none()
            && RECV_YIELD.load(Ordering::Relaxed)
            && s.yield_first()
        {
            // read after the other runnable processes ran (core::yield_read)
            stats::READ_YIELDS.incr();
            return Recv::Yield;
        }
        stats::READS_SKIPPED.incr();
    } else {
        s.set_drained(false);
        loop {
            let outcome = match s.with_fd(|fd| {
                read_once(
                    env,
                    s,
                    fd,
                    len,
                    flags,
                    s.rcvbuf(),
                    s.streaming(),
                    &mut partial,
                    &mut drained,
                )
            }) {
                Ok(r) => r,
                Err(e) => return Recv::Failed(e, partial_bin(env, partial)),
            };
            if std::mem::replace(&mut after_yield, false)
                && s.yielded(!matches!(outcome, Read::WouldBlock))
            {
                leave_set(s);
            }
            match outcome {
                Read::Complete(b, n) => {
                    if len == 0 {
                        s.note_read(n);
                    }
                    s.set_drained(drained && !peek);
                    lifecycle::done(env, sock.obj, Dir::Read, &caller);
                    return Recv::Data(b);
                }
                Read::Progress if drained && mode != Mode::Zero => {
                    // The queue was just emptied: wait without an EAGAIN read.
                    stats::READS_SKIPPED.incr();
                    break;
                }
                Read::Progress => {
                    reads += 1;
                    if reads >= MAX_READS_PER_CALL {
                        s.lock().partial = partial;
                        return Recv::More;
                    }
                }
                Read::WouldBlock => {
                    stats::READS_EAGAIN.incr();
                    break;
                }
                Read::Eof => {
                    lifecycle::done(env, sock.obj, Dir::Read, &caller);
                    return Recv::Failed(Error::Closed, partial_bin(env, partial));
                }
                Read::Failed(e) => {
                    lifecycle::done(env, sock.obj, Dir::Read, &caller);
                    return Recv::Failed(Error::Os(e), partial_bin(env, partial));
                }
            }
        }
    }
    match mode {
        Mode::Zero => {
            lifecycle::done(env, sock.obj, Dir::Read, &caller);
            // As socket: timeout 0 returns what is there, even short of the
            // length asked for.
            match partial_bin(env, partial) {
                Some(b) => Recv::Data(b),
                None => Recv::Failed(Error::Timeout, None),
            }
        }
        Mode::Nowait => {
            if let Err(e) = lifecycle::wait(env, sock.obj, sock.term, Dir::Read, &caller, handle) {
                return Recv::Failed(e, partial_bin(env, partial));
            }
            Recv::Select(partial_bin(env, partial))
        }
        Mode::Wait | Mode::Yielded => {
            let waited = if len == 0 && flags == 0 {
                lifecycle::wait_eager(env, sock.obj, sock.term, &caller, handle)
            } else {
                lifecycle::wait(env, sock.obj, sock.term, Dir::Read, &caller, handle)
            };
            if let Err(e) = waited {
                return Recv::Failed(e, partial_bin(env, partial));
            }
            s.lock().partial = partial;
            Recv::Select(None)
        }
    }
}

/// The socket's reads keep finding their data after yields: it leaves the
/// readiness set (`readiness::leave`), if it is open and in it.
fn leave_set(s: &Socket) {
    let kept = {
        let mut st = s.lock();
        if st.phase != Phase::Open {
            return;
        }
        s.with_fd(|fd| readiness::leave(&mut st, fd)).ok().flatten()
    };
    // the slot's reference, dropped with no socket lock held
    drop(kept);
}

/// Whether a blocking `recv(S, 0)` may yield before it reads
/// (`core::yield_read`; application env `recv_yield`, default true).
static RECV_YIELD: AtomicBool = AtomicBool::new(true);

/// Turns the yields of blocking `recv(S, 0)` calls on or off (from the
/// module's load).
pub fn set_recv_yield(on: bool) {
    RECV_YIELD.store(on, Ordering::Relaxed);
}

/// A readiness drain's read for the blocking `recv(S, 0)` that waits on
/// `obj` with the integer handle `h` (installed as the drain's `Take` hook;
/// the drain holds the socket's state lock): one recv into the scratch
/// buffer, as this call's would be, with its result sent to `pid` as
/// `{'$nifsock', recv, H, {ok, Data} | {error, Reason}}`, which
/// `nifsock_wait:await/4` returns as the call's result: one NIF call and one
/// message per wait instead of a select message and a second recv call.
/// Streaming sockets are declined (their reads go straight into binaries).
pub fn take_from_drain(
    obj: Obj<'_, Socket>,
    pid: &ErlNifPid,
    h: isize,
    out: &readiness::Out,
) -> Taken {
    let s = obj.get();
    if s.streaming() {
        return Taken::Declined;
    }
    let want = s.rcvbuf();
    let r = s.with_fd(|fd| {
        scratch_read::recv(s, fd, want, 0, |got| {
            send_result(out, pid, h, Ok(got));
        })
    });
    let failed = match r {
        Ok(ScratchRead::Bytes((), n)) => {
            s.note_read(n);
            s.set_drained(is_drained(n, want));
            stats::EAGER_READS.incr();
            return Taken::Sent(n);
        }
        Ok(ScratchRead::WouldBlock) => return Taken::Empty,
        // EBUSY: the scratch buffer is borrowed (no read was made)
        Ok(ScratchRead::Interrupted | ScratchRead::Failed(libc::EBUSY)) | Err(_) => {
            return Taken::Declined
        }
        Ok(ScratchRead::Eof) => Error::Closed,
        Ok(ScratchRead::Failed(e)) => Error::Os(e),
    };
    send_result(out, pid, h, Err(failed));
    Taken::Sent(0)
}

/// Sends an eager read's result (see [`take_from_drain`]).
fn send_result(out: &readiness::Out, pid: &ErlNifPid, h: isize, r: Result<&[u8], Error>) {
    out.send_plain(
        pid,
        |spec, env| {
            spec.atom(atoms::nifsock_tag()).atom(atoms::recv()).int(h);
            match r {
                Ok(bytes) => spec.atom(atoms::ok()).buf(bytes),
                Err(e) => {
                    let reason = e.encode(env);
                    spec.atom(atoms::error());
                    match Atom::from_term(reason) {
                        Ok(a) => spec.atom(a),
                        Err(_) => spec.int(reason.decode::<isize>().unwrap_or(0)),
                    }
                }
            };
            spec.tuple(2).tuple(4);
        },
        |env| {
            let result = match r {
                Ok(bytes) => {
                    let mut bin = NewBinary::new(env, bytes.len());
                    bin.as_mut_slice().copy_from_slice(bytes);
                    (atoms::ok(), Binary::from(bin)).encode(env)
                }
                Err(e) => (atoms::error(), e).encode(env),
            };
            (atoms::nifsock_tag(), atoms::recv(), h, result).encode(env)
        },
    );
}

/// Takes the bytes of an unfinished recv(S, N) out of the socket (after a
/// timeout or an abort): an empty binary when there are none.
pub fn take_partial<'a>(env: Env<'a>, sock: Sock<'a>) -> Binary<'a> {
    let p = sock.s.lock().partial.take();
    partial_bin(env, p).unwrap_or_else(|| NewBinary::new(env, 0).into())
}
