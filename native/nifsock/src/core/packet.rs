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
    /// Up to and including the line delimiter (`{line_delimiter, C}`, `\n` by default).
    Line,
}

/// `{line_delimiter, C}`: the byte that ends a line (`\n` unless set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delimiter(pub u8);

impl Default for Delimiter {
    fn default() -> Self {
        Delimiter(b'\n')
    }
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
    /// The packet is larger than the limit (`packet_size`), or than any packet
    /// can be: gen_tcp's `emsgsize`.
    TooLarge,
}

/// The longest frame (header and payload) of `{packet, 1 | 2 | 4}`: inet keeps
/// a frame's length in a C `int`, and rejects a header whose frame would not
/// fit (a 4-byte length of 2^31 - 4 or more) instead of waiting for it.
pub const MAX_FRAME: usize = i32::MAX as usize;

/// What bounds a packet besides its mode: gen_tcp's `packet_size`, `buffer`
/// and `line_delimiter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `packet_size`: the longest payload (a line: with its delimiter); 0: no limit.
    pub limit: usize,
    /// `buffer`: a line is looked for in the first `trunc` bytes only, and a
    /// longer one comes in pieces of `trunc` bytes, as inet delivers lines
    /// longer than its buffer; 0: no truncation.
    pub trunc: usize,
    /// The byte that ends a line.
    pub delimiter: u8,
}

#[cfg(test)]
impl Bounds {
    /// No limit, no truncation, lines end at `\n`.
    pub const NONE: Bounds = Bounds {
        limit: 0,
        trunc: 0,
        delimiter: b'\n',
    };
}

