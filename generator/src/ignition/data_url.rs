//! Contents as data URLs: encoded (gzip when it pays), re-encoded in a base, decoded.

use super::{Config, Contents};
use base64::Engine;
use flate2::{write::GzEncoder, Compression};
use hardshift_bundle::data_url::Undecodable;
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

pub use hardshift_bundle::data_url::MAX_DECODED;

/// Decode a data URL (and gzip), for tests and for reading a base config; `None` if it is not
/// one hardshift can read or would exceed [`MAX_DECODED`].
pub fn decode(c: &Contents) -> Option<Vec<u8>> {
    decode_bounded(c).ok()
}

/// Decode a data URL (and gzip), or say why not (the bundle crate's reader, over `Contents`).
pub fn decode_bounded(c: &Contents) -> Result<Vec<u8>, Undecodable> {
    let src = c.source.as_deref().ok_or_else(|| Undecodable("no source".into()))?;
    hardshift_bundle::data_url::decode(src, c.compression.as_deref())
}
