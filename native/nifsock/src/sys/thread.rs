//! Which kind of thread the current code runs on (normal or dirty scheduler).

/// The kind of thread a NIF or callback runs on, as `enif_thread_type` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// Not a scheduler thread (a poll thread, our closer thread, a test thread).
    Other,
    /// A normal scheduler: nothing here may block.
    Normal,
    /// A dirty CPU scheduler.
    DirtyCpu,
    /// A dirty I/O scheduler: blocking system calls belong here.
    DirtyIo,
}

const ERL_NIF_THR_NORMAL_SCHEDULER: i32 = 1;
const ERL_NIF_THR_DIRTY_CPU_SCHEDULER: i32 = 2;
const ERL_NIF_THR_DIRTY_IO_SCHEDULER: i32 = 3;

/// The kind of the calling thread.
pub fn current() -> ThreadKind {
    // SAFETY: enif_thread_type takes no arguments and may be called from any thread.
    match unsafe { rustler::sys::enif_thread_type() } {
        ERL_NIF_THR_NORMAL_SCHEDULER => ThreadKind::Normal,
        ERL_NIF_THR_DIRTY_CPU_SCHEDULER => ThreadKind::DirtyCpu,
        ERL_NIF_THR_DIRTY_IO_SCHEDULER => ThreadKind::DirtyIo,
        _ => ThreadKind::Other,
    }
}
