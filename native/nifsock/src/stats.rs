//! Process-wide counters, returned by `nifsock:info/0`, so users can see
//! the mechanisms at work in production.
//!
//! Each thread that counts has its own block of slots ([`Shard`]), which only
//! it writes (a plain load and store, no locked instruction): one shared block
//! bumped by every scheduler on every read and write is a cache line that
//! moves between the cores at each bump (with two threads bumping two slots of
//! the one block, 75 ns per pair on this 2-core VM, against 8.7 ns for atomic
//! adds to a line per thread and 0.5 ns for a load and store). A value is the
//! sum of every thread's block, read when `info/0` asks. The blocks live as
//! long as the VM (a thread's block outlives it: its counts stay in the sums)
//! and are listed in a value of the block `sys::carry` shares between library
//! generations, so an upgrade keeps them and both copies count into one sum.
//! Gauges go up on one thread and down on another: each block holds its
//! thread's net change (two's complement), and the sum is the gauge.
//! The slots of `sys::carry`'s own block still count what comes before the
//! list exists (nothing does: `init` runs at load) and what a copy of the
//! library without blocks counts after an upgrade; the sums include them.
//! A gauge the library reads on a hot path ([`SharedGauge`]: the port's fds
//! held for input, which a drain reads at every read it serves) stays one
//! slot of that shared block: it changes seldom, and reading it must be cheap.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::sys::carry;

/// One thread's slots.
struct Shard([AtomicU64; carry::SLOTS]);

/// Every thread's block (never freed: see the module doc).
#[derive(Default)]
struct Shards(Mutex<Vec<&'static Shard>>);

static SHARDS: carry::Named<Shards> = carry::Named::new("stats::Shards");

thread_local! {
    /// This thread's block, once it counted (per library copy).
    static MINE: Cell<Option<&'static Shard>> = const { Cell::new(None) };
}

/// Makes (or finds the old copy's) list of blocks; from load/upgrade.
pub fn init() -> bool {
    carry::init_shared(&SHARDS)
}

/// Makes this thread's block and lists it (None before [`init`]).
fn new_shard() -> Option<&'static Shard> {
    let list = carry::shared(&SHARDS)?;
    let shard: &'static Shard =
        Box::leak(Box::new(Shard([const { AtomicU64::new(0) }; carry::SLOTS])));
    list.0.lock().unwrap_or_else(|e| e.into_inner()).push(shard);
    Some(shard)
}

/// Adds `n` (wrapping) to slot `i` of this thread's block, or of the shared
/// block when this thread has none.
fn bump(i: usize, n: u64) {
    let mine = MINE
        .try_with(|m| {
            m.get().or_else(|| {
                let made = new_shard();
                m.set(made);
                made
            })
        })
        .ok()
        .flatten();
    match mine {
        // Only this thread writes its block: no locked instruction needed.
        Some(shard) => {
            if let Some(c) = shard.0.get(i) {
                c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            }
        }
        None => bump_shared(i, n),
    }
}

