//! `nifsock_dist`'s port carrier: what a dist port of the driver does (the
//! hooks [`install`] gives `sys::distdrv`), and the hand-over of a socket's fd
//! to such a port ([`attach`], the NIF `dist_attach/2`).
//!
//! After the handshake the connection's socket is closed through nifsock's
//! ordinary close (every later call on it says `{error, closed}`, its waits
//! are gone, it left the readiness set and any `enif_select`), and the port
//! owns a `dup` of its fd: it `driver_select`s it itself and gives it up in
//! its stop, and the fd is closed (`lifecycle::close_fd`, counted in `fds`)
//! only in ERTS's `stop_select`, once no poller has it.
//!
//! Output: each `outputv` is one packet (dist data, or a tick's empty
//! `port_command`): a 4-byte length in the vector's header slot, one
//! `sendmsg`; what the socket does not take is queued in the port's queue
//! (`driver_enqv`: ERTS's binaries referenced, not copied), the fd selected
//! for writing, and the port busy from [`DIST_HIGH_WATERMARK`] queued until
//! the queue is down to [`DIST_LOW_WATERMARK`] (inet_drv's defaults). A
//! packet that comes within [`DIST_BURST_US`] of one written at once is
//! queued too, and a 0 ms timer writes the queue with one `sendmsg` after
//! the port task: ERTS's dist command hands its whole queue over packet by
//! packet, and a stream of small messages then costs one `sendmsg` per
//! batch instead of one per message (inet_drv writes each), while the
//! packets of a round trip, further apart, are written at once.
//! Input: reads into one 64 KB buffer, cut into packets there and handed to
//! ERTS with `driver_output` (a packet larger than the buffer is read
//! straight into a driver binary of its size: `driver_output_binary`), at
//! most [`DIST_READS_PER_INPUT`] reads per `ready_input`; a short read ends
//! the turn (the socket is empty, ERTS's poll says when it is not).

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use rustler::Env;

use crate::core::distframe::{self, InBuf, Next};
use crate::core::errno::is_would_block;
use crate::core::limits::{
    DIST_BURST_US, DIST_HIGH_WATERMARK, DIST_INBUF, DIST_LOW_WATERMARK, DIST_READS_PER_INPUT,
};
use crate::error::{Error, Result};
use crate::lifecycle::{self, Ctx, How};
use crate::socket::{Phase, Socket};
use crate::stats;
use crate::sys::distdrv::{self, Conn, DrvBin, Fail, Hooks, IoVec, Port};
use crate::sys::msg;
use crate::sys::resource::Obj;
use crate::sys::syscall;

/// `port_control` operations (lib/nifsock_dist_port.erl uses the same numbers).
const OP_ATTACH: u32 = 1;
const OP_SETOPT: u32 = 2;
const OP_GETOPT: u32 = 3;

static HOOKS: Hooks = Hooks {
    start: new_conn,
    close: close_fd,
};

/// Installs the dist port's hooks (load/upgrade) and makes the park table.
pub fn install() -> bool {
    distdrv::set_hooks(&HOOKS);
    distdrv::init()
}

fn new_conn() -> Option<Box<dyn Conn>> {
    Some(Box::new(DistConn {
        fd: None,
        inbuf: InBuf::new(DIST_INBUF),
        large: None,
        busy: false,
        write_on: false,
        flush_armed: false,
        last_direct: None,
    }))
}

fn close_fd(fd: RawFd) {
    lifecycle::close_fd(fd, How::Inline);
}

