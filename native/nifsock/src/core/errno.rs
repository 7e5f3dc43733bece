//! errno → the `inet:posix()` atom name (the lower-case errno name), as OTP's
//! socket returns it. Unknown numbers come back as `None` (encoded as the integer).

/// The lower-case name of `errno`, if it is one `inet:posix()` knows.
pub fn name(errno: i32) -> Option<&'static str> {
    let n = match errno {
        libc::EACCES => "eacces",
        libc::EADDRINUSE => "eaddrinuse",
        libc::EADDRNOTAVAIL => "eaddrnotavail",
        libc::EAFNOSUPPORT => "eafnosupport",
        libc::EAGAIN => "eagain",
        libc::EALREADY => "ealready",
        libc::EBADF => "ebadf",
        libc::EBUSY => "ebusy",
        libc::ECONNABORTED => "econnaborted",
        libc::ECONNREFUSED => "econnrefused",
        libc::ECONNRESET => "econnreset",
        libc::EDESTADDRREQ => "edestaddrreq",
        libc::EEXIST => "eexist",
        libc::EFAULT => "efault",
        libc::EHOSTDOWN => "ehostdown",
        libc::EHOSTUNREACH => "ehostunreach",
        libc::EINPROGRESS => "einprogress",
        libc::EINTR => "eintr",
        libc::EINVAL => "einval",
        libc::EIO => "eio",
        libc::EISCONN => "eisconn",
        libc::ELOOP => "eloop",
        libc::EMFILE => "emfile",
        libc::EMSGSIZE => "emsgsize",
        libc::ENAMETOOLONG => "enametoolong",
        libc::ENETDOWN => "enetdown",
        libc::ENETRESET => "enetreset",
        libc::ENETUNREACH => "enetunreach",
        libc::ENFILE => "enfile",
        libc::ENOBUFS => "enobufs",
        libc::ENODEV => "enodev",
        libc::ENOENT => "enoent",
        libc::ENOMEM => "enomem",
        libc::ENOPROTOOPT => "enoprotoopt",
        libc::ENOSPC => "enospc",
        libc::ENOTCONN => "enotconn",
        libc::ENOTDIR => "enotdir",
        libc::ENOTSOCK => "enotsock",
        libc::ENOTSUP => "enotsup",
        libc::ENXIO => "enxio",
        libc::EPERM => "eperm",
        libc::EPIPE => "epipe",
        libc::EPROTO => "eproto",
        libc::EPROTONOSUPPORT => "eprotonosupport",
        libc::EPROTOTYPE => "eprototype",
        libc::EROFS => "erofs",
        libc::ESOCKTNOSUPPORT => "esocktnosupport",
        libc::ETIMEDOUT => "etimedout",
        _ => return None,
    };
    Some(n)
}

/// EAGAIN or (where it differs) EWOULDBLOCK: the call would block.
pub fn is_would_block(e: i32) -> bool {
    e == libc::EAGAIN || e == libc::EWOULDBLOCK
}

#[cfg(test)]
mod tests {
    use super::name;

    #[test]
    fn common_errnos_have_posix_names() {
        assert_eq!(name(libc::EAGAIN), Some("eagain"));
        assert_eq!(name(libc::ECONNRESET), Some("econnreset"));
        assert_eq!(name(libc::EADDRINUSE), Some("eaddrinuse"));
        assert_eq!(name(libc::EMFILE), Some("emfile"));
        assert_eq!(name(libc::EPIPE), Some("epipe"));
    }

    #[test]
    fn unknown_errno_has_no_name() {
        assert_eq!(name(0), None);
        assert_eq!(name(-1), None);
        assert_eq!(name(100_000), None);
    }

    #[test]
    fn names_are_lower_case_and_start_with_e() {
        for e in 1..200 {
            if let Some(n) = name(e) {
                assert!(n.starts_with('e'), "{n}");
                assert_eq!(n, n.to_lowercase());
            }
        }
    }
}
