//! Data flow between calls: an argument may be (or contain) a reference `$LABEL.path.to.field$`
//! to an earlier call's output (NESTFUL / ComplexFuncBench notation). A whole-string reference
//! takes the referenced value with its type; a reference inside a longer string is spliced in as
//! text. Paths go through objects by key and arrays by index; a path that meets an array without an
//! index takes its first element (`$var1.coordinates.latitude$` on a list of places).

use serde_json::{Map, Value};
use std::borrow::Borrow;
use std::collections::HashMap;

/// Why a reference could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    pub argument: String,
    pub reference: String,
    pub reason: String,
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "argument `{}`: reference ${}$ {}", self.argument, self.reference, self.reason)
    }
}

/// Follow `path` (dot-separated keys / indexes) into `v`.
pub fn lookup<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(v);
    };
    match v {
        Value::Object(m) => lookup(m.get(*first)?, rest),
        Value::Array(items) => match first.parse::<usize>() {
            Ok(i) => lookup(items.get(i)?, rest),
            Err(_) => lookup(items.first()?, path),
        },
        _ => None,
    }
}

fn resolve_one<V: Borrow<Value>>(reference: &str, outputs: &HashMap<String, V>) -> Result<Value, String> {
    let mut parts = reference.split('.');
    let label = parts.next().unwrap_or_default();
    let path: Vec<&str> = parts.collect();
    let out = outputs
        .get(label)
        .map(Borrow::borrow)
        .ok_or_else(|| format!("names `{label}`, which no earlier call produced"))?;
    lookup(out, &path)
        .cloned()
        .ok_or_else(|| format!("has no value at `{}` in the output of `{label}`", path.join(".")))
}

fn is_reference(s: &str) -> bool {
    s.len() > 2
        && s.starts_with('$')
        && s.ends_with('$')
        && !s[1..s.len() - 1].contains('$')
        && !s[1..s.len() - 1].contains(' ')
}

/// All references a string holds (`$a.b$ and $c$` → [`a.b`, `c`]).
pub fn references(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find('$') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('$') else { break };
        let inner = &after[..end];
        if !inner.is_empty() && !inner.contains(' ') {
            out.push(inner);
            rest = &after[end + 1..];
        } else {
            rest = &after[end..];
        }
    }
    out
}

fn resolve_value<V: Borrow<Value>>(arg: &str, v: &Value, outputs: &HashMap<String, V>) -> Result<Value, RefError> {
    let fail = |reference: &str, reason: String| RefError {
        argument: arg.to_string(),
        reference: reference.to_string(),
        reason,
    };
    match v {
        Value::String(s) if is_reference(s) => {
            let r = &s[1..s.len() - 1];
            resolve_one(r, outputs).map_err(|e| fail(r, e))
        }
        Value::String(s) if !references(s).is_empty() => {
            let mut text = s.clone();
            for r in references(s) {
                let value = resolve_one(r, outputs).map_err(|e| fail(r, e))?;
                let piece = match value {
                    Value::String(x) => x,
                    other => other.to_string(),
                };
                text = text.replacen(&format!("${r}$"), &piece, 1);
            }
            Ok(Value::String(text))
        }
        Value::Array(items) => {
            items.iter().map(|i| resolve_value(arg, i, outputs)).collect::<Result<Vec<_>, _>>().map(Value::Array)
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), resolve_value(arg, x, outputs)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

/// Resolve every reference in `args` against the outputs of earlier calls (by label).
pub fn resolve<V: Borrow<Value>>(
    args: &Map<String, Value>,
    outputs: &HashMap<String, V>,
) -> Result<Map<String, Value>, RefError> {
    let mut out = Map::new();
    for (k, v) in args {
        out.insert(k.clone(), resolve_value(k, v, outputs)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_and_embedded_references() {
        let outputs: HashMap<String, Value> = [
            (
                "var1".to_string(),
                json!([{"city": "San Diego", "coordinates": {"latitude": 32.87, "longitude": -117.2}}]),
            ),
            ("var2".to_string(), json!({"data": {"hotels": [{"hotel_id": 7}, {"hotel_id": 9}]}})),
        ]
        .into_iter()
        .collect();
        let args = json!({
            "lat": "$var1.coordinates.latitude$",
            "hotel": "$var2.data.hotels.1.hotel_id$",
            "label": "near $var1.city$",
            "plain": "no refs here",
            "price": "$5 and $10"
        });
        let r = resolve(args.as_object().unwrap(), &outputs).unwrap();
        assert_eq!(r["lat"], json!(32.87));
        assert_eq!(r["hotel"], json!(9));
        assert_eq!(r["label"], json!("near San Diego"));
        assert_eq!(r["plain"], json!("no refs here"));
        assert_eq!(r["price"], json!("$5 and $10"), "dollar amounts are not references");

        let e = resolve(json!({"x": "$var3.id$"}).as_object().unwrap(), &outputs).unwrap_err();
        assert!(e.to_string().contains("var3") && e.to_string().contains("`x`"), "{e}");
        let e = resolve(json!({"x": "$var1.nope$"}).as_object().unwrap(), &outputs).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
