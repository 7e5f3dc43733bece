//! Thin epoll and eventfd wrappers for nifsock's own readiness set.

use std::os::fd::RawFd;

/// Readable, peer closed, error or hang-up: all mean "try the read".
pub const IN: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLERR | libc::EPOLLHUP) as u32;
/// Peer shut down writing, hang-up or error: persistent conditions.
pub const HUP: u32 = (libc::EPOLLRDHUP | libc::EPOLLERR | libc::EPOLLHUP) as u32;
/// Writable, error or hang-up: all mean "try the write" (or the connect).
pub const WR: u32 = (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32;
/// Writable (added to [`IN`] once a socket waits for a write).
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// Error or hang-up: writes fail from now on (a write wait is ready at once).
pub const WHUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
/// Edge-triggered (no ONESHOT: a registration serves every wait).
pub const ET: u32 = libc::EPOLLET as u32;

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// epoll_create1(EPOLL_CLOEXEC).
pub fn create() -> Result<RawFd, i32> {
    // SAFETY: no pointers; returns a new fd or -1.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd)
    }
}

/// A nonblocking, close-on-exec eventfd (to make the set readable on demand).
pub fn eventfd() -> Result<RawFd, i32> {
    // SAFETY: no pointers; returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd)
    }
}

/// Adds `fd` to `epfd` with `events` and the opaque `key`.
pub fn add(epfd: RawFd, fd: RawFd, events: u32, key: u64) -> Result<(), i32> {
    let mut ev = libc::epoll_event { events, u64: key };
    // SAFETY: ev is a valid epoll_event for the duration of the call.
    let r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Changes the events of `fd` in `epfd` (its `key` kept).
pub fn modify(epfd: RawFd, fd: RawFd, events: u32, key: u64) -> Result<(), i32> {
    let mut ev = libc::epoll_event { events, u64: key };
    // SAFETY: ev is a valid epoll_event for the duration of the call.
    let r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Removes `fd` from `epfd` (ENOENT/EBADF are not errors worth reporting).
pub fn del(epfd: RawFd, fd: RawFd) {
    // SAFETY: a NULL event is allowed for EPOLL_CTL_DEL (Linux >= 2.6.9).
    unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
}

/// epoll_wait with timeout 0 (never blocks): fills `out` with (events, key)
/// pairs and returns how many.
pub fn poll(epfd: RawFd, out: &mut [(u32, u64)]) -> usize {
    const MAX: usize = 64;
    let mut evs = [libc::epoll_event { events: 0, u64: 0 }; MAX];
    let want = out.len().min(MAX);
    // SAFETY: evs has room for `want` (<= MAX) events; timeout 0.
    let n = unsafe { libc::epoll_wait(epfd, evs.as_mut_ptr(), want as i32, 0) };
    if n <= 0 {
        return 0;
    }
    let n = (n as usize).min(want);
    for (o, e) in out.iter_mut().zip(evs.iter()).take(n) {
        let (events, key) = (e.events, e.u64);
        *o = (events, key);
    }
    n
}

/// Adds 1 to an eventfd counter (makes it readable).
pub fn kick(efd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid u64.
    unsafe { libc::write(efd, std::ptr::from_ref(&one).cast(), 8) };
}

/// Resets an eventfd counter (reads it).
pub fn clear(efd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a valid u64.
    unsafe { libc::read(efd, std::ptr::from_mut(&mut v).cast(), 8) };
}
