//! nifsock's own readiness source (application env `readiness`: `driver`,
//! the default on Linux, or `pump`; `select` leaves this layer off and every
//! wait is one `enif_select`).
//!
//! * **Register once** (`set`). The first read wait of a socket adds its fd
//!   to one process-wide epoll set, edge-triggered (`EPOLLIN | EPOLLRDHUP |
//!   EPOLLET`, no ONESHOT). Waiting again sets a flag under the socket's state
//!   lock: no system call. The epoll data is a slot key `(generation << 32) |
//!   index`, never a pointer or an fd; closing takes the fd out of the set
//!   (before close(2)), frees the slot and bumps its generation, so an event
//!   still queued for a closed socket finds a different generation and is
//!   dropped.
//! * **Sticky readiness** (`arm`). An edge that arrives while nobody is armed
//!   sets `ready`; the next arm consumes it and tells the waiter at once, so no
//!   edge is lost between an EAGAIN and the arm. A hang-up is sticky too.
//! * **Polled by a scheduler** (`driver`). A port of the driver in
//!   `sys::driver` selects the epoll fd for input and never deselects it; after
//!   ten `ready_input`s ERTS moves it into its level-triggered scheduler
//!   pollset, so a scheduler polls it itself. (`pump`: a process
//!   `enif_select`s the set's fd once per batch and drains it in a NIF call.)
//! * **Hot sockets held by the port** (`direct`). A socket whose reads a
//!   drain keeps serving (active deliveries, eager reads) has its fd
//!   `driver_select`ed by the readiness port itself after 16 of them
//!   (`core::promotion`), and leaves the set for
//!   input: once ERTS moved that fd into the scheduler
//!   pollset, the scheduler's own `epoll_wait` names the socket and
//!   `ready_input` reads it, with no `epoll_wait` of the set in between. Input
//!   nobody takes goes back to the set; the port closes a held fd itself, once
//!   ERTS let it go (`stop_select`). By default (`core::promotion`'s
//!   `Rule::Alone`) sockets served in crowded batches (a busy server's) stay
//!   in the set: one `epoll_wait` of the set serves the batch, each event
//!   reported once, where held fds would each cost a port task and a second
//!   `tcp_poll` of the level-triggered pollset. With the application env
//!   `port_hold` = `any` (`Rule::Any`) every hot active socket is held,
//!   crowded or not.
//! * **Drain in batches** (`drain`). At most [`drain::BATCH`] events per call
//!   from `epoll_wait(timeout 0)`: a passive waiter gets its select message,
//!   except a blocking `recv(S, 0)`, which is read for there and sent its
//!   result (through the hook `ops::recv` installs); an active `nifsock_tcp`
//!   socket is read, framed and delivered to its owner there (through the
//!   hook `ops::tcp::active` installs: this layer sits below `lifecycle` and
//!   `ops`, see the module map in lib.rs). Left-over work goes
//!   to a backlog and kicks an eventfd in the set, so ERTS runs the drain again
//!   after other work.
//!
//! * **Writers and connects too** (`arm::arm_write`). The first write or
//!   connect wait adds `EPOLLOUT` to the fd's registration (an ADD with
//!   `EPOLLIN | EPOLLOUT`, or one MOD of a socket already in the set for
//!   reads); every later write wait is a flag, as for reads. Write readiness
//!   is sticky in the same way (`EPOLLOUT`, or an error/hang-up, seen while no
//!   writer is armed), and the armed writer's message is the one enif_select
//!   sends. Sockets that never wait for a write stay registered for reads only,
//!   so they get no write edges.
//!
//! Reads, writes and connects all use this path when it is on; with
//! `select` every wait is one `enif_select`.

mod arm;
mod direct;
mod drain;
mod set;

pub use arm::{
    arm, arm_write, cancel, defer_armed, end_reply_hold, hold_for_reply, hup, keep_ready, leave,
    nothing_new, reads_follow, rearm_direct, unregister, write_attempt, Arm,
};
pub use direct::{release, set_rule as set_port_rule};
pub use drain::{install, pump_drain, pump_stopped, Out, Taken};
pub use set::{enabled, pump_on, set_pump, shared_size};
