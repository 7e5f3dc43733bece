//! Per-socket traffic counters: the `counters` of `nifsock:info/1` (OTP
//! socket's names) and what inet-style `getstat` reports. `Socket::count_*`
//! bumps these and the process-wide `stats` together.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes and calls each way on one socket, the largest single transfer, and
/// on a listener the connections accepted. 56 bytes, no allocation.
#[derive(Debug, Default)]
pub struct Traffic {
    read_byte: AtomicU64,
    read_pkg: AtomicU64,
    read_pkg_max: AtomicU64,
    write_byte: AtomicU64,
    write_pkg: AtomicU64,
    write_pkg_max: AtomicU64,
    acc_success: AtomicU64,
}

fn bump(bytes: &AtomicU64, calls: &AtomicU64, max: &AtomicU64, n: usize) {
    let n = n as u64;
    bytes.fetch_add(n, Ordering::Relaxed);
    calls.fetch_add(1, Ordering::Relaxed);
    max.fetch_max(n, Ordering::Relaxed);
}

impl Traffic {
    /// A recv that returned `n` > 0 bytes.
    pub fn read(&self, n: usize) {
        bump(&self.read_byte, &self.read_pkg, &self.read_pkg_max, n);
    }

    /// A sendmsg or sendfile that wrote `n` bytes.
    pub fn write(&self, n: usize) {
        bump(&self.write_byte, &self.write_pkg, &self.write_pkg_max, n);
    }

    /// A connection accepted on this listener.
    pub fn accepted(&self) {
        self.acc_success.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters under OTP socket's names.
    pub fn snapshot(&self) -> [(&'static str, u64); 7] {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("read_byte", get(&self.read_byte)),
            ("read_pkg", get(&self.read_pkg)),
            ("read_pkg_max", get(&self.read_pkg_max)),
            ("write_byte", get(&self.write_byte)),
            ("write_pkg", get(&self.write_pkg)),
            ("write_pkg_max", get(&self.write_pkg_max)),
            ("acc_success", get(&self.acc_success)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::Traffic;

    fn get(t: &Traffic, name: &str) -> u64 {
        t.snapshot()
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(u64::MAX, |(_, v)| *v)
    }

    #[test]
    fn counts_bytes_calls_and_the_largest_read() {
        let t = Traffic::default();
        t.read(5);
        t.read(100);
        t.read(7);
        assert_eq!(get(&t, "read_byte"), 112);
        assert_eq!(get(&t, "read_pkg"), 3);
        assert_eq!(get(&t, "read_pkg_max"), 100);
        assert_eq!(get(&t, "write_pkg"), 0);
    }

    #[test]
    fn writes_and_accepts_count_apart_from_reads() {
        let t = Traffic::default();
        t.write(3);
        t.write(9);
        t.accepted();
        assert_eq!(get(&t, "write_byte"), 12);
        assert_eq!(get(&t, "write_pkg"), 2);
        assert_eq!(get(&t, "write_pkg_max"), 9);
        assert_eq!(get(&t, "acc_success"), 1);
        assert_eq!(get(&t, "read_byte"), 0);
    }
}
