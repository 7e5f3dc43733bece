//! Inspecting an Erlang I/O vector (a flat list of binaries, as made by
//! `erlang:iolist_to_iovec/1`) without copying its bytes.

use std::ffi::c_int;
use std::ptr;

use rustler::sys::{
    enif_get_list_cell, enif_inspect_binary, enif_inspect_iovec, ErlNifBinary, ErlNifIOVec,
    ErlNifTerm,
};
use rustler::{Env, Term, TermType};

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

/// Most binaries [`with_iolist`] sends from where they are, one iovec entry
/// each, with no copy (a short reply: status line, headers, body).
const DIRECT_MAX: usize = 8;
/// The most pieces [`Gathered`] takes (a run of small binaries, copied
/// together, is one piece; a Cowboy response is one).
pub const GATHER_MAX: usize = 64;
/// The deepest list nesting the walk follows.
const GATHER_DEPTH: usize = 16;
/// Binaries shorter than this are copied into the gather buffer (as ERTS
/// does for a port's iolist: `ERL_SMALL_IO_BIN_LIMIT`), so that a response of
/// many small pieces is one iovec entry: the kernel's per-entry copy costs
/// more than the copy here.
const COPY_BELOW: usize = 256;
/// The gather buffer's size.
const GATHER_BUF: usize = 1024;

const NO_ENTRY: libc::iovec = libc::iovec {
    iov_base: ptr::null_mut(),
    iov_len: 0,
};

fn entry(bytes: &[u8]) -> libc::iovec {
    libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    }
}

/// Calls `visit` with the bytes of each non-empty binary of `term` (a
/// binary, or a list, proper or with a binary tail, of binaries and such
/// lists), in order. [`Unwalked::NotIodata`] when it holds a bitstring
/// or a term that is no part of iodata (ERTS's `enif_inspect_iovec` lets a
/// bitstring of no whole byte through as empty); [`Unwalked::Other`] when it
/// holds byte integers, lists nested deeper than 16, or `visit` says None.
///
/// Each erl_nif call is a call into the emulator, and a Cowboy response has
/// ~26 binaries: an element (a list's head, usually a binary) is tried as a
/// binary first and a tail (usually a cell) as a cell first, so each costs
/// one call, and `[]` is recognised by its word (an immediate: every `[]` is
/// the same word) with none.
fn each_binary<'a>(
    term: Term<'a>,
    mut visit: impl FnMut(&'a [u8]) -> Option<()>,
) -> Result<(), Unwalked> {
    // Raw terms, not rustler's `Term`s (a term and its env): the walk keeps
    // one word per term, in registers and a plain array of words.
    let env = term.get_env();
    let nil = Term::list_new_empty(env).as_c_arg();
    // The tails still to walk, innermost last.
    let mut tails = [nil; GATHER_DEPTH];
    let mut depth = 0usize;
    let mut cur = term.as_c_arg();
    // Whether `cur` is a list's tail (then most likely a cell) rather than
    // an element or the whole term (most likely a binary).
    let mut tail_position = false;
    loop {
        if cur != nil {
            let mut cell = if tail_position {
                list_cell(env, cur)
            } else {
                None
            };
            if cell.is_none() {
                match binary_bytes(env, cur) {
                    Some(bytes) => {
                        if !bytes.is_empty() {
                            visit(bytes).ok_or(Unwalked::Other)?;
                        }
                    }
                    None => match list_cell(env, cur) {
                        Some(c) if !tail_position => cell = Some(c),
                        _ => return Err(not_walked(env, cur)),
                    },
                }
            }
            if let Some((head, tail)) = cell {
                if tail != nil {
                    *tails.get_mut(depth).ok_or(Unwalked::Other)? = tail;
                    depth += 1;
                }
                cur = head;
                tail_position = false;
                continue;
            }
        }
        if depth == 0 {
            return Ok(());
        }
        depth -= 1;
        cur = *tails.get(depth).ok_or(Unwalked::Other)?;
        tail_position = true;
    }
}

/// The head and tail of `list`, a term of `env`; None if it is no cell.
fn list_cell(env: Env<'_>, list: ErlNifTerm) -> Option<(ErlNifTerm, ErlNifTerm)> {
    let mut head = ErlNifTerm::default();
    let mut tail = ErlNifTerm::default();
    // SAFETY: list is a term of env (the calling process env); head and
    // tail are out-pointers to words ERTS writes on success.
    let ok = unsafe { enif_get_list_cell(env.as_c_arg(), list, &mut head, &mut tail) };
    (ok != 0).then_some((head, tail))
}

/// The bytes of `bin`, a term of `env`, if it is a binary (not a bitstring
/// with bits beyond its last whole byte).
fn binary_bytes<'a>(env: Env<'a>, bin: ErlNifTerm) -> Option<&'a [u8]> {
    let mut b = std::mem::MaybeUninit::<ErlNifBinary>::uninit();
    // SAFETY: bin is a term of env; b is an out-pointer that ERTS fills when
    // it returns non-zero.
    if unsafe { enif_inspect_binary(env.as_c_arg(), bin, b.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: initialised by the successful call above.
    let b = unsafe { b.assume_init() };
    if b.size == 0 || b.data.is_null() {
        return Some(&[]);
    }
    // SAFETY: ERTS's data points to size bytes of the binary (or of an
    // aligned copy it frees with env), both kept alive by env for 'a.
    Some(unsafe { std::slice::from_raw_parts(b.data, b.size) })
}

/// Why [`with_iolist`] did not call its `f`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwalked {
    /// Iodata of another shape (byte integers, too many pieces, too deep):
    /// the caller's general path takes it.
    Other,
    /// Not iodata: a bitstring, or a term of another type.
    NotIodata,
}

