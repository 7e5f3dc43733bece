//! The socket system calls nifsock makes, each returning the errno on
//! failure; none blocks (every fd is O_NONBLOCK) except `close` on a socket
//! with SO_LINGER {on, N > 0}, which callers keep off normal schedulers.
//!
//! socket2 (`SockRef`) and nix make the calls they wrap, with the same
//! arguments as before they did: socket with SOCK_NONBLOCK | SOCK_CLOEXEC,
//! accept4 without an address, bind, listen, connect, shutdown,
//! getsockname/getpeername, F_DUPFD_CLOEXEC, F_GETFL/F_SETFL, sendfile, close.
//! Hand-written: raw `setsockopt`/`getsockopt` by level and name (both crates
//! only have typed options), and the macOS fallbacks (untested here).
//!
//! Also hand-written on Linux: the per-request calls `recv`, `send` and
//! `sendmsg` (MSG_NOSIGNAL OR-ed in here; send for a vector of one entry), made
//! with `syscall(2)`: the kernel calls recvfrom, sendto and sendmsg, the same
//! as strace showed before. nix's and socket2's wrappers call glibc's `recv`,
//! `send` and `sendmsg`, which are thread cancellation points: in a
//! multi-threaded process (the VM always is) each call switches the thread's
//! cancel type on and off around the system call, two atomic
//! compare-and-swaps. No fd of nifsock's ever blocks and ERTS never cancels
//! its threads, so nothing is lost. Measured on this machine
//! (`bench/profile/cancel-wrappers.c`): 20-30 ns less per call (an EAGAIN
//! recv: 142-151 against 122-128 ns; a send and a recv on a socket pair:
//! 569-581 against 523-538 ns). Elsewhere nix and socket2 make them.
//!
//! Every fd passed in is open for the call: the caller owns it or holds the
//! socket's fd cell, which is what borrowing it as a `BorrowedFd` needs.

use std::ffi::c_void;
#[cfg(not(target_os = "linux"))]
use std::io::IoSlice;
use std::os::fd::{BorrowedFd, IntoRawFd, RawFd};

#[cfg(not(target_os = "linux"))]
use nix::sys::socket::MsgFlags;
use socket2::{Domain, Protocol, SockAddr, SockRef, Type};

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

fn os(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn nix(e: nix::errno::Errno) -> i32 {
    e as i32
}

/// `f` with `fd` borrowed as a socket2 `SockRef`.
fn with_ref<R>(fd: RawFd, f: impl FnOnce(SockRef<'_>) -> R) -> R {
    // SAFETY: fd is open for the duration of the call (module contract) and
    // the borrow doesn't outlive the closure; SockRef never closes it.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    f(SockRef::from(&b))
}

/// socket(2), non-blocking and close-on-exec from birth.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
pub fn socket(domain: i32, ty: i32, protocol: i32) -> SysResult<RawFd> {
    // new_raw adds nothing: the type carries SOCK_NONBLOCK | SOCK_CLOEXEC, one call.
    socket2::Socket::new_raw(
        Domain::from(domain),
        Type::from(ty).nonblocking().cloexec(),
        Some(Protocol::from(protocol)),
    )
    .map(IntoRawFd::into_raw_fd)
    .map_err(os)
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
    use nix::sys::socket::SockFlag;
    // SAFETY: fd is open for the call (module contract); the borrow ends with it.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    nix::sys::socket::accept4(b, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC)
        .map(IntoRawFd::into_raw_fd)
        .map_err(nix)
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
    with_ref(fd, |s| s.bind(addr)).map_err(os)
}

/// listen(2).
pub fn listen(fd: RawFd, backlog: i32) -> SysResult<()> {
    with_ref(fd, |s| s.listen(backlog)).map_err(os)
}

/// connect(2); EINPROGRESS means "wait for writable, then read SO_ERROR".
pub fn connect(fd: RawFd, addr: &SockAddr) -> SysResult<()> {
    with_ref(fd, |s| s.connect(addr)).map_err(os)
}

/// recv(2) into `buf`; Ok(0) is end of stream.
#[cfg(target_os = "linux")]
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> SysResult<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes for the call; fd is
    // open (module contract); recvfrom(2) takes NULL for the address and its
    // length. Integers go as full c_longs: syscall(2) reads every variadic
    // argument as a long.
    raw(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            libc::c_long::from(fd),
            buf.as_mut_ptr(),
            buf.len(),
            libc::c_long::from(flags),
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })
}

/// recv(2) into `buf` (nix); Ok(0) is end of stream.
#[cfg(not(target_os = "linux"))]
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> SysResult<usize> {
    nix::sys::socket::recv(fd, buf, MsgFlags::from_bits_retain(flags)).map_err(nix)
}

