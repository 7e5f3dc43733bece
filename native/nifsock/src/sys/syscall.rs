//! Thin wrappers over the socket system calls nifsock makes. Each returns the
//! errno on failure; none blocks (every fd is O_NONBLOCK) except `close` on a
//! socket with SO_LINGER {on, N > 0}, which callers keep off normal schedulers.

use std::ffi::c_void;
use std::os::fd::RawFd;

use socket2::SockAddr;

/// Result of a syscall: the value, or errno.
pub type SysResult<T> = Result<T, i32>;

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn check(r: libc::c_int) -> SysResult<libc::c_int> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn check_size(r: libc::ssize_t) -> SysResult<usize> {
    usize::try_from(r).map_err(|_| errno())
}

/// socket(2), non-blocking and close-on-exec from birth.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
pub fn socket(domain: i32, ty: i32, protocol: i32) -> SysResult<RawFd> {
    // SAFETY: plain syscall with integer arguments.
    check(unsafe {
        libc::socket(
            domain,
            ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            protocol,
        )
    })
}

/// socket(2) then fcntl, where SOCK_NONBLOCK doesn't exist (macOS).
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
pub fn socket(domain: i32, ty: i32, protocol: i32) -> SysResult<RawFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = check(unsafe { libc::socket(domain, ty, protocol) })?;
    if let Err(e) = set_nonblock_cloexec(fd) {
        close(fd);
        return Err(e);
    }
    Ok(fd)
}

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC: one call per connection, no
/// fcntl; the peer address isn't asked for (peername/1 fetches it on demand).
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
pub fn accept(fd: RawFd) -> SysResult<RawFd> {
    // SAFETY: NULL address pointers are allowed and mean "don't return the peer".
    check(unsafe {
        libc::accept4(
            fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })
}

/// accept(2) + fcntl where accept4 doesn't exist (macOS). Compiled, untested here.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
pub fn accept(fd: RawFd) -> SysResult<RawFd> {
    // SAFETY: NULL address pointers are allowed.
    let new = check(unsafe { libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut()) })?;
    if let Err(e) = set_nonblock_cloexec(new) {
        close(new);
        return Err(e);
    }
    Ok(new)
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn set_nonblock_cloexec(fd: RawFd) -> SysResult<()> {
    // SAFETY: fcntl on an fd we own, integer arguments.
    unsafe {
        let fl = check(libc::fcntl(fd, libc::F_GETFL))?;
        check(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK))?;
        check(libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC))?;
    }
    Ok(())
}

/// bind(2).
pub fn bind(fd: RawFd, addr: &SockAddr) -> SysResult<()> {
    // SAFETY: addr points to a valid sockaddr of addr.len() bytes.
    check(unsafe { libc::bind(fd, addr.as_ptr().cast(), addr.len()) }).map(|_| ())
}

/// listen(2).
pub fn listen(fd: RawFd, backlog: i32) -> SysResult<()> {
    // SAFETY: plain syscall with integer arguments.
    check(unsafe { libc::listen(fd, backlog) }).map(|_| ())
}

/// connect(2); EINPROGRESS means "wait for writable, then read SO_ERROR".
pub fn connect(fd: RawFd, addr: &SockAddr) -> SysResult<()> {
    // SAFETY: addr points to a valid sockaddr of addr.len() bytes.
    check(unsafe { libc::connect(fd, addr.as_ptr().cast(), addr.len()) }).map(|_| ())
}

/// recv(2) into `buf`; Ok(0) is end of stream.
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> SysResult<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    check_size(unsafe { libc::recv(fd, buf.as_mut_ptr().cast::<c_void>(), buf.len(), flags) })
}

/// sendmsg(2) of an I/O vector (the kernel's writev, with flags): MSG_NOSIGNAL
/// so a closed peer gives EPIPE, never SIGPIPE.
pub fn sendv(fd: RawFd, iov: &[libc::iovec], flags: i32) -> SysResult<usize> {
    let iovlen = iov.len().min(IOV_MAX);
    // SAFETY: msghdr is plain data; zeroed is a valid "no name, no control" value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iovlen as _;
    // SAFETY: msg points to iovlen valid iovecs whose buffers the caller keeps
    // alive (binaries of the calling env); the kernel only reads them.
    check_size(unsafe { libc::sendmsg(fd, &msg, flags | nosignal()) })
}