/// `dist_attach(Socket, Port)`: hands the socket's connection to the live
/// dist port `port` (its id): a dup of the fd and the bytes nifsock had
/// read but not delivered go to the port's park entry, and the socket is
/// closed. Only the socket's owner may; the port takes the fd with its
/// attach `port_control`.
pub fn attach(env: Env<'_>, obj: Obj<'_, Socket>, port: usize) -> Result<()> {
    let s = obj.get();
    let caller = msg::self_pid(env).ok_or(Error::BadArg)?;
    let (fd, pending) = {
        let mut st = s.lock();
        if st.phase != Phase::Open {
            return Err(Error::Closed);
        }
        if !msg::same_pid(&st.owner, &caller) {
            return Err(Error::NotOwner);
        }
        if st.listening || st.connecting {
            return Err(Error::Invalid("state"));
        }
        let fd = s.with_fd(syscall::dup_cloexec)?.map_err(Error::Os)?;
        stats::FDS.up();
        // The dup keeps the open file (and so its registration in nifsock's
        // epoll set) alive after the close below: the close must DEL it.
        s.share_fd();
        (fd, std::mem::take(&mut st.pending))
    };
    if let Err((fd, _)) = distdrv::park(port, fd, pending) {
        close_fd(fd);
        return Err(Error::Invalid("port"));
    }
    lifecycle::close_never_blocking(Ctx::Nif(env), obj);
    Ok(())
}

struct DistConn {
    /// The socket's fd, from the attach on.
    fd: Option<RawFd>,
    inbuf: InBuf,
    /// A packet larger than `inbuf`, being read into its binary: the bytes filled.
    large: Option<(DrvBin, usize)>,
    /// set_busy_port is on.
    busy: bool,
    /// The fd is selected for writing.
    write_on: bool,
    /// A 0 ms timer will flush the queue.
    flush_armed: bool,
    /// When a packet was last written straight from `outputv`.
    last_direct: Option<Instant>,
}

impl DistConn {
    /// Bytes were queued: select for writing, busy above the high watermark.
    fn queued(&mut self, port: &Port) {
        if let (Some(fd), false) = (self.fd, self.write_on) {
            self.write_on = port.select(fd, false, true, true);
        }
        if !self.busy && port.sizeq() >= DIST_HIGH_WATERMARK {
            self.busy = true;
            port.set_busy(true);
        }
    }

    fn send(&mut self, port: &Port, ev: &mut IoVec<'_>) -> Option<Fail> {
        let Some(fd) = self.fd else {
            port.enqv(ev, 0);
            self.queued(port);
            return None;
        };
        if port.sizeq() > 0 {
            port.enqv(ev, 0);
            self.queued(port);
            return None;
        }
        // A packet right behind one written from here (ERTS's dist command
        // hands over its queue packet by packet): queued, and the queue
        // written by one sendmsg once this port task is over.
        let now = Instant::now();
        if self
            .last_direct
            .is_some_and(|t| now.duration_since(t) < Duration::from_micros(DIST_BURST_US))
        {
            port.enqv(ev, 0);
            if !self.write_on && !self.flush_armed {
                self.flush_armed = port.timer_now();
            }
            self.queued(port);
            return None;
        }
        self.last_direct = Some(now);
        let size = ev.size();
        match syscall::sendv(fd, ev.iov(), 0) {
            Ok(n) => {
                count_write(n);
                if n < size {
                    port.enqv(ev, n);
                    self.queued(port);
                }
                None
            }
            Err(e) if is_would_block(e) || e == libc::EINTR => {
                port.enqv(ev, 0);
                self.queued(port);
                None
            }
            Err(_) => Some(Fail::Eof),
        }
    }

    /// Cuts what `inbuf` holds into packets for ERTS.
    fn deliver(&mut self, port: &Port) -> Option<Fail> {
        loop {
            match self.inbuf.cut() {
                Next::Packet { start, len } => {
                    port.output(self.inbuf.bytes().get(start..start + len).unwrap_or(&[]));
                }
                Next::Large { start, have, len } => {
                    let Some(mut bin) = DrvBin::alloc(len) else {
                        return Some(Fail::Posix(libc::ENOMEM));
                    };
                    let src = self.inbuf.bytes().get(start..start + have).unwrap_or(&[]);
                    if let Some(dst) = bin.bytes_mut().get_mut(..src.len()) {
                        dst.copy_from_slice(src);
                    }
                    self.large = Some((bin, src.len()));
                    return None;
                }
                Next::More => return None,
            }
        }
    }

