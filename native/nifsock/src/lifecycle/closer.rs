//! The closer thread: closes fds whose close(2) may block (SO_LINGER on with a
//! positive timeout) when the close is triggered where no dirty scheduler can be
//! used — the owner's down callback, a scheduled stop callback, a destructor.
//! Started on first use; an fd given to it is never touched by anyone else.

use std::os::fd::RawFd;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

use crate::stats;
use crate::sys::syscall;

/// close(2) on a socket fd counted in `stats::FDS`: the one call of it (every
/// path goes through `close::close_fd`, which counts where it ran).
pub(super) fn release(fd: RawFd) {
    syscall::close(fd);
    stats::FDS.down();
}

static CLOSER: OnceLock<Option<Mutex<Sender<RawFd>>>> = OnceLock::new();

fn start() -> Option<Mutex<Sender<RawFd>>> {
    let (tx, rx) = channel::<RawFd>();
    let spawned = std::thread::Builder::new()
        .name("nifsock-closer".into())
        .spawn(move || {
            while let Ok(fd) = rx.recv() {
                tracing::debug!(fd, op = "close", "lingering close on the closer thread");
                release(fd);
            }
        });
    spawned.ok().map(|_| Mutex::new(tx))
}

/// Closes `fd` off the calling thread. Falls back to closing inline if the
/// thread can't be started (it could block then; logged).
pub(super) fn close_later(fd: RawFd) {
    stats::CLOSES_DEFERRED.incr();
    let sent = CLOSER
        .get_or_init(start)
        .as_ref()
        .and_then(|m| m.lock().ok().and_then(|tx| tx.send(fd).ok()));
    if sent.is_none() {
        tracing::warn!(
            fd,
            op = "close",
            "closer thread unavailable: closing inline"
        );
        release(fd);
    }
}
