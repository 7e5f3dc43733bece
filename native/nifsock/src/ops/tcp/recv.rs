//! Passive, packet-framed recv.

use super::{data_term, frame, read_into, Read};
use crate::atoms;
use crate::codec::args::{self, Mode, Sock};
use crate::codec::reply;
use crate::core::limits::MAX_EXACT_LEN;
use crate::core::packet::{Found, Packet};
use crate::error::Error;
use crate::lifecycle;
use crate::socket::{Active, Phase};
use crate::sys::select::Dir;
use rustler::{Encoder, Env, NifResult, Term};

/// Passive recv for `nifsock_tcp`: a packet (or `len` bytes, or what's there).
pub fn recv<'a>(
    env: Env<'a>,
    sock: Sock<'a>,
    len: usize,
    handle: Term<'a>,
    mode: Mode,
) -> NifResult<Term<'a>> {
    let (opts, mut pending) = {
        let mut st = sock.s.lock();
        if st.phase != Phase::Open {
            return reply::error(env, Error::Closed);
        }
        if st.tcp.active != Active::Off || (len > 0 && st.tcp.packet != Packet::Raw) {
            return reply::error(env, Error::Os(libc::EINVAL));
        }
        if len > MAX_EXACT_LEN {
            return reply::error(env, Error::Os(libc::ENOMEM));
        }
        if st.partial.is_some() {
            // bytes of a timed-out exact recv: serve them through `pending`
            if let Some(p) = st.partial.take() {
                let mut v = p.buf.as_slice().get(..p.filled).unwrap_or(&[]).to_vec();
                v.extend_from_slice(&st.pending);
                st.pending = v;
            }
        }
        if st.tcp.packet == Packet::Raw
            && st.pending.is_empty()
            && !st.tcp.list
            && st.tcp.header == 0
        {
            drop(st);
            // nifsock_tcp has no nowait: partial bytes stay in the socket.
            let mode = if mode == Mode::Nowait {
                Mode::Wait
            } else {
                mode
            };
            return crate::ops::recv::recv(env, sock, len, 0, handle, mode);
        }
        (st.tcp, std::mem::take(&mut st.pending))
    };
    let caller = args::caller(env)?;
    let put_back = |pending: Vec<u8>| sock.s.lock().pending = pending;
    let rcvbuf = sock.s.rcvbuf();
    loop {
        match frame(&opts, len, &pending, rcvbuf) {
            Found::Packet { consumed, payload } => {
                let data = data_term(env, pending.get(payload).unwrap_or(&[]), &opts);
                pending.drain(..consumed.min(pending.len()));
                put_back(pending);
                lifecycle::done(env, sock.obj, Dir::Read, &caller);
                return Ok((atoms::ok(), data).encode(env));
            }
            Found::TooLarge => {
                // As inet: what was read is dropped with the bad packet
                // (`pending` was taken out of the socket); nifsock_tcp then
                // ends the stream as at end of file.
                drop(pending);
                return reply::error(env, Error::Os(libc::EMSGSIZE));
            }
            Found::Incomplete => match read_into(sock.s, &mut pending, rcvbuf) {
                Read::Got(_) => {}
                Read::WouldBlock => {
                    put_back(pending);
                    if mode == Mode::Zero {
                        return reply::error(env, Error::Timeout);
                    }
                    return match lifecycle::wait(
                        env,
                        sock.obj,
                        sock.term,
                        Dir::Read,
                        &caller,
                        handle,
                    ) {
                        Ok(()) => Ok(atoms::select().encode(env)),
                        Err(e) => reply::error(env, e),
                    };
                }
                Read::Eof => {
                    put_back(pending);
                    return reply::error(env, Error::Closed);
                }
                Read::Failed(e) => {
                    put_back(pending);
                    return reply::error(env, Error::Os(e));
                }
            },
        }
    }
}
