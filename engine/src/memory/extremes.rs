//! A recorded chain's choice of one list element by an extreme: where a request asks for a
//! superlative and the chain's references into a list all read one element — not the first —
//! that holds the least or the greatest value of a field ("the day when the ticket is the
//! cheapest": the price calendar's 7th day), the remembered references name the choice
//! (`$var3.min(price:units).departureDate$`, see [`crate::exec::refs::Extreme`]) instead of the
//! index, so a replay takes the cheapest day of *its* calendar. A value traced to another element
//! that the chosen one holds too (a return date equal to a later day's departure) is read from the
//! chosen one.

use crate::exec::refs::{lookup, Extreme, Reference};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Where a value stands in a response: a path (dot-separated) or none.
type Finder = fn(&Value, &str) -> Option<String>;

/// Rewrite the references of a chain's arguments (`all`, one map per call) that read an extreme
/// choice; `responses` gives each label's response, `find` where a value stands in one.
pub(crate) fn choose_extremes(all: &mut [Map<String, Value>], responses: &[(&str, Option<&Value>)], find: Finder) {
    // (label, path before the first index) → the references that index there.
    let mut groups: BTreeMap<(String, Vec<String>), Vec<Reference>> = BTreeMap::new();
    for args in all.iter() {
        args.values().for_each(|v| {
            references(v, &mut |r| {
                let segs = r.segments();
                if let Some(k) = segs.iter().position(|s| s.parse::<usize>().is_ok()) {
                    let prefix = segs[..k].iter().map(|s| s.to_string()).collect();
                    groups.entry((r.label.clone(), prefix)).or_default().push(r.clone());
                }
            })
        });
    }
    let mut rewritten: HashMap<String, String> = HashMap::new();
    for ((label, prefix), refs) in &groups {
        let Some(response) = responses.iter().find(|(l, _)| l == label).and_then(|(_, r)| *r) else { continue };
        let prefix_path: Vec<&str> = prefix.iter().map(String::as_str).collect();
        let Some(Value::Array(items)) = lookup(response, &prefix_path) else { continue };
        let index = |r: &Reference| r.segments().get(prefix.len()).and_then(|s| s.parse::<usize>().ok());
        let mut candidates: Vec<usize> = refs.iter().filter_map(index).filter(|i| *i != 0).collect();
        candidates.dedup();
        for i in candidates {
            let Some(e) = extreme_at(items, i) else { continue };
            // Every reference of the group read from element i.
            let moved: Option<Vec<(String, String)>> = refs
                .iter()
                .map(|r| {
                    let within = if index(r) == Some(i) {
                        r.segments()[prefix.len() + 1..].join(".")
                    } else {
                        let v = lookup(response, &r.segments())?;
                        let text = match v {
                            Value::String(s) => s.trim().to_string(),
                            Value::Number(n) => n.to_string(),
                            _ => return None,
                        };
                        find(&items[i], &text)?
                    };
                    let mut path: Vec<String> = prefix.clone();
                    path.push(e.to_string());
                    path.extend(within.split('.').filter(|s| !s.is_empty()).map(str::to_string));
                    Some((r.to_string(), Reference { path: path.join("."), ..r.clone() }.to_string()))
                })
                .collect();
            if let Some(moved) = moved {
                rewritten.extend(moved);
                break;
            }
        }
    }
    if rewritten.is_empty() {
        return;
    }
    for args in all.iter_mut() {
        args.values_mut().for_each(|v| rewrite(v, &rewritten));
    }
}

