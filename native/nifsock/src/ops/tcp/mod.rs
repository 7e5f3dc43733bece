//! `nifsock_tcp`'s data path: gen_tcp-style active delivery and packet-framed
//! recv. Here: the reads and framing both share, and the end of a stream;
//! `active`, `recv`, `accept`, `format`, `opts`, `send` hold the rest.
//!
//! An active socket's readiness goes to a shared pump process (one per
//! scheduler, not per connection), whose NIF call reads and sends the owner
//! one `{nifsock, S, Data}` message per packet, straight from here. Turning a
//! socket active first tries to read inline, so data that is already there
//! costs no select and no pump hop. The operations return Rust outcomes; the
//! terms (replies, packets, messages) are `codec::tcp`'s.

use rustler::Env;

use crate::codec::args::Sock;
use crate::core::errno::is_would_block;
use crate::core::packet::{self, Bounds, Found, Packet};
use crate::error::Error;
use crate::lifecycle;
use crate::ops::scratch_read::{self, ScratchRead};
use crate::socket::{Socket, TcpOpts};
use crate::stats;

pub mod accept;
pub mod active;
pub mod format;
pub mod opts;
pub mod recv;
pub mod send;

enum Read {
    /// Bytes arrived; `true` when the read came back short (queue emptied).
    Got(bool),
    WouldBlock,
    Eof,
    Failed(i32),
    /// The socket was closed meanwhile (a close took its fd): not a socket
    /// error, and nothing of it to tell its owner (the close does).
    Gone,
}

/// One recv into the scratch buffer, appended to `pending`.
fn read_into(s: &Socket, pending: &mut Vec<u8>, rcvbuf: usize) -> Read {
    let r = s.with_fd(|fd| {
        let r = scratch_read::recv(s, fd, rcvbuf, 0, |got| pending.extend_from_slice(got));
        scratch_outcome(r, rcvbuf).0
    });
    noted(s, r.unwrap_or(Read::Gone))
}

/// Marks on the socket whether read `r` left the receive queue empty (a
/// short read or EAGAIN: `Socket::set_drained`), which lets the next wait
/// skip its read; every read of this module's deliveries and receives goes
/// through here, so the mark never outlives a read that left bytes behind.
fn noted(s: &Socket, r: Read) -> Read {
    s.set_drained(matches!(r, Read::Got(true) | Read::WouldBlock));
    r
}

/// What a scratch read of up to `rcvbuf` bytes means for a delivery, with
/// the bytes it read (a short read: the queue is empty).
fn scratch_outcome(r: ScratchRead<()>, rcvbuf: usize) -> (Read, usize) {
    match r {
        ScratchRead::Bytes((), n) => (Read::Got(n < rcvbuf), n),
        ScratchRead::Eof => (Read::Eof, 0),
        ScratchRead::WouldBlock => {
            stats::READS_EAGAIN.incr();
            (Read::WouldBlock, 0)
        }
        ScratchRead::Interrupted => (Read::Got(false), 0),
        ScratchRead::Failed(e) => (Read::Failed(e), 0),
    }
}

/// What a direct read's errno means for a delivery: the queue is empty
/// (EAGAIN), try again (EINTR, as a short read), or the socket failed.
fn failed_read(e: i32) -> Read {
    if is_would_block(e) {
        stats::READS_EAGAIN.incr();
        Read::WouldBlock
    } else if e == libc::EINTR {
        Read::Got(false)
    } else {
        Read::Failed(e)
    }
}

/// The first deliverable packet of `pending` under `opts` (`len` > 0 asks
/// exactly that many bytes in raw mode); `rcvbuf` is the socket's `buffer`,
/// which bounds a line as inet's buffer does.
fn frame(opts: &TcpOpts, len: usize, pending: &[u8], rcvbuf: usize) -> Found {
    match opts.packet {
        Packet::Raw if len > 0 => {
            if pending.len() >= len {
                Found::Packet {
                    consumed: len,
                    payload: 0..len,
                }
            } else {
                Found::Incomplete
            }
        }
        p => {
            let bounds = Bounds {
                limit: opts.packet_size,
                trunc: rcvbuf,
                delimiter: opts.line_delimiter.0,
            };
            packet::first(p, pending, bounds)
        }
    }
}

/// Closes a socket whose stream ended (`exit_on_close`, gen_tcp's default), or
/// whose send timed out under `send_timeout_close`. Never blocks: a lingering
/// close goes to the closer thread.
pub fn close_ended(env: Env, sock: Sock) {
    lifecycle::close_never_blocking(lifecycle::Ctx::Nif(env), sock.obj);
}

/// After a passive recv saw the end of the stream (`reset`: a connection
/// reset, or an end after a send met one): closes unless `exit_on_close` is
/// off, and returns the error recv returns, as gen_tcp: `closed`, or
/// `econnreset` for a reset under `show_econnreset`.
pub fn ended(env: Env, sock: Sock, reset: bool) -> Error {
    let (keep_open, show) = {
        let st = sock.s.lock();
        (st.tcp.keep_open, st.tcp.show_econnreset)
    };
    if !keep_open {
        close_ended(env, sock);
    }
    if (reset || sock.s.peer_reset()) && show {
        Error::Os(libc::ECONNRESET)
    } else {
        Error::Closed
    }
}

/// Puts bytes back in front of the stream (a timed-out recv's partial data), so
/// the next recv sees them first, as gen_tcp keeps them.
pub fn unread(sock: Sock, bytes: &[u8]) {
    if !bytes.is_empty() {
        let mut st = sock.s.lock();
        let mut v = bytes.to_vec();
        v.extend_from_slice(&st.pending);
        st.pending = v;
    }
}