/// What a term that is neither a binary nor a list cell makes of the walk:
/// a byte (iodata, for the general path) or not iodata.
fn not_walked(env: Env<'_>, raw: ErlNifTerm) -> Unwalked {
    // SAFETY: raw is a term of env (a part of the walked term).
    let term = unsafe { Term::new(env, raw) };
    match term.get_type() {
        TermType::Integer if term.decode::<u8>().is_ok() => Unwalked::Other,
        _ => Unwalked::NotIodata,
    }
}

/// Calls `f` with the bytes of the iolist `term` (binaries and nested lists
/// of them, no byte integers) as iovec entries, allocating nothing: at most
/// [`DIRECT_MAX`] binaries are sent from where they are; more, up to
/// [`GATHER_MAX`] pieces, through a [`Gathered`] buffer. [`Unwalked`] (and
/// `f` not called) when it is neither: `Other` for the caller's general path
/// (`enif_inspect_iovec`, or `erlang:iolist_to_iovec/1`), `NotIodata` for
/// what no path may send. The binaries are borrowed from the calling env, so
/// they stay put while `f` runs.
pub fn with_iolist<R>(term: Term<'_>, f: impl FnOnce(&[libc::iovec]) -> R) -> Result<R, Unwalked> {
    let mut direct: [&[u8]; DIRECT_MAX] = [&[]; DIRECT_MAX];
    let mut n = 0usize;
    // Made when a binary past the first DIRECT_MAX comes: one walk either way.
    let mut gathered: Option<Gathered> = None;
    each_binary(term, |bytes| {
        if let Some(g) = gathered.as_mut() {
            return g.push(bytes);
        }
        if let Some(slot) = direct.get_mut(n) {
            *slot = bytes;
            n += 1;
            return Some(());
        }
        let g = gathered.insert(Gathered::new());
        for b in direct {
            g.push(b)?;
        }
        g.push(bytes)
    })?;
    if let Some(g) = &gathered {
        return Ok(g.with_entries(f));
    }
    let mut iov = [NO_ENTRY; DIRECT_MAX];
    for (e, b) in iov.iter_mut().zip(direct) {
        *e = entry(b);
    }
    Ok(f(iov.get(..n).unwrap_or(&[])))
}

/// Calls `f` with the bytes of the iodata `term` copied together, as one
/// iovec entry: `enif_inspect_iolist_as_binary`, which sizes and copies it in
/// two walks in C into a temporary buffer that ERTS frees when the NIF call
/// returns. For short iodata (the caller bounds its size): one erl_nif call
/// where [`with_iolist`] makes one per element. `NotIodata` (and `f` not
/// called) when `term` is not iodata.
pub fn with_flat<R>(term: Term<'_>, f: impl FnOnce(&[libc::iovec]) -> R) -> Result<R, Unwalked> {
    let bin = rustler::Binary::from_iolist(term).map_err(|_| Unwalked::NotIodata)?;
    let bytes = bin.as_slice();
    if bytes.is_empty() {
        return Ok(f(&[]));
    }
    Ok(f(&[entry(bytes)]))
}

/// One piece of a gathered iolist.
#[derive(Clone, Copy)]
enum Piece<'a> {
    /// A binary, sent from where it is.
    Bin(&'a [u8]),
    /// Bytes `off..off + len` of the gather buffer.
    Buf(usize, usize),
}

/// The bytes of an iolist: large binaries borrowed from the calling env,
/// runs of small ones copied into a fixed buffer; no allocation.
struct Gathered<'a> {
    pieces: [Piece<'a>; GATHER_MAX],
    len: usize,
    buf: [u8; GATHER_BUF],
    used: usize,
}

impl<'a> Gathered<'a> {
    fn new() -> Self {
        Gathered {
            pieces: [Piece::Buf(0, 0); GATHER_MAX],
            len: 0,
            buf: [0; GATHER_BUF],
            used: 0,
        }
    }

    /// Adds a binary's bytes: copied onto the buffer's last piece, or as a
    /// new piece. None when there is no room for another piece.
    fn push(&mut self, bytes: &'a [u8]) -> Option<()> {
        let n = bytes.len();
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
    fn with_entries<R>(&self, f: impl FnOnce(&[libc::iovec]) -> R) -> R {
        let mut iov = [NO_ENTRY; GATHER_MAX];
        for (e, p) in iov.iter_mut().zip(self.pieces.iter().take(self.len)) {
            *e = match *p {
                Piece::Bin(b) => entry(b),
                Piece::Buf(off, len) => entry(self.buf.get(off..off + len).unwrap_or(&[])),
            };
        }
        f(iov.get(..self.len).unwrap_or(&[]))
    }
}
