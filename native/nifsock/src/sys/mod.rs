//! The only place with `unsafe` code: raw erl_nif calls that Rustler does not
//! wrap safely (resource types with stop/down callbacks, enif_select_x, iovec
//! inspection, monitors, message sending) and thin syscall wrappers.
//!
//! Each public function here is safe to call; the `unsafe` blocks inside carry
//! a `// SAFETY:` comment saying why the call is sound.

pub mod carry;
pub mod distdrv;
pub mod driver;
pub mod drvsend;
pub mod entry;
pub mod env;
pub mod epoll;
pub mod handles;
pub mod iovec;
pub mod msg;
pub mod netns;
pub mod resource;
pub mod select;
pub mod syscall;
