//! The distribution port kind of the driver in `driver` (`open_port({spawn_driver,
//! "libnifsock dist"}, [binary])`): the ERTS side of `nifsock_dist`'s port
//! carrier. ERTS hands such a port (once `erlang:setnode/3` made it a dist
//! controller) its dist data through `outputv`, and a `driver_output` from it
//! goes straight to `erts_net_message` (see doc/readiness-research.md, "The
//! port carrier").
//!
//! This module is the unsafe half: the `driver_*` declarations (written from
//! erl_driver.h; OTP 25-29 have the same ones), safe wrappers a callback
//! gets ([`Port`], [`IoVec`], [`DrvBin`]), the table through which a NIF
//! hands a socket's fd to a port ([`park`] / [`take`]), and the callbacks'
//! entry points, which forward to a [`Conn`] made by the hooks the layer
//! above installs ([`set_hooks`], from `ops::dist`), as the readiness port's
//! are. A dist port is always served by the code of the copy whose driver
//! runs it (the driver's copy stays mapped while any of its ports is open):
//! an upgrade of the NIF library leaves live dist ports alone.

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::carry;

pub(super) type ErlDrvPort = *mut c_void;

const ERL_DRV_READ: c_int = 1;
const ERL_DRV_WRITE: c_int = 2;
const ERL_DRV_USE: c_int = 4;

/// `struct erl_io_vec` of erl_driver.h.
#[repr(C)]
pub(super) struct ErlIOVec {
    vsize: c_int,
    size: usize,
    iov: *mut libc::iovec,
    binv: *mut *mut c_void,
}

/// `struct erl_drv_binary` of erl_driver.h (its first two fields).
#[repr(C)]
struct ErlDrvBinary {
    orig_size: isize,
    orig_bytes: [u8; 1],
}

extern "C" {
    fn driver_select(port: ErlDrvPort, event: *mut c_void, mode: c_int, on: c_int) -> c_int;
    fn driver_mk_port(port: ErlDrvPort) -> usize;
    fn driver_output(port: ErlDrvPort, buf: *mut c_char, len: usize) -> c_int;
    fn driver_output_binary(
        port: ErlDrvPort,
        hbuf: *mut c_char,
        hlen: usize,
        bin: *mut ErlDrvBinary,
        offset: usize,
        len: usize,
    ) -> c_int;
    fn driver_failure_eof(port: ErlDrvPort) -> c_int;
    fn driver_failure_posix(port: ErlDrvPort, error: c_int) -> c_int;
    fn set_busy_port(port: ErlDrvPort, on: c_int);
    fn driver_enqv(port: ErlDrvPort, ev: *mut ErlIOVec, skip: usize) -> c_int;
    fn driver_enq(port: ErlDrvPort, buf: *mut c_char, len: usize) -> c_int;
    fn driver_peekq(port: ErlDrvPort, vlen: *mut c_int) -> *mut libc::iovec;
    fn driver_deq(port: ErlDrvPort, size: usize) -> usize;
    fn driver_sizeq(port: ErlDrvPort) -> usize;
    fn driver_alloc_binary(size: usize) -> *mut ErlDrvBinary;
    fn driver_set_timer(port: ErlDrvPort, time: std::ffi::c_ulong) -> c_int;
    fn driver_free_binary(bin: *mut ErlDrvBinary);
    /// erl_nif.h: `int enif_get_local_port(ErlNifEnv*, ERL_NIF_TERM,
    /// ErlNifPort*)`; an `ErlNifPort` is one `ERL_NIF_TERM` (the port id).
    fn enif_get_local_port(
        env: *mut rustler::sys::ErlNifEnv,
        term: rustler::sys::ErlNifTerm,
        port: *mut usize,
    ) -> c_int;
}

/// The id of the local port `term` (as `driver_mk_port` gives it to the
/// port's own callbacks), or None.
pub fn local_port_id(env: rustler::Env<'_>, term: rustler::Term<'_>) -> Option<usize> {
    let mut id: usize = 0;
    // SAFETY: env is the calling process's env and term one of its terms;
    // id is a valid out-pointer for the ErlNifPort's one field (a size_t).
    let ok = unsafe { enif_get_local_port(env.as_c_arg(), term.as_c_arg(), &mut id) };
    (ok != 0).then_some(id)
}

fn event_of(fd: RawFd) -> *mut c_void {
    // On Unix an ErlDrvEvent is the fd cast to a pointer (erl_driver.h).
    fd as isize as *mut c_void
}

/// A dist port inside one of its callbacks (port lock held, no process
/// locks): what the layer above may do with it.
pub struct Port(ErlDrvPort);

