//! A socket made in another network namespace: `open/4`'s `netns` option,
//! as OTP's socket has it. The calling thread (a scheduler) enters the
//! namespace named by a file (`/var/run/netns/NAME`, `/proc/PID/ns/net`),
//! makes the socket and goes back to its own namespace. The socket stays in
//! the namespace it was made in; the thread's namespace is its own again
//! before this returns. Five system calls, none of which blocks; entering a
//! namespace needs CAP_SYS_ADMIN (`eperm` otherwise).

use std::os::fd::RawFd;
use std::path::Path;

use super::syscall::{self, SysResult};

/// socket(2) as `syscall::socket`, made inside the network namespace that
/// the file at `path` names.
#[cfg(target_os = "linux")]
pub fn socket_in(path: &Path, domain: i32, ty: i32, protocol: i32) -> SysResult<RawFd> {
    use nix::sched::{setns, CloneFlags};
    use std::fs::File;

    let os = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EINVAL);
    // std opens with O_CLOEXEC; both files close when they drop
    let own = File::open("/proc/thread-self/ns/net").map_err(os)?;
    let target = File::open(path).map_err(os)?;
    setns(&target, CloneFlags::CLONE_NEWNET).map_err(|e| e as i32)?;
    let made = syscall::socket(domain, ty, protocol);
    if let Err(e) = setns(&own, CloneFlags::CLONE_NEWNET) {
        // The thread could not go back (it just left that namespace with the
        // same rights, so this is not expected): no socket is handed out from
        // here, and the failure is logged, as OTP's socket does.
        tracing::error!(
            errno = e as i32,
            "nifsock: could not return to the thread's network namespace"
        );
        if let Ok(fd) = made {
            syscall::close(fd);
        }
        return Err(e as i32);
    }
    made
}

/// Network namespaces are Linux's.
#[cfg(not(target_os = "linux"))]
pub fn socket_in(_path: &Path, _domain: i32, _ty: i32, _protocol: i32) -> SysResult<RawFd> {
    Err(libc::EOPNOTSUPP)
}
