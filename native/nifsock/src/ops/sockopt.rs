//! setopt/getopt over the option table (`codec::sockopt` decodes the
//! option and value, and encodes what is read): one setsockopt per option,
//! except IP_TOS, whose SO_PRIORITY side effect is undone (one getsockopt
//! first, one more setsockopt only when Linux's derived priority differs).

use crate::codec::sockopt::{OptValue, SetOpt, Target, MAX_OPT_LEN};
use crate::core::opts::{self, Kind};
use crate::error::{Error, Result};
use crate::socket::Socket;
use crate::stats;
use crate::sys::syscall;

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

/// getsockopt(Level, Opt) into `buf`, which holds the value passed in (as
/// inet's `{raw, Level, Opt, Bin}`): the length the kernel wrote.
pub fn get_raw_into(s: &Socket, level: i32, opt: i32, buf: &mut [u8]) -> Result<usize> {
    get_raw(s, level, opt, buf)
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

/// An SO_LINGER setsockopt (`set`) with the socket's linger state kept
/// (`close_may_block`, which the close path reads instead of asking the
/// kernel). A close from another process may run between the setsockopt and
/// the record: the state says "may block" across that window whenever
/// either the old or the new setting does, so such a close goes to a dirty
/// scheduler rather than block a normal one.
fn set_linger(s: &Socket, blocks: bool, set: impl FnOnce() -> Result<()>) -> Result<()> {
    let before = s.close_may_block();
    if blocks {
        s.set_close_may_block(true);
    }
    let r = set();
    s.set_close_may_block(if r.is_ok() { blocks } else { before });
    r
}

/// setopt.
pub fn set(s: &Socket, opt: SetOpt) -> Result<()> {
    match opt {
        SetOpt::Rcvbuf(n) => {
            s.set_rcvbuf(n);
            Ok(())
        }
        SetOpt::Raw { level, opt, bytes } => {
            match (level == libc::SOL_SOCKET && opt == libc::SO_LINGER)
                .then(|| opts::linger_parse(&bytes))
                .flatten()
            {
                Some((on, secs)) => set_linger(s, opts::linger_blocks(on, secs), || {
                    set_raw(s, level, opt, &bytes)
                }),
                None => set_raw(s, level, opt, &bytes),
            }
        }
        SetOpt::Int(spec, i) => {
            set_raw(s, spec.level, spec.opt, &i.to_ne_bytes())?;
            if (spec.level, spec.opt) == (libc::SOL_SOCKET, libc::SO_PRIORITY) {
                s.lock().tcp.priority = Some(i);
            }
            Ok(())
        }
        SetOpt::Linger(spec, on, secs) => set_linger(s, opts::linger_blocks(on, secs), || {
            set_raw(s, spec.level, spec.opt, &opts::linger_bytes(on, secs))
        }),
        SetOpt::Str(spec, bytes) => set_raw(s, spec.level, spec.opt, &bytes),
        SetOpt::Tos(tos) => set_tos(s, tos),
    }
}

/// getopt.
pub fn get(s: &Socket, target: Target) -> Result<OptValue> {
    let mut buf = [0u8; MAX_OPT_LEN];
    match target {
        Target::OtpRcvbuf => Ok(OptValue::Rcvbuf(s.rcvbuf())),
        Target::OtpFd => {
            // the caller may dup it, or hand it on
            s.share_fd();
            s.with_fd(OptValue::Fd)
        }
        Target::OtpDomain => Ok(OptValue::Domain(s.family)),
        Target::Raw(level, opt) => {
            let n = get_raw(s, level, opt, &mut buf)?;
            let len = if n <= MAX_OPT_LEN { n } else { 0 };
            Ok(match opts::int_parse(buf.get(..len).unwrap_or(&[])) {
                Some(i) => OptValue::RawInt(i),
                None => OptValue::RawBytes { buf, len },
            })
        }
        Target::Known(spec) => {
            let n = get_raw(s, spec.level, spec.opt, &mut buf)?;
            let b = buf.get(..n).unwrap_or(&[]);
            match spec.kind {
                Kind::Bool | Kind::ReadOnlyBool => {
                    Ok(OptValue::Bool(opts::int_parse(b).unwrap_or(0) != 0))
                }
                Kind::Int | Kind::ReadOnlyInt => {
                    let i = opts::int_parse(b).ok_or(Error::Os(libc::EINVAL))?;
                    Ok(OptValue::Int(spec, i))
                }
                Kind::Tos => {
                    let i = opts::int_parse(b).ok_or(Error::Os(libc::EINVAL))?;
                    Ok(OptValue::Tos(i))
                }
                Kind::Linger => {
                    let (on, secs) = opts::linger_parse(b).ok_or(Error::Os(libc::EINVAL))?;
                    Ok(OptValue::Linger(on, secs))
                }
                Kind::Str => {
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    let s = String::from_utf8_lossy(b.get(..end).unwrap_or(&[])).into_owned();
                    Ok(OptValue::Str(s))
                }
            }
        }
    }
}
