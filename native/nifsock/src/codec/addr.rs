//! Socket addresses: OTP's sockaddr maps (`#{family => inet, addr => {127,0,0,1},
//! port => 80}`, inet6 with flowinfo/scope_id, `#{family => local, path => P}`)
//! and the atoms `any` / `loopback` ↔ `socket2::SockAddr`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use rustler::types::map::MapIterator;
use rustler::{Atom, Encoder, Env, Term};
use socket2::SockAddr;

use crate::atoms;
use crate::error::{Error, Result};

pub use crate::core::family::Family;

/// Family <-> the atoms OTP uses.
impl Family {
    /// The atom OTP uses.
    pub fn atom(self) -> Atom {
        match self {
            Family::Inet => atoms::inet(),
            Family::Inet6 => atoms::inet6(),
            Family::Local => atoms::local(),
        }
    }

    /// From the atom.
    pub fn from_atom(a: Atom) -> Option<Family> {
        if a == atoms::inet() {
            Some(Family::Inet)
        } else if a == atoms::inet6() {
            Some(Family::Inet6)
        } else if a == atoms::local() {
            Some(Family::Local)
        } else {
            None
        }
    }
}

/// Decodes `any`, `loopback`, `broadcast` or a sockaddr map for a socket of `family`.
pub fn decode(term: Term, family: Family) -> Result<SockAddr> {
    if let Ok(a) = term.decode::<Atom>() {
        return special(a, family, 0).map(SockAddr::from);
    }
    if !term.is_map() {
        return Err(Error::BadArg);
    }
    let mut fam = None;
    let mut addr = None;
    let mut port: u16 = 0;
    let mut flowinfo: u32 = 0;
    let mut scope_id: u32 = 0;
    let mut path = None;
    for (k, v) in MapIterator::new(term).ok_or(Error::BadArg)? {
        let key = k.decode::<Atom>().map_err(|_| Error::Invalid("sockaddr"))?;
        if key == atoms::family() {
            fam = Some(
                v.decode::<Atom>()
                    .ok()
                    .and_then(Family::from_atom)
                    .ok_or(Error::Invalid("sockaddr"))?,
            );
        } else if key == atoms::addr() {
            addr = Some(v);
        } else if key == atoms::port() {
            port = exact::<u16>(v).ok_or(Error::Invalid("sockaddr"))?;
        } else if key == atoms::flowinfo() {
            flowinfo = v.decode::<u32>().map_err(|_| Error::Invalid("sockaddr"))?;
        } else if key == atoms::scope_id() {
            scope_id = v.decode::<u32>().map_err(|_| Error::Invalid("sockaddr"))?;
        } else if key == atoms::path() {
            path = Some(v);
        }
    }
    let fam = fam.ok_or(Error::Invalid("sockaddr"))?;
    if fam != family {
        return Err(Error::Os(libc::EAFNOSUPPORT));
    }
    match fam {
        Family::Inet => {
            let ip = match addr {
                None => Ipv4Addr::UNSPECIFIED,
                Some(t) => match t.decode::<Atom>() {
                    Ok(a) => match special(a, fam, port)? {
                        SocketAddr::V4(v4) => *v4.ip(),
                        SocketAddr::V6(_) => return Err(Error::Invalid("sockaddr")),
                    },
                    Err(_) => ipv4(t).ok_or(Error::Invalid("sockaddr"))?,
                },
            };
            Ok(SockAddr::from(SocketAddrV4::new(ip, port)))
        }
        Family::Inet6 => {
            let ip = match addr {
                None => Ipv6Addr::UNSPECIFIED,
                Some(t) => match t.decode::<Atom>() {
                    Ok(a) => match special(a, fam, port)? {
                        SocketAddr::V6(v6) => *v6.ip(),
                        SocketAddr::V4(_) => return Err(Error::Invalid("sockaddr")),
                    },
                    Err(_) => ipv6(t).ok_or(Error::Invalid("sockaddr"))?,
                },
            };
            Ok(SockAddr::from(SocketAddrV6::new(
                ip, port, flowinfo, scope_id,
            )))
        }
        Family::Local => {
            let p = path.ok_or(Error::Invalid("sockaddr"))?;
            let bytes = crate::codec::args::string_bytes(p).ok_or(Error::Invalid("sockaddr"))?;
            crate::core::unix_path::to_addr(&bytes).ok_or(Error::Invalid("sockaddr"))
        }
    }
}

/// `any`, `loopback` or `broadcast`: the address atoms of the IP families.
pub fn is_ip_name(term: Term) -> bool {
    term.decode::<Atom>()
        .is_ok_and(|a| a == atoms::any() || a == atoms::loopback() || a == atoms::broadcast())
}

