//! Unix-domain socket paths: bytes ↔ `SockAddr`. A leading NUL byte names the
//! Linux abstract namespace (socket2 encodes that form itself); the empty
//! path is the unnamed address (as `socket`'s: bind autobinds it to an
//! abstract name on Linux, connect is the kernel's EINVAL).

use socket2::SockAddr;

/// The most bytes a path holds (sun_path is 108 bytes, NUL-terminated).
pub const MAX_PATH: usize = 107;

/// A unix address from path bytes (empty: the unnamed address, just the
/// family); None if too long.
pub fn to_addr(bytes: &[u8]) -> Option<SockAddr> {
    use std::os::unix::ffi::OsStrExt;
    if bytes.len() > MAX_PATH {
        return None;
    }
    SockAddr::unix(std::ffi::OsStr::from_bytes(bytes)).ok()
}

/// The path bytes of a unix address (abstract names keep their leading NUL).
pub fn from_addr(a: &SockAddr) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    if let Some(p) = a.as_pathname() {
        return p.as_os_str().as_bytes().to_vec();
    }
    if let Some(name) = a.as_abstract_namespace() {
        let mut v = Vec::with_capacity(name.len() + 1);
        v.push(0);
        v.extend_from_slice(name);
        return v;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_too_long_paths() {
        assert!(to_addr(&[b'a'; 200]).is_none());
    }

    #[test]
    fn the_empty_path_is_the_unnamed_address() {
        let a = to_addr(b"");
        assert_eq!(a.as_ref().map(|a| a.len()), Some(2));
        assert_eq!(a.as_ref().map(from_addr), Some(Vec::new()));
    }

    #[test]
    fn a_path_round_trips() {
        let a = to_addr(b"/tmp/x.sock");
        assert_eq!(a.as_ref().map(from_addr), Some(b"/tmp/x.sock".to_vec()));
    }

    #[test]
    fn an_abstract_name_keeps_its_bytes() {
        let a = to_addr(b"\0abc");
        assert_eq!(
            a.as_ref().and_then(|a| a.as_abstract_namespace()),
            Some(&b"abc"[..])
        );
        assert_eq!(a.as_ref().map(from_addr), Some(b"\0abc".to_vec()));
    }
}
