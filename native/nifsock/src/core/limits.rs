//! The tuning constants: how much one call reads, writes or holds.

/// Most recv(2) calls one `recv` NIF call makes before yielding back to Erlang.
pub const MAX_READS_PER_CALL: usize = 8;

/// Most reads one active-mode delivery call makes before re-arming its select.
pub const MAX_DELIVERY_READS: usize = 4;

/// The largest exact length recv accepts (as gen_tcp, larger is `{error,
/// enomem}`): the result binary is allocated up front once bytes arrive.
pub const MAX_EXACT_LEN: usize = 64 << 20;

/// Reads this large count as "streaming" (see `recv::read_direct`).
pub const STREAM_THRESHOLD: usize = 16 * 1024;

/// The most a per-thread scratch buffer holds between calls.
pub const SCRATCH_CAP: usize = 64 * 1024;

/// Most bytes asked of one sendfile(2) call (the socket buffer bounds it anyway).
pub const SENDFILE_CHUNK: usize = 1 << 20;

/// Most sendfile(2) calls one NIF call makes before yielding to Erlang.
pub const SENDFILE_MAX_CALLS: usize = 16;

/// A dist port's input buffer (`ops::dist`): packets larger than this are
/// read straight into a binary of their size.
pub const DIST_INBUF: usize = 64 * 1024;

/// Most reads one `ready_input` of a dist port makes (a short read ends it
/// sooner), so one flooding peer cannot hold a scheduler.
pub const DIST_READS_PER_INPUT: usize = 4;

/// A dist port is busy (ERTS keeps dist data in its own queue) from this
/// many bytes queued to write (inet_drv's default high watermark)...
pub const DIST_HIGH_WATERMARK: usize = 8 * 1024;

/// ...until its queue is down to this (inet_drv's default low watermark).
pub const DIST_LOW_WATERMARK: usize = 4 * 1024;

/// A packet handed to a dist port within this many µs of one it wrote at
/// once is queued instead, and the queue written with one sendmsg right
/// after the port task (ERTS hands a dist command's packets over one by
/// one; a round trip's packets are further apart than this).
pub const DIST_BURST_US: u64 = 10;
