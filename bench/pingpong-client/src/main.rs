//! Ping-pong load for `bench/run` (the `native` client): CONNS connections to
//! 127.0.0.1:PORT, each sending SIZE bytes and reading SIZE bytes back, again
//! and again until DURATION_MS have passed. One thread and one epoll set
//! (level-triggered), so the load costs the client a `recv`, a `send` and a
//! share of one `epoll_wait` per round trip: a BEAM client on one core runs
//! out of CPU before a fast server does, and then the bench measures the
//! client.
//!
//! ```text
//! nifsock-pingpong-client PORT CONNS SIZE DURATION_MS
//! round_trips=N elapsed_us=U errors=E
//! ```
//!
//! Like bench_client:pingpong/5, each connection has TCP_NODELAY and
//! SO_LINGER 0, finishes the round trip under way at the deadline, and the
//! elapsed time runs from the first send to the last connection's end.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use socket2::SockRef;

/// One connection's state: bytes of the current reply still to read, and
/// whether it has stopped (deadline passed or an error).
struct Conn {
    stream: TcpStream,
    pending: usize,
    done: bool,
}

struct Args {
    port: u16,
    conns: usize,
    size: usize,
    duration: Duration,
}

fn parse_args() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let [port, conns, size, ms] = argv.as_slice() else {
        return Err("usage: nifsock-pingpong-client PORT CONNS SIZE DURATION_MS".into());
    };
    let num = |s: &String, what: &str| -> Result<u64, String> {
        s.parse::<u64>().map_err(|_| format!("bad {what}: {s}"))
    };
    Ok(Args {
        port: u16::try_from(num(port, "port")?).map_err(|_| format!("bad port: {port}"))?,
        conns: usize::try_from(num(conns, "conns")?).map_err(|_| "bad conns".to_string())?,
        size: usize::try_from(num(size, "size")?).map_err(|_| "bad size".to_string())?,
        duration: Duration::from_millis(num(ms, "duration")?),
    })
}

fn connect(port: u16) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    stream.set_nodelay(true)?;
    SockRef::from(&stream).set_linger(Some(Duration::ZERO))?;
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// Sends the whole message on a non-blocking socket (a 100-byte message to an
/// idle connection always fits; a short write is waited out by spinning).
fn send_all(stream: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    let mut off = 0;
    while let Some(rest) = msg.get(off..).filter(|r| !r.is_empty()) {
        match stream.write(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => off += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn run(args: &Args) -> std::io::Result<(u64, Duration, u64)> {
    let msg = vec![b'p'; args.size];
    let mut buf = vec![0u8; args.size.max(1)];
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    let mut conns = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        let stream = connect(args.port)?;
        epoll.add(&stream, EpollEvent::new(EpollFlags::EPOLLIN, i as u64))?;
        conns.push(Conn {
            stream,
            pending: 0,
            done: false,
        });
    }
    let t0 = Instant::now();
    let deadline = t0 + args.duration;
    let (mut round_trips, mut errors, mut live) = (0u64, 0u64, 0usize);
    for c in conns.iter_mut() {
        match send_all(&mut c.stream, &msg) {
            Ok(()) => {
                c.pending = args.size;
                live += 1;
            }
            Err(_) => {
                errors += 1;
                c.done = true;
            }
        }
    }
    let mut events = vec![EpollEvent::empty(); args.conns.max(1)];
    // a server that stops answering ends the run this long after the deadline
    let give_up = deadline + Duration::from_secs(10);
    while live > 0 && Instant::now() < give_up {
        let n = match epoll.wait(&mut events, EpollTimeout::from(100u16)) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        for ev in events.iter().take(n) {
            let Some(c) = usize::try_from(ev.data())
                .ok()
                .and_then(|i| conns.get_mut(i))
            else {
                continue;
            };
            if c.done {
                continue;
            }
            let want = c.pending.min(buf.len());
            let got = match c.stream.read(buf.get_mut(..want).unwrap_or_default()) {
                Ok(0) => Err(()),
                Ok(k) => Ok(k),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    continue
                }
                Err(_) => Err(()),
            };
            let mut stop = |c: &mut Conn, failed: bool| {
                c.done = true;
                live -= 1;
                errors += u64::from(failed);
                let _ = epoll.delete(&c.stream);
            };
            match got {
                Err(()) => stop(c, true),
                Ok(k) => {
                    c.pending -= k;
                    if c.pending == 0 {
                        round_trips += 1;
                        if Instant::now() >= deadline {
                            stop(c, false);
                        } else if send_all(&mut c.stream, &msg).is_err() {
                            stop(c, true);
                        } else {
                            c.pending = args.size;
                        }
                    }
                }
            }
        }
    }
    errors += live as u64;
    Ok((round_trips, t0.elapsed(), errors))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok((rt, elapsed, errors)) => {
            println!(
                "round_trips={rt} elapsed_us={} errors={errors}",
                elapsed.as_micros()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("nifsock-pingpong-client: {e}");
            ExitCode::FAILURE
        }
    }
}
