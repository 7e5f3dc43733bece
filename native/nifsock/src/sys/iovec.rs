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

/// The most pieces [`Gathered`] takes (a run of small binaries, copied
/// together, is one piece; a Cowboy response is one).
pub const GATHER_MAX: usize = 64;
/// The deepest list nesting [`Gathered`] follows.
const GATHER_DEPTH: usize = 16;
/// Binaries shorter than this are copied into the gather buffer (as ERTS
/// does for a port's iolist: `ERL_SMALL_IO_BIN_LIMIT`), so that a response of
/// many small pieces is one iovec entry: the kernel's per-entry copy costs
/// more than the copy here.
const COPY_BELOW: usize = 256;
/// The gather buffer's size.
const GATHER_BUF: usize = 1024;

/// One piece of a gathered iolist.
#[derive(Clone, Copy)]
enum Piece<'a> {
    /// A binary, sent from where it is.
    Bin(&'a [u8]),
    /// Bytes `off..off + len` of the gather buffer.
    Buf(usize, usize),
}

/// The bytes of an iolist of nested lists of binaries (no byte integers):
/// large binaries borrowed from the calling env, runs of small ones copied
/// into a fixed buffer; no allocation.
pub struct Gathered<'a> {
    pieces: [Piece<'a>; GATHER_MAX],
    len: usize,
    buf: [u8; GATHER_BUF],
    used: usize,
}

impl<'a> Gathered<'a> {
    /// Walks `term`: a binary, or a list (proper or with a binary tail) of
    /// binaries and such lists. None when it holds anything else (byte
    /// integers, bitstrings, other terms), more than [`GATHER_MAX`] pieces or
    /// lists nested deeper than 16: the caller then takes the general path
    /// (`erlang:iolist_to_iovec/1`), which also raises badarg.
    pub fn walk(term: Term<'a>) -> Option<Gathered<'a>> {
        let mut g = Gathered {
            pieces: [Piece::Buf(0, 0); GATHER_MAX],
            len: 0,
            buf: [0; GATHER_BUF],
            used: 0,
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
                g.push(bin.as_slice())?;
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

    /// Adds a binary's bytes: copied onto the buffer's last piece, or as a
    /// new piece. None when there is no room for another piece.
    fn push(&mut self, bytes: &'a [u8]) -> Option<()> {
        let n = bytes.len();
        if n == 0 {
            return Some(());
        }
        if n < COPY_BELOW {
            if let Some(dst) = self.buf.get_mut(self.used..self.used + n) {
                dst.copy_from_slice(bytes);
                let at = self.used;
                self.used += n;
                if let Some(Piece::Buf(off, len)) =
                    self.len.checked_sub(1).and_then(|i| self.pieces.get_mut(i))
                {
                    if *off + *len == at {
                        *len += n;
                        return Some(());
                    }
                }
                *self.pieces.get_mut(self.len)? = Piece::Buf(at, n);
                self.len += 1;
                return Some(());
            }
        }
        *self.pieces.get_mut(self.len)? = Piece::Bin(bytes);
        self.len += 1;
        Some(())
    }

    /// Calls `f` with the pieces as iovec entries (pointing into `self`).
    pub fn with_entries<R>(&self, f: impl FnOnce(&[libc::iovec]) -> R) -> R {
        let mut iov = [libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        }; GATHER_MAX];
        for (e, p) in iov.iter_mut().zip(self.pieces.iter().take(self.len)) {
            let bytes: &[u8] = match *p {
                Piece::Bin(b) => b,
                Piece::Buf(off, len) => self.buf.get(off..off + len).unwrap_or(&[]),
            };
            e.iov_base = bytes.as_ptr().cast_mut().cast();
            e.iov_len = bytes.len();
        }
        f(iov.get(..self.len).unwrap_or(&[]))
    }
}