    /// One read into the large packet's binary: Err ends the turn.
    fn read_large(&mut self, port: &Port, fd: RawFd) -> std::result::Result<(), Option<Fail>> {
        let Some((bin, filled)) = self.large.as_mut() else {
            return Ok(());
        };
        let len = bin.size();
        let want = len.saturating_sub(*filled);
        let dst = bin.bytes_mut().get_mut(*filled..).unwrap_or(&mut []);
        let n = read_once(fd, dst)?;
        *filled += n;
        if *filled >= len {
            if let Some((bin, _)) = self.large.take() {
                port.output_binary(&bin, len);
            }
        }
        whole(n, want)
    }

    /// One read into `inbuf`, its packets delivered: Err ends the turn.
    fn read_buf(&mut self, port: &Port, fd: RawFd) -> std::result::Result<(), Option<Fail>> {
        let space = self.inbuf.space();
        let want = space.len();
        let n = read_once(fd, space)?;
        self.inbuf.filled(n);
        if let Some(f) = self.deliver(port) {
            return Err(Some(f));
        }
        whole(n, want)
    }

    /// Writes the queue while the socket takes it; deselects writing once it
    /// is empty, clears busy at the low watermark.
    fn flush(&mut self, port: &Port) -> Option<Fail> {
        let fd = self.fd?;
        loop {
            let iov = port.peekq();
            if iov.is_empty() {
                if self.write_on {
                    port.select(fd, false, true, false);
                    self.write_on = false;
                }
                return None;
            }
            let total: usize = iov.iter().map(|v| v.iov_len).sum();
            match syscall::sendv(fd, iov, 0) {
                Ok(n) => {
                    count_write(n);
                    let left = port.deq(n);
                    if self.busy && left <= DIST_LOW_WATERMARK {
                        self.busy = false;
                        port.set_busy(false);
                    }
                    if n < total && left > 0 {
                        return None;
                    }
                }
                Err(e) if is_would_block(e) || e == libc::EINTR => return None,
                Err(_) => return Some(Fail::Eof),
            }
        }
    }

    fn attach(&mut self, port: &Port) -> Vec<u8> {
        if self.fd.is_some() {
            return error_reply(libc::EINVAL);
        }
        let Some((fd, pending)) = distdrv::take(port.id()) else {
            return error_reply(libc::EINVAL);
        };
        if !port.select(fd, true, false, true) {
            // Never selected: closed here, not by stop_select.
            close_fd(fd);
            return error_reply(libc::EBADF);
        }
        self.fd = Some(fd);
        let mut rest: &[u8] = &pending;
        while !rest.is_empty() {
            let n = self.inbuf.push(rest);
            rest = rest.get(n..).unwrap_or(&[]);
            if self.deliver(port).is_some() || (n == 0 && self.large.is_none()) {
                return error_reply(libc::ENOMEM);
            }
            if let Some((bin, filled)) = self.large.as_mut() {
                let take = rest.len().min(bin.size().saturating_sub(*filled));
                if let (Some(dst), Some(src)) = (
                    bin.bytes_mut().get_mut(*filled..*filled + take),
                    rest.get(..take),
                ) {
                    dst.copy_from_slice(src);
                }
                *filled += take;
                rest = rest.get(take..).unwrap_or(&[]);
                if *filled >= bin.size() {
                    let len = bin.size();
                    if let Some((bin, _)) = self.large.take() {
                        port.output_binary(&bin, len);
                    }
                }
            }
        }
        if port.sizeq() > 0 {
            self.queued(port);
        }
        vec![0]
    }
}

impl Conn for DistConn {
    fn outputv(&mut self, port: &Port, ev: &mut IoVec<'_>) -> Option<Fail> {
        let Some(hdr) = distframe::header(ev.size()) else {
            return Some(Fail::Posix(libc::EMSGSIZE));
        };
        ev.with_header(&hdr, |ev| self.send(port, ev)).flatten()
    }

    fn output(&mut self, port: &Port, data: &[u8]) -> Option<Fail> {
        // Not called while outputv exists (io.c, dist.c); queued whole if it is.
        let hdr = distframe::header(data.len())?;
        port.enq(&hdr);
        port.enq(data);
        self.queued(port);
        None
    }