/// Every reference inside `v` (strings in arrays and objects too).
fn references(v: &Value, f: &mut impl FnMut(&Reference)) {
    match v {
        Value::String(s) => {
            for r in Reference::all_in(s) {
                f(&r);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| references(x, f)),
        Value::Object(m) => m.values().for_each(|x| references(x, f)),
        _ => {}
    }
}

fn rewrite(v: &mut Value, rewritten: &HashMap<String, String>) {
    match v {
        Value::String(s) => {
            let mut out = s.clone();
            for r in Reference::all_in(s) {
                if let Some(new) = rewritten.get(&r.to_string()) {
                    out = out.replacen(&r.to_string(), new, 1);
                }
            }
            *s = out;
        }
        Value::Array(items) => items.iter_mut().for_each(|x| rewrite(x, rewritten)),
        Value::Object(m) => m.values_mut().for_each(|x| rewrite(x, rewritten)),
        _ => {}
    }
}

/// The field by which element `i` (not the first) of `items` (three or more) is the one least or
/// greatest: every element has it, no other element ties, and the list is not in its order
/// (then the first or last would be a position, not a choice). Of several, the field with the
/// most distinct values.
fn extreme_at(items: &[Value], i: usize) -> Option<Extreme> {
    if i == 0 || items.len() < 3 {
        return None;
    }
    let mut fields = Vec::new();
    numeric_fields(items.get(i)?, &mut Vec::new(), &mut fields);
    let mut best: Option<(usize, Extreme)> = None;
    for field in fields {
        let path: Vec<&str> = field.iter().map(String::as_str).collect();
        let Some(values) = items.iter().map(|x| lookup(x, &path).and_then(Value::as_f64)).collect::<Option<Vec<f64>>>()
        else {
            continue;
        };
        let me = values[i];
        let unique = values.iter().filter(|x| **x == me).count() == 1;
        let least = values.iter().all(|x| *x >= me);
        let greatest = values.iter().all(|x| *x <= me);
        let sorted = values.windows(2).all(|w| w[0] <= w[1]) || values.windows(2).all(|w| w[0] >= w[1]);
        if !unique || sorted || !(least || greatest) {
            continue;
        }
        let distinct = values.iter().map(|x| x.to_bits()).collect::<HashSet<_>>().len();
        if best.as_ref().is_none_or(|(d, _)| distinct > *d) {
            best = Some((distinct, Extreme { least, field }));
        }
    }
    best.map(|(_, e)| e)
}

/// The paths of an element's numbers (through objects, not lists).
fn numeric_fields(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(k.clone());
                numeric_fields(x, at, out);
                at.pop();
            }
        }
        Value::Number(_) if !at.is_empty() => out.push(at.clone()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The first scalar equal to `text`, depth first (the memory's finder is breadth first).
    fn find(v: &Value, text: &str) -> Option<String> {
        match v {
            Value::Object(m) => m
                .iter()
                .find_map(|(k, x)| find(x, text).map(|p| if p.is_empty() { k.clone() } else { format!("{k}.{p}") })),
            Value::String(s) => (s == text).then(String::new),
            _ => None,
        }
    }

    #[test]
    fn the_element_a_chain_took_by_an_extreme_is_remembered_by_it() {
        let calendar = json!([
            {"departureDate": "2024-11-05", "returnDate": "2024-11-12", "offsetDays": -2, "price": {"units": 652, "nanos": 710}},
            {"departureDate": "2024-11-06", "returnDate": "2024-11-13", "offsetDays": -1, "price": {"units": 498, "nanos": 0}},
            {"departureDate": "2024-11-07", "returnDate": "2024-11-14", "offsetDays": 0, "price": {"units": 520, "nanos": 0}},
            {"departureDate": "2024-11-13", "returnDate": "2024-11-20", "offsetDays": 1, "price": {"units": 700, "nanos": 0}},
        ]);
        let hotels = json!({"result": [{"id": 7, "reviews": 10}, {"id": 9, "reviews": 99}, {"id": 3, "reviews": 50}]});
        let flights = json!([{"token": "a", "price": 3}, {"token": "b", "price": 1}, {"token": "c", "price": 2}]);
        let responses = [("var1", Some(&calendar)), ("var2", Some(&hotels)), ("var3", Some(&flights))];
        let mut all = vec![
            // The return date was traced to the 4th day's departure: the cheapest day holds it too.
            json!({"departDate": "$var1.1.departureDate$", "returnDate": "$var1.3.departureDate$", "token": "$var3.0.token$"})
                .as_object()
                .unwrap()
                .clone(),
            // Two hotels of one list, neither chosen by an extreme both share: a walk, not a choice.
            json!({"a": "$var2.result.1.id$", "b": "$var2.result.2.id$"}).as_object().unwrap().clone(),
        ];
        choose_extremes(&mut all, &responses, find);
        assert_eq!(all[0]["departDate"], json!("$var1.min(price:units).departureDate$"));
        assert_eq!(all[0]["returnDate"], json!("$var1.min(price:units).returnDate$"));
        assert_eq!(all[0]["token"], json!("$var3.0.token$"), "the first element is no choice");
        assert_eq!(all[1]["a"], json!("$var2.result.1.id$"));
        assert_eq!(all[1]["b"], json!("$var2.result.2.id$"));
        // Resolved against another calendar, it takes that one's cheapest day.
        let other = json!([{"departureDate": "2024-12-01", "price": {"units": 90}}, {"departureDate": "2024-12-02", "price": {"units": 80}}]);
        let r = Reference::whole(all[0]["departDate"].as_str().unwrap()).unwrap();
        let outputs = HashMap::from([("var1".to_string(), other)]);
        assert_eq!(r.resolve(&outputs).unwrap(), json!("2024-12-02"));
    }
}
