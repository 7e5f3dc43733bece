//! gen_tcp-style packet framing (`{packet, raw | 1 | 2 | 4 | line}`): where
//! the first complete packet in a buffer ends, and which bytes are its payload.

use std::ops::Range;

/// A framing mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Packet {
    /// No framing: whatever arrived.
    #[default]
    Raw,
    /// A big-endian length header of 1, 2 or 4 bytes, then that many bytes.
    Len(u8),
    /// Up to and including a newline.
    Line,
}

/// Where the first packet in a buffer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A complete packet: consume `consumed` bytes, deliver `payload`.
    Packet {
        consumed: usize,
        payload: Range<usize>,
    },
    /// Not complete yet.
    Incomplete,
    /// The packet is larger than the limit (`packet_size`).
    TooLarge,
}

/// Finds the first packet of `buf` under `mode`; `limit` 0 means no limit.
pub fn first(mode: Packet, buf: &[u8], limit: usize) -> Found {
    match mode {
        Packet::Raw if buf.is_empty() => Found::Incomplete,
        Packet::Raw => Found::Packet {
            consumed: buf.len(),
            payload: 0..buf.len(),
        },
        Packet::Len(n) => {
            let n = usize::from(n);
            let Some(header) = buf.get(..n) else {
                return Found::Incomplete;
            };
            let len = header
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            if limit != 0 && len > limit {
                return Found::TooLarge;
            }
            if buf.len() - n < len {
                return Found::Incomplete;
            }
            Found::Packet {
                consumed: n + len,
                payload: n..n + len,
            }
        }
        Packet::Line => match buf.iter().position(|&b| b == b'\n') {
            Some(i) if limit != 0 && i + 1 > limit => Found::TooLarge,
            Some(i) => Found::Packet {
                consumed: i + 1,
                payload: 0..i + 1,
            },
            None if limit != 0 && buf.len() >= limit => Found::TooLarge,
            None => Found::Incomplete,
        },
    }
}

/// The header to put in front of a payload of `len` bytes, or None if it doesn't fit.
pub fn header(mode: Packet, len: usize) -> Option<Vec<u8>> {
    match mode {
        Packet::Raw | Packet::Line => Some(Vec::new()),
        Packet::Len(n) => {
            let n = u32::from(n);
            if n < 8 && (len as u64) >> (8 * n) != 0 {
                return None;
            }
            let bytes = (len as u64).to_be_bytes();
            bytes.get(8 - n as usize..).map(|b| b.to_vec())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_takes_everything() {
        assert_eq!(
            first(Packet::Raw, b"abc", 0),
            Found::Packet {
                consumed: 3,
                payload: 0..3
            }
        );
        assert_eq!(first(Packet::Raw, b"", 0), Found::Incomplete);
    }

    #[test]
    fn length_prefixed_waits_for_the_whole_packet() {
        assert_eq!(first(Packet::Len(2), b"\x00", 0), Found::Incomplete);
        assert_eq!(first(Packet::Len(2), b"\x00\x03ab", 0), Found::Incomplete);
        assert_eq!(
            first(Packet::Len(2), b"\x00\x03abcXY", 0),
            Found::Packet {
                consumed: 5,
                payload: 2..5
            }
        );
        assert_eq!(
            first(Packet::Len(4), b"\x00\x00\x00\x00rest", 0),
            Found::Packet {
                consumed: 4,
                payload: 4..4
            }
        );
        assert_eq!(
            first(Packet::Len(1), b"\x02hi", 0),
            Found::Packet {
                consumed: 3,
                payload: 1..3
            }
        );
    }

    #[test]
    fn length_prefixed_respects_the_limit() {
        assert_eq!(
            first(Packet::Len(4), b"\x00\x01\x00\x00", 1000),
            Found::TooLarge
        );
    }

    #[test]
    fn line_includes_the_newline() {
        assert_eq!(
            first(Packet::Line, b"ab\ncd", 0),
            Found::Packet {
                consumed: 3,
                payload: 0..3
            }
        );
        assert_eq!(first(Packet::Line, b"abcd", 0), Found::Incomplete);
        assert_eq!(first(Packet::Line, b"abcd", 2), Found::TooLarge);
        assert_eq!(first(Packet::Line, b"abcdef\n", 5), Found::TooLarge);
        assert_eq!(
            first(Packet::Line, b"abc\n", 5),
            Found::Packet {
                consumed: 4,
                payload: 0..4
            }
        );
    }

    #[test]
    fn headers_are_big_endian_and_bounded() {
        assert_eq!(header(Packet::Len(2), 258), Some(vec![1, 2]));
        assert_eq!(header(Packet::Len(1), 256), None);
        assert_eq!(header(Packet::Len(4), 5), Some(vec![0, 0, 0, 5]));
        assert_eq!(header(Packet::Raw, 5), Some(vec![]));
    }
}
