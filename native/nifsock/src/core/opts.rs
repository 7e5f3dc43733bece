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

const S: i32 = libc::SOL_SOCKET;
const IP: i32 = libc::IPPROTO_IP;
const IP6: i32 = libc::IPPROTO_IPV6;
const TCP: i32 = libc::IPPROTO_TCP;

/// `level name: LEVEL OPTNAME Kind;` rows into `Spec`s (one option a line).
macro_rules! table {
    ($($level:ident $name:ident: $lvl:ident $opt:ident $kind:ident;)*) => {
        &[$(Spec {
            level_name: stringify!($level),
            name: stringify!($name),
            level: $lvl,
            opt: libc::$opt,
            kind: Kind::$kind,
        },)*]
    };
}

/// Every named option nifsock knows.
pub static TABLE: &[Spec] = table! {
    socket reuseaddr:     S   SO_REUSEADDR      Bool;
    socket reuseport:     S   SO_REUSEPORT      Bool;
    socket keepalive:     S   SO_KEEPALIVE      Bool;
    socket linger:        S   SO_LINGER         Linger;
    socket rcvbuf:        S   SO_RCVBUF         Int;
    socket sndbuf:        S   SO_SNDBUF         Int;
    socket priority:      S   SO_PRIORITY       Int;
    socket rcvlowat:      S   SO_RCVLOWAT       Int;
    socket broadcast:     S   SO_BROADCAST      Bool;
    socket dontroute:     S   SO_DONTROUTE      Bool;
    socket oobinline:     S   SO_OOBINLINE      Bool;
    socket bindtodevice:  S   SO_BINDTODEVICE   Str;
    socket type:          S   SO_TYPE           ReadOnlyInt;
    socket error:         S   SO_ERROR          ReadOnlyInt;
    socket domain:        S   SO_DOMAIN         ReadOnlyInt;
    socket protocol:      S   SO_PROTOCOL       ReadOnlyInt;
    socket acceptconn:    S   SO_ACCEPTCONN     ReadOnlyBool;
    ip tos:               IP  IP_TOS            Tos;
    ip ttl:               IP  IP_TTL            Int;
    ip recvtos:           IP  IP_RECVTOS        Bool;
    ip freebind:          IP  IP_FREEBIND       Bool;
    ip transparent:       IP  IP_TRANSPARENT    Bool;
    ipv6 v6only:          IP6 IPV6_V6ONLY       Bool;
    ipv6 tclass:          IP6 IPV6_TCLASS       Int;
    ipv6 unicast_hops:    IP6 IPV6_UNICAST_HOPS Int;
    tcp nodelay:          TCP TCP_NODELAY       Bool;
    tcp cork:             TCP TCP_CORK          Bool;
    tcp keepidle:         TCP TCP_KEEPIDLE      Int;
    tcp keepintvl:        TCP TCP_KEEPINTVL     Int;
    tcp keepcnt:          TCP TCP_KEEPCNT       Int;
    tcp maxseg:           TCP TCP_MAXSEG        Int;
    tcp user_timeout:     TCP TCP_USER_TIMEOUT  Int;
    tcp quickack:         TCP TCP_QUICKACK      Bool;
    tcp congestion:       TCP TCP_CONGESTION    Str;
    tcp defer_accept:     TCP TCP_DEFER_ACCEPT  Int;
};

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
