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