impl Port {
    /// The port's id (the port term, as `enif_get_local_port` sees it).
    pub fn id(&self) -> usize {
        // SAFETY: the port is valid during its callback.
        unsafe { driver_mk_port(self.0) }
    }

    /// Selects `fd` for reading and/or writing (`ERL_DRV_USE` with it: the
    /// fd is the port's until [`Port::release`]), or deselects the directions
    /// given (without `ERL_DRV_USE`, which would give the fd up). False if
    /// ERTS refused.
    pub fn select(&self, fd: RawFd, read: bool, write: bool, on: bool) -> bool {
        let mode = if read { ERL_DRV_READ } else { 0 } | if write { ERL_DRV_WRITE } else { 0 };
        if mode == 0 {
            return true;
        }
        let mode = if on { mode | ERL_DRV_USE } else { mode };
        // SAFETY: the port is valid during its callback; fd is the open fd
        // this port owns (taken from the park table, closed only in
        // stop_select after `release`).
        unsafe { driver_select(self.0, event_of(fd), mode, c_int::from(on)) == 0 }
    }

    /// Gives `fd` up: every direction off, `ERL_DRV_USE` off. ERTS then calls
    /// `stop_select` (now or once no poller holds the fd), which closes it
    /// through the hooks' `close`.
    pub fn release(&self, fd: RawFd) {
        lock(closing()).push(fd);
        // SAFETY: as in select; the fd is not used by the port after this.
        let r = unsafe {
            driver_select(
                self.0,
                event_of(fd),
                ERL_DRV_READ | ERL_DRV_WRITE | ERL_DRV_USE,
                0,
            )
        };
        if r != 0 {
            // Never selected: no stop_select will come.
            if take_closing(fd) {
                close_hook(fd);
            }
        }
    }

    /// A received packet, copied by ERTS (`driver_output`: on a dist port,
    /// `erts_net_message`; 0 bytes is a tick).
    pub fn output(&self, data: &[u8]) {
        // SAFETY: the port is valid; data is readable for its length (ERTS
        // only reads it, during the call).
        unsafe { driver_output(self.0, data.as_ptr().cast_mut().cast(), data.len()) };
    }

    /// A received packet in a driver binary (ERTS keeps a reference where it
    /// keeps the data: no copy of a large fragment).
    pub fn output_binary(&self, bin: &DrvBin, len: usize) {
        let len = len.min(bin.size());
        // SAFETY: the port is valid; bin is a live driver binary of at least
        // len bytes; ERTS takes its own reference if it keeps it.
        unsafe { driver_output_binary(self.0, std::ptr::null_mut(), 0, bin.0, 0, len) };
    }

    /// Runs the port's `timeout` as soon as ERTS can (a 0 ms timer: ERTS's
    /// "at once" timer slot, served at the scheduler's next timer check,
    /// after the port task that set it).
    pub fn timer_now(&self) -> bool {
        // SAFETY: the port is valid during its callback.
        unsafe { driver_set_timer(self.0, 0) == 0 }
    }

    /// Busy (ERTS stops handing over dist data) or not.
    pub fn set_busy(&self, on: bool) {
        // SAFETY: as above.
        unsafe { set_busy_port(self.0, c_int::from(on)) };
    }

    /// Queues `ev` after its first `skip` bytes (ERTS references its
    /// binaries and copies the rest).
    pub fn enqv(&self, ev: &mut IoVec<'_>, skip: usize) {
        // SAFETY: the port is valid; ev is the vector of this callback.
        unsafe { driver_enqv(self.0, ev.0, skip.min(ev.size())) };
    }

    /// Queues a copy of `data`.
    pub fn enq(&self, data: &[u8]) {
        // SAFETY: the port is valid; data is read (copied) during the call.
        unsafe { driver_enq(self.0, data.as_ptr().cast_mut().cast(), data.len()) };
    }

    /// The port's queue.
    pub fn peekq(&self) -> &[libc::iovec] {
        let mut n: c_int = 0;
        // SAFETY: the port is valid; n is a valid out-pointer.
        let p = unsafe { driver_peekq(self.0, &mut n) };
        let n = usize::try_from(n).unwrap_or(0);
        if p.is_null() || n == 0 {
            return &[];
        }
        // SAFETY: ERTS returns n iovecs of the queue, valid until the queue
        // changes (a deq or enq), which the borrow of self spans no call of.
        unsafe { std::slice::from_raw_parts(p, n) }
    }

