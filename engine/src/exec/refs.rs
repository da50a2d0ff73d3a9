//! Data flow between calls: an argument may be (or contain) a reference `$LABEL.path.to.field$`
//! to an earlier call's output (NESTFUL / ComplexFuncBench notation). A whole-string reference
//! takes the referenced value with its type; a reference inside a longer string is spliced in as
//! text. Paths go through objects by key and arrays by index; a path that meets an array without an
//! index takes its first element (`$var1.coordinates.latitude$` on a list of places).
//!
//! [`Reference`] is the one type for such a reference: the planner writes its arguments with it,
//! the learned model and the scorers read recorded arguments with it, and the executor resolves it.

use serde_json::{Map, Value};
use std::borrow::Borrow;
use std::collections::HashMap;

/// A reference `$label.path$` to a field of an earlier call's output: the call's label and the
/// dotted path into its output (empty: the whole output). Between the dollars there is no space,
/// no dollar and no empty segment, so `$5 and $10` holds none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    pub label: String,
    /// Dotted keys and indexes (`data.hotels.1.hotel_id`); empty for the whole output.
    pub path: String,
}

impl Reference {
    pub fn new(label: impl Into<String>, path: impl Into<String>) -> Self {
        Reference { label: label.into(), path: path.into() }
    }

    /// The text between the dollars (`var2.data.id`), if it is a reference.
    fn parse(inner: &str) -> Option<Self> {
        if inner.is_empty() || inner.contains([' ', '$']) || inner.split('.').any(str::is_empty) {
            return None;
        }
        let (label, path) = inner.split_once('.').unwrap_or((inner, ""));
        Some(Reference::new(label, path))
    }

    /// `s` is exactly one reference (`"$var1.id$"`, not `"near $var1.city$"`).
    pub fn whole(s: &str) -> Option<Self> {
        Self::parse(s.strip_prefix('$')?.strip_suffix('$')?)
    }

    /// Every reference a string holds, in order (`$a.b$ and $c$` → `a.b`, `c`).
    pub fn all_in(s: &str) -> Vec<Self> {
        let mut out = Vec::new();
        let mut rest = s;
        while let Some(start) = rest.find('$') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('$') else { break };
            match Self::parse(&after[..end]) {
                Some(r) => {
                    out.push(r);
                    rest = &after[end + 1..];
                }
                None => rest = &after[end..],
            }
        }
        out
    }

    /// The path's segments (none for the whole output).
    pub fn segments(&self) -> Vec<&str> {
        if self.path.is_empty() {
            Vec::new()
        } else {
            self.path.split('.').collect()
        }
    }

    /// The same reference `path` deeper (`$var1.data$` + `0.id` → `$var1.data.0.id$`; itself for
    /// an empty path).
    pub fn join(&self, path: &str) -> Self {
        let path = match (self.path.is_empty(), path.is_empty()) {
            (_, true) => self.path.clone(),
            (true, false) => path.to_string(),
            (false, false) => format!("{}.{path}", self.path),
        };
        Reference::new(self.label.clone(), path)
    }

    /// The referenced value in `outputs` (call label → output).
    pub fn resolve<V: Borrow<Value>>(&self, outputs: &HashMap<String, V>) -> Result<Value, String> {
        let label = &self.label;
        let out = outputs
            .get(label)
            .map(Borrow::borrow)
            .ok_or_else(|| format!("names `{label}`, which no earlier call produced"))?;
        lookup(out, &self.segments())
            .cloned()
            .ok_or_else(|| format!("has no value at `{}` in the output of `{label}`", self.path))
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "${}$", self.label)
        } else {
            write!(f, "${}.{}$", self.label, self.path)
        }
    }
}

impl From<Reference> for Value {
    fn from(r: Reference) -> Value {
        Value::String(r.to_string())
    }
}

/// Whether `s` holds a reference (`"$5 and $10"` holds none).
pub fn holds_reference(s: &str) -> bool {
    !Reference::all_in(s).is_empty()
}

/// The labels a value references, in order, through arrays and objects (`$var1.x$` → `var1`).
pub fn labels_in(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => Reference::all_in(s).into_iter().map(|r| r.label).collect(),
        Value::Array(a) => a.iter().flat_map(labels_in).collect(),
        Value::Object(m) => m.values().flat_map(labels_in).collect(),
        _ => Vec::new(),
    }
}

/// Why a reference could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    pub argument: String,
    /// The reference as written between its dollars.
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

fn resolve_value<V: Borrow<Value>>(arg: &str, v: &Value, outputs: &HashMap<String, V>) -> Result<Value, RefError> {
    let fail = |r: &Reference, reason: String| {
        let text = r.to_string();
        RefError { argument: arg.to_string(), reference: text[1..text.len() - 1].to_string(), reason }
    };
    match v {
        Value::String(s) => {
            if let Some(r) = Reference::whole(s) {
                return r.resolve(outputs).map_err(|e| fail(&r, e));
            }
            let all = Reference::all_in(s);
            if all.is_empty() {
                return Ok(v.clone());
            }
            let mut text = s.clone();
            for r in all {
                let value = r.resolve(outputs).map_err(|e| fail(&r, e))?;
                let piece = match value {
                    Value::String(x) => x,
                    other => other.to_string(),
                };
                text = text.replacen(&r.to_string(), &piece, 1);
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

    #[test]
    fn one_reference_type_reads_and_writes_the_notation() {
        let r = Reference::whole("$var2.data.hotels.1.hotel_id$").unwrap();
        assert_eq!((r.label.as_str(), r.path.as_str()), ("var2", "data.hotels.1.hotel_id"));
        assert_eq!(r.segments(), vec!["data", "hotels", "1", "hotel_id"]);
        assert_eq!(r.to_string(), "$var2.data.hotels.1.hotel_id$", "written back as read");
        assert_eq!(Reference::whole("$var1$").unwrap(), Reference::new("var1", ""));
        assert_eq!(Reference::new("var1", "").to_string(), "$var1$");
        assert_eq!(Reference::new("var1", "data").join("0").to_string(), "$var1.data.0$");
        assert_eq!(Reference::new("var1", "").join("a.b").join("").to_string(), "$var1.a.b$");
        for not in ["near $var1.city$", "$5 and $10", "$$", "$a..b$", "$a.$", "$ a$", "$"] {
            assert_eq!(Reference::whole(not), None, "{not}");
        }
        let all = Reference::all_in("from $var1.city$ to $var2$, $5 and $10");
        assert_eq!(all, vec![Reference::new("var1", "city"), Reference::new("var2", "")]);
        assert!(holds_reference("near $var1.city$") && !holds_reference("US$ 5 or $10"));
        assert_eq!(labels_in(&json!({"a": ["$x.y$", {"b": "$z$ and $5"}], "c": 3})), vec!["x", "z"]);
        let v: Value = Reference::new("var3", "id").into();
        assert_eq!(v, json!("$var3.id$"));
    }
}
