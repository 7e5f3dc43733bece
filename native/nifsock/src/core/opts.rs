//! The socket option table: `{Level, Name}` ↔ (level, optname, value kind), and
//! the value codecs. Options are told apart by level *and* number (OTP's socket
//! mistakes TCP_NODELAY for IP_TOS because both are 1).

/// How an option's value is encoded for setsockopt/getsockopt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `boolean()` ↔ int 0/1.
    Bool,
    /// `integer()` ↔ int.
    Int,
    /// `#{onoff := boolean(), linger := integer()}` ↔ struct linger.
    Linger,
    /// A string (charlist or binary) ↔ bytes (bindtodevice, congestion).
    Str,
    /// IP_TOS: an integer or lowdelay | throughput | reliability | mincost.
    Tos,
    /// Read-only integer (type, error, domain, protocol, acceptconn as bool).
    ReadOnlyInt,
    /// Read-only boolean.
    ReadOnlyBool,
}

/// One known option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The level atom's name.
    pub level_name: &'static str,
    /// The option atom's name.
    pub name: &'static str,
    /// SOL_SOCKET, IPPROTO_IP, ...
    pub level: i32,
    /// SO_*, IP_*, TCP_*...
    pub opt: i32,
    /// The value codec.
    pub kind: Kind,
}

const fn spec(
    level_name: &'static str,
    name: &'static str,
    level: i32,
    opt: i32,
    kind: Kind,
) -> Spec {
    Spec {
        level_name,
        name,
        level,
        opt,
        kind,
    }
}

const S: i32 = libc::SOL_SOCKET;
const IP: i32 = libc::IPPROTO_IP;
const IP6: i32 = libc::IPPROTO_IPV6;
const TCP: i32 = libc::IPPROTO_TCP;

/// Every named option nifsock knows.
pub static TABLE: &[Spec] = &[
    spec("socket", "reuseaddr", S, libc::SO_REUSEADDR, Kind::Bool),
    spec("socket", "reuseport", S, libc::SO_REUSEPORT, Kind::Bool),
    spec("socket", "keepalive", S, libc::SO_KEEPALIVE, Kind::Bool),
    spec("socket", "linger", S, libc::SO_LINGER, Kind::Linger),
    spec("socket", "rcvbuf", S, libc::SO_RCVBUF, Kind::Int),
    spec("socket", "sndbuf", S, libc::SO_SNDBUF, Kind::Int),
    spec("socket", "priority", S, libc::SO_PRIORITY, Kind::Int),
    spec("socket", "rcvlowat", S, libc::SO_RCVLOWAT, Kind::Int),
    spec("socket", "broadcast", S, libc::SO_BROADCAST, Kind::Bool),
    spec("socket", "dontroute", S, libc::SO_DONTROUTE, Kind::Bool),
    spec("socket", "oobinline", S, libc::SO_OOBINLINE, Kind::Bool),
    spec(
        "socket",
        "bindtodevice",
        S,
        libc::SO_BINDTODEVICE,
        Kind::Str,
    ),
    spec("socket", "type", S, libc::SO_TYPE, Kind::ReadOnlyInt),
    spec("socket", "error", S, libc::SO_ERROR, Kind::ReadOnlyInt),
    spec("socket", "domain", S, libc::SO_DOMAIN, Kind::ReadOnlyInt),
    spec(
        "socket",
        "protocol",
        S,
        libc::SO_PROTOCOL,
        Kind::ReadOnlyInt,
    ),
    spec(
        "socket",
        "acceptconn",
        S,
        libc::SO_ACCEPTCONN,
        Kind::ReadOnlyBool,
    ),
    spec("ip", "tos", IP, libc::IP_TOS, Kind::Tos),
    spec("ip", "ttl", IP, libc::IP_TTL, Kind::Int),
    spec("ip", "recvtos", IP, libc::IP_RECVTOS, Kind::Bool),
    spec("ip", "freebind", IP, libc::IP_FREEBIND, Kind::Bool),
    spec("ip", "transparent", IP, libc::IP_TRANSPARENT, Kind::Bool),
    spec("ipv6", "v6only", IP6, libc::IPV6_V6ONLY, Kind::Bool),
    spec("ipv6", "tclass", IP6, libc::IPV6_TCLASS, Kind::Int),
    spec(
        "ipv6",
        "unicast_hops",
        IP6,
        libc::IPV6_UNICAST_HOPS,
        Kind::Int,
    ),
    spec("tcp", "nodelay", TCP, libc::TCP_NODELAY, Kind::Bool),
    spec("tcp", "cork", TCP, libc::TCP_CORK, Kind::Bool),
    spec("tcp", "keepidle", TCP, libc::TCP_KEEPIDLE, Kind::Int),
    spec("tcp", "keepintvl", TCP, libc::TCP_KEEPINTVL, Kind::Int),
    spec("tcp", "keepcnt", TCP, libc::TCP_KEEPCNT, Kind::Int),
    spec("tcp", "maxseg", TCP, libc::TCP_MAXSEG, Kind::Int),
    spec(
        "tcp",
        "user_timeout",
        TCP,
        libc::TCP_USER_TIMEOUT,
        Kind::Int,
    ),
    spec("tcp", "quickack", TCP, libc::TCP_QUICKACK, Kind::Bool),
    spec("tcp", "congestion", TCP, libc::TCP_CONGESTION, Kind::Str),
    spec(
        "tcp",
        "defer_accept",
        TCP,
        libc::TCP_DEFER_ACCEPT,
        Kind::Int,
    ),
];