    fn ready_input(&mut self, port: &Port) -> Option<Fail> {
        let fd = self.fd?;
        for _ in 0..DIST_READS_PER_INPUT {
            let r = if self.large.is_some() {
                self.read_large(port, fd)
            } else {
                self.read_buf(port, fd)
            };
            if let Err(fail) = r {
                return fail;
            }
        }
        None
    }

    fn ready_output(&mut self, port: &Port) -> Option<Fail> {
        self.flush(port)
    }

    fn timeout(&mut self, port: &Port) -> Option<Fail> {
        self.flush_armed = false;
        let f = self.flush(port);
        if f.is_none() && port.sizeq() > 0 {
            self.queued(port);
        }
        f
    }

    fn control(&mut self, port: &Port, op: u32, data: &[u8]) -> Vec<u8> {
        match op {
            OP_ATTACH => self.attach(port),
            OP_SETOPT => match (self.fd, int3(data)) {
                (Some(fd), Some([level, name, value])) => {
                    match syscall::setsockopt(fd, level, name, &value.to_ne_bytes()) {
                        Ok(()) => vec![0],
                        Err(e) => error_reply(e),
                    }
                }
                (None, _) => error_reply(libc::ENOTCONN),
                _ => error_reply(libc::EINVAL),
            },
            OP_GETOPT => match (self.fd, int3(data)) {
                (Some(fd), Some([level, name, _])) => {
                    let mut b = [0u8; 4];
                    match syscall::getsockopt(fd, level, name, &mut b) {
                        Ok(_) => {
                            let mut r = vec![0];
                            r.extend_from_slice(&i32::from_ne_bytes(b).to_be_bytes());
                            r
                        }
                        Err(e) => error_reply(e),
                    }
                }
                (None, _) => error_reply(libc::ENOTCONN),
                _ => error_reply(libc::EINVAL),
            },
            _ => error_reply(libc::EINVAL),
        }
    }

    fn stop(&mut self, port: &Port) {
        self.large = None;
        if let Some(fd) = self.fd.take() {
            port.release(fd);
        }
    }
}

/// Three big-endian 32-bit integers.
fn int3(data: &[u8]) -> Option<[i32; 3]> {
    let mut out = [0i32; 3];
    for (i, o) in out.iter_mut().enumerate() {
        let b: [u8; 4] = data.get(i * 4..i * 4 + 4)?.try_into().ok()?;
        *o = i32::from_be_bytes(b);
    }
    Some(out)
}

/// `<<1, Name/binary>>`: the posix name of `errno`.
fn error_reply(errno: i32) -> Vec<u8> {
    let mut r = vec![1];
    r.extend_from_slice(
        crate::core::errno::name(errno)
            .unwrap_or("unknown")
            .as_bytes(),
    );
    r
}

/// One `recv` into `dst` (counted): the bytes read, or what ends the turn
/// (EOF or a read error fails the port; EAGAIN/EINTR just end the turn).
fn read_once(fd: RawFd, dst: &mut [u8]) -> std::result::Result<usize, Option<Fail>> {
    match syscall::recv(fd, dst, 0) {
        Ok(0) => Err(Some(Fail::Eof)),
        Ok(n) => {
            count_read(n);
            Ok(n)
        }
        Err(e) => Err(read_error(e)),
    }
}

/// After a read of `n` of `want` bytes: a short read ends the turn (the
/// socket is empty).
fn whole(n: usize, want: usize) -> std::result::Result<(), Option<Fail>> {
    if n < want {
        Err(None)
    } else {
        Ok(())
    }
}

fn read_error(e: i32) -> Option<Fail> {
    if is_would_block(e) || e == libc::EINTR {
        None
    } else {
        Some(Fail::Posix(e))
    }
}

fn count_read(n: usize) {
    stats::READS.incr();
    stats::BYTES_IN.add(n as u64);
}

fn count_write(n: usize) {
    stats::WRITES.incr();
    stats::BYTES_OUT.add(n as u64);
}