/// Finds the first packet of `buf` under `mode` and `bounds`.
pub fn first(mode: Packet, buf: &[u8], bounds: Bounds) -> Found {
    let limit = bounds.limit;
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
            if (limit != 0 && len > limit) || len > MAX_FRAME - n {
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
        Packet::Line => {
            // inet's buffer holds at most `trunc` bytes: the line is looked
            // for there, and what doesn't fit is the next piece.
            let window = match bounds.trunc {
                0 => buf,
                t => buf.get(..t).unwrap_or(buf),
            };
            match window.iter().position(|&b| b == bounds.delimiter) {
                Some(i) if limit != 0 && i + 1 > limit => Found::TooLarge,
                Some(i) => Found::Packet {
                    consumed: i + 1,
                    payload: 0..i + 1,
                },
                None if limit != 0 && window.len() > limit => Found::TooLarge,
                None if bounds.trunc != 0 && window.len() >= bounds.trunc => Found::Packet {
                    consumed: window.len(),
                    payload: 0..window.len(),
                },
                None => Found::Incomplete,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(limit: usize) -> Bounds {
        Bounds {
            limit,
            ..Bounds::NONE
        }
    }

    fn pkt(consumed: usize, payload: Range<usize>) -> Found {
        Found::Packet { consumed, payload }
    }

    #[test]
    fn raw_takes_everything() {
        assert_eq!(first(Packet::Raw, b"abc", Bounds::NONE), pkt(3, 0..3));
        assert_eq!(first(Packet::Raw, b"", Bounds::NONE), Found::Incomplete);
    }

    #[test]
    fn length_prefixed_waits_for_the_whole_packet() {
        let none = Bounds::NONE;
        assert_eq!(first(Packet::Len(2), b"\x00", none), Found::Incomplete);
        assert_eq!(
            first(Packet::Len(2), b"\x00\x03ab", none),
            Found::Incomplete
        );
        assert_eq!(first(Packet::Len(2), b"\x00\x03abcXY", none), pkt(5, 2..5));
        assert_eq!(
            first(Packet::Len(4), b"\x00\x00\x00\x00rest", none),
            pkt(4, 4..4)
        );
        assert_eq!(first(Packet::Len(1), b"\x02hi", none), pkt(3, 1..3));
    }

    #[test]
    fn length_prefixed_respects_the_limit() {
        assert_eq!(
            first(Packet::Len(4), b"\x00\x01\x00\x00", limit(1000)),
            Found::TooLarge
        );
        // packet_size itself is allowed (gen_tcp: a length above it is refused)
        assert_eq!(first(Packet::Len(2), b"\x00\x02ab", limit(2)), pkt(4, 2..4));
        assert_eq!(
            first(Packet::Len(2), b"\x00\x03", limit(2)),
            Found::TooLarge
        );
        assert_eq!(first(Packet::Len(1), b"\x04", limit(3)), Found::TooLarge);
        // the header alone decides: no payload byte needs to be there
        assert_eq!(first(Packet::Len(1), b"\x04", limit(4)), Found::Incomplete);
    }

    #[test]
    fn length_prefixed_refuses_frames_longer_than_inet_can_hold() {
        // A 4-byte length whose frame doesn't fit an i32 is refused at once,
        // with or without packet_size; one that fits waits for its bytes.
        for header in [0x7FFF_FFFCu32, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF] {
            let buf = header.to_be_bytes();
            assert_eq!(first(Packet::Len(4), &buf, Bounds::NONE), Found::TooLarge);
            assert_eq!(
                first(Packet::Len(4), &buf, limit(usize::MAX)),
                Found::TooLarge
            );
        }
        for header in [0x7FFF_FFFBu32, 0x0400_0001] {
            let buf = header.to_be_bytes();
            assert_eq!(first(Packet::Len(4), &buf, Bounds::NONE), Found::Incomplete);
        }
        // 1- and 2-byte headers can't get there
        assert_eq!(
            first(Packet::Len(2), b"\xFF\xFF", Bounds::NONE),
            Found::Incomplete
        );
        assert_eq!(
            first(Packet::Len(1), b"\xFF", Bounds::NONE),
            Found::Incomplete
        );
    }

    #[test]
    fn line_includes_the_newline() {
        let none = Bounds::NONE;
        assert_eq!(first(Packet::Line, b"ab\ncd", none), pkt(3, 0..3));
        assert_eq!(first(Packet::Line, b"abcd", none), Found::Incomplete);
        assert_eq!(first(Packet::Line, b"\n", none), pkt(1, 0..1));
    }

    #[test]
    fn line_respects_the_limit() {
        // without a delimiter: refused once more than packet_size bytes are there
        assert_eq!(first(Packet::Line, b"abc", limit(2)), Found::TooLarge);
        assert_eq!(first(Packet::Line, b"ab", limit(2)), Found::Incomplete);
        assert_eq!(first(Packet::Line, b"abcde", limit(5)), Found::Incomplete);
        // with one: the line with its delimiter may be packet_size long
        assert_eq!(first(Packet::Line, b"abcdef\n", limit(5)), Found::TooLarge);
        assert_eq!(first(Packet::Line, b"abcde\n", limit(5)), Found::TooLarge);
        assert_eq!(first(Packet::Line, b"abcd\n", limit(5)), pkt(5, 0..5));
        assert_eq!(first(Packet::Line, b"abc\n", limit(5)), pkt(4, 0..4));
    }

    #[test]
    fn line_longer_than_the_buffer_comes_in_pieces() {
        let b = Bounds {
            trunc: 10,
            ..Bounds::NONE
        };
        let line = b"0123456789abcdefghijklmn\nxy\n";
        assert_eq!(first(Packet::Line, line, b), pkt(10, 0..10));
        assert_eq!(
            first(Packet::Line, line.get(10..).unwrap_or(&[]), b),
            pkt(10, 0..10)
        );
        assert_eq!(
            first(Packet::Line, line.get(20..).unwrap_or(&[]), b),
            pkt(5, 0..5)
        );
        assert_eq!(first(Packet::Line, b"012345678", b), Found::Incomplete);
        assert_eq!(first(Packet::Line, b"0123456789", b), pkt(10, 0..10));
        // a delimiter past the buffer doesn't count; one that is its last byte does
        assert_eq!(first(Packet::Line, b"0123456789\n", b), pkt(10, 0..10));
        assert_eq!(first(Packet::Line, b"\n", b), pkt(1, 0..1));
        assert_eq!(first(Packet::Line, b"012345678\nab", b), pkt(10, 0..10));
    }

    #[test]
    fn line_buffer_smaller_than_the_limit_never_reaches_it() {
        // gen_tcp with {buffer, 3}, {packet_size, 5}: "abcdefgh\n" is
        // delivered as "abc", "def", "gh\n".
        let b = Bounds {
            limit: 5,
            trunc: 3,
            ..Bounds::NONE
        };
        assert_eq!(first(Packet::Line, b"abcdefgh\n", b), pkt(3, 0..3));
        assert_eq!(first(Packet::Line, b"gh\n", b), pkt(3, 0..3));
        // a buffer larger than the limit: the limit wins
        let b = Bounds {
            limit: 5,
            trunc: 10,
            ..Bounds::NONE
        };
        assert_eq!(first(Packet::Line, b"abcdefgh\n", b), Found::TooLarge);
    }

    #[test]
    fn line_ends_at_the_delimiter() {
        let semi = Bounds {
            delimiter: b';',
            ..Bounds::NONE
        };
        assert_eq!(first(Packet::Line, b"ab\ncd;ef", semi), pkt(6, 0..6));
        assert_eq!(first(Packet::Line, b"ab\n", semi), Found::Incomplete);
        let nul = Bounds {
            delimiter: 0,
            ..Bounds::NONE
        };
        assert_eq!(first(Packet::Line, b"a\0b", nul), pkt(2, 0..2));
    }
}
