//! One recv into this thread's scratch buffer: the step `nifsock:recv` and
//! nifsock_tcp's delivery both take, with the same accounting and errno
//! handling. The caller sees the bytes only while the buffer is borrowed and
//! copies what it keeps.

use std::os::fd::RawFd;

use crate::core::errno::is_would_block;
use crate::core::scratch;
use crate::socket::Socket;
use crate::sys::syscall;

/// What one recv into the scratch buffer came to.
pub enum ScratchRead<R> {
    /// `n` bytes arrived (n may be 0 only when 0 bytes were asked for);
    /// `R` is what the caller made of them.
    Bytes(R, usize),
    /// The peer closed its side.
    Eof,
    /// EAGAIN: nothing to read now.
    WouldBlock,
    /// EINTR: try again.
    Interrupted,
    /// Any other errno (EBUSY when the buffer is already borrowed on this
    /// thread, which only a re-entrant call could cause).
    Failed(i32),
}

/// recv(2) up to `want` bytes with `flags` from `s`'s `fd` into the scratch
/// buffer and hand the bytes read to `keep`.
pub fn recv<R>(
    s: &Socket,
    fd: RawFd,
    want: usize,
    flags: i32,
    keep: impl FnOnce(&[u8]) -> R,
) -> ScratchRead<R> {
    let r = scratch::with(want, |buf| match syscall::recv(fd, buf, flags) {
        Ok(0) if want > 0 => ScratchRead::Eof,
        Ok(n) => {
            if flags & libc::MSG_PEEK == 0 {
                s.count_read(n);
            } else {
                s.count_peek();
            }
            ScratchRead::Bytes(keep(buf.get(..n).unwrap_or(&[])), n)
        }
        Err(e) if is_would_block(e) => ScratchRead::WouldBlock,
        Err(libc::EINTR) => ScratchRead::Interrupted,
        Err(e) => ScratchRead::Failed(e),
    });
    r.unwrap_or(ScratchRead::Failed(libc::EBUSY))
}
