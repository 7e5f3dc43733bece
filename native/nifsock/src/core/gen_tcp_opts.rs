//! gen_tcp's rules for the options `nifsock_tcp` keeps itself (the kernel has
//! no such options): the watermark pairs and the `{header, N}` split. Each rule
//! is inet_drv's (OTP 25), checked against gen_tcp on Linux.

/// A high/low watermark pair, as inet_drv keeps it: setting one end past the
/// other moves the other end with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// High watermark.
    pub high: u32,
    /// Low watermark.
    pub low: u32,
}

impl Watermarks {
    /// gen_tcp's defaults for both pairs (send queue and port message queue).
    pub const DEFAULT: Watermarks = Watermarks {
        high: 8192,
        low: 4096,
    };

    /// `{high_watermark, V}` / `{high_msgq_watermark, V}`: a low above the
    /// new high comes down to it.
    pub fn set_high(&mut self, v: u32) {
        self.high = v;
        self.low = self.low.min(v);
    }

    /// `{low_watermark, V}` / `{low_msgq_watermark, V}`: a high below the new
    /// low goes up to it.
    pub fn set_low(&mut self, v: u32) {
        self.low = v;
        self.high = self.high.max(v);
    }
}

/// The send-queue watermark inet_drv stores for `{high_watermark, V}` or
/// `{low_watermark, V}`: prim_inet sends V's low 32 bits, inet_drv reads them
/// as a C int and makes a negative one 0 (so 16#80000000 and above read
/// back as 0).
pub fn send_watermark(low_32_bits: u32) -> u32 {
    if low_32_bits > i32::MAX as u32 {
        0
    } else {
        low_32_bits
    }
}

/// The port message queue watermark gen_tcp stores for
/// `{high_msgq_watermark, V}` or `{low_msgq_watermark, V}` from V's low 32
/// bits (prim_inet sends those): 0 and all ones (ERTS's "read only" and
/// "disabled") are `None` (gen_tcp's einval), anything above 2^31-1 is
/// 2^31-1 (ERTS's limit).
pub fn msgq_watermark(low_32_bits: u32) -> Option<u32> {
    match low_32_bits {
        0 | u32::MAX => None,
        v => Some(v.min(i32::MAX as u32)),
    }
}

/// How a binary-mode packet is delivered under `{header, N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A binary (header 0).
    Binary,
    /// A plain list of all its bytes (shorter than the header).
    List,
    /// `[B1, ..., BN | Rest]`: the first N bytes, then the rest as a binary
    /// (`<<>>` when the packet is exactly N bytes).
    Header(usize),
}

/// The shape of a binary-mode packet of `len` bytes under `{header, header}`.
pub fn shape(len: usize, header: u32) -> Shape {
    if header == 0 {
        return Shape::Binary;
    }
    match usize::try_from(header) {
        Ok(h) if h <= len => Shape::Header(h),
        _ => Shape::List,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn high_below_low_lowers_low() {
        let mut w = Watermarks::DEFAULT;
        w.set_high(100);
        assert_eq!(
            w,
            Watermarks {
                high: 100,
                low: 100
            }
        );
        w.set_high(0);
        assert_eq!(w, Watermarks { high: 0, low: 0 });
    }

    #[test]
    fn low_above_high_raises_high() {
        let mut w = Watermarks::DEFAULT;
        w.set_low(20000);
        assert_eq!(
            w,
            Watermarks {
                high: 20000,
                low: 20000
            }
        );
        w.set_low(5);
        assert_eq!(
            w,
            Watermarks {
                high: 20000,
                low: 5
            }
        );
    }

    #[test]
    fn send_watermark_reads_as_c_int() {
        assert_eq!(send_watermark(0), 0);
        assert_eq!(send_watermark(i32::MAX as u32), i32::MAX as u32);
        assert_eq!(send_watermark(0x8000_0000), 0);
        assert_eq!(send_watermark(u32::MAX), 0); // -1
    }

    #[test]
    fn msgq_watermark_range() {
        assert_eq!(msgq_watermark(0), None);
        assert_eq!(msgq_watermark(u32::MAX), None); // -1
        assert_eq!(msgq_watermark(1), Some(1));
        assert_eq!(msgq_watermark(i32::MAX as u32), Some(i32::MAX as u32));
        assert_eq!(msgq_watermark(0x8000_0000), Some(i32::MAX as u32));
        assert_eq!(msgq_watermark(u32::MAX - 4), Some(i32::MAX as u32)); // -5
    }

    #[test]
    fn header_shapes() {
        assert_eq!(shape(10, 0), Shape::Binary);
        assert_eq!(shape(6, 3), Shape::Header(3));
        assert_eq!(shape(3, 3), Shape::Header(3));
        assert_eq!(shape(1, 3), Shape::List);
        assert_eq!(shape(0, 3), Shape::List);
        assert_eq!(shape(5, u32::MAX), Shape::List);
    }
}
