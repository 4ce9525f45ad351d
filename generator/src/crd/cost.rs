//! A CEL rule's cost, bounded before it runs. The API server stops a rule whose cost passes its
//! per-call limit (1,000,000, `celconfig.PerCallLimit`); the cel crate counts nothing, so a rule
//! of nested comprehensions over literals would run for minutes and take gigabytes here. This
//! walks the rule's AST once with an upper bound on the size of every value (the object's own
//! sizes for `self`, a literal's length, what a comprehension or a concatenation can build) and
//! bounds the work: a rule over the limit is "not evaluated: over budget", never a pass.

use cel::common::ast::{operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;
use std::collections::HashMap;

/// The API server's limit on one evaluation of one rule.
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// An upper bound on a value's length (elements, entries, characters or bytes) and on that of
/// anything nested in it, at any depth.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Shape {
    size: u64,
    inner: u64,
}

impl Shape {
    fn any(n: u64) -> Shape {
        Shape { size: n, inner: n }
    }
    /// The bound on any part of this value, itself included.
    fn deep(self) -> u64 {
        self.size.max(self.inner)
    }
}

/// The most a value's collections and strings hold: the bound for `self` and whatever is taken
/// from it.
pub fn largest(v: &Value) -> u64 {
    let mut max = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        let n = match v {
            Value::String(s) => s.len(),
            Value::Array(a) => {
                stack.extend(a.iter());
                a.len()
            }
            Value::Object(m) => {
                stack.extend(m.values());
                m.len().max(m.keys().map(String::len).max().unwrap_or(0))
            }
            _ => 0,
        };
        max = max.max(n as u64);
    }
    max
}

/// The bounded cost of evaluating `expr` with `self` bound to a value whose collections and
/// strings hold at most `self_size`. Saturates rather than overflows.
pub fn estimate(expr: &IdedExpr, self_size: u64) -> u64 {
    let mut scope = HashMap::new();
    scope.insert("self".to_string(), Shape::any(self_size));
    walk(expr, &mut scope, self_size).0
}

/// (cost, shape) of one node. `unknown` bounds what comes from no literal: the object's sizes.
fn walk(e: &IdedExpr, scope: &mut HashMap<String, Shape>, unknown: u64) -> (u64, Shape) {
    match &e.expr {
        Expr::Unspecified => (1, Shape::default()),
        Expr::Literal(l) => (
            1,
            Shape {
                size: match l {
                    LiteralValue::String(s) => s.inner().len() as u64,
                    LiteralValue::Bytes(b) => b.inner().len() as u64,
                    _ => 0,
                },
                inner: 0,
            },
        ),
        Expr::Ident(name) => (1, scope.get(name).copied().unwrap_or(Shape::any(unknown))),
        Expr::Select(s) => {
            let (c, shape) = walk(&s.operand, scope, unknown);
            (c.saturating_add(1), Shape::any(shape.inner))
        }
        Expr::List(l) => collection(l.elements.iter(), scope, unknown),
        Expr::Map(m) => collection(entries(&m.entries), scope, unknown),
        Expr::Struct(s) => collection(entries(&s.entries), scope, unknown),
        Expr::Call(call) => self::call(call, scope, unknown),
        Expr::Comprehension(c) => comprehension(c, scope, unknown),
    }
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> impl Iterator<Item = &IdedExpr> {
    entries.iter().flat_map(|e| match &e.expr {
        EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
        EntryExpr::StructField(f) => vec![&f.value],
    })
}

/// A literal list or map: its length, and the deepest of its parts.
fn collection<'a>(parts: impl Iterator<Item = &'a IdedExpr>, scope: &mut HashMap<String, Shape>, unknown: u64) -> (u64, Shape) {
    let (mut cost, mut shape) = (1u64, Shape::default());
    for p in parts {
        let (c, s) = walk(p, scope, unknown);
        cost = cost.saturating_add(c);
        shape.size += 1;
        shape.inner = shape.inner.max(s.deep());
    }
    (cost, shape)
}

/// String functions whose work and result are linear in their inputs.
const LINEAR: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "lowerAscii",
    "upperAscii",
    "trim",
    "substring",
    "indexOf",
    "lastIndexOf",
    "split",
    "join",
    "charAt",
    "quote",
    "string",
    "bytes",
    "int",
    "uint",
    "double",
    "isIP",
    "isCIDR",
    "isURL",
    "ip",
    "cidr",
    "family",
    "prefixLength",
    "has",
    "type",
    "dyn",
];

