//! The per-scheduler-thread read buffer: recv reads into it and copies only the
//! bytes read into a right-sized binary, so a socket waiting in recv holds no
//! buffer of its own.
//!
//! Each thread's buffer is also listed in [`ALL`], so that when this copy of
//! the library is unloaded (an upgrade's old code purged, `release_all`) the
//! buffers of every thread that read through it are freed: thread-locals of
//! an unloaded copy are otherwise never dropped.

use std::cell::OnceCell;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

/// The most a scratch buffer holds between calls.
pub const CAP: usize = super::limits::SCRATCH_CAP;

type Buf = Arc<Mutex<Vec<u8>>>;

thread_local! {
    // ManuallyDrop: no thread-local destructor is registered, so nothing runs
    // when a scheduler thread exits at VM shutdown (nor keeps an unloaded
    // copy of the library mapped).
    static SCRATCH: ManuallyDrop<OnceCell<Buf>> = const { ManuallyDrop::new(OnceCell::new()) };
}

/// Every thread's buffer (one entry per thread that read, added once).
static ALL: Mutex<Vec<Buf>> = Mutex::new(Vec::new());

fn mine() -> Buf {
    let b: Buf = Arc::new(Mutex::new(Vec::new()));
    ALL.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::clone(&b));
    b
}

/// Runs `f` with this thread's scratch buffer of `len` bytes (≤ CAP is kept
/// for reuse; a larger request gets a temporary buffer). Returns None if the
/// buffer is already borrowed on this thread (a re-entrant call).
pub fn with<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
    if len > CAP {
        let mut tmp = vec![0u8; len];
        return Some(f(&mut tmp));
    }
    SCRATCH.with(|cell| {
        // Uncontended: only this thread locks it, but for `release_all`.
        let mut buf = cell.get_or_init(mine).try_lock().ok()?;
        if buf.len() < len {
            buf.resize(CAP.max(len), 0);
        }
        buf.get_mut(..len).map(f)
    })
}

/// Frees every thread's buffer (a later `with` allocates again) and returns
/// the bytes freed. For the library's unload, when no thread runs its code:
/// a buffer found in use is left alone.
pub fn release_all() -> usize {
    let all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    let mut freed = 0;
    for b in all.iter() {
        if let Ok(mut buf) = b.try_lock() {
            freed += buf.capacity();
            *buf = Vec::new();
        }
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::{with, CAP};

    #[test]
    fn gives_a_buffer_of_the_asked_length() {
        assert_eq!(with(10, |b| b.len()), Some(10));
        assert_eq!(with(CAP, |b| b.len()), Some(CAP));
    }

    #[test]
    fn larger_requests_get_a_temporary_buffer() {
        assert_eq!(with(CAP + 1, |b| b.len()), Some(CAP + 1));
    }

    /// The tests that call `release_all` (it frees other test threads' buffers).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn release_all_frees_and_the_buffer_comes_back() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(with(16, |b| b.len()), Some(16));
        assert!(super::release_all() >= CAP);
        assert_eq!(with(16, |b| b.len()), Some(16));
    }

    #[test]
    fn release_all_leaves_a_buffer_in_use() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let r = with(8, |b| {
            b.fill(7);
            let _ = super::release_all();
            b.iter().all(|x| *x == 7)
        });
        assert_eq!(r, Some(true));
    }

    #[test]
    fn reentrant_use_is_refused_not_a_panic() {
        let inner = with(8, |_| with(8, |b| b.len()));
        assert_eq!(inner, Some(None));
    }
}
