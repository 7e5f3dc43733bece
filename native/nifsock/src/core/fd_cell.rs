//! The fd number of a socket: read by concurrent syscalls, ended exactly once.
//!
//! Syscalls hold the lock for reading; the one place that ends the fd takes it
//! for writing and sets it to -1, so no syscall can run on an fd number after
//! nifsock gave it up (a reused number would cross-wire two connections).

use std::os::fd::RawFd;
use std::sync::RwLock;

/// The fd, or -1 once taken.
#[derive(Debug)]
pub struct FdCell(RwLock<RawFd>);

impl FdCell {
    /// Owns `fd`.
    pub fn new(fd: RawFd) -> FdCell {
        FdCell(RwLock::new(fd))
    }

    /// Runs `f` on the fd while no one can take it. None once it is gone.
    pub fn with<R>(&self, f: impl FnOnce(RawFd) -> R) -> Option<R> {
        let g = self.0.read().unwrap_or_else(|e| e.into_inner());
        if *g < 0 {
            return None;
        }
        Some(f(*g))
    }

    /// Takes the fd out; later `with` calls see None. Some exactly once.
    pub fn take(&self) -> Option<RawFd> {
        let mut g = self.0.write().unwrap_or_else(|e| e.into_inner());
        let fd = *g;
        *g = -1;
        (fd >= 0).then_some(fd)
    }
}

#[cfg(test)]
mod tests {
    use super::FdCell;
    use std::sync::Arc;

    #[test]
    fn gives_the_fd_out_exactly_once() {
        let c = FdCell::new(7);
        assert_eq!(c.with(|fd| fd), Some(7));
        assert_eq!(c.take(), Some(7));
        assert_eq!(c.take(), None);
        assert_eq!(c.with(|fd| fd), None);
    }

    #[test]
    fn concurrent_takers_get_it_once() {
        let c = Arc::new(FdCell::new(3));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || c.take())
            })
            .collect();
        let got: Vec<_> = handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect();
        assert_eq!(got, vec![3]);
    }

    #[test]
    fn negative_fd_is_already_closed() {
        let c = FdCell::new(-1);
        assert_eq!(c.take(), None);
        assert_eq!(c.with(|fd| fd), None);
    }
}
