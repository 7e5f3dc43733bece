//! setopt/getopt terms: `{Level, Name}` resolved over the option table, a
//! value decoded for the option it is for (`SetOpt`), and what getopt read
//! (`OptValue`) encoded as OTP's `socket` shows it.

use rustler::types::map::MapIterator;
use rustler::{Atom, Binary, Encoder, Env, NewBinary, Term};

use crate::atoms;
use crate::codec::args;
use crate::core::family::Family;
use crate::core::opts::{self, Kind, Spec};
use crate::error::{Error, Result};

/// What an option name resolved to.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A table entry.
    Known(&'static Spec),
    /// `{Level :: integer(), Opt :: integer()}`.
    Raw(i32, i32),
    /// `{otp, rcvbuf}`: bytes per recv(S, 0).
    OtpRcvbuf,
    /// `{otp, fd}` (read-only).
    OtpFd,
    /// `{otp, domain}` (read-only).
    OtpDomain,
}

/// Resolves `{Level, Name}` (atoms or integers). Unknown atom pairs are invalid.
pub fn target(level: Term, name: Term) -> Result<Target> {
    if let (Ok(l), Ok(n)) = (level.decode::<i32>(), name.decode::<i32>()) {
        return Ok(Target::Raw(l, n));
    }
    let l = level.atom_to_string().map_err(|_| Error::BadArg)?;
    let n = name.atom_to_string().map_err(|_| Error::BadArg)?;
    if l == "otp" {
        return match n.as_str() {
            "rcvbuf" => Ok(Target::OtpRcvbuf),
            "fd" => Ok(Target::OtpFd),
            "domain" => Ok(Target::OtpDomain),
            _ => Err(Error::Invalid("option")),
        };
    }
    opts::lookup(&l, &n)
        .map(Target::Known)
        .ok_or(Error::Invalid("option"))
}

