//! The socket's format (packet framing, mode, header, send timeout) and what
//! nifsock_tcp reads back: `send_info`, `get_opts` (encoded by `codec::tcp`).

use crate::codec::args::Sock;
use crate::codec::tcp::{SendInfo, TcpView};
use crate::core::packet::{self, Packet};
use crate::error::{Error, Result};
use crate::socket::Phase;

/// What `nifsock_tcp:send/2` needs: the framing, the send timeout, and
/// whether bytes of a timed-out send wait to go out first.
pub fn send_info(sock: Sock) -> SendInfo {
    let st = sock.s.lock();
    SendInfo {
        packet: st.tcp.packet,
        send_timeout: st.tcp.send_timeout,
        queued: st.send_rest.is_some(),
    }
}

/// The `nifsock_tcp` options and `send_pend` (bytes queued by timed-out
/// sends); `closed` once the socket is.
pub fn get_opts(sock: Sock) -> Result<TcpView> {
    let st = sock.s.lock_after_delivery();
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    Ok(TcpView {
        tcp: st.tcp,
        listening: st.listening,
        send_pend: st.send_rest.as_ref().map_or(0, |r| r.unsent().len()),
    })
}

/// The format options `set_format` takes, decoded.
pub struct Format {
    /// `packet`.
    pub packet: Packet,
    /// `packet_size`.
    pub packet_size: usize,
    /// `{mode, list}`.
    pub list: bool,
    /// `send_timeout` in ms (`None`: infinity).
    pub send_timeout: Option<u32>,
    /// `{exit_on_close, false}`.
    pub keep_open: bool,
    /// `line_delimiter` (0..255).
    pub line_delimiter: u8,
}

/// Sets packet framing, delivery format and send timeout.
pub fn set_format(sock: Sock, f: Format) -> Result<()> {
    let mut st = sock.s.lock();
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    st.tcp.keep_open = f.keep_open;
    st.tcp.packet = f.packet;
    st.tcp.packet_size = f.packet_size;
    st.tcp.list = f.list;
    st.tcp.send_timeout = f.send_timeout;
    st.tcp.line_delimiter = packet::Delimiter(f.line_delimiter);
    Ok(())
}
