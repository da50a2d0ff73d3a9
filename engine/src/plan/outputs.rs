//! What earlier calls' outputs offer an argument: a response's fields by name ([`FieldIndex`]),
//! and, for an API called once per option (one call per hotel compared), which element of an
//! earlier output's list the next call reads.

use super::reading::key as norm;
use super::{ApiView, ArgSource, Context};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};

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
                            let nk = norm(k);
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

    /// A field for `param`: `(path, exact)`: the same name, else the first whose name the
    /// parameter ends with (`pick_up_latitude` ← `latitude`, `fromId` ← `id`) or that ends with it.
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
        let want = norm(param);
        if want.is_empty() {
            return None;
        }
        if let Some(&i) = self.first.get(&want) {
            return Some((self.entries[i].1.clone(), true));
        }
        self.entries
            .iter()
            .find(|(nk, _)| {
                let id_link = nk == "id" && want.len() > 2 && want.ends_with("id");
                id_link || nk.len() >= 3 && (want.ends_with(nk.as_str()) || (want.len() >= 4 && nk.ends_with(&want)))
            })
            .map(|(_, p)| (p.clone(), false))
    }
}

pub(super) fn find_field(ctx: &Context, step: &super::Step, param: &str) -> Option<(String, bool)> {
    match ctx.fields.get(&step.label) {
        Some(idx) => idx.find(param),
        None => FieldIndex::build(&step.response).find(param),
    }
}

/// How many calls of `api` the request asks for, one per option, where another call of it can be
/// one more option: the count the learned model reads in the request ("three hotels"), else —
/// when the request compares ("compare", "both", "each") — up to [`MAX_OPTIONS`]. `None` when
/// recorded runs do not call `api` once per option ([`ArgModel::per_option`]).
pub fn option_count(ctx: &Context, api: &ApiView) -> Option<usize> {
    let model = ctx.args.as_deref()?;
    if !model.per_option(&api.id, &api.params) {
        return None;
    }
    match model.options(&api.id, &ctx.values) {
        Some(n) => Some(n),
        None => super::coverage::compares(&ctx.request).then_some(MAX_OPTIONS),
    }
}

/// Calls of one API per option at most, where the request does not say how many.
pub const MAX_OPTIONS: usize = 5;

/// The path of the element after the last one earlier calls of `api` read `param` from (in the
/// list `path` of step `label`'s output crosses first): `result.hotel_id` → `result.1.hotel_id`.
/// `None` when the list holds no further element.
pub(super) fn next_item(ctx: &Context, api: &ApiView, param: &str, label: &str, path: &str) -> Option<String> {
    let response = ctx.path.iter().find(|s| s.label == label)?.response.clone();
    let fields = |p: &str| p.split('.').filter(|s| s.parse::<usize>().is_err()).map(str::to_string).collect::<Vec<_>>();
    let want = fields(path);
    let read = outputs_read(ctx, api, param)
        .filter(|(l, p)| *l == label && fields(p) == want)
        .filter_map(|(_, p)| item_index(&response, p))
        .max()?;
    item_path(&response, &want, read + 1)
}

/// The outputs earlier calls of `api` read `param` from: (label, path) each.
fn outputs_read<'c>(
    ctx: &'c Context,
    api: &'c ApiView,
    param: &'c str,
) -> impl Iterator<Item = (&'c str, &'c str)> + 'c {
    ctx.path.iter().filter(move |s| s.api.id == api.id).filter_map(move |s| match s.sources.get(param) {
        Some(ArgSource::Output { label, path }) => Some((label.as_str(), path.as_str())),
        _ => None,
    })
}

/// The newest call of another API than `api` whose output has a field for `param` and that no
/// earlier call of `api` read `param` from: its label and the field's path (each hotel's payment
/// call reads the hotel's own details call; two flight searches, one details call each).
pub(super) fn newest_producer(ctx: &Context, api: &ApiView, param: &str) -> Option<(String, String)> {
    let read: HashSet<&str> = outputs_read(ctx, api, param).map(|(label, _)| label).collect();
    ctx.path
        .iter()
        .rev()
        .filter(|s| s.api.id != api.id && !read.contains(s.label.as_str()))
        .find_map(|s| find_field(ctx, s, param).map(|(path, _)| (s.label.clone(), path)))
}

/// Which element of the first list on `path` it reads (an index left out reads the first).
fn item_index(v: &Value, path: &str) -> Option<usize> {
    let mut cur = v;
    let mut segs = path.split('.').filter(|s| !s.is_empty()).peekable();
    loop {
        match cur {
            Value::Array(items) => {
                return Some(segs.peek().and_then(|s| s.parse::<usize>().ok()).unwrap_or(0))
                    .filter(|i| *i < items.len().max(1))
            }
            Value::Object(m) => cur = m.get(segs.next()?)?,
            _ => return None,
        }
    }
}

/// `fields` through `v` with element `n` of the first list crossed (the first element of any
/// later one): the path of the `n`-th option's value, `None` when there is none.
fn item_path(v: &Value, fields: &[String], n: usize) -> Option<String> {
    let mut out: Vec<String> = Vec::with_capacity(fields.len() + 1);
    let (mut cur, mut i, mut placed) = (v, 0, false);
    while i < fields.len() {
        match cur {
            Value::Array(items) => {
                let k = if placed { 0 } else { n };
                placed = true;
                cur = items.get(k)?;
                out.push(k.to_string());
            }
            Value::Object(m) => {
                cur = m.get(&fields[i])?;
                out.push(fields[i].clone());
                i += 1;
            }
            _ => return None,
        }
    }
    (placed && !cur.is_null()).then(|| out.join("."))
}
