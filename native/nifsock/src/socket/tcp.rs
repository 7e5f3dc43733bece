//! The gen_tcp layer's per-socket state: active mode and the options
//! `nifsock_tcp` reads and inherits.

use rustler::Atom;

use crate::atoms;
use crate::core::gen_tcp_opts::Watermarks;

/// gen_tcp-style active delivery (`nifsock_tcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Active {
    /// Passive: the owner calls recv.
    #[default]
    Off,
    /// `{active, true}`.
    Forever,
    /// `{active, once}`: one message, then passive without a passive message.
    Once,
    /// `{active, once}` (1) or `{active, N}`: messages left before passive.
    Count(i32),
}

/// The tags of the active-mode messages (`{tags, T}`): `{Data, S, Bytes}`,
/// `{Closed, S}`, `{Error, S, Reason}`, `{Passive, S}`. Kept as atoms, so a
/// message costs no lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tags {
    /// Data message tag (`nifsock`; gen_tcp's `tcp`).
    pub data: Atom,
    /// Closed message tag (`nifsock_closed`).
    pub closed: Atom,
    /// Error message tag (`nifsock_error`).
    pub error: Atom,
    /// Passive message tag (`nifsock_passive`).
    pub passive: Atom,
}

impl Default for Tags {
    /// nifsock's own tags.
    fn default() -> Tags {
        Tags {
            data: atoms::nifsock(),
            closed: atoms::nifsock_closed(),
            error: atoms::nifsock_error(),
            passive: atoms::nifsock_passive(),
        }
    }
}

/// The `nifsock_tcp` options kept in the socket (inherited by accepted sockets
/// without a syscall).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOpts {
    /// Active mode.
    pub active: Active,
    /// Packet framing.
    pub packet: crate::core::packet::Packet,
    /// Largest packet accepted (0: no limit).
    pub packet_size: usize,
    /// `{line_delimiter, C}`: the byte that ends a `{packet, line}` packet.
    pub line_delimiter: crate::core::packet::Delimiter,
    /// Deliver lists instead of binaries.
    pub list: bool,
    /// On a listener: the active mode accepted sockets start in.
    pub accept_active: Active,
    /// `send_timeout` in ms (`None`: infinity).
    pub send_timeout: Option<u32>,
    /// `exit_on_close` (gen_tcp's default, true): end of stream closes the socket.
    pub keep_open: bool,
    /// SO_PRIORITY set through setopt: Linux does not copy it to accepted
    /// sockets, so `nifsock_tcp` accept sets it (the only per-accept setsockopt,
    /// and only when a priority was set on the listener).
    pub priority: Option<i32>,
    /// `{header, N}`: binary-mode packets start with their first N bytes as a
    /// list (`gen_tcp_opts::shape`).
    pub header: u32,
    /// `{high_watermark, _}` / `{low_watermark, _}`: kept and reported only
    /// (nifsock_tcp has no driver queue; see the README).
    pub send_watermarks: Watermarks,
    /// `{high_msgq_watermark, _}` / `{low_msgq_watermark, _}`: kept and
    /// reported only (there is no port message queue).
    pub msgq_watermarks: Watermarks,
    /// `{delay_send, _}`: kept and reported only.
    pub delay_send: bool,
    /// `{send_timeout_close, _}`: a send timeout closes the socket.
    pub send_timeout_close: bool,
    /// `{show_econnreset, _}`: a reset is reported as `econnreset`, not as a close.
    pub show_econnreset: bool,
    /// `{deliver, port}` (false: `term`, the default): kept and reported only.
    pub deliver_port: bool,
    /// `{tags, _}`: the active-mode message tags.
    pub tags: Tags,
}

impl Default for TcpOpts {
    /// gen_tcp's defaults (`exit_on_close` true, watermarks 8192/4096...),
    /// except the mode: nifsock_tcp sets it on every socket it makes.
    fn default() -> TcpOpts {
        TcpOpts {
            active: Active::Off,
            packet: crate::core::packet::Packet::Raw,
            packet_size: 0,
            line_delimiter: crate::core::packet::Delimiter::default(),
            list: false,
            accept_active: Active::Off,
            send_timeout: None,
            keep_open: false,
            priority: None,
            header: 0,
            send_watermarks: Watermarks::DEFAULT,
            msgq_watermarks: Watermarks::DEFAULT,
            delay_send: false,
            send_timeout_close: false,
            show_econnreset: false,
            deliver_port: false,
            tags: Tags::default(),
        }
    }
}
