//! Inspecting an Erlang I/O vector (a flat list of binaries, as made by
//! `erlang:iolist_to_iovec/1`) without copying its bytes.

use std::ffi::c_int;
use std::ptr;

use rustler::sys::{enif_inspect_iovec, ErlNifIOVec, ErlNifTerm};
use rustler::{Env, Term};

/// The head of `ErlNifIOVec` (its fields are private in rustler::sys).
#[repr(C)]
struct IoVecHead {
    iovcnt: c_int,
    size: usize,
    iov: *const libc::iovec,
}

/// The binaries of an I/O vector, borrowed from the calling env.
pub struct IoVec<'a> {
    iov: &'a [libc::iovec],
    size: usize,
}

impl<'a> IoVec<'a> {
    /// Inspects `term` (a list of binaries). None if it is not one.
    /// The vector lives in `env` (ERTS frees it with the env: never free it here).
    pub fn inspect(env: Env<'a>, term: Term<'a>) -> Option<IoVec<'a>> {
        let mut tail: ErlNifTerm = term.as_c_arg();
        let mut iov: *mut ErlNifIOVec = ptr::null_mut();
        // SAFETY: env is the calling process env; term belongs to it; tail and iov
        // are valid out-pointers. max_elements usize::MAX takes the whole list.
        let ok = unsafe {
            enif_inspect_iovec(
                env.as_c_arg(),
                usize::MAX,
                term.as_c_arg(),
                &mut tail,
                &mut iov,
            )
        };
        if ok == 0 || iov.is_null() {
            return None;
        }
        // SAFETY: iov points to an ErlNifIOVec owned by env, whose first fields
        // are (iovcnt, size, iov) as in erl_nif.h; it stays valid for 'a.
        let head = unsafe { &*iov.cast::<IoVecHead>() };
        let count = usize::try_from(head.iovcnt).unwrap_or(0);
        let slice = if count == 0 || head.iov.is_null() {
            &[][..]
        } else {
            // SAFETY: ERTS guarantees `iov` points to `iovcnt` initialised entries
            // that reference binaries kept alive by env for 'a.
            unsafe { std::slice::from_raw_parts(head.iov, count) }
        };
        Some(IoVec {
            iov: slice,
            size: head.size,
        })
    }

    /// The entries.
    pub fn entries(&self) -> &'a [libc::iovec] {
        self.iov
    }

    /// Total bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The bytes of each entry, in order.
    pub fn slices(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iov.iter().map(|v| {
            if v.iov_base.is_null() || v.iov_len == 0 {
                &[][..]
            } else {
                // SAFETY: each entry points to iov_len readable bytes of a
                // binary that env keeps alive for 'a (see `inspect`).
                unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) }
            }
        })
    }
}
