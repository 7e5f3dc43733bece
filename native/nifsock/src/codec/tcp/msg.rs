//! Packets as the owner gets them, and the active-mode messages (tagged
//! with the socket's `tags`).

use rustler::{Atom, Encoder, Env, NewBinary, Term};

use crate::atoms;
use crate::core::errno;
use crate::core::gen_tcp_opts::{self, Shape};
use crate::error::Error;
use crate::socket::TcpOpts;
use crate::sys::drvsend::{DrvBin, Ext, Spec};

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

/// A packet as [`packet`] makes it, as a driver term spec.
fn packet_spec<'s>(spec: &mut Spec<'s>, bytes: &'s [u8], opts: &TcpOpts) {
    let shape = if opts.list {
        Shape::List
    } else {
        gen_tcp_opts::shape(bytes.len(), opts.header)
    };
    match shape {
        Shape::Binary => spec.buf(bytes),
        Shape::List => spec.string(bytes),
        Shape::Header(n) => {
            let (head, rest) = bytes.split_at(n.min(bytes.len()));
            spec.buf(rest).string_cons(head)
        }
    };
}

/// The socket term `{'$nifsock', Resource}` (as `args::sock_term`) around
/// the resource term's external format `res`.
fn sock_spec<'s>(spec: &mut Spec<'s>, res: &'s Ext) {
    spec.atom(atoms::nifsock_tag()).ext(res).tuple(2);
}

/// [`data_msg`] as a driver term spec (`sock`: the socket's resource term's
/// external format).
pub fn data_spec<'s>(spec: &mut Spec<'s>, sock: &'s Ext, bytes: &'s [u8], opts: &TcpOpts) {
    spec.atom(opts.tags.data);
    sock_spec(spec, sock);
    packet_spec(spec, bytes, opts);
    spec.tuple(3);
}

/// [`tagged`] as a driver term spec.
pub fn tagged_spec<'s>(spec: &mut Spec<'s>, tag: Atom, sock: &'s Ext) {
    spec.atom(tag);
    sock_spec(spec, sock);
    spec.tuple(2);
}

/// [`error_msg`] of an OS error `e` as a driver term spec (the reason as
/// `Error::Os(e)` encodes it: its posix atom, else the number).
pub fn error_spec<'s>(spec: &mut Spec<'s>, env: Env, tag: Atom, sock: &'s Ext, e: i32) {
    spec.atom(tag);
    sock_spec(spec, sock);
    match errno::name(e).and_then(|name| Atom::from_str(env, name).ok()) {
        Some(a) => spec.atom(a),
        None => spec.int(e as isize),
    };
    spec.tuple(3);
}

/// `{Data, S, Binary}` of the first `len` bytes of a driver binary (raw
/// binary mode: the packet is the read), as a driver term spec.
pub fn data_bin_spec<'s>(
    spec: &mut Spec<'s>,
    tag: Atom,
    sock: &'s Ext,
    bin: &'s DrvBin,
    len: usize,
) {
    spec.atom(tag);
    sock_spec(spec, sock);
    spec.bin(bin, len).tuple(3);
}