/// Looks an option up by its level and name atoms.
pub fn lookup(level: &str, name: &str) -> Option<&'static Spec> {
    TABLE
        .iter()
        .find(|s| s.level_name == level && s.name == name)
}

/// The IP_TOS atoms and their values.
pub fn tos_value(name: &str) -> Option<i32> {
    match name {
        "lowdelay" => Some(libc::IPTOS_LOWDELAY as i32),
        "throughput" => Some(libc::IPTOS_THROUGHPUT as i32),
        "reliability" => Some(libc::IPTOS_RELIABILITY as i32),
        "mincost" => Some(0x02),
        _ => None,
    }
}

/// The IP_TOS atom of a value, as socket's getopt names it.
pub fn tos_name(tos: i32) -> Option<&'static str> {
    match tos {
        0x10 => Some("lowdelay"),
        0x08 => Some("throughput"),
        0x04 => Some("reliability"),
        0x02 => Some("mincost"),
        _ => None,
    }
}

/// The priority Linux derives from a TOS value when IP_TOS changes
/// (net/ipv4/route.c: ip_tos2prio[IPTOS_TOS(tos) >> 1]).
pub fn tos_to_priority(tos: i32) -> i32 {
    const IP_TOS2PRIO: [i32; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    let idx = usize::try_from((tos & 0x1E) >> 1).unwrap_or(0);
    IP_TOS2PRIO.get(idx).copied().unwrap_or(0)
}

/// Whether a linger value makes close(2) block: on, with a positive timeout.
pub fn linger_blocks(onoff: bool, secs: i32) -> bool {
    onoff && secs > 0
}

/// `struct linger` as bytes.
pub fn linger_bytes(onoff: bool, secs: i32) -> Vec<u8> {
    let l = libc::linger {
        l_onoff: i32::from(onoff),
        l_linger: secs,
    };
    let mut v = Vec::with_capacity(8);
    v.extend_from_slice(&l.l_onoff.to_ne_bytes());
    v.extend_from_slice(&l.l_linger.to_ne_bytes());
    v
}

/// Parses `struct linger` bytes (as getsockopt wrote them).
pub fn linger_parse(b: &[u8]) -> Option<(bool, i32)> {
    let on = i32::from_ne_bytes(b.get(0..4)?.try_into().ok()?);
    let secs = i32::from_ne_bytes(b.get(4..8)?.try_into().ok()?);
    Some((on != 0, secs))
}

/// Parses a native int.
pub fn int_parse(b: &[u8]) -> Option<i32> {
    match b.len() {
        1 => b.first().map(|&x| i32::from(x)),
        4 => Some(i32::from_ne_bytes(b.try_into().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodelay_and_tos_are_told_apart_by_level() {
        let nodelay = lookup("tcp", "nodelay");
        let tos = lookup("ip", "tos");
        assert_eq!(
            nodelay.map(|s| s.opt),
            tos.map(|s| s.opt),
            "both are 1 on Linux"
        );
        assert_ne!(nodelay.map(|s| s.level), tos.map(|s| s.level));
        assert_eq!(nodelay.map(|s| s.kind), Some(Kind::Bool));
        assert_eq!(tos.map(|s| s.kind), Some(Kind::Tos));
    }

    #[test]
    fn every_entry_is_unique() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in TABLE.iter().skip(i + 1) {
                assert!(!(a.level_name == b.level_name && a.name == b.name), "{a:?}");
                assert!(!(a.level == b.level && a.opt == b.opt), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn unknown_options_are_not_found() {
        assert!(lookup("tcp", "reuseaddr").is_none());
        assert!(lookup("nope", "nodelay").is_none());
    }

    #[test]
    fn tos_names_round_trip() {
        for name in ["lowdelay", "throughput", "reliability", "mincost"] {
            assert_eq!(tos_value(name).and_then(tos_name), Some(name));
        }
        assert_eq!(tos_name(0), None);
        assert_eq!(tos_name(0x18), None);
        assert_eq!(tos_name(0x20), None);
    }

    #[test]
    fn tos_priority_matches_linux() {
        assert_eq!(tos_to_priority(0x10), 6); // lowdelay: interactive
        assert_eq!(tos_to_priority(0x08), 2); // throughput: bulk
        assert_eq!(tos_to_priority(0x00), 0);
        assert_eq!(tos_to_priority(0x18), 4);
        assert_eq!(tos_to_priority(0xff), 4);
    }

    #[test]
    fn linger_round_trips() {
        let b = linger_bytes(true, 7);
        assert_eq!(linger_parse(&b), Some((true, 7)));
        assert_eq!(linger_parse(b.get(..3).unwrap_or(&[])), None);
    }

    #[test]
    fn only_positive_linger_blocks() {
        assert!(linger_blocks(true, 1));
        assert!(!linger_blocks(true, 0));
        assert!(!linger_blocks(false, 5));
    }
}
