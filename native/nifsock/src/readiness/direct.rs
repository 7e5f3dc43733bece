//! Hot sockets' own fds held by the readiness port ("direct" input).
//!
//! A socket whose reads the drain keeps serving (an active `nifsock_tcp`
//! socket's deliveries, a blocking `recv(S, 0)`'s eager reads) is moved out
//! of the set for input: the port `driver_select`s its fd itself
//! ([`driver::hold`]), so after ERTS's own migration (ten `ready_input`s) the
//! fd sits in the scheduler pollset, and the scheduler's `epoll_wait` names
//! the socket: `ready_input` reads it with no `epoll_wait` of the set in
//! between. Its write waits stay in the set.
//!
//! The scheduler pollset is level-triggered, so input that nobody will take
//! (no reader armed) must not stay selected: the port then gives the fd's
//! input back to the set ([`demote`]: `READ` off, the fd added to the set
//! again), where an edge is kept as sticky readiness as for any socket. A
//! socket demoted [`MAX_DEMOTIONS`] times stays in the set.
//!
//! Input with no reader armed is also the common race of a keep-alive
//! server: the client's next request arrives between the reply's send and
//! the server's next `recv`, and a scheduler may poll (and report the fd)
//! again before the server process runs. So one or two such reports say
//! nothing; the input is given back only when such reports go on for
//! [`UNARMED_GRACE_US`] with still no reader ([`unarmed_too_long`]; a
//! demotion and the promotion after it cost some fifteen system calls, the
//! grace at most that long of level-triggered reports).
//!
//! ERTS must let an fd go before it is closed (`ERL_DRV_USE` off, then its
//! `stop_select`), and only the port may do that. A held fd is therefore
//! closed by the port: its socket's close hands the fd to [`release`], the
//! drain that follows lets it go ([`serve_releases`]), and its `stop_select`
//! ([`released`]) closes it, through the close hook `lifecycle` installs (the
//! fd number stays taken until then, so no other socket can get it while ERTS
//! still knows it). A port that stops lets every fd it holds go.

use std::cell::Cell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use super::set::{self, lock, Held};
use crate::core::backlog::Wakeup;
use crate::core::promotion::{self, Rule};
use crate::socket::{Active, Socket, State};
use crate::stats;
use crate::sys::driver::{self, Hold};
use crate::sys::epoll;
use crate::sys::resource::Obj;

/// Whether any active socket the drain keeps serving may move to the port
/// (`Rule::Any`), or only one served alone in its batch (`Rule::Alone`, the
/// default until `set_rule`; always for passive sockets).
static ANY: AtomicBool = AtomicBool::new(false);

/// Sets the rule by which hot sockets' input moves to the port
/// (`core::promotion`; the application env `port_hold`, applied by
/// `nifsock_nif`'s load). Sockets already held stay held.
pub fn set_rule(rule: Rule) {
    ANY.store(rule == Rule::Any, Ordering::Relaxed);
}

/// The rule in force.
fn rule() -> Rule {
    if ANY.load(Ordering::Relaxed) {
        Rule::Any
    } else {
        Rule::Alone
    }
}

/// Demotions after which a socket's input stays in the set.
const MAX_DEMOTIONS: u8 = 8;

/// How long held input may be reported with no reader armed before it goes
/// back to the set (microseconds).
const UNARMED_GRACE_US: u32 = 2_000;

/// Microseconds since the first call, never 0 (0 is "no unarmed report" in
/// `SockRd::unarmed_since`); wraps after ~71 minutes, which only the
/// difference of two close readings sees.
fn clock_us() -> u32 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    // truncation is the wrap
    let us = start.elapsed().as_micros() as u32;
    us.max(1)
}

