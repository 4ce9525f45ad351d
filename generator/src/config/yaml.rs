//! YAML to `serde_json::Value`, keeping where every node starts.
//!
//! serde's YAML deserializers give a line for syntax errors only; a semantic error such as
//! "this CIDR overlaps that one" needs the position of `networking.machineNetwork[0].cidr`.
//! So one pass over the parser's events builds both the value and a path → position index,
//! with paths in the same form `serde_path_to_error` prints (`a.b[0].c`).
//!
//! The same pass is strict where YAML is lenient and a typo would be silent: a duplicate key
//! (YAML would keep the last), a second document (it would be ignored) and alias expansion past
//! a small budget (an alias bomb of 1.6 KB would take gigabytes) are errors with a position.

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// A parsed document and the position of every key and value in it.
#[derive(Debug, Default)]
pub struct Doc {
    pub value: Value,
    positions: Positions,
}

/// Path → position. Paths are the user's own keys, so a fast hash is enough (no untrusted peer).
type Positions = HashMap<String, Pos, foldhash::fast::RandomState>;

impl Doc {
    /// Position of the node at `path`, or of its nearest ancestor that exists.
    pub fn pos(&self, path: &str) -> Option<Pos> {
        let mut p = path.to_string();
        loop {
            if let Some(pos) = self.positions.get(&p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p.truncate(cut);
        }
    }
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

enum Frame {
    Map {
        map: Map<String, Value>,
        path: String,
        key: Option<String>,
    },
    Seq {
        items: Vec<Value>,
        path: String,
    },
}

/// Nodes that aliases may add in all: far above any hand-written config, far below a bomb.
pub const MAX_ALIAS_NODES: usize = 10_000;
/// Nodes in one document, aliases included: 1 MiB of YAML holds well under this, and 32 MiB of
/// agent-config.yaml (30,000 hosts of some 40 nodes each) too; a few hundred MB of memory at most.
pub const MAX_NODES: usize = 2_000_000;

/// How deep collections may nest: the release's deepest CRD nests 25 levels; serde_json stops
/// at 128 too, and every walk of a value after this one recurses.
pub const MAX_DEPTH: usize = 128;

/// Parse exactly one YAML document.
pub fn parse(src: &str) -> Result<Doc, SyntaxError> {
    lone_carriage_return(src)?;
    let mut parser = Parser::new_from_str(src);
    let mut b = Builder::new(src.len());
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| SyntaxError {
            pos: Pos {
                line: e.marker().line(),
                col: e.marker().col() + 1,
            },
            message: e.info().to_string(),
        })?;
        let pos = Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
        };
        b.event(event, pos)?;
    }
    Ok(Doc {
        value: b.root.unwrap_or(Value::Null),
        positions: b.positions,
    })
}

/// YAML counts a lone carriage return as a line break; editors, sed and the positions we
/// report count newlines. Refused (found by the fuzzer): positions past it would point outside
/// the file as the user sees it.
fn lone_carriage_return(src: &str) -> Result<(), SyntaxError> {
    let Some(at) = src
        .as_bytes()
        .windows(2)
        .position(|w| w[0] == b'\r' && w[1] != b'\n')
        .or_else(|| src.ends_with('\r').then(|| src.len() - 1))
    else {
        return Ok(());
    };
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Err(SyntaxError {
        pos: Pos { line, col },
        message: "a carriage return not followed by a newline: save the file with Unix (LF) or Windows (CRLF) line endings".into(),
    })
}

/// The value and the positions, built event by event.
struct Builder {
    stack: Vec<Frame>,
    /// An anchor's value and its size in nodes (what each alias of it costs).
    anchors: HashMap<usize, (Value, usize)>,
    /// Per open collection: its anchor and the node count when it opened.
    anchor_of: Vec<(usize, usize)>,
    positions: Positions,
    root: Option<Value>,
    nodes: usize,
    alias_nodes: usize,
    documents: usize,
}

