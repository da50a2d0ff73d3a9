//! What the planner sees of a response: long responses compressed to the fields a next call
//! is likely to need.

use serde_json::{Map, Value};
use std::collections::HashSet;

/// The planner's view of a response: at most `limit` characters. Long responses keep the keys in
/// `keep` (words of the request, parameter names of likely next calls) and id-like fields first,
/// lists cut to their first items, then the text is truncated.
pub fn compress(response: &Value, keep: &HashSet<String>, limit: usize) -> String {
    // Serialize at most limit·4 + 1 bytes to learn whether it fits (large responses stop early).
    struct Capped(Vec<u8>, usize);
    impl std::io::Write for Capped {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + b.len() > self.1 {
                return Err(std::io::Error::other("over the limit"));
            }
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Capped(Vec::new(), limit.saturating_mul(4).saturating_add(1));
    if serde_json::to_writer(&mut w, response).is_ok() {
        let full = String::from_utf8_lossy(&w.0).into_owned();
        if full.chars().count() <= limit {
            return full;
        }
    }
    fn wanted(key: &str, keep: &HashSet<String>) -> bool {
        let k = key.to_ascii_lowercase();
        k == "id"
            || k.ends_with("_id")
            || k.ends_with("id") && k.len() <= 12
            || k == "name"
            || k == "title"
            || keep.contains(&k)
    }
    fn prune(v: &Value, keep: &HashSet<String>, depth: usize) -> Value {
        match v {
            Value::Array(items) => Value::Array(items.iter().take(3).map(|i| prune(i, keep, depth + 1)).collect()),
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    let is_container = x.is_object() || x.is_array();
                    if wanted(k, keep) || (is_container && depth < 4) {
                        let p = prune(x, keep, depth + 1);
                        let empty = matches!(&p, Value::Object(o) if o.is_empty())
                            || matches!(&p, Value::Array(a) if a.is_empty());
                        if !empty || wanted(k, keep) {
                            out.insert(k.clone(), p);
                        }
                    }
                }
                Value::Object(out)
            }
            other => match other {
                Value::String(s) if s.chars().count() > 200 => Value::String(s.chars().take(200).collect()),
                _ => other.clone(),
            },
        }
    }
    let pruned = prune(response, keep, 0).to_string();
    let text = if pruned.len() > 2 { pruned } else { response.to_string() };
    text.chars().take(limit).collect()
}

/// The words of a text and parameter names, lower-cased: the `keep` set of [`compress`].
pub fn keep_set<'a>(text: &str, params: impl IntoIterator<Item = &'a str>) -> HashSet<String> {
    let mut s: HashSet<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| w.len() > 2)
        .map(|w| w.to_ascii_lowercase())
        .collect();
    s.extend(params.into_iter().map(|p| p.to_ascii_lowercase()));
    s
}
