//! The one error type of the crate; it encodes to the atoms and tuples OTP's
//! socket returns (`closed`, `timeout`, posix atoms, `{invalid, What}`), never
//! to strings.

use rustler::{Encoder, Env, Term};

use crate::atoms;
use crate::core::errno;

/// Why an operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// A term of the wrong type: raised as `badarg`, not returned.
    BadArg,
    /// The socket is closed (or closing), or the peer closed the stream.
    Closed,
    /// The operation didn't complete in time.
    Timeout,
    /// An OS error (errno).
    Os(i32),
    /// A value of the right type but not acceptable: `{invalid, What}`.
    Invalid(&'static str),
    /// The caller doesn't own the socket.
    NotOwner,
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

impl From<i32> for Error {
    fn from(errno: i32) -> Error {
        Error::Os(errno)
    }
}

impl Encoder for Error {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        match *self {
            Error::BadArg => atoms::badarg().encode(env),
            Error::Closed => atoms::closed().encode(env),
            Error::Timeout => atoms::timeout().encode(env),
            Error::NotOwner => atoms::not_owner().encode(env),
            Error::Os(e) => match errno::name(e) {
                Some(name) => rustler::Atom::from_str(env, name)
                    .map(|a| a.encode(env))
                    .unwrap_or_else(|_| e.encode(env)),
                None => e.encode(env),
            },
            Error::Invalid(what) => {
                let what = rustler::Atom::from_str(env, what)
                    .map(|a| a.encode(env))
                    .unwrap_or_else(|_| atoms::undefined().encode(env));
                (atoms::invalid(), what).encode(env)
            }
        }
    }
}
