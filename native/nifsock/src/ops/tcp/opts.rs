//! The gen_tcp options `nifsock_tcp` keeps in the socket beside its framing
//! (`header`, the watermarks, `delay_send`, `send_timeout_close`,
//! `show_econnreset`, `deliver`, `tags`): set from a list (decoded by
//! `codec::tcp`) in the order gen_tcp applies them, read back by
//! `tcp_getopts`, copied to accepted sockets with the rest of `TcpOpts`.

use crate::codec::args::Sock;
use crate::codec::tcp::Setting;
use crate::error::{Error, Result};
use crate::socket::{Phase, TcpOpts};

fn apply(t: &mut TcpOpts, s: Setting) {
    match s {
        Setting::Header(n) => t.header = n,
        Setting::HighWatermark(n) => t.send_watermarks.set_high(n),
        Setting::LowWatermark(n) => t.send_watermarks.set_low(n),
        Setting::HighMsgq(n) => t.msgq_watermarks.set_high(n),
        Setting::LowMsgq(n) => t.msgq_watermarks.set_low(n),
        Setting::DelaySend(b) => t.delay_send = b,
        Setting::SendTimeoutClose(b) => t.send_timeout_close = b,
        Setting::ShowEconnreset(b) => t.show_econnreset = b,
        Setting::DeliverPort(b) => t.deliver_port = b,
        Setting::Tags(tags) => t.tags = tags,
    }
}

/// Applies `settings` in their order (the watermark pairs depend on it).
pub fn set_opts(sock: Sock, settings: &[Setting]) -> Result<()> {
    let mut st = sock.s.lock();
    if st.phase != Phase::Open {
        return Err(Error::Closed);
    }
    let mut t = st.tcp;
    for s in settings {
        apply(&mut t, *s);
    }
    st.tcp = t;
    Ok(())
}
