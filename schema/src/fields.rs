//! Field paths of example responses and JSON schemas (what an API outputs, as dotted paths).

use serde_json::Value;
use std::collections::BTreeSet;

/// A field's or parameter's comparable form: its last path segment, its letters and digits
/// lower-cased (`coordinates.pick_up-Latitude` → `pickuplatitude`), without ToolBench's `is_`
/// on a parameter named after a keyword (`is_id` → `id`, `is_from` → `from`).
/// The one normal form of a name (a parameter's, a field's, a label's): its letters and digits, in
/// lower case (`Pick-up_Time`, `pickUpTime` → `pickuptime`).
pub fn name_key(name: &str) -> String {
    name.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

pub fn field_key(name: &str) -> String {
    let leaf = name.rsplit('.').next().unwrap_or(name);
    let key = name_key(leaf);
    match key.strip_prefix("is") {
        Some(rest) if ["from", "class", "return", "false", "true", "id", "and"].contains(&rest) => rest.to_string(),
        _ => key,
    }
}

/// How an output field fills a parameter by name ([`link`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// The same key.
    Exact,
    /// One key ends the other.
    Part,
}

/// Whether a field keyed `field` fills a parameter keyed `param` (both [`field_key`]s), and how.
/// The one rule of "this output feeds that parameter": the graph's FEEDS edges keep its exact
/// links, Reverse Chain's providers and the argument filler take any (exact first). A part: the
/// field's key ends the parameter's, 3+ characters (`pickuplatitude` ← `coordinates.latitude`);
/// `id` for a parameter ending in `id` (`hotelid` ← `id`); or the parameter's key, 4+
/// characters, ends the field's (`name` ← `hotel_name`).
pub fn link(field: &str, param: &str) -> Option<Link> {
    if param.is_empty() || field.is_empty() {
        return None;
    }
    if field == param {
        return Some(Link::Exact);
    }
    let part = (field == "id" && param.len() > 2 && param.ends_with("id"))
        || (field.len() >= 3 && param.ends_with(field))
        || (param.len() >= 4 && field.ends_with(param));
    part.then_some(Link::Part)
}

/// The first character of `s` that shows nothing or reorders what is shown — control characters,
/// zero-width characters and joiners, bidirectional embeddings, overrides and isolates, the byte
/// order mark — if any. Names people read (tools, APIs, users) must not hold one: `admin` and
/// `adm\u{200B}in` look the same.
pub fn hidden_char(s: &str) -> Option<char> {
    s.chars().find(|c| {
        c.is_control()
            || matches!(*c as u32, 0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFB | 0xE0000..=0xE0FFF)
    })
}

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
        "type",
        "title",
        "description",
        "enum",
        "required",
        "properties",
        "items",
        "format",
        "default",
        "example",
        "examples",
        "nullable",
        "additionalProperties",
    ];
    m.get("type").and_then(Value::as_str).is_some_and(|t| TYPES.contains(&t))
        && m.keys().all(|k| KEYWORDS.contains(&k.as_str()))
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
        Some(Value::Array(ts)) => {
            ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("string").to_string()
        }
        _ => "string".into(),
    }
}

#[cfg(test)]
mod hidden_tests {
    use super::hidden_char;

    #[test]
    fn invisible_and_reordering_characters_are_found() {
        for s in
            ["adm\u{200B}in", "\u{202E}nimda", "tool\u{2066}x", "a\u{FEFF}", "x\u{00AD}y", "tab\tname", "zw\u{200D}j"]
        {
            assert!(hidden_char(s).is_some(), "{s:?}");
        }
        for s in ["current_weather", "Booking.com — hotels", "Café Ñandú", "東京 weather"] {
            assert_eq!(hidden_char(s), None, "{s:?}");
        }
    }
}

#[cfg(test)]
mod link_tests {
    use super::*;

    #[test]
    fn one_rule_links_an_output_field_to_a_parameter() {
        let l = |f: &str, p: &str| link(&field_key(f), &field_key(p));
        assert_eq!(field_key("coordinates.pick_up-Latitude"), "pickuplatitude");
        assert_eq!(field_key("is_id"), "id", "ToolBench's keyword parameters");
        assert_eq!(field_key("island"), "island");
        assert_eq!(l("data.dest_id", "dest_id"), Some(Link::Exact));
        assert_eq!(l("coordinates.latitude", "pick_up_latitude"), Some(Link::Part));
        assert_eq!(l("data.id", "hotel_id"), Some(Link::Part));
        assert_eq!(l("hotel_name", "name"), Some(Link::Part));
        assert_eq!(l("lat", "latitude"), None, "a field's key ends the parameter's, not begins it");
        assert_eq!(l("to", "photo"), None, "two characters are too few to be a part");
        assert_eq!(l("id", "id"), Some(Link::Exact));
        assert_eq!(l("", "id"), None);
    }
}
