//! What earlier calls' outputs offer an argument: a response's fields by name ([`FieldIndex`]),
//! and, for an API called once per option (one call per hotel compared), which element of an
//! earlier output's list the next call reads.

use super::fields::FieldIndex;
use crate::plan::planner::{ApiView, ArgSource, Context};
use serde_json::Value;
use std::collections::HashSet;

pub(crate) fn find_field(ctx: &Context, step: &crate::plan::planner::Step, param: &str) -> Option<(String, bool)> {
    match ctx.fields.get(&step.label) {
        Some(idx) => idx.find(param),
        None => FieldIndex::build(&step.response).find(param),
    }
}

/// How many calls of `api` the request asks for, one per option, where another call of it can be
/// one more option: the count it says ([`counted_options`]), else — when the request compares
/// ("compare", "both", "each") — up to [`MAX_OPTIONS`]. `None` when recorded runs do not call
/// `api` once per option ([`ArgModel::per_option`]).
///
/// [`ArgModel::per_option`]: crate::fill::learned::ArgModel::per_option
pub(crate) fn option_count(ctx: &Context, api: &ApiView) -> Option<usize> {
    counted_options(ctx, api).or_else(|| {
        let model = ctx.args.as_deref()?;
        (model.per_option(&api.id, &api.params) && crate::read::reading::compares(&ctx.request)).then_some(MAX_OPTIONS)
    })
}

/// The count of options the request says for `api`, an API recorded runs call once per option:
/// the count the learned model reads in the request ([`learned_options`]), else a count of
/// things the request points back at ([`pointed_options`]).
pub(crate) fn counted_options(ctx: &Context, api: &ApiView) -> Option<usize> {
    learned_options(ctx, api).or_else(|| pointed_options(ctx, api))
}

/// The count the learned model reads in the request for `api` (a count said where its recorded
/// runs were called that many times), where recorded runs call `api` once per option.
pub(crate) fn learned_options(ctx: &Context, api: &ApiView) -> Option<usize> {
    let model = ctx.args.as_deref()?;
    model.per_option(&api.id, &api.params).then(|| model.options(&api.id, &ctx.values)).flatten()
}

/// A count of things the request points back at ("the two highest-rated galleries … describe
/// them": [`crate::read::reading::counted_options`]), for an API recorded runs call once per
/// option whose call on the path read an item of a list another call found.
pub(crate) fn pointed_options(ctx: &Context, api: &ApiView) -> Option<usize> {
    let model = ctx.args.as_deref()?;
    if !model.per_option(&api.id, &api.params) || !reads_options(ctx, api) {
        return None;
    }
    crate::read::reading::counted_options(&ctx.request)
}

/// Whether a call of `api` on the path read an item of a list another call found (the
/// galleries a search listed), not the top match of a lookup (a city's id): what a count of
/// options the request says is a count of.
fn reads_options(ctx: &Context, api: &ApiView) -> bool {
    ctx.path.iter().filter(|s| s.api.id == api.id).flat_map(|s| s.sources.values()).any(|src| match src {
        ArgSource::Output { label, path } => ctx
            .path
            .iter()
            .find(|p| &p.label == label)
            .is_some_and(|p| !p.api.is_lookup() && item_index(&p.response, path).is_some()),
        _ => false,
    })
}

/// Calls of one API per option at most, where the request does not say how many.
pub(crate) const MAX_OPTIONS: usize = 5;

/// The path of the element after the last one earlier calls of `api` read `param` from (in the
/// list `path` of step `label`'s output crosses first): `result.hotel_id` → `result.1.hotel_id`.
/// `None` when the list holds no further element.
pub(crate) fn next_item(ctx: &Context, api: &ApiView, param: &str, label: &str, path: &str) -> Option<String> {
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
pub(crate) fn newest_producer(ctx: &Context, api: &ApiView, param: &str) -> Option<(String, String)> {
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