    /// Drops `n` bytes from the queue's head; returns the bytes left.
    pub fn deq(&self, n: usize) -> usize {
        // SAFETY: the port is valid; n is at most the queue's size (the caller's write).
        unsafe { driver_deq(self.0, n) }
    }

    /// Bytes queued.
    pub fn sizeq(&self) -> usize {
        // SAFETY: the port is valid.
        let n = unsafe { driver_sizeq(self.0) };
        if n == usize::MAX {
            0
        } else {
            n
        }
    }
}

/// The I/O vector of an `outputv` call (its element 0 is the driver's, for a
/// header: io.c and dist.c leave it empty).
pub struct IoVec<'a>(*mut ErlIOVec, std::marker::PhantomData<&'a mut ErlIOVec>);

impl IoVec<'_> {
    /// Total bytes (the header's included while one is set).
    pub fn size(&self) -> usize {
        // SAFETY: the vector is valid for the callback.
        unsafe { (*self.0).size }
    }

    /// Its iovecs (element 0 the header slot).
    pub fn iov(&self) -> &[libc::iovec] {
        // SAFETY: as above; vsize iovecs at iov.
        let (p, n) = unsafe { ((*self.0).iov, (*self.0).vsize) };
        let n = usize::try_from(n).unwrap_or(0);
        if p.is_null() || n == 0 {
            return &[];
        }
        // SAFETY: ERTS made vsize iovecs at iov for this call.
        unsafe { std::slice::from_raw_parts(p, n) }
    }

    /// Runs `f` with `hdr` in element 0 (`size` counting it), then empties
    /// element 0 again, as dist.c expects it back.
    pub fn with_header<R>(&mut self, hdr: &[u8], f: impl FnOnce(&mut Self) -> R) -> Option<R> {
        // SAFETY: as above.
        let (p, n) = unsafe { ((*self.0).iov, (*self.0).vsize) };
        if p.is_null() || n < 1 {
            return None;
        }
        // SAFETY: element 0 exists (vsize >= 1) and is the driver's; hdr
        // outlives the use (restored below before returning); binv[0] is
        // NULL, so driver_enqv copies it.
        unsafe {
            (*p).iov_base = hdr.as_ptr().cast_mut().cast();
            (*p).iov_len = hdr.len();
            (*self.0).size += hdr.len();
        }
        let r = f(self);
        // SAFETY: as above.
        unsafe {
            (*self.0).size -= hdr.len();
            (*p).iov_base = std::ptr::null_mut();
            (*p).iov_len = 0;
        }
        Some(r)
    }
}

/// An owned driver binary (freed on drop; ERTS keeps its own reference
/// where it keeps the data).
pub struct DrvBin(*mut ErlDrvBinary, usize);

impl DrvBin {
    /// `len` bytes, or None.
    pub fn alloc(len: usize) -> Option<DrvBin> {
        // SAFETY: plain allocation; null on failure.
        let p = unsafe { driver_alloc_binary(len) };
        (!p.is_null()).then_some(DrvBin(p, len))
    }

    /// Its size.
    pub fn size(&self) -> usize {
        self.1
    }

    /// Its bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: orig_bytes starts the binary's len bytes, owned by us
        // (nobody else has a reference before output_binary, and ERTS's
        // copy of the reference only reads).
        unsafe {
            let base = std::ptr::addr_of_mut!((*self.0).orig_bytes).cast::<u8>();
            std::slice::from_raw_parts_mut(base, self.1)
        }
    }
}

impl Drop for DrvBin {
    fn drop(&mut self) {
        // SAFETY: our reference from driver_alloc_binary, dropped once.
        unsafe { driver_free_binary(self.0) };
    }
}

// SAFETY: a driver binary is reference counted by ERTS with atomics; the
// owner only moves between callbacks of one port (serialised by its lock).
unsafe impl Send for DrvBin {}

/// How a dist port's event ended its connection: the port exits (ERTS
/// terminates it inside the `driver_failure_*` call, running its stop, so
/// the callback touches nothing of the port's after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    /// The peer closed, or a write failed (inet_drv's reason too): `normal`,
    /// which nodedown reports as `connection_closed`.
    Eof,
    /// A read failed: the posix atom.
    Posix(i32),
}

