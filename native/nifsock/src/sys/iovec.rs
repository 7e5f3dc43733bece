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

/// The most binaries [`Gathered`] takes (a Cowboy response has about 25).
pub const GATHER_MAX: usize = 64;
/// The deepest list nesting [`Gathered`] follows.
const GATHER_DEPTH: usize = 16;

/// The binaries of an iolist of nested lists of binaries (no byte integers),
/// borrowed from the calling env, in a fixed array: no allocation, no copy.
pub struct Gathered<'a> {
    iov: [libc::iovec; GATHER_MAX],
    len: usize,
    _env: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> Gathered<'a> {
    /// Walks `term`: a binary, or a list (proper or with a binary tail) of
    /// binaries and such lists. None when it holds anything else (byte
    /// integers, bitstrings, other terms), more than [`GATHER_MAX`] non-empty
    /// binaries or lists nested deeper than 16: the caller then takes the
    /// general path (`erlang:iolist_to_iovec/1`), which also raises badarg.
    pub fn walk(term: Term<'a>) -> Option<Gathered<'a>> {
        let mut g = Gathered {
            iov: [libc::iovec {
                iov_base: ptr::null_mut(),
                iov_len: 0,
            }; GATHER_MAX],
            len: 0,
            _env: std::marker::PhantomData,
        };
        // The tails still to walk, innermost last.
        let mut tails: [Option<Term<'a>>; GATHER_DEPTH] = [None; GATHER_DEPTH];
        let mut depth = 0usize;
        let mut cur = term;
        loop {
            if let Ok((head, tail)) = cur.list_get_cell() {
                if !tail.is_empty_list() {
                    *tails.get_mut(depth)? = Some(tail);
                    depth += 1;
                }
                cur = head;
                continue;
            }
            if cur.is_binary() {
                let bin = rustler::Binary::from_term(cur).ok()?;
                let bytes: &'a [u8] = bin.as_slice();
                if !bytes.is_empty() {
                    let e = g.iov.get_mut(g.len)?;
                    e.iov_base = bytes.as_ptr().cast_mut().cast();
                    e.iov_len = bytes.len();
                    g.len += 1;
                }
            } else if !cur.is_empty_list() {
                return None;
            }
            if depth == 0 {
                return Some(g);
            }
            depth -= 1;
            cur = tails.get_mut(depth)?.take()?;
        }
    }

    /// The entries.
    pub fn entries(&self) -> &[libc::iovec] {
        self.iov.get(..self.len).unwrap_or(&[])
    }
}
