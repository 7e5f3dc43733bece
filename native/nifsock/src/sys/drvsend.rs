//! Messages sent by the readiness driver's port: `erl_drv_send_term` with a
//! driver term spec (`ErlDrvTermData`), as inet_drv delivers `{tcp, Port,
//! Data}`. ERTS builds such a message straight on an idle receiver's heap
//! (it takes the receiver's main lock when it can), where `enif_send` from a
//! process-independent env hands over the env's heap fragment. Only from
//! the port's own `ready_input` (the port is locked there; a spec's pointers
//! are read before `erl_drv_send_term` returns).
//!
//! The spec's tags and layout are erl_driver.h's (OTP 25-29 agree).

use std::ffi::c_int;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::ptr::NonNull;

use rustler::sys::{enif_release_binary, enif_term_to_binary, ErlNifBinary, ErlNifPid};
use rustler::{Atom, Term};

/// `ErlDrvTermData` (an `ErlNapiUInt`: pointer-sized).
type TermData = usize;

const ERL_DRV_ATOM: TermData = 2;
const ERL_DRV_INT: TermData = 3;
const ERL_DRV_BINARY: TermData = 5;
const ERL_DRV_STRING: TermData = 6;
const ERL_DRV_TUPLE: TermData = 7;
const ERL_DRV_STRING_CONS: TermData = 9;
const ERL_DRV_EXT2TERM: TermData = 12;
const ERL_DRV_BUF2BINARY: TermData = 14;

/// `struct erl_drv_binary` of erl_driver.h.
#[repr(C)]
struct ErlDrvBinary {
    orig_size: isize,
    orig_bytes: [u8; 1],
}

extern "C" {
    fn erl_drv_send_term(port: TermData, to: TermData, data: *mut TermData, n: c_int) -> c_int;
    fn driver_alloc_binary(size: usize) -> *mut ErlDrvBinary;
    fn driver_realloc_binary(bin: *mut ErlDrvBinary, size: usize) -> *mut ErlDrvBinary;
    fn driver_free_binary(bin: *mut ErlDrvBinary);
}

/// The readiness port whose `ready_input` runs on this thread (from
/// `driver::ready_port`): messages sent with it have the port as sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortId(TermData);

impl PortId {
    pub(super) fn from_raw(id: TermData) -> Option<PortId> {
        (id != 0).then_some(PortId(id))
    }
}

/// A term's external format (`term_to_binary/1`), kept to be rebuilt in
/// messages with `ERL_DRV_EXT2TERM`. A resource term decodes to the same
/// live resource on this node while the resource lives.
pub struct Ext(Box<[u8]>);

impl Ext {
    /// The external format of `term`; None if ERTS can't encode it.
    pub fn of(term: Term) -> Option<Ext> {
        let mut bin = std::mem::MaybeUninit::<ErlNifBinary>::uninit();
        // SAFETY: term belongs to env; bin is an out-pointer, initialised when
        // the call returns non-zero, and then released once below.
        unsafe {
            if enif_term_to_binary(term.get_env().as_c_arg(), term.as_c_arg(), bin.as_mut_ptr())
                == 0
            {
                return None;
            }
            let mut bin = bin.assume_init();
            let bytes: Box<[u8]> = if bin.size == 0 || bin.data.is_null() {
                Box::new([])
            } else {
                std::slice::from_raw_parts(bin.data, bin.size).into()
            };
            enif_release_binary(&mut bin);
            (!bytes.is_empty()).then_some(Ext(bytes))
        }
    }
}

/// A driver binary (`driver_alloc_binary`) read into, then sent with
/// `ERL_DRV_BINARY` (the message takes a reference; ours is freed on drop).
pub struct DrvBin {
    bin: NonNull<ErlDrvBinary>,
    cap: usize,
    /// Bytes written by `recv` (initialised).
    filled: usize,
}

impl DrvBin {
    /// A binary of `cap` bytes (None when out of memory).
    pub fn new(cap: usize) -> Option<DrvBin> {
        // SAFETY: driver_alloc_binary has no preconditions; NULL is failure.
        let bin = NonNull::new(unsafe { driver_alloc_binary(cap) })?;
        Some(DrvBin {
            bin,
            cap,
            filled: 0,
        })
    }

    /// recv(2) into the binary's bytes (never past `cap`).
    pub fn recv(&mut self, fd: RawFd, flags: i32) -> Result<usize, i32> {
        // SAFETY: the binary is ours and holds `cap` bytes from orig_bytes;
        // the kernel writes at most `cap` bytes there.
        let n = unsafe {
            let p = std::ptr::addr_of_mut!((*self.bin.as_ptr()).orig_bytes).cast::<libc::c_void>();
            libc::recv(fd, p, self.cap, flags)
        };
        match usize::try_from(n) {
            Ok(n) => {
                self.filled = n.min(self.cap);
                Ok(n)
            }
            Err(_) => Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)),
        }
    }

    /// The bytes `recv` wrote.
    pub fn filled(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes (<= cap) were written by recv.
        unsafe {
            let p = std::ptr::addr_of!((*self.bin.as_ptr()).orig_bytes).cast::<u8>();
            std::slice::from_raw_parts(p, self.filled)
        }
    }

    /// Shrinks the binary to `n` bytes (keeps it as it is when that fails).
    pub fn shrink(&mut self, n: usize) {
        if n >= self.cap {
            return;
        }
        // SAFETY: the binary is ours, with one reference (not sent yet);
        // realloc gives a new pointer or NULL, leaving the old one valid.
        let p = unsafe { driver_realloc_binary(self.bin.as_ptr(), n) };
        if let Some(p) = NonNull::new(p) {
            self.bin = p;
            self.cap = n;
            self.filled = self.filled.min(n);
        }
    }
}