impl Builder {
    fn new(src_len: usize) -> Builder {
        Builder {
            stack: Vec::new(),
            anchors: HashMap::new(),
            anchor_of: Vec::new(),
            // About one node per 16 bytes of YAML: sized once, not rehashed as it grows.
            positions: Positions::with_capacity_and_hasher(src_len / 16, Default::default()),
            root: None,
            nodes: 0,
            alias_nodes: 0,
            documents: 0,
        }
    }

    fn event(&mut self, event: Event, pos: Pos) -> Result<(), SyntaxError> {
        let node_event = matches!(
            event,
            Event::Scalar(..) | Event::Alias(_) | Event::MappingStart(..) | Event::SequenceStart(..)
        );
        if node_event {
            self.count(pos)?;
        }
        match event {
            Event::DocumentStart(_) => self.documents += 1,
            Event::Scalar(text, style, anchor, tag) => {
                // A scalar in key position names the next value; it is not a value itself.
                if self.key(&text, pos)? {
                    return Ok(());
                }
                let forced_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !forced_str {
                    plain_scalar(&text)
                } else {
                    Value::String(text.to_string())
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, (value.clone(), 1));
                }
                self.positions.entry(child_path(&self.stack)).or_insert(pos);
                push_value(&mut self.stack, &mut self.root, value);
            }
            Event::Alias(id) => self.alias(id, pos)?,
            Event::MappingStart(anchor, _) => self.open(anchor, pos, true)?,
            Event::SequenceStart(anchor, _) => self.open(anchor, pos, false)?,
            Event::MappingEnd | Event::SequenceEnd => self.close(),
            _ => {}
        }
        Ok(())
    }

    /// One more node: refused in a second document, or past `MAX_NODES`.
    fn count(&mut self, pos: Pos) -> Result<(), SyntaxError> {
        if self.documents > 1 {
            return Err(SyntaxError {
                pos,
                message: "a second YAML document (after `---`); this file must hold exactly one".into(),
            });
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                pos,
                message: format!("more than {MAX_NODES} YAML nodes; this is not a configuration file"),
            });
        }
        Ok(())
    }

    /// When a map waits for a key, `k` is it (true); a duplicate is refused with both lines.
    fn key(&mut self, k: &str, pos: Pos) -> Result<bool, SyntaxError> {
        let Some(Frame::Map { map, key, path }) = self.stack.last_mut() else {
            return Ok(false);
        };
        if key.is_some() {
            return Ok(false);
        }
        let child = join(path, k);
        // A key's value is in the map by the time the next key comes, and its position in
        // `positions`: both lines of a duplicate are known.
        if map.contains_key(k) {
            return Err(duplicate(k, self.positions.get(&child).copied().unwrap_or(pos), pos));
        }
        self.positions.insert(child, pos);
        *key = Some(k.to_string());
        Ok(true)
    }

    fn alias(&mut self, id: usize, pos: Pos) -> Result<(), SyntaxError> {
        // Count before cloning, so a bomb is refused before it takes memory.
        let size = self.anchors.get(&id).map_or(1, |(_, n)| *n);
        self.alias_nodes += size;
        self.nodes += size;
        if self.alias_nodes > MAX_ALIAS_NODES || self.nodes > MAX_NODES {
            return Err(SyntaxError {
                pos,
                message: format!(
                    "aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?); write the values out or use fewer aliases"
                ),
            });
        }
        let value = self.anchors.get(&id).map(|(v, _)| v.clone()).unwrap_or(Value::Null);
        if !self.key(&scalar_key(&value), pos)? {
            push_value(&mut self.stack, &mut self.root, value);
        }
        Ok(())
    }

    fn open(&mut self, anchor: usize, pos: Pos, map: bool) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                pos,
                message: format!("collections nested more than {MAX_DEPTH} deep; this is not a configuration or a CRD"),
            });
        }
        let path = child_path(&self.stack);
        self.positions.entry(path.clone()).or_insert(pos);
        self.anchor_of.push((anchor, self.nodes));
        self.stack.push(if map {
            Frame::Map {
                map: Map::new(),
                path,
                key: None,
            }
        } else {
            Frame::Seq { items: Vec::new(), path }
        });
        Ok(())
    }

    fn close(&mut self) {
        let value = match self.stack.pop() {
            Some(Frame::Map { map, .. }) => Value::Object(map),
            Some(Frame::Seq { items, .. }) => Value::Array(items),
            None => return,
        };
        let (anchor, opened_at) = self.anchor_of.pop().unwrap_or((0, self.nodes));
        if anchor > 0 {
            self.anchors.insert(anchor, (value.clone(), self.nodes + 1 - opened_at));
        }
        push_value(&mut self.stack, &mut self.root, value);
    }
}

