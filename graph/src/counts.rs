//! How a learned model's counts are stored: as increments the store adds (never a whole part
//! read, changed and written back), so two processes that learn at once both count.
//!
//! A model is any JSON tree whose leaves are counts (the engine's argument model serialises to
//! one). [`flatten`] turns a tree into one counter per leaf, keyed by the leaf's path; [`delta`]
//! is what one learning step added; [`unflatten`] builds the tree again from the stored counters.
//! The stored keys are `<prefix><path as a JSON array>`, e.g.
//! `arguments/v2/["slots","car/rent","drop_off_time","kinds","time"]` → `3`. Every element of an
//! array is stored, zeros too (a fixed-size array reads back whole); an object's leaf at zero or
//! below is left out when read (an evicted entry).

use crate::CountDelta;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Where the engine's argument model keeps its counters (the `v2` is the layout: a store that
/// holds another layout is learned again, not misread).
pub const ARGUMENT_COUNTS: &str = "arguments/v2/";

/// Every count leaf of `tree` as `(key, count)`: the key is `prefix` and the leaf's path. Object
/// leaves at zero are left out; every array element is kept. Non-count leaves (strings, floats,
/// booleans) are not counts and are left out.
pub fn flatten(prefix: &str, tree: &Value) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let mut path = Vec::new();
    walk(prefix, tree, &mut path, false, &mut out);
    out
}

fn walk(prefix: &str, v: &Value, path: &mut Vec<Value>, in_array: bool, out: &mut BTreeMap<String, i64>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                path.push(Value::String(k.clone()));
                walk(prefix, child, path, false, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                path.push(Value::from(i));
                walk(prefix, child, path, true, out);
                path.pop();
            }
        }
        Value::Number(n) => {
            let Some(n) = n.as_i64() else { return };
            if n != 0 || in_array {
                out.insert(key(prefix, path), n);
            }
        }
        _ => {}
    }
}

fn key(prefix: &str, path: &[Value]) -> String {
    format!("{prefix}{}", Value::Array(path.to_vec()))
}

/// What learning added between `before` and `after` (both [`flatten`]ed from the same parts of a
/// model): one increment per counter that changed, and one of zero per counter `after` has and
/// `before` had not (an array element that must exist when read back).
pub fn delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> Vec<CountDelta> {
    let mut out = Vec::new();
    for (k, a) in after {
        match before.get(k) {
            Some(b) if b == a => {}
            Some(b) => out.push(CountDelta { key: k.clone(), n: a - b }),
            None => out.push(CountDelta { key: k.clone(), n: *a }),
        }
    }
    out.extend(
        before.iter().filter(|(k, _)| !after.contains_key(*k)).map(|(k, b)| CountDelta { key: k.clone(), n: -b }),
    );
    out
}

/// Sum increments by key (what a batch applies: one write per counter).
pub fn summed(deltas: impl IntoIterator<Item = CountDelta>) -> Vec<CountDelta> {
    let mut by_key: BTreeMap<String, i64> = BTreeMap::new();
    for d in deltas {
        *by_key.entry(d.key).or_default() += d.n;
    }
    by_key.into_iter().map(|(key, n)| CountDelta { key, n }).collect()
}

/// The tree stored as `counts` (keys under `prefix`; others are ignored). An error names the key
/// that does not read. Object leaves at zero or below are left out; arrays are filled with zeros
/// up to their highest stored element.
pub fn unflatten(prefix: &str, counts: &[(String, i64)]) -> Result<Value, String> {
    let mut root = Value::Object(Map::new());
    for (k, n) in counts {
        let Some(rest) = k.strip_prefix(prefix) else { continue };
        let path: Vec<Value> =
            serde_json::from_str(rest).map_err(|e| format!("stored count `{k}`: its path does not read: {e}"))?;
        let Some((last, parents)) = path.split_last() else {
            return Err(format!("stored count `{k}` has an empty path"));
        };
        if last.is_string() && *n <= 0 {
            continue;
        }
        let mut at = &mut root;
        for (i, step) in parents.iter().enumerate() {
            let next_is_index = path[i + 1].is_u64();
            let fresh = || if next_is_index { Value::Array(Vec::new()) } else { Value::Object(Map::new()) };
            at = child(at, step, fresh).ok_or_else(|| format!("stored count `{k}` does not fit the others"))?;
        }
        let leaf = child(at, last, || Value::from(0))
            .filter(|v| v.is_number())
            .ok_or_else(|| format!("stored count `{k}` does not fit the others"))?;
        *leaf = Value::from(*n);
    }
    Ok(root)
}

/// `at`'s child `step` (an object key or an array index), made with `fresh` when missing; `None`
/// where `at` is not the container `step` needs.
fn child<'a>(at: &'a mut Value, step: &Value, fresh: impl Fn() -> Value) -> Option<&'a mut Value> {
    match (at, step) {
        (Value::Object(m), Value::String(k)) => Some(m.entry(k.clone()).or_insert_with(fresh)),
        (Value::Array(items), Value::Number(i)) => {
            let i = usize::try_from(i.as_u64()?).ok().filter(|i| *i < 1024)?;
            while items.len() <= i {
                items.push(Value::from(0));
            }
            if items[i] == 0 && !fresh().is_number() {
                items[i] = fresh();
            }
            Some(&mut items[i])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tree_of_counts_reads_back_and_deltas_add_up() {
        let before = json!({"examples": 1, "slots": {"a": {"p": {"support": 1, "cues": {"time": {"at": [1, 0]}}}}}});
        let after = json!({"examples": 2, "slots": {"a": {"p": {"support": 2, "on_repeat": [0, 0, 1, 0],
            "cues": {"time": {"at": [1, 1], "by": [0, 1]}}}}}});
        let (fb, fa) = (flatten("m/", &before), flatten("m/", &after));
        assert_eq!(unflatten("m/", &fa.clone().into_iter().collect::<Vec<_>>()).unwrap(), after);
        // Stored counters plus the delta are the later tree: what an increment-merging store holds.
        let mut stored = fb.clone();
        for d in delta(&fb, &fa) {
            *stored.entry(d.key).or_default() += d.n;
        }
        assert_eq!(unflatten("m/", &stored.into_iter().collect::<Vec<_>>()).unwrap(), after);
        // Two learners' deltas from the same start both count.
        let d = delta(&fb, &fa);
        let twice = summed(d.iter().cloned().chain(d.iter().cloned()));
        let support = twice.iter().find(|c| c.key.ends_with(r#""p","support"]"#)).unwrap();
        assert_eq!(support.n, 2);
    }

    #[test]
    fn evicted_entries_and_bad_keys() {
        let stored = vec![
            (r#"m/["values","x"]"#.to_string(), 0),
            (r#"m/["values","y"]"#.to_string(), 2),
            (r#"m/["pair",1]"#.to_string(), 0),
            ("other/thing".to_string(), 5),
        ];
        assert_eq!(unflatten("m/", &stored).unwrap(), json!({"values": {"y": 2}, "pair": [0, 0]}));
        let bad = vec![(r#"m/["a"#.to_string(), 1)];
        assert!(unflatten("m/", &bad).unwrap_err().contains(r#"m/["a"#));
        let clash = vec![(r#"m/["a"]"#.to_string(), 1), (r#"m/["a","b"]"#.to_string(), 1)];
        assert!(unflatten("m/", &clash).unwrap_err().contains("does not fit"));
        let clash = vec![(r#"m/["a","b"]"#.to_string(), 1), (r#"m/["a"]"#.to_string(), 1)];
        assert!(unflatten("m/", &clash).unwrap_err().contains("does not fit"));
    }
}
