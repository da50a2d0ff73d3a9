//! FEEDS edges (SoAy's I/O coupling): a → b when a field a is known to return has the name of one
//! of b's input parameters. Derived, not observed: computed for pairs of APIs of the same tool and
//! for pairs seen one after the other in trajectories (all pairs of 46k APIs would link every API
//! returning `id` to every API taking one).

use crate::catalog::Catalog;
use std::collections::{BTreeMap, BTreeSet};
use toolgraph_schema::fields::field_key;
use toolgraph_schema::{ApiDoc, FeedsRow};

/// The parameters of `b` an output field of `a` fills exactly (the exact links of
/// [`toolgraph_schema::fields::link`]: the same [`field_key`]).
fn shared(a: &ApiDoc, b: &ApiDoc) -> Vec<String> {
    let outs: BTreeSet<String> = a.output_fields.iter().map(|f| field_key(f)).filter(|f| !f.is_empty()).collect();
    let mut fields: Vec<String> =
        b.params.iter().map(|p| p.name.clone()).filter(|p| outs.contains(&field_key(p))).collect();
    fields.sort();
    fields.dedup();
    fields
}

/// FEEDS rows among the APIs of `tools` (tool ids) and along `pairs` (observed a → b).
pub fn derive(catalog: &Catalog, tools: &BTreeSet<String>, pairs: &BTreeSet<(String, String)>) -> Vec<FeedsRow> {
    let mut by_tool: BTreeMap<String, Vec<&ApiDoc>> = BTreeMap::new();
    for doc in catalog.apis() {
        let t = doc.tool_id();
        if tools.contains(&t) {
            by_tool.entry(t).or_default().push(doc);
        }
    }
    let mut rows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for docs in by_tool.values() {
        for a in docs.iter().filter(|a| !a.output_fields.is_empty()) {
            for b in docs {
                if a.id() == b.id() {
                    continue;
                }
                let f = shared(a, b);
                if !f.is_empty() {
                    rows.insert((a.id(), b.id()), f);
                }
            }
        }
    }
    for (from, to) in pairs {
        if from == to {
            continue;
        }
        if let (Some(a), Some(b)) = (catalog.get(from), catalog.get(to)) {
            let f = shared(a, b);
            if !f.is_empty() {
                rows.insert((from.clone(), to.clone()), f);
            }
        }
    }
    rows.into_iter().map(|((from, to), fields)| FeedsRow { from, to, fields }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraph_schema::ParamDoc;

    fn doc(tool: &str, api: &str, outs: &[&str], params: &[&str]) -> ApiDoc {
        ApiDoc {
            category: "Travel".into(),
            tool: tool.into(),
            api: api.into(),
            tool_description: String::new(),
            description: String::new(),
            method: "GET".into(),
            url: String::new(),
            params: params
                .iter()
                .map(|p| ParamDoc {
                    name: p.to_string(),
                    ty: "string".into(),
                    description: String::new(),
                    required: true,
                    default: None,
                })
                .collect(),
            output_fields: outs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn outputs_feed_matching_inputs() {
        let mut c = Catalog::default();
        let a = c.add(doc("Booking", "Search_Hotel_Destination", &["dest_id", "coordinates.latitude"], &["query"]));
        let b = c.add(doc("Booking", "Search_Hotels", &["hotels"], &["dest_id", "arrival_date"]));
        let d = c.add(doc("Other", "Get_By_Id", &[], &["is_id"]));
        let e = c.add(doc("Other", "List", &["id"], &[]));
        let tools: BTreeSet<String> = ["travel/booking".to_string(), "travel/other".to_string()].into();
        let rows = derive(&c, &tools, &BTreeSet::new());
        assert!(rows.iter().any(|r| r.from == a && r.to == b && r.fields == vec!["dest_id".to_string()]));
        assert!(rows.iter().any(|r| r.from == e && r.to == d), "is_id takes id: {rows:?}");
        assert!(!rows.iter().any(|r| r.from == b && r.to == a));
    }
}