/// send(2) of one buffer.
pub fn send(fd: RawFd, buf: &[u8], flags: i32) -> SysResult<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes.
    check_size(unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast::<c_void>(),
            buf.len(),
            flags | nosignal(),
        )
    })
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn nosignal() -> i32 {
    libc::MSG_NOSIGNAL
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn nosignal() -> i32 {
    0
}

/// The most entries one sendmsg takes.
pub const IOV_MAX: usize = 1024;

/// shutdown(2).
pub fn shutdown(fd: RawFd, how: i32) -> SysResult<()> {
    // SAFETY: plain syscall with integer arguments.
    check(unsafe { libc::shutdown(fd, how) }).map(|_| ())
}

/// close(2). Errors are ignored: after close(2) returns, the fd is gone even on EINTR (Linux).
pub fn close(fd: RawFd) {
    // SAFETY: the caller owns fd and never uses the number again.
    unsafe { libc::close(fd) };
}

/// setsockopt(2) with raw bytes.
pub fn setsockopt(fd: RawFd, level: i32, name: i32, value: &[u8]) -> SysResult<()> {
    let len = libc::socklen_t::try_from(value.len()).map_err(|_| libc::EINVAL)?;
    // SAFETY: value is valid for reads of len bytes.
    check(unsafe { libc::setsockopt(fd, level, name, value.as_ptr().cast::<c_void>(), len) })
        .map(|_| ())
}

/// getsockopt(2) into `buf`; returns the length the kernel wrote.
pub fn getsockopt(fd: RawFd, level: i32, name: i32, buf: &mut [u8]) -> SysResult<usize> {
    let mut len = libc::socklen_t::try_from(buf.len()).map_err(|_| libc::EINVAL)?;
    // SAFETY: buf is valid for writes of len bytes; len is a valid in/out pointer.
    check(unsafe {
        libc::getsockopt(fd, level, name, buf.as_mut_ptr().cast::<c_void>(), &mut len)
    })?;
    Ok(usize::try_from(len).unwrap_or(0).min(buf.len()))
}

/// getsockname(2).
pub fn sockname(fd: RawFd) -> SysResult<SockAddr> {
    // SAFETY: try_init hands a zeroed sockaddr_storage and its length to the closure,
    // which getsockname fills in; the length it writes back is within the storage.
    unsafe {
        SockAddr::try_init(|storage, len| {
            if libc::getsockname(fd, storage.cast(), len) < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
    }
    .map(|((), a)| a)
    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// getpeername(2).
pub fn peername(fd: RawFd) -> SysResult<SockAddr> {
    // SAFETY: as in `sockname`.
    unsafe {
        SockAddr::try_init(|storage, len| {
            if libc::getpeername(fd, storage.cast(), len) < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
    }
    .map(|((), a)| a)
    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// sendfile(2) from `file_fd` at `offset` (Linux). Returns bytes sent.
#[cfg(target_os = "linux")]
pub fn sendfile(sock: RawFd, file_fd: RawFd, offset: &mut i64, count: usize) -> SysResult<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: off is a valid in/out pointer; both fds are owned by the caller.
    let r = check_size(unsafe { libc::sendfile(sock, file_fd, &mut off, count) });
    *offset = off;
    r
}

/// fcntl(F_DUPFD_CLOEXEC): a new fd for the same socket.
pub fn dup_cloexec(fd: RawFd) -> SysResult<RawFd> {
    // SAFETY: fcntl with integer arguments; the caller owns the new fd.
    check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })
}

/// Sets O_NONBLOCK (for adopted fds only: our own sockets are born non-blocking).
pub fn set_nonblocking(fd: RawFd) -> SysResult<()> {
    // SAFETY: fcntl with integer arguments on an fd the caller owns.
    unsafe {
        let fl = check(libc::fcntl(fd, libc::F_GETFL))?;
        if fl & libc::O_NONBLOCK == 0 {
            check(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK))?;
        }
    }
    Ok(())
}

/// sendfile(2) is wired for Linux only; elsewhere the call reports ENOTSUP.
#[cfg(not(target_os = "linux"))]
pub fn sendfile(
    _sock: RawFd,
    _file_fd: RawFd,
    _offset: &mut i64,
    _count: usize,
) -> SysResult<usize> {
    Err(libc::ENOTSUP)
}
