//! Device plugins built with grpc-go before 1.52 (upstream's own sample plugin among
//! them) dial the kubelet's unix socket with the socket's path as the HTTP/2
//! `:authority`, which grpc-go's server ignores but `h2` refuses as malformed
//! (`PROTOCOL_ERROR`). Each connection's client-to-server bytes therefore pass through
//! [`AuthorityRewriter`], which replaces the `:authority` of every HEADERS frame whose
//! header block it can read with `localhost`; everything else goes through unchanged.
//! The value is re-encoded with the representation the client chose, so the client's
//! and the server's HPACK dynamic tables keep the same entries (only this entry's size
//! differs, which matters only once a long connection fills the 4 KiB table; a plugin's
//! `Register` connection makes one call).

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The static table's index of `:authority`.
const AUTHORITY_INDEX: usize = 1;
const REPLACEMENT: &[u8] = b"localhost";

/// The client's byte stream, rewritten frame by frame.
#[derive(Debug, Default)]
pub struct AuthorityRewriter {
    pending: Vec<u8>,
    preface_done: bool,
    /// Not HTTP/2 with prior knowledge: every byte passes through.
    passthrough: bool,
}

impl AuthorityRewriter {
    /// Takes the bytes read from the client; returns those to hand to the server (whole
    /// frames; a partial frame waits for the rest).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.passthrough {
            return bytes.to_vec();
        }
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::with_capacity(self.pending.len());
        let mut at = 0;
        if !self.preface_done {
            let have = self.pending.len().min(PREFACE.len());
            if self.pending[..have] != PREFACE[..have] {
                self.passthrough = true;
                return std::mem::take(&mut self.pending);
            } else if have < PREFACE.len() {
                return out;
            } else {
                out.extend_from_slice(PREFACE);
                at = PREFACE.len();
                self.preface_done = true;
            }
        }
        loop {
            let rest = &self.pending[at..];
            if rest.len() < FRAME_HEADER {
                break;
            }
            let len =
                (usize::from(rest[0]) << 16) | (usize::from(rest[1]) << 8) | usize::from(rest[2]);
            if rest.len() < FRAME_HEADER + len {
                break;
            }
            let frame = &rest[..FRAME_HEADER + len];
            match rewrite_headers(frame) {
                Some(rewritten) => out.extend_from_slice(&rewritten),
                None => out.extend_from_slice(frame),
            }
            at += FRAME_HEADER + len;
        }
        self.pending.drain(..at);
        out
    }
}

/// A HEADERS frame with its whole header block, `:authority` replaced; `None` for any
/// other frame or a block this cannot read (passed through as it is).
fn rewrite_headers(frame: &[u8]) -> Option<Vec<u8>> {
    let (kind, flags) = (frame[3], frame[4]);
    if kind != HEADERS || flags & END_HEADERS == 0 {
        return None;
    }
    let payload = &frame[FRAME_HEADER..];
    let pad = if flags & PADDED != 0 {
        usize::from(*payload.first()?)
    } else {
        0
    };
    let head = usize::from(flags & PADDED != 0) + if flags & PRIORITY != 0 { 5 } else { 0 };
    let block_end = payload.len().checked_sub(pad)?;
    let block = payload.get(head..block_end)?;
    let new_block = rewrite_block(block)?;
    let len = head + new_block.len() + pad;
    if len >= 1 << 24 {
        return None;
    }
    let mut out = Vec::with_capacity(FRAME_HEADER + len);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8]);
    out.extend_from_slice(&frame[3..FRAME_HEADER]);
    out.extend_from_slice(&payload[..head]);
    out.extend_from_slice(&new_block);
    out.extend_from_slice(&payload[block_end..]);
    Some(out)
}

/// An HPACK integer with an `n`-bit prefix at `at`: its value and the next position.
fn integer(block: &[u8], at: usize, n: u32) -> Option<(usize, usize)> {
    let mask = (1usize << n) - 1;
    let mut value = usize::from(*block.get(at)?) & mask;
    let mut at = at + 1;
    if value < mask {
        return Some((value, at));
    }
    let mut shift = 0;
    loop {
        let b = *block.get(at)?;
        at += 1;
        value = value.checked_add(usize::from(b & 0x7f).checked_shl(shift)?)?;
        shift += 7;
        if b & 0x80 == 0 || shift > 28 {
            return (b & 0x80 == 0).then_some((value, at));
        }
    }
}

