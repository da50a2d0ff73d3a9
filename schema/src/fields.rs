//! Field paths of example responses and JSON schemas (what an API outputs, as dotted paths).

use serde_json::Value;
use std::collections::BTreeSet;

/// Field names an example response or output schema shows, as dotted paths (`coordinates.latitude`).
pub fn output_fields(v: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    collect_fields(v, "", &mut out, 0);
    out.into_iter().collect()
}

fn collect_fields(v: &Value, prefix: &str, out: &mut BTreeSet<String>, depth: usize) {
    if depth > 6 || out.len() > 256 {
        return;
    }
    match v {
        Value::Object(m) => {
            // A JSON-schema node: walk its properties / items rather than its keywords.
            if is_schema_node(m) {
                if let Some(props) = m.get("properties").and_then(Value::as_object) {
                    for (k, sub) in props {
                        let path = join(prefix, k);
                        out.insert(path.clone());
                        collect_fields(sub, &path, out, depth + 1);
                    }
                }
                if let Some(items) = m.get("items").filter(|i| i.is_object()) {
                    collect_fields(items, prefix, out, depth + 1);
                }
                return;
            }
            for (k, sub) in m {
                if k == "_list_length" {
                    continue;
                }
                let path = join(prefix, k);
                out.insert(path.clone());
                collect_fields(sub, &path, out, depth + 1);
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                collect_fields(first, prefix, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn is_schema_node(m: &serde_json::Map<String, Value>) -> bool {
    const TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array", "null"];
    const KEYWORDS: &[&str] = &[
        "type", "title", "description", "enum", "required", "properties", "items", "format", "default",
        "example", "examples", "nullable", "additionalProperties",
    ];
    m.get("type").and_then(Value::as_str).is_some_and(|t| TYPES.contains(&t)) && m.keys().all(|k| KEYWORDS.contains(&k.as_str()))
}

fn join(prefix: &str, k: &str) -> String {
    if prefix.is_empty() {
        k.to_string()
    } else {
        format!("{prefix}.{k}")
    }
}

/// The parameter type a JSON Schema declares (`["number", "null"]` → `number`; enums and schemas
/// without a type are strings).
pub fn schema_type(s: &Value) -> String {
    match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("string").to_string(),
        _ => "string".into(),
    }
}
