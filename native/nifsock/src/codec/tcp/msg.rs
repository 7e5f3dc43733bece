//! Packets as the owner gets them, and the active-mode messages (tagged
//! with the socket's `tags`).

use rustler::{Atom, Encoder, Env, NewBinary, Term};

use crate::atoms;
use crate::core::gen_tcp_opts::{self, Shape};
use crate::error::Error;
use crate::socket::TcpOpts;

fn binary<'a>(env: Env<'a>, bytes: &[u8]) -> Term<'a> {
    let mut b = NewBinary::new(env, bytes.len());
    b.as_mut_slice().copy_from_slice(bytes);
    b.into()
}

/// A packet as the owner gets it: a binary, a list (list mode), or, in
/// binary mode with `{header, N}`, `[B1, ..., BN | Rest]` (gen_tcp's shape).
pub fn packet<'a>(env: Env<'a>, bytes: &[u8], opts: &TcpOpts) -> Term<'a> {
    let shape = if opts.list {
        Shape::List
    } else {
        gen_tcp_opts::shape(bytes.len(), opts.header)
    };
    match shape {
        Shape::Binary => binary(env, bytes),
        Shape::List => {
            let items: Vec<Term<'a>> = bytes.iter().map(|b| b.encode(env)).collect();
            items.encode(env)
        }
        Shape::Header(n) => {
            let (head, rest) = bytes.split_at(n.min(bytes.len()));
            head.iter()
                .rev()
                .fold(binary(env, rest), |tail, b| tail.list_prepend(*b))
        }
    }
}

/// `{Data, S, Packet}`, tagged with the socket's data tag.
pub fn data_msg<'a>(env: Env<'a>, sock: Term<'a>, bytes: &[u8], opts: &TcpOpts) -> Term<'a> {
    (opts.tags.data, sock, packet(env, bytes, opts)).encode(env)
}

/// The handle of an active socket's select for its pump (`active`).
pub fn active_handle(env: Env) -> Term {
    atoms::active().encode(env)
}

/// `{Tag, S}`: a closed or passive message.
pub fn tagged<'a>(env: Env<'a>, tag: Atom, sock: Term<'a>) -> Term<'a> {
    (tag, sock).encode(env)
}

/// `{Error, S, Reason}`.
pub fn error_msg<'a>(env: Env<'a>, tag: Atom, sock: Term<'a>, e: Error) -> Term<'a> {
    (tag, sock, e).encode(env)
}
