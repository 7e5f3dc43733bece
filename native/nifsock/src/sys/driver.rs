//! A minimal ERTS driver in the same shared object as the NIF, with two kinds
//! of port. The readiness port (`open_port({spawn_driver, "libnifsock"}, ..)`)
//! has a port `driver_select` one fd for input (nifsock's readiness epoll
//! set), and the socket fds the readiness layer hands it ([`hold`]), and
//! runs [`Hooks::ready`] with the fd when ERTS calls `ready_input`. A dist port
//! (`"libnifsock dist"`) is `nifsock_dist`'s port carrier: its callbacks are
//! `distdrv`'s.
//!
//! Rustler has no driver API, so the few C declarations needed are here,
//! written from `erl_driver.h` (OTP 25-29 all have driver ABI 3.3). The driver
//! is loaded with `erl_ddll:load_driver(PrivDir, "libnifsock")`: ERTS
//! `dlopen`s the same path as `erlang:load_nif`, so both share this object and
//! its statics (see doc/readiness-research.md).

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicPtr, Ordering};

use super::carry;
use super::distdrv::{self, DistData, ErlIOVec};
use super::drvsend::PortId;

type ErlDrvData = *mut c_void;
type ErlDrvEvent = *mut c_void;
type ErlDrvPort = *mut c_void;
type ErlDrvSizeT = usize;
type ErlDrvSSizeT = isize;

const ERL_DRV_READ: c_int = 1;
const ERL_DRV_USE: c_int = 4;
const ERL_DRV_EXTENDED_MARKER: c_int = 0xfeee_eeed_u32 as c_int;
const ERL_DRV_EXTENDED_MAJOR_VERSION: c_int = 3;
const ERL_DRV_EXTENDED_MINOR_VERSION: c_int = 3;
const ERL_DRV_FLAG_USE_PORT_LOCKING: c_int = 1;
/// `port_command(Port, Data, [force])` (dist_util's ticks) needs it.
const ERL_DRV_FLAG_SOFT_BUSY: c_int = 1 << 1;

/// `struct erl_drv_entry` of erl_driver.h (major version 3), field for field.
#[repr(C)]
struct ErlDrvEntry {
    init: Option<unsafe extern "C" fn() -> c_int>,
    start: Option<unsafe extern "C" fn(ErlDrvPort, *mut c_char) -> ErlDrvData>,
    stop: Option<unsafe extern "C" fn(ErlDrvData)>,
    output: Option<unsafe extern "C" fn(ErlDrvData, *mut c_char, ErlDrvSizeT)>,
    ready_input: Option<unsafe extern "C" fn(ErlDrvData, ErlDrvEvent)>,
    ready_output: Option<unsafe extern "C" fn(ErlDrvData, ErlDrvEvent)>,
    driver_name: *const c_char,
    finish: Option<unsafe extern "C" fn()>,
    handle: *mut c_void,
    control: Option<
        unsafe extern "C" fn(
            ErlDrvData,
            c_uint,
            *mut c_char,
            ErlDrvSizeT,
            *mut *mut c_char,
            ErlDrvSizeT,
        ) -> ErlDrvSSizeT,
    >,
    timeout: Option<unsafe extern "C" fn(ErlDrvData)>,
    outputv: Option<unsafe extern "C" fn(ErlDrvData, *mut c_void)>,
    ready_async: Option<unsafe extern "C" fn(ErlDrvData, *mut c_void)>,
    flush: Option<unsafe extern "C" fn(ErlDrvData)>,
    call: Option<
        unsafe extern "C" fn(
            ErlDrvData,
            c_uint,
            *mut c_char,
            ErlDrvSizeT,
            *mut *mut c_char,
            ErlDrvSizeT,
            *mut c_uint,
        ) -> ErlDrvSSizeT,
    >,
    unused_event_callback: Option<unsafe extern "C" fn()>,
    extended_marker: c_int,
    major_version: c_int,
    minor_version: c_int,
    driver_flags: c_int,
    handle2: *mut c_void,
    process_exit: Option<unsafe extern "C" fn(ErlDrvData, *mut c_void)>,
    stop_select: Option<unsafe extern "C" fn(ErlDrvEvent, *mut c_void)>,
    emergency_close: Option<unsafe extern "C" fn(ErlDrvData)>,
}