/// A string literal at `at`: the position after it.
fn string_end(block: &[u8], at: usize) -> Option<usize> {
    let (len, at) = integer(block, at, 7)?;
    let end = at.checked_add(len)?;
    (end <= block.len()).then_some(end)
}

fn rewrite_block(block: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(block.len());
    let mut at = 0;
    while at < block.len() {
        let b = block[at];
        let start = at;
        if b & 0x80 != 0 {
            // Indexed field.
            at = integer(block, at, 7)?.1;
        } else if b & 0xe0 == 0x20 {
            // Dynamic table size update.
            at = integer(block, at, 5)?.1;
        } else {
            // A literal: with incremental indexing (01), without or never indexed (0000,
            // 0001).
            let prefix = if b & 0x40 != 0 { 6 } else { 4 };
            let (index, after_index) = integer(block, at, prefix)?;
            let name_end = if index == 0 {
                string_end(block, after_index)?
            } else {
                after_index
            };
            let value_end = string_end(block, name_end)?;
            if index == AUTHORITY_INDEX {
                out.extend_from_slice(&block[start..after_index]);
                out.push(REPLACEMENT.len() as u8);
                out.extend_from_slice(REPLACEMENT);
                at = value_end;
                continue;
            }
            at = value_end;
        }
        out.extend_from_slice(&block[start..at]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            flags,
            0,
            0,
            0,
            1,
        ];
        f.extend_from_slice(payload);
        f
    }

    fn literal(first: u8, value: &[u8]) -> Vec<u8> {
        let mut v = vec![first, value.len() as u8];
        v.extend_from_slice(value);
        v
    }

    #[test]
    fn a_socket_path_authority_becomes_localhost_and_the_rest_is_kept() {
        let path = b"/var/lib/kubelet/device-plugins/kubelet.sock";
        // grpc-go's block: :method POST (indexed), :authority as a literal with
        // indexing, :path as a literal without indexing.
        let mut headers = vec![0x83];
        headers.extend(literal(0x41, path));
        headers.extend(literal(0x04, b"/v1beta1.Registration/Register"));
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, &[])); // SETTINGS
        input.extend(frame(HEADERS, END_HEADERS, &headers));
        input.extend(frame(0x0, 0x1, b"data"));
        let mut r = AuthorityRewriter::default();
        // Fed in two pieces: the partial frame waits for the rest.
        let mut out = r.feed(&input[..30]);
        out.extend(r.feed(&input[30..]));
        let mut want = vec![0x83];
        want.extend(literal(0x41, b"localhost"));
        want.extend(literal(0x04, b"/v1beta1.Registration/Register"));
        let mut expected = PREFACE.to_vec();
        expected.extend(frame(0x4, 0, &[]));
        expected.extend(frame(HEADERS, END_HEADERS, &want));
        expected.extend(frame(0x0, 0x1, b"data"));
        assert_eq!(out, expected);
    }

    #[test]
    fn padded_and_prioritized_headers_keep_their_padding_and_priority() {
        let mut payload = vec![2u8, 0, 0, 0, 3, 16];
        payload.extend(literal(0x01, b"a/b"));
        payload.extend([0, 0]);
        let f = frame(HEADERS, END_HEADERS | PADDED | PRIORITY, &payload);
        let out = rewrite_headers(&f).unwrap_or_default();
        let mut want = vec![2u8, 0, 0, 0, 3, 16];
        want.extend(literal(0x01, b"localhost"));
        want.extend([0, 0]);
        assert_eq!(out, frame(HEADERS, END_HEADERS | PADDED | PRIORITY, &want));
    }

    #[test]
    fn an_unreadable_block_passes_through() {
        // A string longer than the block.
        let f = frame(HEADERS, END_HEADERS, &[0x41, 0x7e]);
        assert_eq!(rewrite_headers(&f), None);
        let mut r = AuthorityRewriter::default();
        let mut input = PREFACE.to_vec();
        input.extend(&f);
        assert_eq!(r.feed(&input), input);
        // Another protocol: passed through as it comes.
        let mut r = AuthorityRewriter::default();
        assert_eq!(r.feed(b"GET / HTTP/1.1\r\n"), b"GET / HTTP/1.1\r\n");
        assert_eq!(r.feed(b"\r\n"), b"\r\n");
    }
}
