//! The config as bytes, plainly or with large data URLs as pieces shared between configs.

use super::Config;
use std::sync::Arc;

/// The config as bytes: compact JSON, fields and lists in a fixed order, newline-terminated.
pub fn to_json(cfg: &Config) -> Vec<u8> {
    let mut out = serde_json::to_vec(cfg).expect("config serializes");
    out.push(b'\n');
    out
}

/// The JSON text of large data URLs, made once and shared by every config that holds the same
/// string (the MCO base's files, the agent): keyed by the string's address, which the entry keeps
/// alive so no other string can take it.
#[derive(Default)]
pub struct Pieces(std::sync::Mutex<std::collections::HashMap<usize, Piece>>);

/// A string, and its JSON text.
type Piece = (Arc<str>, Arc<[u8]>);

impl Pieces {
    fn json_of(&self, s: &Arc<str>) -> Arc<[u8]> {
        let key = Arc::as_ptr(s) as *const u8 as usize;
        if let Some((_, j)) = self.0.lock().expect("pieces").get(&key) {
            return j.clone();
        }
        let j: Arc<[u8]> = Arc::from(serde_json::to_vec(&**s).expect("a string serializes"));
        self.0.lock().expect("pieces").insert(key, (s.clone(), j.clone()));
        j
    }
}

/// `to_json`'s bytes exactly, with every data URL of `splice::MIN` bytes or more as a shared piece:
/// a thousand configs merged into one base hold the base's files once.
pub fn to_json_body(cfg: &Config, pieces: &Pieces) -> crate::body::Body {
    let (mut out, taken) = splice::collecting(|| serde_json::to_vec(cfg).expect("config serializes"));
    out.push(b'\n');
    if taken.is_empty() {
        return crate::body::Body::from(out);
    }
    let marker = serde_json::to_vec(splice::MARKER).expect("a string serializes");
    let mut cuts = Vec::with_capacity(taken.len());
    let mut at = 0;
    while let Some(i) = find(&out[at..], &marker) {
        cuts.push(at + i);
        at += i + marker.len();
    }
    // A user's string that happens to hold the marker: no pieces, the plain bytes.
    if cuts.len() != taken.len() {
        return crate::body::Body::from(to_json(cfg));
    }
    let mut parts: Vec<Arc<[u8]>> = Vec::with_capacity(2 * cuts.len() + 1);
    let mut last = 0;
    for (cut, s) in cuts.iter().zip(&taken) {
        parts.push(Arc::from(&out[last..*cut]));
        parts.push(pieces.json_of(s));
        last = cut + marker.len();
    }
    parts.push(Arc::from(&out[last..]));
    crate::body::Body::from_pieces(parts)
}

/// Where `needle` starts in `hay`. The marker's rare byte (the backslash of `\\u0000`) leads the
/// scan, not its quote, which JSON is full of.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let lead = needle.iter().position(|b| *b == b'\\').unwrap_or(0);
    let (first, needle_at) = (needle[lead], lead);
    let mut from = 0;
    while let Some(i) = hay[from..].iter().position(|b| *b == first) {
        let at = from + i;
        if at >= needle_at && hay[at - needle_at..].starts_with(needle) {
            return Some(at - needle_at);
        }
        from = at + 1;
    }
    None
}

/// While `to_json_body` serializes, each large `source` is written as a marker and its string set
/// aside, in order; any other serialization writes the string itself.
pub(super) mod splice {
    use serde::Serializer;
    use std::cell::RefCell;
    use std::sync::Arc;

    pub const MIN: usize = 16 * 1024;
    pub const MARKER: &str = "\u{0}hardshift:shared-piece\u{0}";

    thread_local! {
        static TAKEN: RefCell<Option<Vec<Arc<str>>>> = const { RefCell::new(None) };
    }

    pub fn collecting<T>(f: impl FnOnce() -> T) -> (T, Vec<Arc<str>>) {
        TAKEN.with(|t| *t.borrow_mut() = Some(Vec::new()));
        let out = f();
        (out, TAKEN.with(|t| t.borrow_mut().take()).unwrap_or_default())
    }

    pub fn source<S: Serializer>(v: &Option<Arc<str>>, ser: S) -> Result<S::Ok, S::Error> {
        let Some(s) = v else { return ser.serialize_none() };
        let taken = s.len() >= MIN && TAKEN.with(|t| t.borrow_mut().as_mut().map(|l| l.push(s.clone())).is_some());
        ser.serialize_str(if taken { MARKER } else { s })
    }
}