/// What a dist port does (plain Rust, made by the hooks' `start`).
pub trait Conn: Send {
    /// ERTS's data for the peer (dist data, or a tick's empty `port_command`).
    fn outputv(&mut self, port: &Port, ev: &mut IoVec<'_>) -> Option<Fail>;
    /// A flat buffer for the peer (only if ERTS calls `output`).
    fn output(&mut self, port: &Port, data: &[u8]) -> Option<Fail>;
    /// The fd is readable.
    fn ready_input(&mut self, port: &Port) -> Option<Fail>;
    /// The fd is writable.
    fn ready_output(&mut self, port: &Port) -> Option<Fail>;
    /// The timer of [`Port::timer_now`].
    fn timeout(&mut self, port: &Port) -> Option<Fail>;
    /// `erlang:port_control/3`: the reply's bytes (never fails the port).
    fn control(&mut self, port: &Port, op: u32, data: &[u8]) -> Vec<u8>;
    /// The port stops: give the fd up ([`Port::release`]).
    fn stop(&mut self, port: &Port);
}

/// What the dist port kind forwards to (set at the NIF's load).
pub struct Hooks {
    /// A dist port opened: its connection (None refuses the port).
    pub start: fn() -> Option<Box<dyn Conn>>,
    /// Closes a dist port's fd once ERTS let it go (`stop_select`).
    pub close: fn(RawFd),
}

static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(std::ptr::null_mut());

/// Installs the hooks of this copy (load or upgrade).
pub fn set_hooks(h: &'static Hooks) {
    HOOKS.store(std::ptr::from_ref(h).cast_mut(), Ordering::Release);
}

fn hooks() -> Option<&'static Hooks> {
    // SAFETY: only ever set from a &'static Hooks of this copy.
    unsafe { HOOKS.load(Ordering::Acquire).as_ref() }
}

fn close_hook(fd: RawFd) {
    if let Some(h) = hooks() {
        (h.close)(fd);
    } else {
        super::syscall::close(fd);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// fds given up by dist ports whose `stop_select` has not come yet (the
/// readiness port's epoll fd is never here: its stop_select closes nothing).
fn closing() -> &'static Mutex<Vec<RawFd>> {
    static CLOSING: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());
    &CLOSING
}

fn take_closing(fd: RawFd) -> bool {
    let mut c = lock(closing());
    match c.iter().position(|&f| f == fd) {
        Some(i) => {
            c.swap_remove(i);
            true
        }
        None => false,
    }
}

/// `stop_select` for `fd`: closes it if a dist port gave it up.
pub(super) fn stop_select(fd: RawFd) {
    if take_closing(fd) {
        close_hook(fd);
    }
}

/// A socket fd on its way from `nifsock_nif:dist_attach/2` to a dist port.
struct Parked {
    port: usize,
    fd: Option<(RawFd, Vec<u8>)>,
}

/// Live dist ports (registered by their start, removed by their stop or
/// their attach), with the fd a NIF parked for them. Shared by every copy of
/// the library (the NIF of an upgraded copy parks for the driver's copy).
#[derive(Default)]
pub(super) struct Park(Mutex<Vec<Parked>>);

/// The park table's size, for the upgrade fingerprint.
pub fn park_size() -> usize {
    std::mem::size_of::<Park>()
}

static PARK: carry::Named<Park> = carry::Named::new("distdrv::Park");

/// Makes (or finds the old copy's) park table; from load/upgrade.
pub fn init() -> bool {
    carry::init_shared(&PARK)
}

fn park_table() -> Option<MutexGuard<'static, Vec<Parked>>> {
    carry::shared(&PARK).map(|p| lock(&p.0))
}

/// Parks `fd` (and the bytes read from it before) for the live dist port
/// `port`; Err gives them back when no such port waits for one.
pub fn park(port: usize, fd: RawFd, pending: Vec<u8>) -> Result<(), (RawFd, Vec<u8>)> {
    let Some(mut t) = park_table() else {
        return Err((fd, pending));
    };
    match t.iter_mut().find(|p| p.port == port && p.fd.is_none()) {
        Some(p) => {
            p.fd = Some((fd, pending));
            Ok(())
        }
        None => Err((fd, pending)),
    }
}

/// The fd parked for `port` (its entry goes: one attach per port).
pub fn take(port: usize) -> Option<(RawFd, Vec<u8>)> {
    let mut t = park_table()?;
    let i = t.iter().position(|p| p.port == port && p.fd.is_some())?;
    t.swap_remove(i).fd
}

fn register(port: usize) -> bool {
    let Some(mut t) = park_table() else {
        return false;
    };
    t.push(Parked { port, fd: None });
    true
}

fn unregister(port: usize) {
    let gone = park_table().and_then(|mut t| {
        let i = t.iter().position(|p| p.port == port)?;
        t.swap_remove(i).fd
    });
    if let Some((fd, _)) = gone {
        close_hook(fd);
    }
}