fn duplicate(key: &str, first: Pos, again: Pos) -> SyntaxError {
    SyntaxError {
        pos: again,
        message: format!(
            "duplicate key `{key}`: first at line {}, column {}, again at line {}, column {}; YAML would silently keep only the last, so remove one",
            first.line, first.col, again.line, again.col
        ),
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// The path the next value pushed onto `stack` will have.
fn child_path(stack: &[Frame]) -> String {
    match stack.last() {
        None => String::new(),
        Some(Frame::Map { path, key, .. }) => join(path, key.as_deref().unwrap_or("")),
        Some(Frame::Seq { items, path }) => format!("{path}[{}]", items.len()),
    }
}

fn push_value(stack: &mut [Frame], root: &mut Option<Value>, value: Value) {
    match stack.last_mut() {
        None => *root = Some(value),
        Some(Frame::Seq { items, .. }) => items.push(value),
        Some(Frame::Map { map, key, .. }) => match key.take() {
            Some(k) => {
                map.insert(k, value);
            }
            // A complex (mapping or sequence) key: keep its text form so nothing is lost.
            None => *key = Some(scalar_key(&value)),
        },
    }
}

fn scalar_key(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// YAML 1.2 core schema resolution of an unquoted scalar.
fn plain_scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let negative = text.starts_with('-');
    let radix = |digits: &str, r: u32| {
        i64::from_str_radix(digits, r)
            .ok()
            .map(|n| Value::from(if negative { -n } else { n }))
    };
    if let Some(h) = unsigned.strip_prefix("0x") {
        if let Some(v) = radix(h, 16) {
            return v;
        }
    }
    if let Some(o) = unsigned.strip_prefix("0o") {
        if let Some(v) = radix(o, 8) {
            return v;
        }
    }
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = text.parse::<i64>() {
            return Value::from(n);
        }
        if let Ok(n) = text.parse::<u64>() {
            return Value::from(n);
        }
    }
    let looks_float = unsigned.bytes().any(|b| b.is_ascii_digit())
        && unsigned
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && unsigned.bytes().filter(|b| *b == b'.').count() <= 1;
    if looks_float {
        if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_positions() {
        let doc =
            parse("a: 1\nb:\n  - cidr: 10.0.0.0/16\n    hostPrefix: 23\n  - cidr: '10.1.0.0/16'\nc: \"x\"\nd: ~\ne: 1.5\nf: 192.168.1.1\n")
                .unwrap();
        assert_eq!(doc.value["a"], 1);
        assert_eq!(doc.value["b"][0]["cidr"], "10.0.0.0/16");
        assert_eq!(doc.value["b"][0]["hostPrefix"], 23);
        assert_eq!(doc.value["d"], Value::Null);
        assert_eq!(doc.value["e"], 1.5);
        assert_eq!(doc.value["f"], "192.168.1.1");
        assert_eq!(doc.pos("b[0].hostPrefix"), Some(Pos { line: 4, col: 5 }));
        assert_eq!(doc.pos("b[1].cidr"), Some(Pos { line: 5, col: 5 }));
        assert_eq!(doc.pos("c"), Some(Pos { line: 6, col: 1 }));
        // Missing leaf: nearest ancestor.
        assert_eq!(doc.pos("b[1].hostPrefix"), Some(Pos { line: 5, col: 5 }));
    }

    #[test]
    fn anchors_and_quoted_numbers() {
        let doc = parse("x: &v {k: 1}\ny: *v\nz: '23'\n").unwrap();
        assert_eq!(doc.value["y"]["k"], 1);
        assert_eq!(doc.value["z"], "23");
    }

    #[test]
    fn duplicate_keys_name_both_lines() {
        let err = parse("a: 1\nb:\n  c: 1\n  c: 2\n").unwrap_err();
        assert_eq!(err.pos, Pos { line: 4, col: 3 });
        assert!(err.message.contains("duplicate key `c`: first at line 3"), "{err:?}");
        // The same key in different mappings is fine.
        parse("a: {c: 1}\nb: {c: 2}\n").unwrap();
        // A first value that is itself a mapping or a list.
        let err = parse("x: 0\na:\n  b: 1\nl: [1]\na: 2\n").unwrap_err();
        assert_eq!(err.pos, Pos { line: 5, col: 1 });
        assert!(err.message.contains("duplicate key `a`: first at line 2, column 1"), "{err:?}");
        let err = parse("l:\n  - 1\nl: 2\n").unwrap_err();
        assert!(
            err.message
                .contains("duplicate key `l`: first at line 1, column 1, again at line 3"),
            "{err:?}"
        );
        // A key given by an alias is a key like any other.
        let err = parse("k: &n name\nm:\n  name: 1\n  *n : 2\n").unwrap_err();
        assert!(err.message.contains("duplicate key `name`: first at line 3, column 3"), "{err:?}");
    }

    #[test]
    fn a_second_document_is_refused() {
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!(err.pos.line, 3, "{err:?}");
        assert!(err.message.contains("second YAML document"));
        // One explicit document is fine, with or without its end marker.
        parse("---\na: 1\n...\n").unwrap();
    }

    #[test]
    fn an_alias_bomb_is_refused_early() {
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 9].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        assert!(bomb.len() < 2000);
        let err = parse(&bomb).unwrap_err();
        assert!(err.message.contains("alias bomb"), "{err:?}");
        // A few modest aliases are fine.
        let doc = parse("base: &b {k: 1, l: [1, 2]}\nx: *b\ny: *b\n").unwrap();
        assert_eq!(doc.value["y"]["l"][1], 2);
    }

    /// A value nested deeper than serde_json takes (128) would fail later walks, or recurse
    /// past the stack: refused where the nesting passes the bound.
    #[test]
    fn nesting_past_the_bound_is_refused_where_it_passes() {
        // (saphyr-parser stops at 256 on its own; 129..256 deep got through.)
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let err = parse(&deep).unwrap_err();
        assert_eq!((err.pos.line, err.pos.col), (1, MAX_DEPTH + 1), "{err:?}");
        assert!(err.message.contains("nested more than 128 deep"), "{err:?}");
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        parse(&ok).unwrap();
    }

    #[test]
    fn a_lone_carriage_return_is_refused_where_it_stands_and_crlf_is_fine() {
        let err = parse("a: 1\nb: 2\rc: 3\n").unwrap_err();
        assert_eq!((err.pos.line, err.pos.col), (2, 5), "{err:?}");
        assert!(err.message.contains("carriage return"), "{err:?}");
        assert!(parse("a: 1\r").is_err());
        let ok = parse("a: 1\r\nb: [2, 3]\r\n").unwrap();
        assert_eq!(ok.value["b"][1], 3);
    }

    #[test]
    fn syntax_error_has_position() {
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.pos.line >= 1, "{err:?}");
    }
}
