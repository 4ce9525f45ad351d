//! A file's contents as pieces that files may share. A thousand Ignition configs that each carry
//! the same MCO base files, or the same agent binary, hold those bytes once; they are hashed and
//! written piece by piece, never joined. Equality is by bytes, whatever the cut.

use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Body {
    pieces: Vec<Arc<[u8]>>,
    len: usize,
}

impl Body {
    /// Empty pieces are dropped: they would only cost a write call.
    pub fn from_pieces(pieces: Vec<Arc<[u8]>>) -> Body {
        let pieces: Vec<Arc<[u8]>> = pieces.into_iter().filter(|p| !p.is_empty()).collect();
        let len = pieces.iter().map(|p| p.len()).sum();
        Body { pieces, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn pieces(&self) -> &[Arc<[u8]>] {
        &self.pieces
    }

    /// The bytes in one slice: borrowed when there is one piece, joined otherwise.
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self.pieces.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(one),
            many => Cow::Owned(many.concat()),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes().into_owned()
    }

    pub fn sha256(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for p in &self.pieces {
            h.update(p);
        }
        h.finalize().into()
    }

    pub fn sha256_hex(&self) -> String {
        hex(&self.sha256())
    }

    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        self.pieces.iter().try_for_each(|p| w.write_all(p))
    }

    /// Whether these are exactly `other`'s bytes.
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        if other.len() != self.len {
            return false;
        }
        let mut rest = other;
        for p in &self.pieces {
            let (head, tail) = rest.split_at(p.len());
            if head != &p[..] {
                return false;
            }
            rest = tail;
        }
        true
    }
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        if self.len != other.len {
            return false;
        }
        // Walk both cuts at once: shared pieces compare by pointer, the rest by bytes.
        let (mut a, mut b) = (self.pieces.iter(), other.pieces.iter());
        let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
        loop {
            if x.is_empty() {
                match a.next() {
                    Some(p) => x = p,
                    None => return y.is_empty() && b.next().is_none(),
                }
            }
            if y.is_empty() {
                match b.next() {
                    Some(p) => y = p,
                    None => return false,
                }
            }
            let n = x.len().min(y.len());
            if !std::ptr::eq(x.as_ptr(), y.as_ptr()) && x[..n] != y[..n] {
                return false;
            }
            x = &x[n..];
            y = &y[n..];
        }
    }
}

impl Eq for Body {}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Body({} bytes in {} pieces)", self.len, self.pieces.len())
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Body::from_pieces(vec![Arc::from(v)])
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body::from(s.into_bytes())
    }
}

impl From<&[u8]> for Body {
    fn from(s: &[u8]) -> Body {
        Body::from_pieces(vec![Arc::from(s)])
    }
}

impl From<&str> for Body {
    fn from(s: &str) -> Body {
        Body::from(s.as_bytes())
    }
}

impl From<&String> for Body {
    fn from(s: &String) -> Body {
        Body::from(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(s: &[u8], at: &[usize]) -> Body {
        let mut pieces = Vec::new();
        let mut last = 0;
        for &i in at.iter().chain(std::iter::once(&s.len())) {
            pieces.push(Arc::from(&s[last..i]));
            last = i;
        }
        Body::from_pieces(pieces)
    }

    #[test]
    fn equality_and_hash_ignore_the_cut() {
        let s = b"the quick brown fox jumps over the lazy dog";
        let whole = Body::from(&s[..]);
        for at in [&[][..], &[1], &[5, 9], &[0, 0, 20, 42], &[10, 11, 12, 13]] {
            let b = cut(s, at);
            assert_eq!(b, whole, "{at:?}");
            assert_eq!(whole, b, "{at:?}");
            assert!(b.eq_bytes(s));
            assert_eq!(b.sha256_hex(), crate::bundle::sha256_hex(s));
            assert_eq!(b.to_vec(), s);
            let mut out = Vec::new();
            b.write_to(&mut out).unwrap();
            assert_eq!(out, s);
        }
        let mut other = s.to_vec();
        other[20] = b'X';
        assert_ne!(cut(&other, &[5, 30]), whole);
        assert!(!whole.eq_bytes(&other));
        assert!(!whole.eq_bytes(&s[..10]));
        assert_ne!(cut(&s[..10], &[3]), whole);
        assert_eq!(Body::default(), Body::from(Vec::new()));
    }

    #[test]
    fn a_shared_piece_is_held_once() {
        let big: Arc<[u8]> = Arc::from(vec![7u8; 1 << 20]);
        let a = Body::from_pieces(vec![Arc::from(&b"a"[..]), big.clone()]);
        let b = Body::from_pieces(vec![Arc::from(&b"b"[..]), big.clone()]);
        assert_eq!(Arc::strong_count(&big), 3);
        assert_eq!(a.len(), b.len());
        assert_ne!(a, b);
    }
}