/// Per-port data of a dist port.
pub(super) struct DistData {
    port: ErlDrvPort,
    conn: Box<dyn Conn>,
}

fn guard(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

/// `start` of a dist port: None refuses it.
pub(super) fn start(port: ErlDrvPort) -> Option<Box<DistData>> {
    let conn = std::panic::catch_unwind(|| hooks().and_then(|h| (h.start)()))
        .ok()
        .flatten()?;
    let p = Port(port);
    if !register(p.id()) {
        return None;
    }
    Some(Box::new(DistData { port, conn }))
}

pub(super) fn stop(d: Box<DistData>) {
    let mut d = d;
    let p = Port(d.port);
    unregister(p.id());
    guard(|| d.conn.stop(&p));
}

/// Runs `f` on the connection of the dist port whose data is `d`, then, with
/// no reference to the data left, ends the port if `f` says so.
///
/// # Safety
/// `d` is the live DistData of the port whose callback runs (its lock held).
unsafe fn event(d: *mut DistData, f: impl FnOnce(&mut dyn Conn, &Port) -> Option<Fail>) {
    let (port, fail) = {
        // SAFETY: the caller's contract; the reference ends in this block.
        let Some(d) = (unsafe { d.as_mut() }) else {
            return;
        };
        let p = Port(d.port);
        let mut fail = None;
        guard(|| fail = f(d.conn.as_mut(), &p));
        (d.port, fail)
    };
    // The port may be terminated (its data freed) inside these calls.
    match fail {
        // SAFETY: the port is valid during its callback.
        Some(Fail::Eof) => unsafe {
            driver_failure_eof(port);
        },
        // SAFETY: as above.
        Some(Fail::Posix(e)) => unsafe {
            driver_failure_posix(port, e);
        },
        None => {}
    }
}

/// # Safety
/// As [`event`]; `ev` is the callback's vector.
pub(super) unsafe fn outputv(d: *mut DistData, ev: *mut ErlIOVec) {
    if ev.is_null() {
        return;
    }
    let mut v = IoVec(ev, std::marker::PhantomData);
    // SAFETY: the caller's contract.
    unsafe { event(d, |c, p| c.outputv(p, &mut v)) };
}

/// # Safety
/// As [`event`]; `buf` holds `len` bytes.
pub(super) unsafe fn output(d: *mut DistData, buf: *const c_char, len: usize) {
    let data: &[u8] = if buf.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: ERTS passes len readable bytes at buf for this call.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }
    };
    // SAFETY: the caller's contract.
    unsafe { event(d, |c, p| c.output(p, data)) };
}

/// # Safety
/// As [`event`].
pub(super) unsafe fn ready_input(d: *mut DistData) {
    // SAFETY: the caller's contract.
    unsafe { event(d, |c, p| c.ready_input(p)) };
}

/// # Safety
/// As [`event`].
pub(super) unsafe fn ready_output(d: *mut DistData) {
    // SAFETY: the caller's contract.
    unsafe { event(d, |c, p| c.ready_output(p)) };
}

/// # Safety
/// As [`event`].
pub(super) unsafe fn timeout(d: *mut DistData) {
    // SAFETY: the caller's contract.
    unsafe { event(d, |c, p| c.timeout(p)) };
}

/// `control`: the reply goes into ERTS's buffer `rbuf` of `rlen` bytes
/// (cut to it: the replies are a few bytes).
///
/// # Safety
/// As [`event`]; `buf` holds `len` bytes; `rbuf` is ERTS's reply buffer.
pub(super) unsafe fn control(
    d: *mut DistData,
    op: u32,
    buf: *const c_char,
    len: usize,
    rbuf: *mut *mut c_char,
    rlen: usize,
) -> isize {
    // SAFETY: the caller's contract.
    let Some(d) = (unsafe { d.as_mut() }) else {
        return 0;
    };
    let p = Port(d.port);
    let data: &[u8] = if buf.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: ERTS passes len readable bytes at buf for this call.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }
    };
    let mut reply = Vec::new();
    guard(|| reply = d.conn.control(&p, op, data));
    let n = reply.len().min(rlen);
    if n == 0 || rbuf.is_null() {
        return 0;
    }
    // SAFETY: *rbuf is ERTS's reply buffer of rlen bytes; n <= rlen.
    unsafe {
        let dst = *rbuf;
        if dst.is_null() {
            return 0;
        }
        std::ptr::copy_nonoverlapping(reply.as_ptr(), dst.cast::<u8>(), n);
    }
    isize::try_from(n).unwrap_or(0)
}