extern "C" {
    /// erl_driver.h: `int driver_select(ErlDrvPort, ErlDrvEvent, int mode, int on)`,
    /// exported by the emulator (resolved at dlopen, like the enif_* symbols).
    fn driver_select(port: ErlDrvPort, event: ErlDrvEvent, mode: c_int, on: c_int) -> c_int;
    /// erl_driver.h: `ErlDrvTermData driver_mk_port(ErlDrvPort)`.
    fn driver_mk_port(port: ErlDrvPort) -> usize;
}

thread_local! {
    /// The port id of this copy's port while its `ready_input` runs on this
    /// thread (0 otherwise): a drain run by it may send from the port.
    static READY_PORT: Cell<usize> = const { Cell::new(0) };
    /// The readiness port itself (its `ErlDrvPort`) while this copy's driver
    /// runs its `ready_input` or `stop` on this thread (null otherwise): a
    /// drain may `driver_select` sockets' fds on it ([`hold`]).
    static READY_DRV: Cell<ErlDrvPort> = const { Cell::new(std::ptr::null_mut()) };
}

/// What [`hold`] does with a socket's fd on the readiness port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Select it for input (`READ|USE`): its events come to `ready_input`.
    Read,
    /// Stop its input (`READ` off), keeping it held (`USE` stays on).
    Pause,
    /// Let it go (`READ|USE` off): ERTS calls `stop_select` for it, now or
    /// once no poller holds it, and only then may it be closed.
    Release,
}

/// `driver_select`s `fd` on the readiness port, from its `ready_input` or
/// `stop` (false elsewhere, or if ERTS refused).
pub fn hold(fd: RawFd, how: Hold) -> bool {
    let port = READY_DRV.with(Cell::get);
    if port.is_null() {
        return false;
    }
    let (mode, on) = match how {
        Hold::Read => (ERL_DRV_READ | ERL_DRV_USE, 1),
        Hold::Pause => (ERL_DRV_READ, 0),
        Hold::Release => (ERL_DRV_READ | ERL_DRV_USE, 0),
    };
    // SAFETY: port is the readiness port whose callback runs on this thread
    // (READY_DRV is set only around those callbacks), so it is valid and
    // locked; fd is an open socket fd that stays open until its stop_select.
    unsafe { driver_select(port, event_of(fd), mode, on) == 0 }
}

/// Whether [`hold`] can select here (the readiness port's `ready_input` or
/// `stop` runs on this thread).
pub fn holding() -> bool {
    !READY_DRV.with(Cell::get).is_null()
}

/// Runs `f` with the readiness port `port` as the one [`hold`] selects on.
fn with_drv<R>(port: ErlDrvPort, f: impl FnOnce() -> R) -> R {
    READY_DRV.with(|c| c.set(port));
    let r = f();
    READY_DRV.with(|c| c.set(std::ptr::null_mut()));
    r
}

/// The port whose `ready_input` (this copy's driver's) runs the current
/// drain, or None (the pump's NIF, or another copy's driver after an
/// upgrade: those send with enif_send).
pub fn ready_port() -> Option<PortId> {
    PortId::from_raw(READY_PORT.with(Cell::get))
}

/// What the driver calls into (plain Rust, set by the readiness module).
pub struct Hooks {
    /// A port opened: the fd to select for input, or None to refuse the port.
    pub start: fn() -> Option<RawFd>,
    /// `ready_input` on a selected fd (a normal scheduler, port lock held,
    /// no process locks): the set's, or one [`hold`] selected.
    pub ready: fn(RawFd),
    /// The port closes (its select of the set is gone; [`hold`] may still
    /// release the fds it holds).
    pub stop: fn(),
    /// `stop_select` of an fd: true if it was one [`hold`] selected.
    pub released: fn(RawFd) -> bool,
}

