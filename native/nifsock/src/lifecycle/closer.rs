//! The closer thread: closes fds whose close(2) may block (SO_LINGER on with a
//! positive timeout) when the close is triggered where no dirty scheduler can be
//! used — the owner's down callback, a scheduled stop callback, a destructor.
//! Started on first use; an fd given to it is never touched by anyone else.

use std::os::fd::RawFd;
use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use crate::stats;
use crate::sys::syscall;

/// close(2) on a socket fd counted in `stats::FDS`: the one call of it (every
/// path goes through `close::close_fd`, which counts where it ran).
pub(super) fn release(fd: RawFd) {
    syscall::close(fd);
    stats::FDS.down();
}

/// The thread's queue and handle; None before first use and after [`stop`].
struct Closer {
    tx: Sender<RawFd>,
    thread: JoinHandle<()>,
}

static CLOSER: Mutex<Option<Closer>> = Mutex::new(None);

fn start() -> Option<Closer> {
    let (tx, rx) = channel::<RawFd>();
    let spawned = std::thread::Builder::new()
        .name("nifsock-closer".into())
        .spawn(move || {
            while let Ok(fd) = rx.recv() {
                tracing::debug!(fd, op = "close", "lingering close on the closer thread");
                release(fd);
            }
        });
    spawned.ok().map(|thread| Closer { tx, thread })
}

/// Closes `fd` off the calling thread. Falls back to closing inline if the
/// thread can't be started (it could block then; logged).
pub(super) fn close_later(fd: RawFd) {
    stats::CLOSES_DEFERRED.incr();
    let sent = {
        let mut closer = CLOSER.lock().unwrap_or_else(|e| e.into_inner());
        if closer.is_none() {
            *closer = start();
        }
        closer.as_ref().and_then(|c| c.tx.send(fd).ok())
    };
    if sent.is_none() {
        tracing::warn!(
            fd,
            op = "close",
            "closer thread unavailable: closing inline"
        );
        release(fd);
    }
}

/// Stops the closer thread once it has closed every fd already handed to it,
/// and waits for it: this copy of the library is being unloaded (an upgrade's
/// old code was purged), so no thread may be left running its code. A later
/// `close_later` (the same copy loaded again) starts a new thread.
pub fn stop() {
    let closer = CLOSER.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(Closer { tx, thread }) = closer {
        // The queue ends when its only sender is gone: the thread drains it,
        // then returns.
        drop(tx);
        let _ = thread.join();
    }
}
