//! The CRDs' CEL rules (`x-kubernetes-validations`), evaluated with the cel crate plus the
//! Kubernetes library functions the release's config CRDs use (`isIP`, `ip`, `family`, `isCIDR`,
//! `cidr`, `prefixLength`, `isURL`; `split` and friends are the strings extension). A rule this
//! cannot evaluate (an unknown function, a transition rule on `oldSelf`) is listed as unchecked
//! with the reason, never counted as passed.

use super::{Problem, Report, Unchecked};
use cel::extractors::This;
use cel::{Context, ExecutionError};
use serde_json::Value;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

fn env() -> Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = cel::Env::stdlib();
        // Registering a fresh stdlib's extension cannot conflict.
        cel::extensions::strings(&mut env).expect("the strings extension registers");
        Arc::new(env)
    })
    .clone()
}

fn fail(function: &str, what: &str, s: &str) -> ExecutionError {
    ExecutionError::function_error(function, format!("{what} `{s}`"))
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

/// A context with the Kubernetes functions and `self`. An IP or CIDR value is its string.
fn context(value: &Value) -> Context<'static, 'static> {
    let mut ctx = Context::with_env(env());
    let ok = [
        ctx.add_function("isIP", |s: Arc<String>| s.parse::<IpAddr>().is_ok()),
        ctx.add_function("isCIDR", |s: Arc<String>| parse_cidr(&s).is_some()),
        ctx.add_function("isURL", |s: Arc<String>| is_url(&s)),
        // `ip(string)` parses; `cidr.ip()` is the CIDR's address.
        ctx.add_function("ip", |This(s): This<Arc<String>>| -> Result<Arc<String>, ExecutionError> {
            if let Some((ip, _)) = parse_cidr(&s) {
                return Ok(Arc::new(ip.to_string()));
            }
            s.parse::<IpAddr>()
                .map(|ip| Arc::new(ip.to_string()))
                .map_err(|_| fail("ip", "not an IP address:", &s))
        }),
        ctx.add_function("cidr", |s: Arc<String>| -> Result<Arc<String>, ExecutionError> {
            parse_cidr(&s).map(|_| s.clone()).ok_or_else(|| fail("cidr", "not a CIDR:", &s))
        }),
        ctx.add_function("family", |This(s): This<Arc<String>>| -> Result<i64, ExecutionError> {
            match s.parse::<IpAddr>() {
                Ok(IpAddr::V4(_)) => Ok(4),
                Ok(IpAddr::V6(_)) => Ok(6),
                Err(_) => Err(fail("family", "not an IP address:", &s)),
            }
        }),
        ctx.add_function("prefixLength", |This(s): This<Arc<String>>| -> Result<i64, ExecutionError> {
            parse_cidr(&s)
                .map(|(_, l)| l as i64)
                .ok_or_else(|| fail("prefixLength", "not a CIDR:", &s))
        }),
    ];
    for r in ok {
        r.expect("no stdlib function has these names");
    }
    ctx.add_variable_from_value("self", to_cel(value));
    ctx
}

/// Kubernetes' `isURL`: an absolute URL with a scheme (Go's url.Parse accepts it).
fn is_url(s: &str) -> bool {
    match s.split_once("://") {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !s.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, cel::Value> = m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

enum Outcome {
    Pass,
    Fail(String),
    Unchecked(String),
}

fn eval(rule: &str, value: &Value) -> Outcome {
    if rule.contains("oldSelf") {
        return Outcome::Unchecked("a transition rule (oldSelf): it runs only on updates".into());
    }
    let program = match env().compile(rule) {
        Ok(p) => p,
        Err(e) => return Outcome::Unchecked(format!("does not parse here: {e}")),
    };
    let cost = super::cost::estimate(program.expression(), super::cost::largest(value));
    if cost > super::cost::PER_CALL_LIMIT {
        return Outcome::Unchecked(format!(
            "not evaluated: over budget (its cost on this object may reach {cost}, past the API server's per-call limit of {}; the API server would stop it too)",
            super::cost::PER_CALL_LIMIT
        ));
    }
    match program.execute(&context(value)) {
        Ok(cel::Value::Bool(true)) => Outcome::Pass,
        Ok(cel::Value::Bool(false)) => Outcome::Fail("the rule is false".into()),
        Ok(other) => Outcome::Unchecked(format!("returned {other:?}, not a bool")),
        // The API server reports a runtime error as a failed validation.
        Err(e @ (ExecutionError::NoSuchKey(_) | ExecutionError::FunctionError { .. })) => Outcome::Fail(e.to_string()),
        Err(e) => Outcome::Unchecked(format!("cannot be evaluated here: {e}")),
    }
}

/// Evaluate every rule whose node exists in `v`, depth first.
pub fn walk(s: &Value, v: &Value, path: &str, object: &str, report: &mut Report) {
    super::visit(s, v, path, false, &mut |s, v, path| rules(s, v, path, object, report));
}

/// The rules of one schema node, on its value.
fn rules(s: &Value, v: &Value, path: &str, object: &str, report: &mut Report) {
    for r in s.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
        let Some(rule) = r.get("rule").and_then(Value::as_str) else {
            continue;
        };
        match eval(rule, v) {
            Outcome::Pass => report.rules_checked += 1,
            Outcome::Fail(why) => {
                report.rules_checked += 1;
                let msg = r.get("message").and_then(Value::as_str).unwrap_or(rule);
                report.problems.push(Problem {
                    object: object.to_string(),
                    path: path.to_string(),
                    message: format!("CEL rule `{rule}` fails ({why}): {msg}"),
                });
            }
            Outcome::Unchecked(why) => report.rules_unchecked.push(Unchecked {
                object: object.to_string(),
                path: path.to_string(),
                rule: rule.to_string(),
                why,
            }),
        }
    }
}
