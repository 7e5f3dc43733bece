//! Passive, packet-framed recv.

use super::{frame, read_into, Read};
use crate::codec::args::{Mode, Sock};
use crate::codec::tcp::{self as codec, TcpRecv};
use crate::core::limits::MAX_EXACT_LEN;
use crate::core::packet::{Found, Packet};
use crate::error::Error;
use crate::lifecycle;
use crate::socket::{Active, Phase};
use crate::sys::msg;
use crate::sys::select::Dir;
use rustler::{Env, Term};

/// Passive recv for `nifsock_tcp`: a packet (or `len` bytes, or what's there).
pub fn recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: usize,
    handle: Term<'a>,
    mode: Mode,
) -> TcpRecv<'a> {
    let (opts, mut pending) = {
        let mut st = sock.s.lock_after_delivery();
        if st.phase != Phase::Open {
            return TcpRecv::Failed(Error::Closed);
        }
        if st.tcp.active != Active::Off || (len > 0 && st.tcp.packet != Packet::Raw) {
            return TcpRecv::Failed(Error::Os(libc::EINVAL));
        }
        if len > MAX_EXACT_LEN {
            return TcpRecv::Failed(Error::Os(libc::ENOMEM));
        }
        if st.partial.is_some() {
            // bytes of a timed-out exact recv: serve them through `pending`
            if let Some(p) = st.partial.take() {
                let mut v = p.buf.as_slice().get(..p.filled).unwrap_or(&[]).to_vec();
                v.extend_from_slice(&st.pending);
                st.pending = v;
            }
        }
        // A timeout-0 recv of an exact length goes the framed way: as
        // inet, bytes short of the length stay for the next call and the
        // answer is `timeout' (socket's timeout 0 returns them instead).
        if st.tcp.packet == Packet::Raw
            && st.pending.is_empty()
            && !st.tcp.list
            && st.tcp.header == 0
            && !(mode == Mode::Zero && len > 0)
        {
            drop(st);
            // nifsock_tcp has no nowait: partial bytes stay in the socket.
            let mode = if mode == Mode::Nowait {
                Mode::Wait
            } else {
                mode
            };
            return TcpRecv::Raw(crate::ops::recv::recv(env, sock, len, 0, handle, mode));
        }
        (st.tcp, std::mem::take(&mut st.pending))
    };
    let Some(caller) = msg::self_pid(env) else {
        return TcpRecv::Failed(Error::BadArg);
    };
    let put_back = |pending: Vec<u8>| sock.s.lock().pending = pending;
    let rcvbuf = sock.s.rcvbuf();
    loop {
        match frame(&opts, len, &pending, rcvbuf) {
            Found::Packet { consumed, payload } => {
                let data = codec::packet(env, pending.get(payload).unwrap_or(&[]), &opts);
                pending.drain(..consumed.min(pending.len()));
                put_back(pending);
                lifecycle::done(env, sock.obj, Dir::Read, &caller);
                return TcpRecv::Packet(data);
            }
            Found::TooLarge => {
                // As inet: what was read is dropped with the bad packet
                // (`pending` was taken out of the socket); nifsock_tcp then
                // ends the stream as at end of file.
                drop(pending);
                return TcpRecv::Failed(Error::Os(libc::EMSGSIZE));
            }
            Found::Incomplete => match read_into(sock.s, &mut pending, rcvbuf) {
                Read::Got(_) => {}
                Read::WouldBlock => {
                    put_back(pending);
                    if mode == Mode::Zero {
                        return TcpRecv::Failed(Error::Timeout);
                    }
                    return match lifecycle::wait(
                        env,
                        sock.obj,
                        sock.term,
                        Dir::Read,
                        &caller,
                        handle,
                    ) {
                        Ok(()) => TcpRecv::Select,
                        Err(e) => TcpRecv::Failed(e),
                    };
                }
                Read::Eof | Read::Gone => {
                    put_back(pending);
                    return TcpRecv::Failed(Error::Closed);
                }
                Read::Failed(e) => {
                    put_back(pending);
                    return TcpRecv::Failed(Error::Os(e));
                }
            },
        }
    }
}
