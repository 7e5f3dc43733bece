//! setopt/getopt over the option table: one setsockopt per option, except
//! IP_TOS, whose SO_PRIORITY side effect is undone (one getsockopt first, one
//! more setsockopt only when Linux's derived priority differs).

use rustler::types::map::MapIterator;
use rustler::{Atom, Encoder, Env, Term};

use crate::atoms;
use crate::core::opts::{self, Kind, Spec};
use crate::error::{Error, Result};
use crate::socket::Socket;
use crate::stats;
use crate::sys::syscall;

/// What an option name resolved to.
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

fn set_raw(s: &Socket, level: i32, opt: i32, bytes: &[u8]) -> Result<()> {
    stats::SETSOCKOPTS.incr();
    s.with_fd(|fd| syscall::setsockopt(fd, level, opt, bytes))?
        .map_err(Error::Os)
}

fn get_raw(s: &Socket, level: i32, opt: i32, buf: &mut [u8]) -> Result<usize> {
    stats::GETSOCKOPTS.incr();
    s.with_fd(|fd| syscall::getsockopt(fd, level, opt, buf))?
        .map_err(Error::Os)
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

fn string_value(v: Term) -> Result<Vec<u8>> {
    crate::codec::args::string_bytes(v).ok_or(Error::Invalid("value"))
}

fn tos_value(v: Term) -> Result<i32> {
    if let Ok(a) = v.atom_to_string() {
        return opts::tos_value(&a).ok_or(Error::Invalid("value"));
    }
    v.decode::<i32>().map_err(|_| Error::Invalid("value"))
}

/// setsockopt(SO_PRIORITY) on a socket nifsock_tcp just accepted.
pub fn set_priority(s: &Socket, p: i32) -> Result<()> {
    set_raw(s, libc::SOL_SOCKET, libc::SO_PRIORITY, &p.to_ne_bytes())?;
    s.lock().tcp.priority = Some(p);
    Ok(())
}

/// IP_TOS without its side effect on SO_PRIORITY.
fn set_tos(s: &Socket, tos: i32) -> Result<()> {
    let mut b = [0u8; 4];
    let n = get_raw(s, libc::SOL_SOCKET, libc::SO_PRIORITY, &mut b)?;
    let saved = opts::int_parse(b.get(..n).unwrap_or(&[])).unwrap_or(0);
    set_raw(s, libc::IPPROTO_IP, libc::IP_TOS, &tos.to_ne_bytes())?;
    if opts::tos_to_priority(tos) != saved {
        // Linux set priority from the TOS value: put the caller's back. Failure is
        // tolerated (raising priority above 6 needs CAP_NET_ADMIN).
        let _ = set_raw(s, libc::SOL_SOCKET, libc::SO_PRIORITY, &saved.to_ne_bytes());
    }
    Ok(())
}

/// setopt.
pub fn set(s: &Socket, target: Target, v: Term) -> Result<()> {
    match target {
        Target::OtpRcvbuf => {
            let n = v
                .decode::<usize>()
                .ok()
                .filter(|n| (1..=(64 << 20)).contains(n))
                .ok_or(Error::Invalid("value"))?;
            s.set_rcvbuf(n);
            Ok(())
        }
        Target::OtpFd | Target::OtpDomain => Err(Error::Invalid("option")),
        Target::Raw(level, opt) => {
            let bytes = match v.decode::<rustler::Binary>() {
                Ok(b) => b.as_slice().to_vec(),
                Err(_) => bool_value(v)
                    .or_else(|_| int_value(v))?
                    .to_ne_bytes()
                    .to_vec(),
            };
            set_raw(s, level, opt, &bytes)?;
            if level == libc::SOL_SOCKET && opt == libc::SO_LINGER {
                if let Some((on, secs)) = opts::linger_parse(&bytes) {
                    s.set_close_may_block(opts::linger_blocks(on, secs));
                }
            }
            Ok(())
        }
        Target::Known(spec) => match spec.kind {
            Kind::Bool => set_raw(s, spec.level, spec.opt, &bool_value(v)?.to_ne_bytes()),
            Kind::Int => {
                let i = int_value(v)?;
                set_raw(s, spec.level, spec.opt, &i.to_ne_bytes())?;
                if (spec.level, spec.opt) == (libc::SOL_SOCKET, libc::SO_PRIORITY) {
                    s.lock().tcp.priority = Some(i);
                }
                Ok(())
            }
            Kind::Linger => {
                let (on, secs) = linger_value(v)?;
                set_raw(s, spec.level, spec.opt, &opts::linger_bytes(on, secs))?;
                s.set_close_may_block(opts::linger_blocks(on, secs));
                Ok(())
            }
            Kind::Str => set_raw(s, spec.level, spec.opt, &string_value(v)?),
            Kind::Tos => set_tos(s, tos_value(v)?),
            Kind::ReadOnlyInt | Kind::ReadOnlyBool => Err(Error::Invalid("option")),
        },
    }
}

/// getopt.
pub fn get<'a>(env: Env<'a>, s: &Socket, target: Target) -> Result<Term<'a>> {
    let mut buf = [0u8; 64];
    match target {
        Target::OtpRcvbuf => Ok(s.rcvbuf().encode(env)),
        Target::OtpFd => s.with_fd(|fd| fd.encode(env)),
        Target::OtpDomain => Ok(s.family.atom().encode(env)),
        Target::Raw(level, opt) => {
            let n = get_raw(s, level, opt, &mut buf)?;
            let b = buf.get(..n).unwrap_or(&[]);
            Ok(match opts::int_parse(b) {
                Some(i) => i.encode(env),
                None => {
                    let mut nb = rustler::NewBinary::new(env, b.len());
                    nb.as_mut_slice().copy_from_slice(b);
                    nb.into()
                }
            })
        }
        Target::Known(spec) => {
            let n = get_raw(s, spec.level, spec.opt, &mut buf)?;
            let b = buf.get(..n).unwrap_or(&[]);
            match spec.kind {
                Kind::Bool | Kind::ReadOnlyBool => {
                    Ok((opts::int_parse(b).unwrap_or(0) != 0).encode(env))
                }
                Kind::Int | Kind::ReadOnlyInt => {
                    let i = opts::int_parse(b).ok_or(Error::Os(libc::EINVAL))?;
                    Ok(readonly_value(env, spec, i))
                }
                Kind::Tos => {
                    // As socket: the four named values as atoms, others as integers.
                    let i = opts::int_parse(b).ok_or(Error::Os(libc::EINVAL))?;
                    Ok(match opts::tos_name(i) {
                        Some(name) => Atom::from_str(env, name)
                            .map(|a| a.encode(env))
                            .unwrap_or_else(|_| i.encode(env)),
                        None => i.encode(env),
                    })
                }
                Kind::Linger => {
                    let (on, secs) = opts::linger_parse(b).ok_or(Error::Os(libc::EINVAL))?;
                    let keys = [atoms::onoff().encode(env), atoms::linger().encode(env)];
                    let vals = [on.encode(env), secs.encode(env)];
                    Term::map_from_term_arrays(env, &keys, &vals)
                        .map_err(|_| Error::Os(libc::EINVAL))
                }
                Kind::Str => {
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    let s = String::from_utf8_lossy(b.get(..end).unwrap_or(&[])).into_owned();
                    Ok(charlist(env, &s))
                }
            }
        }
    }
}

fn readonly_value<'a>(env: Env<'a>, spec: &Spec, i: i32) -> Term<'a> {
    match (spec.level, spec.opt) {
        (libc::SOL_SOCKET, libc::SO_TYPE) if i == libc::SOCK_STREAM => atoms::stream().encode(env),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => match crate::codec::addr::Family::from_raw(i) {
            Some(f) => f.atom().encode(env),
            None => i.encode(env),
        },
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) if i == libc::IPPROTO_TCP => atoms::tcp().encode(env),
        (libc::SOL_SOCKET, libc::SO_ERROR) if i != 0 => crate::error::Error::Os(i).encode(env),
        _ => i.encode(env),
    }
}

fn charlist<'a>(env: Env<'a>, s: &str) -> Term<'a> {
    let chars: Vec<Term> = s.bytes().map(|c| c.encode(env)).collect();
    chars.encode(env)
}