/// A held socket's input was reported with no reader armed (state `st`,
/// locked): whether such reports have gone on for [`UNARMED_GRACE_US`]. The
/// first one starts a stretch; an arm ends it, and so does a gap as long as
/// the grace between two reports (a level-triggered pollset reports unread
/// input at every check, so the input was read meanwhile, by a call that
/// found it there and did not arm).
pub(super) fn unarmed_too_long(st: &mut State) -> bool {
    let now = clock_us();
    let fresh =
        st.rd.unarmed_since == 0 || now.wrapping_sub(st.rd.unarmed_last) >= UNARMED_GRACE_US;
    st.rd.unarmed_last = now;
    if fresh {
        st.rd.unarmed_since = now;
        return false;
    }
    now.wrapping_sub(st.rd.unarmed_since) >= UNARMED_GRACE_US
}

/// Closes a released fd (`lifecycle` installs it): the fd and whether its
/// close(2) may block.
pub type Close = fn(RawFd, bool);

static CLOSE: OnceLock<Close> = OnceLock::new();

pub(super) fn install(close: Close) {
    let _ = CLOSE.set(close);
}

fn index(fd: RawFd) -> Option<usize> {
    usize::try_from(fd).ok()
}

thread_local! {
    /// Socket events in the batch this scheduler thread's drain is serving
    /// (set by [`in_batch`]; 0 outside one).
    static CROWD: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f`, a drain serving a batch of `events` socket events (set events
/// and backlog entries; a held fd's input is a batch of one), on this
/// thread.
pub(super) fn in_batch<R>(events: usize, f: impl FnOnce() -> R) -> R {
    let before = CROWD.with(|c| c.replace(events));
    let r = f();
    CROWD.with(|c| c.set(before));
    r
}

/// After a drain served a read of the socket (state `st`, locked, slot key
/// `key`): in the port's `ready_input` (nothing elsewhere), moves its input
/// to the port once it is hot: `core::promotion` counts the reads in a row
/// (under its `Rule::Alone`, those that were the only socket event of their
/// batch). Not for a socket that also has enif_select
/// waits (ERTS would see two owners), shares its fd, or may linger at close.
pub(super) fn served(obj: Obj<'_, Socket>, st: &mut State, key: u64) {
    if !driver::holding()
        || st.rd.direct
        || st.rd.key != Some(key)
        || st.selected
        || st.rd.demotions >= MAX_DEMOTIONS
    {
        return;
    }
    let Some(sh) = set::shared() else { return };
    let (hits, promote) = promotion::count_hit(
        rule(),
        st.tcp.active != Active::Off,
        st.rd.hits,
        CROWD.with(Cell::get),
        usize::try_from(stats::PORT_READING.get()).unwrap_or(0),
    );
    st.rd.hits = hits;
    if !promote {
        return;
    }
    let s = obj.get();
    if s.fd_shared() || s.close_may_block() {
        return;
    }
    let Ok(fd) = s.with_fd(|fd| fd) else {
        return;
    };
    let Some(i) = index(fd) else { return };
    {
        let mut held = lock(&sh.held);
        if held.len() <= i {
            held.resize(i + 1, None);
        }
        let Some(slot) = held.get_mut(i) else { return };
        match slot {
            None | Some(Held::Paused) => {}
            // still held for a closed socket of the same number (its
            // stop_select has not come): not now
            Some(_) => return,
        }
        let fresh = slot.is_none();
        if !driver::hold(fd, Hold::Read) {
            return;
        }
        sh.retag(slot, Some(Held::Read(key)));
        if fresh {
            stats::PORT_HELD.up();
        }
    }
    stats::PORT_HOLDS.incr();
    sh.any_held.store(true, Ordering::Release);
    if st.rd.out {
        // write waits stay in the set
        let _ = set::modify(fd, key, epoll::OUT);
    } else {
        set::remove(fd);
    }
    st.rd.direct = true;
}

/// A held socket's input came with no reader armed (state `st`, locked): the
/// level-triggered pollset would report it again and again, so its input
/// goes back to the set (where the edge the add reports becomes sticky
/// readiness). From the port's `ready_input`.
pub(super) fn demote(obj: Obj<'_, Socket>, st: &mut State, key: u64) {
    if !st.rd.direct {
        return;
    }
    let Ok(fd) = obj.get().with_fd(|fd| fd) else {
        return;
    };
    if !driver::hold(fd, Hold::Pause) {
        return;
    }
    if let (Some(sh), Some(i)) = (set::shared(), index(fd)) {
        if let Some(slot) = lock(&sh.held).get_mut(i) {
            sh.retag(slot, Some(Held::Paused));
        }
    }
    stats::PORT_RETURNS.incr();
    st.rd.direct = false;
    st.rd.hits = 0;
    st.rd.unarmed_since = 0;
    st.rd.demotions = st.rd.demotions.saturating_add(1);
    let back = if st.rd.out {
        set::modify(fd, key, epoll::IN | epoll::OUT)
    } else {
        set::add(fd, key, epoll::IN)
    };
    if back.is_none() {
        tracing::warn!(fd, "held fd could not rejoin the readiness set");
    }
}

/// The slot key of the socket whose held fd `fd` has input, if still held
/// for reads.
pub(super) fn key_of(fd: RawFd) -> Option<u64> {
    let sh = set::shared()?;
    match lock(&sh.held).get(index(fd)?)? {
        Some(Held::Read(k)) => Some(*k),
        _ => None,
    }
}

/// The socket of fd `fd` is closing: if the port holds it, the port closes
/// it (true; the next drain lets it go); otherwise the caller closes it.
pub fn release(fd: RawFd, lingering: bool) -> bool {
    let Some(sh) = set::shared() else {
        return false;
    };
    if !sh.any_held.load(Ordering::Acquire) {
        return false;
    }
    let Some(i) = index(fd) else { return false };
    {
        let mut held = lock(&sh.held);
        let Some(slot) = held.get_mut(i) else {
            return false;
        };
        match slot {
            Some(Held::Read(_) | Held::Paused) => {
                sh.retag(slot, Some(Held::Closing(lingering)));
            }
            _ => return false,
        }
        // under `held`: `releases` only names fds whose entry is `Closing`
        // (`release_all` and `released` keep it so under the same lock), so
        // no later port lets go of a number closed meanwhile
        lock(&sh.releases).push(fd);
    }
    if let Some(set) = set::get() {
        set.wakeup().kick();
    }
    true
}

/// Lets go of the fds whose sockets closed (from the port's drain).
pub(super) fn serve_releases() {
    let Some(sh) = set::shared() else { return };
    let fds = std::mem::take(&mut *lock(&sh.releases));
    for fd in fds {
        // stop_select may run inside this call (then `released` closes it)
        if !driver::hold(fd, Hold::Release) {
            // ERTS refused: it does not hold the fd, so no stop_select will
            // come; it is let go (and closed) here
            released(fd);
        }
    }
}

/// The port stops: lets go of every fd it holds (their `stop_select` closes
/// the closed sockets' and leaves the others to their sockets' close).
pub(super) fn release_all() {
    let Some(sh) = set::shared() else { return };
    let fds: Vec<RawFd> = {
        let held = lock(&sh.held);
        // every fd named there is let go below
        lock(&sh.releases).clear();
        held.iter()
            .enumerate()
            .filter(|(_, h)| h.is_some())
            .filter_map(|(i, _)| RawFd::try_from(i).ok())
            .collect()
    };
    for fd in fds {
        let _ = driver::hold(fd, Hold::Release);
    }
}

fn close_with(fd: RawFd, lingering: bool) {
    if let Some(c) = CLOSE.get() {
        c(fd, lingering);
    }
}

/// `stop_select` of `fd`: true if the port held it. A closed socket's fd is
/// closed now; an open socket's (the port stopped) is its own again.
pub(super) fn released(fd: RawFd) -> bool {
    let Some(sh) = set::shared() else {
        return false;
    };
    let Some(i) = index(fd) else { return false };
    let was = {
        let mut held = lock(&sh.held);
        let was = match held.get_mut(i) {
            Some(slot) => sh.retag(slot, None),
            None => None,
        };
        if matches!(was, Some(Held::Closing(_))) {
            // closed below: no port may name this number again
            lock(&sh.releases).retain(|&f| f != fd);
        }
        was
    };
    let Some(was) = was else { return false };
    stats::PORT_HELD.down();
    if let Held::Closing(lingering) = was {
        close_with(fd, lingering);
    }
    true
}