/// sendmsg(2) of an I/O vector (the kernel's writev, with flags): MSG_NOSIGNAL
/// so a closed peer gives EPIPE, never SIGPIPE. A vector of one entry goes
/// out with send(2) instead: the same bytes and flags, without the kernel
/// copying in a `msghdr` and importing an iovec array (about 30-50 ns less
/// per call here, measured against sendmsg on a loopback socket).
pub fn sendv(fd: RawFd, iov: &[libc::iovec], flags: i32) -> SysResult<usize> {
    if let [one] = iov {
        let buf: &[u8] = if one.iov_len == 0 {
            &[]
        } else {
            // SAFETY: the entry describes the caller's buffer (a binary of
            // the calling env, or memory it owns), alive and unmodified for
            // this call, of iov_len readable bytes from iov_base (not null:
            // its length is not 0).
            unsafe { std::slice::from_raw_parts(one.iov_base.cast::<u8>(), one.iov_len) }
        };
        return send(fd, buf, flags);
    }
    let iov = iov.get(..IOV_MAX).unwrap_or(iov);
    sendmsg(fd, iov, flags | nosignal())
}

/// sendmsg(2) of `iov` (at most IOV_MAX entries), no address, no control data.
#[cfg(target_os = "linux")]
fn sendmsg(fd: RawFd, iov: &[libc::iovec], flags: i32) -> SysResult<usize> {
    // SAFETY: msghdr is plain data (integers and pointers), valid all zero.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len();
    // SAFETY: msg points at the caller's iovec array of msg_iovlen entries,
    // whose buffers (binaries of the calling env, or memory it owns) are
    // alive and unmodified for this call; sendmsg(2) only reads them. fd is
    // open (module contract).
    raw(unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            libc::c_long::from(fd),
            std::ptr::from_ref(&msg),
            libc::c_long::from(flags),
        )
    })
}

/// sendmsg(2) of `iov` (socket2's vectored send).
#[cfg(not(target_os = "linux"))]
fn sendmsg(fd: RawFd, iov: &[libc::iovec], flags: i32) -> SysResult<usize> {
    // SAFETY: std guarantees IoSlice is ABI compatible with iovec on Unix, so
    // the slice can be viewed as IoSlices; their buffers are the caller's
    // (binaries of the calling env), alive and unmodified for this call.
    let bufs: &[IoSlice<'_>] =
        unsafe { std::slice::from_raw_parts(iov.as_ptr().cast::<IoSlice<'_>>(), iov.len()) };
    with_ref(fd, |s| s.send_vectored_with_flags(bufs, flags)).map_err(os)
}

/// send(2) of one buffer (the kernel's sendto without an address).
#[cfg(target_os = "linux")]
pub fn send(fd: RawFd, buf: &[u8], flags: i32) -> SysResult<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes for the call; fd is
    // open (module contract); sendto(2) takes NULL and 0 for no address.
    raw(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(fd),
            buf.as_ptr(),
            buf.len(),
            libc::c_long::from(flags | nosignal()),
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::c_long,
        )
    })
}

/// send(2) of one buffer (nix).
#[cfg(not(target_os = "linux"))]
pub fn send(fd: RawFd, buf: &[u8], flags: i32) -> SysResult<usize> {
    nix::sys::socket::send(fd, buf, MsgFlags::from_bits_retain(flags | nosignal())).map_err(nix)
}

/// The result of `syscall(2)` for a call that returns a byte count.
#[cfg(target_os = "linux")]
fn raw(r: libc::c_long) -> SysResult<usize> {
    usize::try_from(r).map_err(|_| errno())
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
    use nix::sys::socket::Shutdown;
    let how = match how {
        libc::SHUT_RD => Shutdown::Read,
        libc::SHUT_WR => Shutdown::Write,
        libc::SHUT_RDWR => Shutdown::Both,
        _ => return Err(libc::EINVAL),
    };
    nix::sys::socket::shutdown(fd, how).map_err(nix)
}

/// close(2). Errors are ignored: after close(2) returns, the fd is gone even on EINTR (Linux).
pub fn close(fd: RawFd) {
    // The caller owns fd and never uses the number again.
    let _ = nix::unistd::close(fd);
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
    with_ref(fd, |s| s.local_addr()).map_err(os)
}

/// getpeername(2).
pub fn peername(fd: RawFd) -> SysResult<SockAddr> {
    with_ref(fd, |s| s.peer_addr()).map_err(os)
}

/// sendfile(2) from `file_fd` at `offset` (Linux). Returns bytes sent.
#[cfg(target_os = "linux")]
pub fn sendfile(sock: RawFd, file_fd: RawFd, offset: &mut i64, count: usize) -> SysResult<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: both fds are open for the call (module contract); the borrows end with it.
    let (out, inp) = unsafe {
        (
            BorrowedFd::borrow_raw(sock),
            BorrowedFd::borrow_raw(file_fd),
        )
    };
    let r = nix::sys::sendfile::sendfile(out, inp, Some(&mut off), count).map_err(nix);
    *offset = off;
    r
}

/// fcntl(F_DUPFD_CLOEXEC): a new fd for the same socket.
pub fn dup_cloexec(fd: RawFd) -> SysResult<RawFd> {
    // socket2's try_clone is fcntl(F_DUPFD_CLOEXEC, 0); the caller owns the new fd.
    with_ref(fd, |s| s.try_clone())
        .map(IntoRawFd::into_raw_fd)
        .map_err(os)
}

/// Sets O_NONBLOCK (for adopted fds only: our own sockets are born non-blocking).
pub fn set_nonblocking(fd: RawFd) -> SysResult<()> {
    // socket2: F_GETFL, then F_SETFL only if O_NONBLOCK was not set yet.
    with_ref(fd, |s| s.set_nonblocking(true)).map_err(os)
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
