//! What happens to a socket over its life, driven by NIF calls and by ERTS
//! callbacks: waiting for readiness, handing readiness on to the next waiter,
//! cancelling, closing (inline, or off the normal schedulers when SO_LINGER may
//! block), owner death and destruction.
//!
//! `ctx` (NIF or callback), `notice` (the messages waiters get), `waiters`
//! (arm, queue, promote, done, cancel), `close` (the close protocol, the linger
//! rule, `close_fd`), `closer` (the closer thread), `callbacks` (stop, down,
//! dtor). Operations return these modules' plain outcomes (`Closed`,
//! `Cancelled`); `nif/` turns them into terms.

mod callbacks;
mod close;
mod closer;
mod ctx;
mod notice;
mod waiters;

pub use close::{
    close, close_fd, close_never_blocking, close_released, finish_lingering_close, Closed, How,
};
pub use closer::stop as stop_closer;
pub use ctx::Ctx;
pub use notice::sock_term;
pub use waiters::{cancel, done, done_ctx, wait, wait_eager, write_ended, write_turn, Cancelled};
