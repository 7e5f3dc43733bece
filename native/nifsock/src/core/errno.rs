//! errno → the `inet:posix()` atom name (the lower-case errno name), as OTP's
//! socket returns it: every Linux errno that `inet:posix()` names. Unknown
//! numbers come back as `None` (encoded as the integer).

/// The lower-case name of `errno`, if it is one `inet:posix()` knows.
pub fn name(errno: i32) -> Option<&'static str> {
    let n = match errno {
        libc::E2BIG => "e2big",
        libc::EACCES => "eacces",
        libc::EADDRINUSE => "eaddrinuse",
        libc::EADDRNOTAVAIL => "eaddrnotavail",
        libc::EAFNOSUPPORT => "eafnosupport",
        libc::EAGAIN => "eagain",
        libc::EALREADY => "ealready",
        libc::EBADF => "ebadf",
        libc::EBADFD => "ebadfd",
        libc::EBADMSG => "ebadmsg",
        libc::EBUSY => "ebusy",
        libc::ECHILD => "echild",
        libc::ECOMM => "ecomm",
        libc::ECONNABORTED => "econnaborted",
        libc::ECONNREFUSED => "econnrefused",
        libc::ECONNRESET => "econnreset",
        libc::EDEADLK => "edeadlk",
        libc::EDESTADDRREQ => "edestaddrreq",
        libc::EDOM => "edom",
        libc::EDQUOT => "edquot",
        libc::EEXIST => "eexist",
        libc::EFAULT => "efault",
        libc::EFBIG => "efbig",
        libc::EHOSTDOWN => "ehostdown",
        libc::EHOSTUNREACH => "ehostunreach",
        libc::EIDRM => "eidrm",
        libc::EINPROGRESS => "einprogress",
        libc::EINTR => "eintr",
        libc::EINVAL => "einval",
        libc::EIO => "eio",
        libc::EISCONN => "eisconn",
        libc::EISDIR => "eisdir",
        libc::ELOOP => "eloop",
        libc::EMFILE => "emfile",
        libc::EMLINK => "emlink",
        libc::EMSGSIZE => "emsgsize",
        libc::EMULTIHOP => "emultihop",
        libc::ENAMETOOLONG => "enametoolong",
        libc::ENETDOWN => "enetdown",
        libc::ENETRESET => "enetreset",
        libc::ENETUNREACH => "enetunreach",
        libc::ENFILE => "enfile",
        libc::ENOBUFS => "enobufs",
        libc::ENODATA => "enodata",
        libc::ENODEV => "enodev",
        libc::ENOENT => "enoent",
        libc::ENOEXEC => "enoexec",
        libc::ENOLCK => "enolck",
        libc::ENOLINK => "enolink",
        libc::ENOMEM => "enomem",
        libc::ENOMSG => "enomsg",
        libc::ENOPROTOOPT => "enoprotoopt",
        libc::ENOSPC => "enospc",
        libc::ENOSR => "enosr",
        libc::ENOSTR => "enostr",
        libc::ENOSYS => "enosys",
        libc::ENOTBLK => "enotblk",
        libc::ENOTCONN => "enotconn",
        libc::ENOTDIR => "enotdir",
        libc::ENOTEMPTY => "enotempty",
        libc::ENOTRECOVERABLE => "enotrecoverable",
        libc::ENOTSOCK => "enotsock",
        libc::ENOTSUP => "enotsup",
        libc::ENOTTY => "enotty",
        libc::ENOTUNIQ => "enotuniq",
        libc::ENXIO => "enxio",
        libc::EOVERFLOW => "eoverflow",
        libc::EOWNERDEAD => "eownerdead",
        libc::EPERM => "eperm",
        libc::EPFNOSUPPORT => "epfnosupport",
        libc::EPIPE => "epipe",
        libc::EPROTO => "eproto",
        libc::EPROTONOSUPPORT => "eprotonosupport",
        libc::EPROTOTYPE => "eprototype",
        libc::ERANGE => "erange",
        libc::EREMOTE => "eremote",
        libc::EREMOTEIO => "eremoteio",
        libc::EROFS => "erofs",
        libc::ESHUTDOWN => "eshutdown",
        libc::ESOCKTNOSUPPORT => "esocktnosupport",
        libc::ESPIPE => "espipe",
        libc::ESRCH => "esrch",
        libc::ESTALE => "estale",
        libc::ETIME => "etime",
        libc::ETIMEDOUT => "etimedout",
        libc::ETOOMANYREFS => "etoomanyrefs",
        libc::ETXTBSY => "etxtbsy",
        libc::EUCLEAN => "euclean",
        libc::EUSERS => "eusers",
        libc::EXDEV => "exdev",
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
    fn process_and_file_errnos_have_posix_names() {
        // ESRCH: a monitor of a dead process (controlling_process).
        assert_eq!(name(libc::ESRCH), Some("esrch"));
        assert_eq!(name(libc::ENOSYS), Some("enosys"));
        assert_eq!(name(libc::ENOTEMPTY), Some("enotempty"));
        assert_eq!(name(libc::ESHUTDOWN), Some("eshutdown"));
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
