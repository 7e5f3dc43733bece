//! The address families nifsock opens: IPv4, IPv6, unix domain.

/// Address family of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    Inet,
    /// IPv6.
    Inet6,
    /// Unix domain.
    Local,
}

impl Family {
    /// The AF_* constant.
    pub fn raw(self) -> i32 {
        match self {
            Family::Inet => libc::AF_INET,
            Family::Inet6 => libc::AF_INET6,
            Family::Local => libc::AF_UNIX,
        }
    }

    /// From an AF_* constant.
    pub fn from_raw(af: i32) -> Option<Family> {
        match af {
            libc::AF_INET => Some(Family::Inet),
            libc::AF_INET6 => Some(Family::Inet6),
            libc::AF_UNIX => Some(Family::Local),
            _ => None,
        }
    }
}