fn special(a: Atom, family: Family, port: u16) -> Result<SocketAddr> {
    let v4 = |ip| Ok(SocketAddr::V4(SocketAddrV4::new(ip, port)));
    let v6 = |ip| Ok(SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0)));
    match family {
        Family::Inet if a == atoms::any() => v4(Ipv4Addr::UNSPECIFIED),
        Family::Inet if a == atoms::loopback() => v4(Ipv4Addr::LOCALHOST),
        Family::Inet if a == atoms::broadcast() => v4(Ipv4Addr::BROADCAST),
        Family::Inet6 if a == atoms::any() => v6(Ipv6Addr::UNSPECIFIED),
        Family::Inet6 if a == atoms::loopback() => v6(Ipv6Addr::LOCALHOST),
        _ => Err(Error::Invalid("sockaddr")),
    }
}

/// An integer that fits `T` exactly. Rustler's u8/u16 decoders truncate
/// (`as`): port 70000 would bind port 4464 and octet 256 would be 0.
fn exact<T: TryFrom<u64>>(t: Term) -> Option<T> {
    T::try_from(t.decode::<u64>().ok()?).ok()
}

fn ipv4(t: Term) -> Option<Ipv4Addr> {
    let items = rustler::types::tuple::get_tuple(t).ok()?;
    let [a, b, c, d] = items.as_slice() else {
        return None;
    };
    Some(Ipv4Addr::new(
        exact(*a)?,
        exact(*b)?,
        exact(*c)?,
        exact(*d)?,
    ))
}

fn ipv6(t: Term) -> Option<Ipv6Addr> {
    let items = rustler::types::tuple::get_tuple(t).ok()?;
    if items.len() != 8 {
        return None;
    }
    let mut seg = [0u16; 8];
    for (s, item) in seg.iter_mut().zip(items) {
        *s = exact::<u16>(item)?;
    }
    Some(Ipv6Addr::from(seg))
}

/// Encodes an address as OTP's sockaddr map.
pub fn encode<'a>(env: Env<'a>, a: &SockAddr) -> Term<'a> {
    if let Some(sa) = a.as_socket() {
        return match sa {
            SocketAddr::V4(v4) => {
                let o = v4.ip().octets();
                let ip = (o[0], o[1], o[2], o[3]).encode(env);
                map(
                    env,
                    &[
                        (atoms::family(), atoms::inet().encode(env)),
                        (atoms::port(), v4.port().encode(env)),
                        (atoms::addr(), ip),
                    ],
                )
            }
            SocketAddr::V6(v6) => {
                let s = v6.ip().segments();
                let ip = rustler::types::tuple::make_tuple(env, &s.map(|x| x.encode(env)));
                map(
                    env,
                    &[
                        (atoms::family(), atoms::inet6().encode(env)),
                        (atoms::port(), v6.port().encode(env)),
                        (atoms::addr(), ip),
                        (atoms::flowinfo(), v6.flowinfo().encode(env)),
                        (atoms::scope_id(), v6.scope_id().encode(env)),
                    ],
                )
            }
        };
    }
    let path = crate::core::unix_path::from_addr(a);
    let mut bin = rustler::NewBinary::new(env, path.len());
    bin.as_mut_slice().copy_from_slice(&path);
    let path: Term = bin.into();
    map(
        env,
        &[
            (atoms::family(), atoms::local().encode(env)),
            (atoms::path(), path),
        ],
    )
}

/// inet's form of an address (gen_tcp's peername/sockname): `{IP, Port}`,
/// or `{local, Path}`.
pub fn encode_inet<'a>(env: Env<'a>, a: &SockAddr) -> Term<'a> {
    match a.as_socket() {
        Some(SocketAddr::V4(v4)) => {
            let o = v4.ip().octets();
            ((o[0], o[1], o[2], o[3]), v4.port()).encode(env)
        }
        Some(SocketAddr::V6(v6)) => {
            let s = v6.ip().segments();
            let ip = rustler::types::tuple::make_tuple(env, &s.map(|x| x.encode(env)));
            (ip, v6.port()).encode(env)
        }
        None => {
            let path = crate::core::unix_path::from_addr(a);
            let mut bin = rustler::NewBinary::new(env, path.len());
            bin.as_mut_slice().copy_from_slice(&path);
            let path: Term = bin.into();
            (atoms::local(), path).encode(env)
        }
    }
}

fn map<'a>(env: Env<'a>, kv: &[(Atom, Term<'a>)]) -> Term<'a> {
    let keys: Vec<Term> = kv.iter().map(|(k, _)| k.encode(env)).collect();
    let vals: Vec<Term> = kv.iter().map(|(_, v)| *v).collect();
    Term::map_from_term_arrays(env, &keys, &vals)
        .unwrap_or_else(|_| rustler::types::map::map_new(env))
}
