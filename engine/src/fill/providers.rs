//! Which APIs can provide a parameter (Reverse Chain), indexed once per engine so a missing
//! argument costs a few hash lookups instead of a scan of every API.
//!
//! A field provides parameter `p` where the one rule of the schema crate links them
//! ([`toolgraph_schema::fields::link`]): the filler and the graph's FEEDS edges use the same.

use crate::plan::ApiView;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use toolgraph_schema::fields::field_key;

/// The normalized leaves that can provide `want`: itself, its suffixes of 3+ bytes, and `id`.
fn leaves_for(want: &str) -> impl Iterator<Item = &str> {
    let suffixes =
        want.char_indices().map(move |(i, _)| &want[i..]).filter(move |s| s.len() == want.len() || s.len() >= 3);
    let id = (want.len() > 2 && want.ends_with("id")).then_some("id");
    suffixes.chain(id)
}

/// The proper suffixes of a leaf a parameter's key may be (4+ bytes): `name` for `hotelname`.
fn tails_of(leaf: &str) -> impl Iterator<Item = &str> {
    leaf.char_indices().skip(1).map(move |(i, _)| &leaf[i..]).filter(|s| s.len() >= 4)
}

/// Source APIs with the normalized fields their FEEDS edge carries, by target id.
type FeedsInto = HashMap<String, Vec<(Arc<ApiView>, Vec<String>)>>;

/// An index of the active APIs by the fields they output and the FEEDS edges into each API.
#[derive(Default)]
pub(crate) struct Providers {
    by_leaf: HashMap<String, Vec<Arc<ApiView>>>,
    /// APIs by the proper tails of their leaves (a parameter whose key ends a leaf).
    by_tail: HashMap<String, Vec<Arc<ApiView>>>,
    /// Target id → (source API, normalized fields that edge carries).
    feeds_into: FeedsInto,
}

impl Providers {
    pub(crate) fn build(apis: &HashMap<String, Arc<ApiView>>, feeds: &BTreeMap<(String, String), Vec<String>>) -> Self {
        let mut by_leaf: HashMap<String, Vec<Arc<ApiView>>> = HashMap::new();
        let mut by_tail: HashMap<String, Vec<Arc<ApiView>>> = HashMap::new();
        for api in apis.values() {
            let mut leaves: Vec<String> = api.output_fields.iter().map(|f| field_key(f)).collect();
            leaves.sort();
            leaves.dedup();
            let mut tails: Vec<&str> = leaves.iter().flat_map(|l| tails_of(l)).collect();
            tails.sort();
            tails.dedup();
            for t in tails {
                by_tail.entry(t.to_string()).or_default().push(api.clone());
            }
            for l in leaves {
                by_leaf.entry(l).or_default().push(api.clone());
            }
        }
        let mut feeds_into: FeedsInto = HashMap::new();
        for ((from, to), fields) in feeds {
            if let Some(src) = apis.get(from) {
                feeds_into
                    .entry(to.clone())
                    .or_default()
                    .push((src.clone(), fields.iter().map(|f| field_key(f)).collect()));
            }
        }
        Providers { by_leaf, by_tail, feeds_into }
    }

    /// Every API (other than `target`) that can provide parameter `param` of `target`, with
    /// whether a FEEDS edge into `target` carries it (else only its documented outputs do).
    pub(crate) fn candidates(&self, target: &str, param: &str) -> Vec<(Arc<ApiView>, bool)> {
        let want = field_key(param);
        let mut out: HashMap<&str, (Arc<ApiView>, bool)> = HashMap::new();
        for (src, fields) in self.feeds_into.get(target).into_iter().flatten() {
            // The edge's fields are the exact links ingest found: the same key.
            if src.id != target && !want.is_empty() && fields.contains(&want) {
                out.insert(src.id.as_str(), (src.clone(), true));
            }
        }
        let by_leaf = leaves_for(&want).flat_map(|leaf| self.by_leaf.get(leaf).into_iter().flatten());
        let by_tail = self.by_tail.get(&want).into_iter().flatten();
        for api in by_leaf.chain(by_tail) {
            if api.id != target {
                out.entry(api.id.as_str()).or_insert_with(|| (api.clone(), false));
            }
        }
        out.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraph_schema::fields::link;

    fn api(id: &str, outputs: &[&str]) -> Arc<ApiView> {
        Arc::new(ApiView {
            id: id.into(),
            name: id.into(),
            tool: "t".into(),
            category: String::new(),
            description: String::new(),
            params: vec![],
            output_fields: outputs.iter().map(|s| s.to_string()).collect(),
            availability: None,
            ends: None,
        })
    }

    #[test]
    fn finds_exact_suffix_and_id_providers_and_feeds() {
        let mut apis = HashMap::new();
        for a in [
            api("geo", &["coordinates.latitude", "name"]),
            api("hotels", &["data.id"]),
            api("lat", &["lat"]),
            api("target", &["latitude"]),
            api("hname", &["hotel_name"]),
        ] {
            apis.insert(a.id.clone(), a);
        }
        let mut feeds = BTreeMap::new();
        feeds.insert(("lat".to_string(), "target".to_string()), vec!["lat".to_string()]);
        let p = Providers::build(&apis, &feeds);
        let ids = |t: &str, param: &str| {
            let mut v: Vec<(String, bool)> =
                p.candidates(t, param).into_iter().map(|(a, f)| (a.id.clone(), f)).collect();
            v.sort();
            v
        };
        // Suffix of 3+ characters; the target itself never provides its own parameter.
        assert_eq!(ids("target", "pick_up_latitude"), vec![("geo".to_string(), false)]);
        // `id` provides any *_id; "lat" (FEEDS into target) provides "lat".
        assert_eq!(ids("target", "hotel_id"), vec![("hotels".to_string(), false)]);
        assert_eq!(ids("target", "lat"), vec![("lat".to_string(), true)]);
        // Two-character leaves other than `id` are never suffix matches.
        assert!(ids("target", "xyz").is_empty());
        // A parameter whose key ends a field's: `name` ← `hotel_name`.
        assert_eq!(ids("target", "name"), vec![("geo".to_string(), false), ("hname".to_string(), false)]);
        // Every candidate is one the schema's rule links.
        for param in ["pick_up_latitude", "hotel_id", "lat", "name"] {
            for (a, _) in p.candidates("target", param) {
                let want = field_key(param);
                assert!(a.output_fields.iter().any(|f| link(&field_key(f), &want).is_some()), "{} {param}", a.id);
            }
        }
    }
}