fn call(c: &CallExpr, scope: &mut HashMap<String, Shape>, unknown: u64) -> (u64, Shape) {
    let mut cost = 1u64;
    let mut shapes = Vec::new();
    for a in c.target.iter().map(|t| &**t).chain(c.args.iter()) {
        let (ac, s) = walk(a, scope, unknown);
        cost = cost.saturating_add(ac);
        shapes.push(s);
    }
    let sum = |f: fn(&Shape) -> u64| shapes.iter().map(f).fold(0u64, u64::saturating_add);
    let max_inner = shapes.iter().map(|s| s.inner).max().unwrap_or(0);
    let shape = match c.func_name.as_str() {
        // Concatenation copies both sides.
        operators::ADD => {
            let size = sum(|s| s.size);
            cost = cost.saturating_add(size);
            Shape { size, inner: max_inner }
        }
        operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT => Shape::any(shapes.first().map_or(unknown, |s| s.inner)),
        operators::CONDITIONAL => Shape {
            size: shapes.iter().skip(1).map(|s| s.size).max().unwrap_or(0),
            inner: max_inner,
        },
        // Membership and equality may walk the whole of both sides.
        operators::IN | operators::EQUALS | operators::NOT_EQUALS => {
            cost = cost.saturating_add(sum(|s| s.size.saturating_mul(s.inner.max(1))));
            Shape::default()
        }
        f if LINEAR.contains(&f) => {
            // `join` of n strings of at most m: n*m; the others at most their inputs.
            let size = sum(|s| s.size.saturating_mul(s.inner.max(1)));
            cost = cost.saturating_add(size);
            Shape { size, inner: 0 }
        }
        f if f.starts_with('_') || f.starts_with('!') || f.starts_with('-') || f.starts_with('@') => Shape::default(),
        // Anything else (`replace`, a format, an unknown function): its result may be the product
        // of its inputs.
        _ => {
            let size = shapes.iter().map(|s| s.deep().max(1)).fold(1u64, u64::saturating_mul);
            cost = cost.saturating_add(size);
            Shape::any(size)
        }
    };
    (cost, shape)
}

/// `range.all/exists/map/filter(x, ...)`: the body once per element; the accumulator grows by
/// what one step adds, at most once per element.
fn comprehension(c: &ComprehensionExpr, scope: &mut HashMap<String, Shape>, unknown: u64) -> (u64, Shape) {
    let (range_cost, range) = walk(&c.iter_range, scope, unknown);
    let (init_cost, init) = walk(&c.accu_init, scope, unknown);
    let saved: Vec<(String, Option<Shape>)> = [&c.accu_var, &c.iter_var]
        .into_iter()
        .chain(c.iter_var2.as_ref())
        .map(|v| (v.clone(), scope.get(v).copied()))
        .collect();
    scope.insert(c.iter_var.clone(), Shape::any(range.inner));
    if let Some(v) = &c.iter_var2 {
        scope.insert(v.clone(), Shape::any(range.inner));
    }
    // One step from the initial accumulator says how much a step adds.
    scope.insert(c.accu_var.clone(), init);
    let (_, first) = walk(&c.loop_step, scope, unknown);
    let grows = first.size.saturating_sub(init.size);
    let accu = Shape {
        size: init.size.saturating_add(range.size.saturating_mul(grows)),
        inner: init.inner.max(first.inner),
    };
    // Every step is costed at the largest the accumulator gets.
    scope.insert(c.accu_var.clone(), accu);
    let (cond_cost, _) = walk(&c.loop_cond, scope, unknown);
    let (step_cost, _) = walk(&c.loop_step, scope, unknown);
    let (result_cost, result) = walk(&c.result, scope, unknown);
    for (name, old) in saved {
        match old {
            Some(s) => scope.insert(name, s),
            None => scope.remove(&name),
        };
    }
    let per_element = cond_cost.saturating_add(step_cost);
    let cost = range_cost
        .saturating_add(init_cost)
        .saturating_add(range.size.saturating_mul(per_element))
        .saturating_add(result_cost);
    (cost, result)
}
