//! The per-scheduler-thread read buffer: recv reads into it and copies only the
//! bytes read into a right-sized binary, so a socket waiting in recv holds no
//! buffer of its own.

use std::cell::RefCell;
use std::mem::ManuallyDrop;

/// The most a scratch buffer holds between calls.
pub const CAP: usize = super::limits::SCRATCH_CAP;

thread_local! {
    // ManuallyDrop: no thread-local destructor is registered, so nothing runs
    // when a scheduler thread exits at VM shutdown.
    static SCRATCH: ManuallyDrop<RefCell<Vec<u8>>> = const { ManuallyDrop::new(RefCell::new(Vec::new())) };
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
        let mut buf = cell.try_borrow_mut().ok()?;
        if buf.len() < len {
            buf.resize(CAP.max(len), 0);
        }
        buf.get_mut(..len).map(f)
    })
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

    #[test]
    fn reentrant_use_is_refused_not_a_panic() {
        let inner = with(8, |_| with(8, |b| b.len()));
        assert_eq!(inner, Some(None));
    }
}
