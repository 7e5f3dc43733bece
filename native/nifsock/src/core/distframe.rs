//! The distribution's data-phase framing (a 4-byte big-endian length before
//! each packet, as inet_drv's `{packet, 4}` on an `inet_tcp_dist` port) over
//! one owned input buffer: the dist port's reads land in [`InBuf::space`],
//! [`InBuf::cut`] cuts complete packets out of it, and a packet too large
//! for the buffer is completed elsewhere (the port reads it straight into a
//! binary of its size: [`Next::Large`]).

/// The length header's size.
pub const HEADER: usize = 4;

/// The 4-byte big-endian header of a `len`-byte packet (None past u32).
pub fn header(len: usize) -> Option<[u8; HEADER]> {
    u32::try_from(len).ok().map(u32::to_be_bytes)
}

/// What [`InBuf::cut`] found at the head of the buffered bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A complete packet: `buf[start..start + len]` (0 bytes: a tick).
    Packet { start: usize, len: usize },
    /// A packet of `len` bytes that cannot fit in the buffer: its first
    /// `have` bytes are `buf[start..start + have]`; the rest is to be read
    /// elsewhere. The buffer is empty after this.
    Large {
        start: usize,
        have: usize,
        len: usize,
    },
    /// Not a whole packet yet: read more (into [`InBuf::space`]).
    More,
}

/// The bytes read but not yet cut into packets, `buf[start..end]`.
#[derive(Debug)]
pub struct InBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl InBuf {
    /// A buffer of `cap` bytes (at least one header).
    pub fn new(cap: usize) -> InBuf {
        InBuf {
            buf: vec![0; cap.max(HEADER)],
            start: 0,
            end: 0,
        }
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.end - self.start
    }

    /// The bytes a read may fill (`filled` says how many it did). The held
    /// bytes move to the front first when that gives the read more room.
    pub fn space(&mut self) -> &mut [u8] {
        if self.start > 0 && self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.buf.get_mut(self.end..).unwrap_or(&mut [])
    }

    /// `n` bytes were read into [`InBuf::space`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Appends `data` (bytes read before the port took over), as far as it fits;
    /// returns how many it took.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let space = self.space();
        let n = data.len().min(space.len());
        if let (Some(dst), Some(src)) = (space.get_mut(..n), data.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.filled(n);
        n
    }

    /// The buffer's bytes (positions from [`Next`] index it).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The next packet, consumed from the buffer (its bytes stay valid in
    /// [`InBuf::bytes`] until the next `space`, `push` or `cut` call).
    pub fn cut(&mut self) -> Next {
        let held = self.held();
        if held < HEADER {
            return Next::More;
        }
        let Some(h) = self
            .buf
            .get(self.start..self.start + HEADER)
            .and_then(|h| <[u8; HEADER]>::try_from(h).ok())
        else {
            return Next::More;
        };
        let len = u32::from_be_bytes(h) as usize;
        let body = self.start + HEADER;
        if held - HEADER >= len {
            self.start = body + len;
            self.reset_if_empty();
            return Next::Packet { start: body, len };
        }
        if len + HEADER > self.buf.len() {
            let have = held - HEADER;
            self.start = 0;
            self.end = 0;
            return Next::Large {
                start: body,
                have,
                len,
            };
        }
        Next::More
    }

    fn reset_if_empty(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(b: &mut InBuf, data: &[u8]) {
        assert_eq!(b.push(data), data.len());
    }

    fn packets(b: &mut InBuf) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Next::Packet { start, len } = b.cut() {
            out.push(b.bytes().get(start..start + len).unwrap_or(&[]).to_vec());
        }
        out
    }

    #[test]
    fn cuts_complete_packets_and_ticks() {
        let mut b = InBuf::new(64);
        feed(&mut b, &[0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 1, 9]);
        assert_eq!(packets(&mut b), vec![vec![1, 2, 3], vec![], vec![9]]);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn a_header_or_packet_cut_anywhere_completes_later() {
        let stream = [0u8, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 2, 7, 8];
        for cut in 0..stream.len() {
            let mut b = InBuf::new(16);
            let (head, tail) = stream.split_at(cut);
            feed(&mut b, head);
            let mut got = packets(&mut b);
            feed(&mut b, tail);
            got.extend(packets(&mut b));
            assert_eq!(got, vec![vec![1, 2, 3, 4, 5], vec![7, 8]], "cut at {cut}");
        }
    }

    #[test]
    fn held_bytes_move_to_the_front_when_the_buffer_is_full() {
        let mut b = InBuf::new(8);
        feed(&mut b, &[0, 0, 0, 1, 5, 0, 0, 0]);
        assert_eq!(packets(&mut b), vec![vec![5]]);
        assert_eq!(b.space().len(), 5);
        feed(&mut b, &[2, 6, 7]);
        assert_eq!(packets(&mut b), vec![vec![6, 7]]);
    }

    #[test]
    fn a_packet_larger_than_the_buffer_is_handed_out() {
        let mut b = InBuf::new(8);
        feed(&mut b, &[0, 0, 1, 0, 1, 2, 3]);
        assert_eq!(
            b.cut(),
            Next::Large {
                start: 4,
                have: 3,
                len: 256
            }
        );
        assert_eq!(b.held(), 0);
        assert_eq!(b.space().len(), 8);
    }

    #[test]
    fn header_is_big_endian() {
        assert_eq!(header(0x0102_0304), Some([1, 2, 3, 4]));
        assert_eq!(header(0), Some([0, 0, 0, 0]));
    }
}