/// A setopt, decoded: the option and its value as the kernel takes it.
#[derive(Debug, Clone)]
pub enum SetOpt {
    /// `{otp, rcvbuf}`: 1 byte to 64 MiB.
    Rcvbuf(usize),
    /// A raw option with its bytes (a binary, or an integer or boolean as a C int).
    Raw {
        /// Level.
        level: i32,
        /// Option.
        opt: i32,
        /// Value bytes.
        bytes: Vec<u8>,
    },
    /// A boolean or integer table option, as a C int.
    Int(&'static Spec, i32),
    /// SO_LINGER.
    Linger(&'static Spec, bool, i32),
    /// A string option's bytes.
    Str(&'static Spec, Vec<u8>),
    /// IP_TOS (names resolved to their values).
    Tos(i32),
}

fn int_value(v: Term) -> Result<i32> {
    v.decode::<i32>().map_err(|_| Error::Invalid("value"))
}

fn bool_value(v: Term) -> Result<i32> {
    v.decode::<bool>()
        .map(i32::from)
        .map_err(|_| Error::Invalid("value"))
}

fn linger_value(v: Term) -> Result<(bool, i32)> {
    if v.decode::<Atom>().is_ok_and(|a| a == atoms::abort()) {
        return Ok((true, 0));
    }
    let mut onoff = None;
    let mut secs = None;
    for (k, val) in MapIterator::new(v).ok_or(Error::Invalid("value"))? {
        let k: Atom = k.decode().map_err(|_| Error::Invalid("value"))?;
        if k == atoms::onoff() {
            onoff = Some(val.decode::<bool>().map_err(|_| Error::Invalid("value"))?);
        } else if k == atoms::linger() {
            secs = Some(
                val.decode::<i32>()
                    .ok()
                    .filter(|s| *s >= 0)
                    .ok_or(Error::Invalid("value"))?,
            );
        }
    }
    match (onoff, secs) {
        (Some(o), Some(s)) => Ok((o, s)),
        _ => Err(Error::Invalid("value")),
    }
}

fn tos_value(v: Term) -> Result<i32> {
    if let Ok(a) = v.atom_to_string() {
        return opts::tos_value(&a).ok_or(Error::Invalid("value"));
    }
    v.decode::<i32>().map_err(|_| Error::Invalid("value"))
}

/// Decodes `v` for `target`: a read-only option is `Invalid("option")`
/// whatever the value, a bad value `Invalid("value")`.
pub fn decode_set(target: Target, v: Term) -> Result<SetOpt> {
    match target {
        Target::OtpRcvbuf => v
            .decode::<usize>()
            .ok()
            .filter(|n| (1..=(64 << 20)).contains(n))
            .map(SetOpt::Rcvbuf)
            .ok_or(Error::Invalid("value")),
        Target::OtpFd | Target::OtpDomain => Err(Error::Invalid("option")),
        Target::Raw(level, opt) => {
            let bytes = match v.decode::<Binary>() {
                Ok(b) => b.as_slice().to_vec(),
                Err(_) => bool_value(v)
                    .or_else(|_| int_value(v))?
                    .to_ne_bytes()
                    .to_vec(),
            };
            Ok(SetOpt::Raw { level, opt, bytes })
        }
        Target::Known(spec) => match spec.kind {
            Kind::Bool => Ok(SetOpt::Int(spec, bool_value(v)?)),
            Kind::Int => Ok(SetOpt::Int(spec, int_value(v)?)),
            Kind::Linger => {
                let (on, secs) = linger_value(v)?;
                Ok(SetOpt::Linger(spec, on, secs))
            }
            Kind::Str => Ok(SetOpt::Str(
                spec,
                args::string_bytes(v).ok_or(Error::Invalid("value"))?,
            )),
            Kind::Tos => Ok(SetOpt::Tos(tos_value(v)?)),
            Kind::ReadOnlyInt | Kind::ReadOnlyBool => Err(Error::Invalid("option")),
        },
    }
}

/// The largest option value getopt reads.
pub const MAX_OPT_LEN: usize = 64;

/// What getopt read.
#[derive(Debug, Clone)]
pub enum OptValue {
    /// `{otp, rcvbuf}`.
    Rcvbuf(usize),
    /// `{otp, fd}`.
    Fd(i32),
    /// `{otp, domain}`.
    Domain(Family),
    /// A raw option that reads as a C int.
    RawInt(i32),
    /// A raw option's bytes otherwise (the first `len` of `buf`).
    RawBytes {
        /// The bytes read.
        buf: [u8; MAX_OPT_LEN],
        /// How many.
        len: usize,
    },
    /// A boolean option.
    Bool(bool),
    /// An integer option (read-only ones shown by name where `socket` does).
    Int(&'static Spec, i32),
    /// IP_TOS.
    Tos(i32),
    /// SO_LINGER.
    Linger(bool, i32),
    /// A string option.
    Str(String),
}

/// `value` as OTP's `socket` shows it.
pub fn encode<'a>(env: Env<'a>, value: OptValue) -> Result<Term<'a>> {
    Ok(match value {
        OptValue::Rcvbuf(n) => n.encode(env),
        OptValue::Fd(fd) => fd.encode(env),
        OptValue::Domain(f) => f.atom().encode(env),
        OptValue::RawInt(i) => i.encode(env),
        OptValue::RawBytes { buf, len } => {
            let b = buf.get(..len).unwrap_or(&[]);
            let mut nb = NewBinary::new(env, b.len());
            nb.as_mut_slice().copy_from_slice(b);
            nb.into()
        }
        OptValue::Bool(b) => b.encode(env),
        OptValue::Int(spec, i) => int_value_term(env, spec, i),
        // As socket: the four named values as atoms, others as integers.
        OptValue::Tos(i) => match opts::tos_name(i) {
            Some(name) => Atom::from_str(env, name)
                .map(|a| a.encode(env))
                .unwrap_or_else(|_| i.encode(env)),
            None => i.encode(env),
        },
        OptValue::Linger(on, secs) => {
            let keys = [atoms::onoff().encode(env), atoms::linger().encode(env)];
            let vals = [on.encode(env), secs.encode(env)];
            Term::map_from_term_arrays(env, &keys, &vals).map_err(|_| Error::Os(libc::EINVAL))?
        }
        OptValue::Str(s) => {
            let chars: Vec<Term> = s.bytes().map(|c| c.encode(env)).collect();
            chars.encode(env)
        }
    })
}

/// The read-only options `socket` shows by name: type `stream`, domain
/// `inet | inet6 | local`, protocol `tcp`, error as its posix atom.
fn int_value_term<'a>(env: Env<'a>, spec: &Spec, i: i32) -> Term<'a> {
    match (spec.level, spec.opt) {
        (libc::SOL_SOCKET, libc::SO_TYPE) if i == libc::SOCK_STREAM => atoms::stream().encode(env),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => match Family::from_raw(i) {
            Some(f) => f.atom().encode(env),
            None => i.encode(env),
        },
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) if i == libc::IPPROTO_TCP => atoms::tcp().encode(env),
        (libc::SOL_SOCKET, libc::SO_ERROR) if i != 0 => Error::Os(i).encode(env),
        _ => i.encode(env),
    }
}
