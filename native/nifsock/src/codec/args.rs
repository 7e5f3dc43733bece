//! Argument decoders shared by the NIFs: the socket term, the call mode,
//! proper lists, strings and message flags.

use rustler::{Atom, Decoder, Encoder, Env, NifResult, Term};

use crate::atoms;
use crate::socket::Socket;
use crate::sys::resource::Obj;

/// A socket argument: the `{'$nifsock', Resource}` term and what it points to.
#[derive(Clone, Copy)]
pub struct Sock<'a> {
    /// The term as the caller passed it (used in select messages).
    pub term: Term<'a>,
    /// The resource object.
    pub obj: Obj<'a, Socket>,
    /// The socket in it.
    pub s: &'a Socket,
}

impl<'a> Decoder<'a> for Sock<'a> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let (tag, res): (Atom, Term<'a>) = term.decode()?;
        if tag != atoms::nifsock_tag() {
            return Err(rustler::Error::BadArg);
        }
        let obj = Obj::<Socket>::decode(res).ok_or(rustler::Error::BadArg)?;
        Ok(Sock {
            term,
            obj,
            s: obj.get(),
        })
    }
}

/// The socket term `{'$nifsock', Resource}` (`Sock` decodes it).
pub fn sock_term<'a>(env: Env<'a>, res: Term<'a>) -> Term<'a> {
    (atoms::nifsock_tag(), res).encode(env)
}

/// How a call that would block behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Part of a blocking call: arm a select, keep partial data inside.
    Wait,
    /// `nowait` or a user handle: arm a select, hand partial data back.
    Nowait,
    /// Timeout 0: never arm a select.
    Zero,
    /// A blocking call again after the `yield` reply and `erlang:yield()`
    /// (`core::yield_read`): read first, then as `Wait`.
    Yielded,
}

impl<'a> Decoder<'a> for Mode {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let a: Atom = term.decode()?;
        if a == atoms::wait() {
            Ok(Mode::Wait)
        } else if a == atoms::nowait() {
            Ok(Mode::Nowait)
        } else if a == atoms::zero() {
            Ok(Mode::Zero)
        } else if a == atoms::yielded() {
            Ok(Mode::Yielded)
        } else {
            Err(rustler::Error::BadArg)
        }
    }
}

/// The elements of a proper list; badarg for anything else. (Rustler's list
/// decoder panics on improper lists: never use it on user terms.)
pub fn proper_list(term: Term) -> NifResult<Vec<Term>> {
    let mut items = Vec::new();
    let mut rest = term;
    while !rest.is_empty_list() {
        let (head, tail) = rest.list_get_cell().map_err(|_| rustler::Error::BadArg)?;
        items.push(head);
        rest = tail;
    }
    Ok(items)
}

/// The bytes of a binary or a string (a proper list of characters, as OTP
/// takes `file:filename_all()` and option strings); None otherwise.
pub fn string_bytes(term: Term) -> Option<Vec<u8>> {
    if let Ok(b) = term.decode::<rustler::Binary>() {
        return Some(b.as_slice().to_vec());
    }
    let chars = proper_list(term).ok()?;
    let s: String = chars
        .into_iter()
        .map(|c| c.decode::<u32>().ok().and_then(char::from_u32))
        .collect::<Option<String>>()?;
    Some(s.into_bytes())
}

const KNOWN_FLAGS: i32 = libc::MSG_OOB
    | libc::MSG_PEEK
    | libc::MSG_DONTROUTE
    | libc::MSG_EOR
    | libc::MSG_MORE
    | libc::MSG_NOSIGNAL
    | libc::MSG_CONFIRM
    | libc::MSG_TRUNC
    | libc::MSG_WAITALL
    | libc::MSG_CMSG_CLOEXEC;

fn invalid_flag(t: Term) -> rustler::Error {
    let what = (atoms::msg_flag(), t.decode::<i64>().unwrap_or(-1));
    rustler::Error::Term(Box::new((atoms::invalid(), what)))
}

/// Message flags: a list of atoms (OTP's msg_flag()) or integers, OR-ed.
pub fn msg_flags(term: Term) -> NifResult<i32> {
    if term.is_empty_list() {
        return Ok(0); // the common case: no allocation
    }
    let list = proper_list(term)?;
    let mut flags = 0;
    for t in list {
        if let Ok(i) = t.decode::<i32>() {
            // Only flags a stream recv/send can honour: MSG_ERRQUEUE (or an
            // arbitrary mask) makes recv answer EAGAIN on a readable socket,
            // and the select would fire forever.
            if i < 0 || i & !KNOWN_FLAGS != 0 {
                return Err(invalid_flag(t));
            }
            flags |= i;
            continue;
        }
        let atom: Atom = t.decode()?;
        let name = t.atom_to_string()?;
        flags |= match name.as_str() {
            "oob" => libc::MSG_OOB,
            "peek" => libc::MSG_PEEK,
            "dontroute" => libc::MSG_DONTROUTE,
            "eor" => libc::MSG_EOR,
            "more" => libc::MSG_MORE,
            "nosignal" => libc::MSG_NOSIGNAL,
            "confirm" => libc::MSG_CONFIRM,
            "trunc" => libc::MSG_TRUNC,
            "waitall" => libc::MSG_WAITALL,
            "cmsg_cloexec" => libc::MSG_CMSG_CLOEXEC,
            // rustler wraps Error::Term in {error, _}: {error, {invalid, {msg_flag, F}}}
            _ => {
                return Err(rustler::Error::Term(Box::new((
                    atoms::invalid(),
                    (atoms::msg_flag(), atom),
                ))))
            }
        };
    }
    Ok(flags)
}

/// The calling process's pid (every NIF runs in one).
pub fn caller(env: Env) -> NifResult<rustler::sys::ErlNifPid> {
    crate::sys::msg::self_pid(env).ok_or(rustler::Error::BadArg)
}