impl Drop for DrvBin {
    fn drop(&mut self) {
        // SAFETY: our reference, given up once (a sent message holds its own).
        unsafe { driver_free_binary(self.bin.as_ptr()) };
    }
}

/// Words of the largest spec (`{Tag, {'$nifsock', Res}, [B1, ..., BN | Rest]}`: 17).
const CAP: usize = 24;

/// A driver term spec: a stack program of at most a few terms, whose
/// pointers borrow `'a` (valid until it is sent).
pub struct Spec<'a> {
    d: [TermData; CAP],
    n: usize,
    bad: bool,
    _b: PhantomData<&'a [u8]>,
}

impl Default for Spec<'_> {
    fn default() -> Self {
        Spec {
            d: [0; CAP],
            n: 0,
            bad: false,
            _b: PhantomData,
        }
    }
}

fn term_data(t: rustler::sys::ErlNifTerm) -> TermData {
    // SAFETY: ErlNifTerm is repr(transparent) over size_t, the Eterm itself
    // (ERL_NIF_TERM and ErlDrvTermData are the same word in ERTS).
    unsafe { std::mem::transmute::<rustler::sys::ErlNifTerm, TermData>(t) }
}

impl<'a> Spec<'a> {
    fn push(&mut self, w: &[TermData]) -> &mut Self {
        match self.d.get_mut(self.n..self.n + w.len()) {
            Some(slot) => {
                slot.copy_from_slice(w);
                self.n += w.len();
            }
            None => self.bad = true,
        }
        self
    }

    /// An atom.
    pub fn atom(&mut self, a: Atom) -> &mut Self {
        self.push(&[ERL_DRV_ATOM, term_data(a.as_c_arg())])
    }

    /// A small integer.
    pub fn int(&mut self, i: isize) -> &mut Self {
        self.push(&[ERL_DRV_INT, i as TermData])
    }

    /// The term an [`Ext`] holds.
    pub fn ext(&mut self, e: &'a Ext) -> &mut Self {
        self.push(&[ERL_DRV_EXT2TERM, e.0.as_ptr() as TermData, e.0.len()])
    }

    /// A binary copied from `b` (a heap binary when small).
    pub fn buf(&mut self, b: &'a [u8]) -> &mut Self {
        self.push(&[ERL_DRV_BUF2BINARY, b.as_ptr() as TermData, b.len()])
    }

    /// The first `len` bytes of a driver binary (no copy).
    pub fn bin(&mut self, b: &'a DrvBin, len: usize) -> &mut Self {
        if len > b.filled {
            self.bad = true;
            return self;
        }
        self.push(&[ERL_DRV_BINARY, b.bin.as_ptr() as TermData, len, 0])
    }

    /// The list of the bytes of `b` (`[]` when empty).
    pub fn string(&mut self, b: &'a [u8]) -> &mut Self {
        self.push(&[ERL_DRV_STRING, b.as_ptr() as TermData, b.len()])
    }

    /// The bytes of `b` consed onto the term before (`[B1, ..., BN | T]`).
    pub fn string_cons(&mut self, b: &'a [u8]) -> &mut Self {
        self.push(&[ERL_DRV_STRING_CONS, b.as_ptr() as TermData, b.len()])
    }

    /// A tuple of the `n` terms before.
    pub fn tuple(&mut self, n: usize) -> &mut Self {
        self.push(&[ERL_DRV_TUPLE, n])
    }

    /// Sends the term to `to`, from `port`. False if the spec is malformed or
    /// `to` is not alive.
    pub fn send(&mut self, port: PortId, to: &ErlNifPid) -> bool {
        if self.bad || self.n == 0 {
            return false;
        }
        let Ok(n) = c_int::try_from(self.n) else {
            return false;
        };
        // SAFETY: ErlNifPid is repr(C) around one ErlNifTerm, the pid's Eterm.
        let to = term_data(unsafe { *std::ptr::from_ref(to).cast::<rustler::sys::ErlNifTerm>() });
        // SAFETY: port is the port whose ready_input runs on this thread (it
        // is locked and alive); the spec's pointers borrow 'a, alive here,
        // and ERTS checks the program before building it (it returns -1 for a
        // bad one); it reads the spec only during the call.
        unsafe { erl_drv_send_term(port.0, to, self.d.as_mut_ptr(), n) > 0 }
    }
}