/// Adds `n` (wrapping) to slot `i` of the shared block.
fn bump_shared(i: usize, n: u64) {
    if let Some(c) = carry::counter(i) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// Slot `i` summed over the shared block and every thread's block.
fn sum(i: usize) -> u64 {
    let mut total = carry::counter(i).map_or(0, |c| c.load(Ordering::Relaxed));
    if let Some(list) = carry::shared(&SHARDS) {
        let list = list.0.lock().unwrap_or_else(|e| e.into_inner());
        for shard in list.iter() {
            if let Some(c) = shard.0.get(i) {
                total = total.wrapping_add(c.load(Ordering::Relaxed));
            }
        }
    }
    total
}

/// One counter (a slot of every block).
pub struct Counter(usize);

impl Counter {
    const fn new(slot: usize) -> Self {
        assert!(slot < carry::SLOTS);
        Counter(slot)
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        bump(self.0, n);
    }
    /// Adds one.
    pub fn incr(&self) {
        self.add(1);
    }
    /// The current value.
    pub fn get(&self) -> u64 {
        sum(self.0)
    }
}

/// A gauge that goes up and down (a slot of every block, two's complement),
/// or, as a [`SharedGauge`] (`SHARED`), of the shared block alone.
pub struct Gauge<const SHARED: bool = false>(usize);

/// A gauge the library itself reads where speed matters (a drain's decision),
/// which changes seldom: one slot of the shared block, so reading it is one
/// atomic load, not a sum over every thread's block under a lock.
pub type SharedGauge = Gauge<true>;

impl<const SHARED: bool> Gauge<SHARED> {
    const fn new(slot: usize) -> Self {
        assert!(slot < carry::SLOTS);
        Gauge(slot)
    }
    /// Adds `n` (wrapping) to its slot of this thread's block or the shared one.
    fn add(&self, n: u64) {
        if SHARED {
            bump_shared(self.0, n);
        } else {
            bump(self.0, n);
        }
    }
    /// +1.
    pub fn up(&self) {
        self.add(1);
    }
    /// -1.
    pub fn down(&self) {
        self.add(u64::MAX);
    }
    /// The current value.
    pub fn get(&self) -> i64 {
        if SHARED {
            carry::counter(self.0).map_or(0, |c| c.load(Ordering::Relaxed) as i64)
        } else {
            sum(self.0) as i64
        }
    }
}

/// Sockets whose resource object exists.
pub static SOCKETS: Gauge = Gauge::new(0);
/// File descriptors nifsock owns and has not closed yet.
pub static FDS: Gauge = Gauge::new(1);
/// Successful accept4 calls.
pub static ACCEPTS: Counter = Counter::new(2);
/// Accept calls that returned EAGAIN.
pub static ACCEPTS_EAGAIN: Counter = Counter::new(3);
/// recv calls that returned data or EOF.
pub static READS: Counter = Counter::new(4);
/// recv calls that returned EAGAIN.
pub static READS_EAGAIN: Counter = Counter::new(5);
/// recv calls that went straight to waiting because the last read was short
/// (the receive queue was empty then): an EAGAIN read saved.
pub static READS_SKIPPED: Counter = Counter::new(6);
/// sendmsg/send calls that wrote something.
pub static WRITES: Counter = Counter::new(7);
/// sendmsg/send calls that returned EAGAIN.
pub static WRITES_EAGAIN: Counter = Counter::new(8);
/// Bytes received.
pub static BYTES_IN: Counter = Counter::new(9);
/// Bytes sent.
pub static BYTES_OUT: Counter = Counter::new(10);
/// fds closed on the thread that asked (no scheduler hop).
pub static CLOSES_INLINE: Counter = Counter::new(11);
/// Lingering closes run on a dirty I/O scheduler.
pub static CLOSES_DIRTY: Counter = Counter::new(12);
/// Lingering closes handed to the closer thread (from callbacks).
pub static CLOSES_DEFERRED: Counter = Counter::new(13);
/// Result binaries allocated up front for a recv(S, N) that didn't complete
/// in one read (later reads go straight into them).
pub static EXACT_ALLOCS: Counter = Counter::new(14);
/// recv(S, 0) reads that went straight into their result binary (streams).
pub static DIRECT_READS: Counter = Counter::new(15);
/// Selects armed (enif_select_x READ or WRITE).
pub static SELECTS: Counter = Counter::new(16);
/// setsockopt calls made.
pub static SETSOCKOPTS: Counter = Counter::new(17);
/// getsockopt calls made.
pub static GETSOCKOPTS: Counter = Counter::new(18);
/// Reads a readiness drain made for a blocking `recv(S, 0)` and sent to it
/// as its result (no select message, no second recv call).
pub static EAGER_READS: Counter = Counter::new(19);
/// Sockets whose input the readiness port took over (its own `driver_select`
/// of their fd, `readiness/direct.rs`).
pub static PORT_HOLDS: Counter = Counter::new(20);
/// Held sockets whose input the port gave back to the set (no reader armed).
pub static PORT_RETURNS: Counter = Counter::new(21);
/// Socket fds the readiness port holds now (until ERTS's `stop_select`).
pub static PORT_HELD: Gauge = Gauge::new(22);
/// Of those, the fds it holds for input now (not given back to the set);
/// read by every drain that serves a read (`readiness::direct`'s cap).
pub static PORT_READING: SharedGauge = SharedGauge::new(23);
/// Blocking recv(S, 0) calls that found the queue drained by their last
/// read and yielded to read after other processes ran (`core::yield_read`).
pub static READ_YIELDS: Counter = Counter::new(24);
/// Sockets that left the readiness set because their reads after yields kept
/// finding data (`readiness::leave`).
pub static SET_LEAVES: Counter = Counter::new(25);
/// `nifsock_tcp:send/2` calls after which the active socket's owner yielded
/// to read the peer's next bytes itself (`ops::tcp::active::reply_sent`).
pub static REPLY_YIELDS: Counter = Counter::new(26);

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
        ("eager_reads", c(&EAGER_READS)),
        ("port_holds", c(&PORT_HOLDS)),
        ("port_returns", c(&PORT_RETURNS)),
        ("port_held", PORT_HELD.get()),
        ("port_reading", PORT_READING.get()),
        ("read_yields", c(&READ_YIELDS)),
        ("set_leaves", c(&SET_LEAVES)),
        ("reply_yields", c(&REPLY_YIELDS)),
        // Library generations sharing these counters (2 between an upgrade
        // and the purge of the old code), and upgrades since the first load.
        ("nif_libs", i64::try_from(carry::libs()).unwrap_or(i64::MAX)),
        (
            "nif_upgrades",
            i64::try_from(carry::upgrades()).unwrap_or(i64::MAX),
        ),
        // ERTS counts resource objects as binary memory: this is ours, per socket.
        (
            "socket_object_bytes",
            i64::try_from(object_bytes).unwrap_or(0),
        ),
    ]
}
