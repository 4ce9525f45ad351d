//! File contents as an Ignition config carries them inline (RFC 2397 data URLs, gzip optional),
//! read back bounded: the bundle's configs are read by `verify`, boot-lab and the MCS check, and a
//! small gzip data URL can unpack to gigabytes.

use base64::Engine;

/// The most a file's contents may be once decoded (and decompressed): a config is read whole into
/// memory (the same cap as the bundle's reads).
pub const MAX_DECODED: u64 = 64 << 20;

/// Why inline contents do not read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Undecodable(pub String);

/// Decode a data URL `source` (and its `compression`), or say why not: not a data URL, bad base64,
/// bad gzip, a compression Ignition does not read, more than [`MAX_DECODED`] bytes.
pub fn decode(source: &str, compression: Option<&str>) -> Result<Vec<u8>, Undecodable> {
    let rest = source
        .strip_prefix("data:")
        .ok_or_else(|| Undecodable(format!("not a data URL: {}", source.chars().take(40).collect::<String>())))?;
    let (meta, payload) = rest
        .split_once(',')
        .ok_or_else(|| Undecodable("a data URL without a comma".into()))?;
    if payload.len() as u64 > MAX_DECODED * 2 {
        return Err(Undecodable(format!("a data URL of more than {} MiB", (MAX_DECODED * 2) >> 20)));
    }
    let raw = if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD
            .decode(payload)
            .map_err(|e| Undecodable(format!("bad base64: {e}")))?
    } else {
        percent_decode(payload)
    };
    let raw = match compression {
        Some("gzip") => {
            use std::io::Read;
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&raw[..])
                .take(MAX_DECODED + 1)
                .read_to_end(&mut out)
                .map_err(|e| Undecodable(format!("bad gzip: {e}")))?;
            out
        }
        None | Some("") => raw,
        Some(other) => return Err(Undecodable(format!("compression {other:?} is not one Ignition reads"))),
    };
    if raw.len() as u64 > MAX_DECODED {
        return Err(Undecodable(format!("more than {} MiB once decoded", MAX_DECODED >> 20)));
    }
    Ok(raw)
}

/// `data` as an uncompressed base64 data URL (the generator gzips what pays; a reader that edits
/// a file need not).
pub fn encode_plain(data: &[u8]) -> String {
    format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(data))
}

/// RFC 3986 percent-decoding over bytes: `%` and two hex digits is that byte, anything else is
/// itself (a `%` without two hex digits after it, and any UTF-8 character, whole).
fn percent_decode(s: &str) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let (Some(h), Some(l)) = (b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe's input panicked: a `%` before a two-byte character sliced inside it.
    #[test]
    fn percent_escapes_next_to_non_ascii_and_at_the_very_end() {
        let d = |s: &str| decode(s, None).unwrap();
        assert_eq!(d("data:,%a\u{e9}"), "%a\u{e9}".as_bytes());
        assert_eq!(d("data:,%\u{e9}x"), "%\u{e9}x".as_bytes());
        assert_eq!(d("data:,a%41"), b"aA");
        assert_eq!(d("data:,%41"), b"A");
        assert_eq!(d("data:,%4"), b"%4");
        assert_eq!(d("data:,%"), b"%");
        assert_eq!(d("data:,%e2%82%ac"), "\u{20ac}".as_bytes());
        assert_eq!(d(&encode_plain(b"\x00\xffkeyfile")), b"\x00\xffkeyfile");
    }

    #[test]
    fn a_gzip_bomb_is_refused_at_the_cap_not_unpacked() {
        use flate2::{write::GzEncoder, Compression};
        use std::io::Write;
        let mut gz = GzEncoder::new(Vec::new(), Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(MAX_DECODED >> 20) + 1 {
            gz.write_all(&zeros).unwrap();
        }
        let z = gz.finish().unwrap();
        let e = decode(&encode_plain(&z), Some("gzip")).unwrap_err();
        assert!(e.0.contains("more than 64 MiB"), "{e}");
        assert!(decode("data:,x", Some("xz")).unwrap_err().0.contains("xz"));
    }
}
