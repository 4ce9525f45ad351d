//! Contents as data URLs: encoded (gzip when it pays), re-encoded in a base, decoded.

use super::{Config, Contents};
use base64::Engine;
use flate2::{write::GzEncoder, Compression};
use std::io::Write;

/// Contents as a data URL; gzip-compressed when that saves at least a tenth (and 256 bytes). Files of
/// 2 KiB or less are not tried: a compressor costs more to set up than they could save.
pub fn encode(data: &[u8]) -> Contents {
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    if data.len() > 2048 {
        // GzEncoder writes mtime 0 and no file name: the same input gives the same bytes.
        let mut gz = GzEncoder::new(Vec::new(), Compression::best());
        if gz.write_all(data).is_ok() {
            if let Ok(z) = gz.finish() {
                if z.len() + 256 < data.len() && z.len() * 10 < data.len() * 9 {
                    return Contents {
                        compression: Some("gzip".into()),
                        source: Some(format!("data:;base64,{}", b64(&z)).into()),
                        ..Default::default()
                    };
                }
            }
        }
    }
    Contents {
        compression: None,
        source: Some(format!("data:;base64,{}", b64(data)).into()),
        ..Default::default()
    }
}

/// The base's inline files re-encoded as `encode` does (gzip and base64 when that saves a tenth):
/// the MCO writes them percent-encoded, and every node's config carries them. Same files on the
/// node; a file with a verification hash or already compressed is left as it is. Returns how
/// many bytes of data URLs that saves.
pub fn compact(cfg: &mut Config) -> usize {
    let mut saved = 0;
    for f in &mut cfg.storage.files {
        let Some(c) = f.contents.as_mut() else { continue };
        let inline = c.source.as_deref().is_some_and(|s| s.starts_with("data:"));
        if !inline || c.compression.as_deref().is_some_and(|z| !z.is_empty()) || !c.other.is_empty() {
            continue;
        }
        let Some(data) = decode(c) else { continue };
        let new = encode(&data);
        let (old_len, new_len) = (c.source.as_deref().map_or(0, str::len), new.source.as_deref().map_or(0, str::len));
        if new_len < old_len {
            saved += old_len - new_len;
            c.compression = new.compression;
            c.source = new.source;
        }
    }
    saved
}

/// The most a file's contents may be once decoded (and decompressed): a config is read whole into
/// memory, and a small gzip data URL can unpack to gigabytes (the same cap as the bundle's reads).
pub const MAX_DECODED: u64 = 64 << 20;

/// Decode a data URL (and gzip), for tests and for reading a base config; `None` if it is not
/// one hardshift can read or would exceed [`MAX_DECODED`].
pub fn decode(c: &Contents) -> Option<Vec<u8>> {
    decode_bounded(c).ok()
}

/// Decode a data URL (and gzip), or say why not: not a data URL, bad base64, bad gzip, more than
/// [`MAX_DECODED`] bytes.
pub fn decode_bounded(c: &Contents) -> Result<Vec<u8>, String> {
    let src = c.source.as_deref().ok_or("no source")?;
    let rest = src
        .strip_prefix("data:")
        .ok_or_else(|| format!("not a data URL: {}", src.chars().take(40).collect::<String>()))?;
    let (meta, payload) = rest.split_once(',').ok_or("a data URL without a comma")?;
    if payload.len() as u64 > MAX_DECODED * 2 {
        return Err(format!("a data URL of more than {} MiB", (MAX_DECODED * 2) >> 20));
    }
    let raw = if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD
            .decode(payload)
            .map_err(|e| format!("bad base64: {e}"))?
    } else {
        percent_decode(payload)
    };
    let raw = match c.compression.as_deref() {
        Some("gzip") => {
            use std::io::Read;
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&raw[..])
                .take(MAX_DECODED + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("bad gzip: {e}"))?;
            out
        }
        None | Some("") => raw,
        Some(other) => return Err(format!("compression {other:?} is not one Ignition reads")),
    };
    if raw.len() as u64 > MAX_DECODED {
        return Err(format!("more than {} MiB once decoded", MAX_DECODED >> 20));
    }
    Ok(raw)
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

    fn url(s: &str) -> Contents {
        Contents {
            source: Some(s.into()),
            ..Default::default()
        }
    }

    /// The probe's input panicked: a `%` before a two-byte character sliced inside it.
    #[test]
    fn percent_escapes_next_to_non_ascii_and_at_the_very_end() {
        assert_eq!(decode(&url("data:,%a\u{e9}")).unwrap(), "%a\u{e9}".as_bytes());
        assert_eq!(decode(&url("data:,%\u{e9}x")).unwrap(), "%\u{e9}x".as_bytes());
        assert_eq!(decode(&url("data:,a%41")).unwrap(), b"aA");
        assert_eq!(decode(&url("data:,%41")).unwrap(), b"A");
        assert_eq!(decode(&url("data:,%4")).unwrap(), b"%4");
        assert_eq!(decode(&url("data:,%")).unwrap(), b"%");
        assert_eq!(decode(&url("data:,%e2%82%ac")).unwrap(), "\u{20ac}".as_bytes());
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
        let c = Contents {
            compression: Some("gzip".into()),
            source: Some(format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(&z)).into()),
            ..Default::default()
        };
        let e = decode_bounded(&c).unwrap_err();
        assert!(e.contains("more than 64 MiB"), "{e}");
        assert!(decode(&c).is_none());
        let bad = Contents {
            compression: Some("xz".into()),
            ..url("data:,x")
        };
        assert!(decode_bounded(&bad).unwrap_err().contains("xz"));
    }
}
