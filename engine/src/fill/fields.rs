//! A response's scalar fields by name ([`FieldIndex`]): where argument filling looks up what an
//! earlier call returned.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use toolgraph_schema::fields::{field_key, link};

/// The scalar fields of a response in breadth-first order, normalized name → path; arrays are
/// entered at their first element and the index left out of the path (references take the first
/// element there). Built once per step; argument filling looks fields up here.
#[derive(Debug, Default)]
pub struct FieldIndex {
    entries: Vec<(String, String)>,
    first: HashMap<String, usize>,
    /// Answers already given, by parameter name (a run asks for the same parameters often).
    memo: std::sync::Mutex<HashMap<String, Option<(String, bool)>>>,
}

impl PartialEq for FieldIndex {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl FieldIndex {
    pub fn build(v: &Value) -> Self {
        let mut idx = FieldIndex::default();
        let mut queue: VecDeque<(&Value, String, usize)> = VecDeque::from([(v, String::new(), 0)]);
        let mut seen = 0;
        while let Some((node, path, depth)) = queue.pop_front() {
            seen += 1;
            if seen > 400 || depth > 6 {
                break;
            }
            match node {
                Value::Object(m) => {
                    for (k, sub) in m {
                        let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                        if sub.is_object() || sub.is_array() {
                            queue.push_back((sub, p, depth + 1));
                        } else if !sub.is_null() {
                            let nk = field_key(k);
                            idx.first.entry(nk.clone()).or_insert(idx.entries.len());
                            idx.entries.push((nk, p));
                        }
                    }
                }
                Value::Array(items) => {
                    if let Some(first) = items.first() {
                        queue.push_back((first, path, depth + 1));
                    }
                }
                _ => {}
            }
        }
        idx
    }

    /// A field for `param`: `(path, exact)`: the first with the same key, else the first the
    /// schema's rule links to it ([`link`]: `pick_up_latitude` ← `latitude`, `fromId` ← `id`,
    /// `name` ← `hotel_name`).
    pub fn find(&self, param: &str) -> Option<(String, bool)> {
        if let Some(hit) = self.memo.lock().ok().and_then(|m| m.get(param).cloned()) {
            return hit;
        }
        let found = self.search(param);
        if let Ok(mut m) = self.memo.lock() {
            m.insert(param.to_string(), found.clone());
        }
        found
    }

    fn search(&self, param: &str) -> Option<(String, bool)> {
        let want = field_key(param);
        if want.is_empty() {
            return None;
        }
        if let Some(&i) = self.first.get(&want) {
            return Some((self.entries[i].1.clone(), true));
        }
        self.entries.iter().find(|(nk, _)| link(nk, &want).is_some()).map(|(_, p)| (p.clone(), false))
    }
}
