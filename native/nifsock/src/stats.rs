//! Process-wide atomic counters, returned by `nifsock:info/0`, so users can see
//! the mechanisms at work in production.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// One counter.
pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// Adds one.
    pub fn incr(&self) {
        self.add(1);
    }
    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A gauge that goes up and down.
pub struct Gauge(AtomicI64);

impl Gauge {
    const fn new() -> Self {
        Gauge(AtomicI64::new(0))
    }
    /// +1.
    pub fn up(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// -1.
    pub fn down(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sockets whose resource object exists.
pub static SOCKETS: Gauge = Gauge::new();
/// File descriptors nifsock owns and has not closed yet.
pub static FDS: Gauge = Gauge::new();
/// Successful accept4 calls.
pub static ACCEPTS: Counter = Counter::new();
/// Accept calls that returned EAGAIN.
pub static ACCEPTS_EAGAIN: Counter = Counter::new();
/// recv calls that returned data or EOF.
pub static READS: Counter = Counter::new();
/// recv calls that returned EAGAIN.
pub static READS_EAGAIN: Counter = Counter::new();
/// recv calls that went straight to waiting because the last read was short
/// (the receive queue was empty then): an EAGAIN read saved.
pub static READS_SKIPPED: Counter = Counter::new();
/// sendmsg/send calls that wrote something.
pub static WRITES: Counter = Counter::new();
/// sendmsg/send calls that returned EAGAIN.
pub static WRITES_EAGAIN: Counter = Counter::new();
/// Bytes received.
pub static BYTES_IN: Counter = Counter::new();
/// Bytes sent.
pub static BYTES_OUT: Counter = Counter::new();
/// fds closed on the thread that asked (no scheduler hop).
pub static CLOSES_INLINE: Counter = Counter::new();
/// Lingering closes run on a dirty I/O scheduler.
pub static CLOSES_DIRTY: Counter = Counter::new();
/// Lingering closes handed to the closer thread (from callbacks).
pub static CLOSES_DEFERRED: Counter = Counter::new();
/// Result binaries allocated up front for a recv(S, N) that didn't complete
/// in one read (later reads go straight into them).
pub static EXACT_ALLOCS: Counter = Counter::new();
/// recv(S, 0) reads that went straight into their result binary (streams).
pub static DIRECT_READS: Counter = Counter::new();
/// Selects armed (enif_select_x READ or WRITE).
pub static SELECTS: Counter = Counter::new();
/// setsockopt calls made.
pub static SETSOCKOPTS: Counter = Counter::new();
/// getsockopt calls made.
pub static GETSOCKOPTS: Counter = Counter::new();

/// All counters by name, for `nifsock:info/0`; `object_bytes` is the size of
/// one socket resource object (ERTS counts it as binary memory).
pub fn snapshot(object_bytes: usize) -> Vec<(&'static str, i64)> {
    let c = |c: &Counter| i64::try_from(c.get()).unwrap_or(i64::MAX);
    vec![
        ("sockets", SOCKETS.get()),
        ("fds", FDS.get()),
        ("accepts", c(&ACCEPTS)),
        ("accepts_eagain", c(&ACCEPTS_EAGAIN)),
        ("reads", c(&READS)),
        ("reads_eagain", c(&READS_EAGAIN)),
        ("reads_skipped", c(&READS_SKIPPED)),
        ("writes", c(&WRITES)),
        ("writes_eagain", c(&WRITES_EAGAIN)),
        ("bytes_in", c(&BYTES_IN)),
        ("bytes_out", c(&BYTES_OUT)),
        ("closes_inline", c(&CLOSES_INLINE)),
        ("closes_dirty", c(&CLOSES_DIRTY)),
        ("closes_deferred", c(&CLOSES_DEFERRED)),
        ("exact_allocs", c(&EXACT_ALLOCS)),
        ("direct_reads", c(&DIRECT_READS)),
        ("selects", c(&SELECTS)),
        ("setsockopts", c(&SETSOCKOPTS)),
        ("getsockopts", c(&GETSOCKOPTS)),
        // ERTS counts resource objects as binary memory: this is ours, per socket.
        (
            "socket_object_bytes",
            i64::try_from(object_bytes).unwrap_or(0),
        ),
    ]
}