/// The hooks this copy's driver forwards to: this copy's own, or, once a
/// newer copy of the library was loaded by an upgrade while this copy's driver
/// runs the readiness port, the newer copy's (so the port is served by the
/// new code).
static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(std::ptr::null_mut());

fn hooks_cell() -> *mut c_void {
    std::ptr::addr_of!(HOOKS).cast_mut().cast()
}

/// Sets the hooks the driver forwards to (from the NIF's load or upgrade,
/// before any port of this copy starts), and points the running port's
/// driver, if another copy runs it, at them too.
pub fn set_hooks(h: &'static Hooks) {
    let h = std::ptr::from_ref(h).cast_mut();
    HOOKS.store(h, Ordering::Release);
    let port = carry::current().port_hooks.load(Ordering::Acquire);
    if !port.is_null() && port != hooks_cell() {
        // SAFETY: port_hooks is the HOOKS static of the copy whose driver runs
        // the port (set by its drv_start, cleared by its drv_stop before the
        // driver can be unloaded), so it is mapped; it is an AtomicPtr<Hooks>,
        // written atomically, and every copy sharing the block has this layout.
        unsafe { &*port.cast::<AtomicPtr<Hooks>>() }.store(h, Ordering::Release);
    }
}

/// This copy's code is about to be unmapped: a port driver of another copy
/// forwarding to this copy's hooks forwards to nothing from now on (an
/// upgrade's new copy has already pointed it at its own).
pub fn retire() {
    let mine = HOOKS.load(Ordering::Acquire);
    let port = carry::current().port_hooks.load(Ordering::Acquire);
    if mine.is_null() || port.is_null() || port == hooks_cell() {
        return;
    }
    // SAFETY: as in set_hooks.
    let cell = unsafe { &*port.cast::<AtomicPtr<Hooks>>() };
    let _ = cell.compare_exchange(
        mine,
        std::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

fn hooks() -> Option<&'static Hooks> {
    let h = HOOKS.load(Ordering::Acquire);
    // SAFETY: only ever set from a `&'static Hooks` of this copy (`set_hooks`)
    // or of a newer copy (its `set_hooks`), which takes it back in `retire`
    // before its code is unmapped.
    unsafe { h.as_ref() }
}

/// Per-port data: the readiness port and the fd it selected, or a dist port.
enum PortData {
    Readiness { port: ErlDrvPort, fd: RawFd },
    Dist(Box<DistData>),
}

/// Whether the port's command (`"libnifsock dist"`) asks for a dist port.
fn is_dist(cmd: *mut c_char) -> bool {
    if cmd.is_null() {
        return false;
    }
    // SAFETY: ERTS passes the port's command as a NUL-terminated string,
    // valid during start.
    let cmd = unsafe { std::ffi::CStr::from_ptr(cmd) };
    cmd.to_bytes().split(|&b| b == b' ').nth(1) == Some(&b"dist"[..])
}

fn event_of(fd: RawFd) -> ErlDrvEvent {
    // On Unix an ErlDrvEvent is the fd cast to a pointer (erl_driver.h).
    fd as isize as ErlDrvEvent
}

unsafe extern "C" fn drv_start(port: ErlDrvPort, cmd: *mut c_char) -> ErlDrvData {
    if is_dist(cmd) {
        return match distdrv::start(port) {
            Some(d) => Box::into_raw(Box::new(PortData::Dist(d))).cast(),
            None => -1isize as ErlDrvData,
        };
    }
    let fd = std::panic::catch_unwind(|| hooks().and_then(|h| (h.start)()))
        .ok()
        .flatten();
    let Some(fd) = fd else {
        return -1isize as ErlDrvData; // ERL_DRV_ERROR_GENERAL
    };
    // SAFETY: port is the port ERTS is starting (valid in this callback); fd is
    // an open fd owned by the readiness module for the life of the library.
    // READ|USE, on: the fd stays selected until the port stops.
    let r = unsafe { driver_select(port, event_of(fd), ERL_DRV_READ | ERL_DRV_USE, 1) };
    if r != 0 {
        return -1isize as ErlDrvData;
    }
    // An upgrade's new copy points this copy's hooks at its own.
    carry::current()
        .port_hooks
        .store(hooks_cell(), Ordering::Release);
    Box::into_raw(Box::new(PortData::Readiness { port, fd })).cast()
}

unsafe extern "C" fn drv_stop(data: ErlDrvData) {
    if data.is_null() {
        return;
    }
    // SAFETY: data is the Box made by drv_start, handed back once by ERTS at stop.
    let pd = unsafe { Box::from_raw(data.cast::<PortData>()) };
    let (port, fd) = match *pd {
        PortData::Readiness { port, fd } => (port, fd),
        PortData::Dist(d) => return distdrv::stop(d),
    };
    // SAFETY: the port is still valid during its stop callback; USE off makes
    // ERTS call stop_select (a no-op: the fd outlives the port).
    unsafe { driver_select(port, event_of(fd), ERL_DRV_READ | ERL_DRV_USE, 0) };
    let _ = carry::current().port_hooks.compare_exchange(
        hooks_cell(),
        std::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    let _ = std::panic::catch_unwind(|| {
        if let Some(h) = hooks() {
            with_drv(port, h.stop);
        }
    });
}

/// The dist data of a dist port's callback (a raw pointer: the port may be
/// terminated, and its data freed, inside the callback).
///
/// # Safety
/// As [`port_data`].
unsafe fn dist_of(data: ErlDrvData) -> Option<*mut DistData> {
    // SAFETY: the caller's contract; the reference ends here.
    match unsafe { port_data(data) } {
        Some(PortData::Dist(d)) => Some(std::ptr::from_mut(d.as_mut())),
        _ => None,
    }
}

/// The port data of a callback (None for a null pointer).
///
/// # Safety
/// `data` is what drv_start returned for the port whose callback runs (alive
/// until drv_stop; the port lock serialises its callbacks).
unsafe fn port_data<'a>(data: ErlDrvData) -> Option<&'a mut PortData> {
    // SAFETY: the caller's contract.
    unsafe { data.cast::<PortData>().as_mut() }
}

unsafe extern "C" fn drv_ready_input(data: ErlDrvData, event: ErlDrvEvent) {
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    if let Some(d) = unsafe { dist_of(data) } {
        // SAFETY: d is the port's live dist data, its lock held.
        return unsafe { distdrv::ready_input(d) };
    }
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    let Some(PortData::Readiness { port, .. }) = (unsafe { port_data(data) }) else {
        return;
    };
    let drv = *port;
    // SAFETY: the port is valid (and locked) during its ready_input.
    let id = unsafe { driver_mk_port(drv) };
    let fd = event as isize as RawFd;
    READY_PORT.with(|c| c.set(id));
    let _ = std::panic::catch_unwind(|| {
        if let Some(h) = hooks() {
            with_drv(drv, || (h.ready)(fd));
        }
    });
    READY_PORT.with(|c| c.set(0));
}

unsafe extern "C" fn drv_ready_output(data: ErlDrvData, _event: ErlDrvEvent) {
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    if let Some(d) = unsafe { dist_of(data) } {
        // SAFETY: d is the port's live dist data, its lock held; ERTS's
        // arguments are valid for the callback.
        unsafe { distdrv::ready_output(d) };
    }
}

unsafe extern "C" fn drv_timeout(data: ErlDrvData) {
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    if let Some(d) = unsafe { dist_of(data) } {
        // SAFETY: d is the port's live dist data, its lock held.
        unsafe { distdrv::timeout(d) };
    }
}

unsafe extern "C" fn drv_outputv(data: ErlDrvData, ev: *mut c_void) {
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    if let Some(d) = unsafe { dist_of(data) } {
        // SAFETY: d is the port's live dist data, its lock held; ERTS's
        // arguments are valid for the callback.
        unsafe { distdrv::outputv(d, ev.cast::<ErlIOVec>()) };
    }
}

unsafe extern "C" fn drv_output(data: ErlDrvData, buf: *mut c_char, len: ErlDrvSizeT) {
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    if let Some(d) = unsafe { dist_of(data) } {
        // SAFETY: d is the port's live dist data, its lock held; ERTS's
        // arguments are valid for the callback.
        unsafe { distdrv::output(d, buf, len) };
    }
}

unsafe extern "C" fn drv_control(
    data: ErlDrvData,
    op: c_uint,
    buf: *mut c_char,
    len: ErlDrvSizeT,
    rbuf: *mut *mut c_char,
    rlen: ErlDrvSizeT,
) -> ErlDrvSSizeT {
    // SAFETY: data is the PortData drv_start made, alive until drv_stop.
    match unsafe { dist_of(data) } {
        // SAFETY: d is the port's live dist data, its lock held; ERTS's
        // arguments are valid for the callback.
        Some(d) => unsafe { distdrv::control(d, op, buf, len, rbuf, rlen) },
        None => 0,
    }
}

unsafe extern "C" fn drv_stop_select(event: ErlDrvEvent, _reserved: *mut c_void) {
    // The readiness port's epoll fd belongs to the readiness module and is
    // reused by the next port; a socket fd the readiness port held goes back
    // to the readiness module (which closes it if its socket closed); a dist
    // port's fd is closed here (distdrv).
    let fd = event as isize as RawFd;
    let _ = std::panic::catch_unwind(|| {
        if !hooks().is_some_and(|h| (h.released)(fd)) {
            distdrv::stop_select(fd);
        }
    });
}

struct EntryCell(UnsafeCell<ErlDrvEntry>);

// SAFETY: the entry is written only by ERTS (its `handle` fields) under its
// driver-list lock, after driver_init returned it; Rust never touches it again.
unsafe impl Sync for EntryCell {}

static ENTRY: EntryCell = EntryCell(UnsafeCell::new(ErlDrvEntry {
    init: None,
    start: Some(drv_start),
    stop: Some(drv_stop),
    output: Some(drv_output),
    ready_input: Some(drv_ready_input),
    ready_output: Some(drv_ready_output),
    // erl_ddll requires the driver name to equal the file name without ".so".
    driver_name: c"libnifsock".as_ptr(),
    finish: None,
    handle: std::ptr::null_mut(),
    control: Some(drv_control),
    timeout: Some(drv_timeout),
    outputv: Some(drv_outputv),
    ready_async: None,
    flush: None,
    call: None,
    unused_event_callback: None,
    extended_marker: ERL_DRV_EXTENDED_MARKER,
    major_version: ERL_DRV_EXTENDED_MAJOR_VERSION,
    minor_version: ERL_DRV_EXTENDED_MINOR_VERSION,
    driver_flags: ERL_DRV_FLAG_USE_PORT_LOCKING | ERL_DRV_FLAG_SOFT_BUSY,
    handle2: std::ptr::null_mut(),
    process_exit: None,
    stop_select: Some(drv_stop_select),
    emergency_close: None,
}));

/// The symbol `erl_ddll` looks up (erts_sys_ddll_load_driver_init).
///
/// # Safety
/// Called by ERTS once per load; the returned entry is static.
#[no_mangle]
pub unsafe extern "C" fn driver_init() -> *mut c_void {
    ENTRY.0.get().cast()
}
