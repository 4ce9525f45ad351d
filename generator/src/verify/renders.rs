//! DIR/render: the release's renders as `hardshift render` recorded them.

use super::{check, Check, Status};
use crate::bundle;
use std::path::Path;

/// DIR/render against the SHA-256 `render` recorded of each of its files (renders.json): a file
/// changed, added or removed since is named. None when there are no renders.
pub fn render_outputs(dir: &Path) -> Option<Check> {
    use crate::pipeline::{outputs, render, rendered};
    let root = dir.join(crate::layout::RENDER);
    std::fs::symlink_metadata(&root).ok()?;
    let name = crate::layout::RENDER;
    let again = format!("run `hardshift render --dir {}` again", dir.display());
    let files = match outputs::read_all(&root) {
        Ok(f) => f,
        Err(e) => return Some(check(name, Status::Fail, format!("{}; {again}", e.at(&root)))),
    };
    let Some(json) = files.get(render::RECORD) else {
        return Some(check(
            name,
            Status::Warn,
            format!(
                "{}: no renders.json, so not made by `hardshift render`: not checked ({again})",
                root.display()
            ),
        ));
    };
    let record = match rendered::parse_record(json) {
        Ok(r) => r,
        Err(e) => {
            return Some(check(
                name,
                Status::Fail,
                format!("{}: {e}; {again}", root.join(render::RECORD).display()),
            ))
        }
    };
    let Some(recorded) = record.outputs else {
        return Some(check(
            name,
            Status::Warn,
            format!(
                "{}: the renders' outputs are unrecorded (a renders.json from an older hardshift): not checked; {again} to record them",
                root.display()
            ),
        ));
    };
    let mut problems = Vec::new();
    for (p, bytes) in files.iter().filter(|(p, _)| p.as_str() != render::RECORD) {
        match recorded.get(p) {
            None => problems.push(format!("{p} (added)")),
            Some(h) if *h != bundle::sha256_hex(bytes) => problems.push(format!("{p} (changed)")),
            _ => {}
        }
    }
    problems.extend(
        recorded
            .keys()
            .filter(|p| !files.contains_key(*p))
            .map(|p| format!("{p} (removed)")),
    );
    Some(match problems.len() {
        0 => check(
            name,
            Status::Ok,
            format!("{} files as the renders made them (renders.json)", recorded.len()),
        ),
        n => check(
            name,
            Status::Fail,
            format!(
                "{}: not as the renders made them (renders.json): {}{}; {again}",
                root.display(),
                problems[..n.min(10)].join(", "),
                if n > 10 { format!(" and {} more", n - 10) } else { String::new() }
            ),
        ),
    })
}
