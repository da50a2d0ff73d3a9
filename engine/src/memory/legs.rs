//! A remembered list of legs laid again along this request's route ([`crate::read::route`]): a
//! remembered call that sent one object per leg, each reading its start and end from a lookup of
//! a place its request named on its route ("from: the lookup of Miami, to: the lookup of
//! Dallas, date"), sends as many legs as this request's route has, each reading the lookup of
//! this route's places (made where this run has none yet) and leaving on the route's day. The
//! remembered request's own route must read as its legs did, place by place: else the list is
//! not one this reading understands, and the replay maps it value by value as before.

use super::analogy::{Analogy, Transfer};
use super::store::MemoryStep;
use crate::exec::refs::Reference;
use crate::fill::filler::{role, Role};
use crate::plan::{ApiView, ArgSource, Filled};
use crate::read::route::route;
use crate::run::engine::{Engine, RunState};
use serde_json::{Map, Value};

/// The source a rebuilt list of legs (and a lookup made for it) is traced with.
pub(crate) const ROUTE: &str = "route";

/// Remembered calls of an API looked at (nearest by meaning first) for one whose list of legs is
/// a model to lay this route's along.
const MODELS: usize = 16;

/// A parameter holding a list of legs: its name, the template leg, the keys of a leg's start,
/// end and date.
struct Legs<'a> {
    param: &'a str,
    items: &'a [Value],
    from: String,
    to: String,
    date: Option<String>,
}

/// A reference's label and path.
fn reference(v: &Value) -> Option<(String, String)> {
    match ArgSource::of_reference(v)? {
        ArgSource::Output { label, path } => Some((label, path)),
        _ => None,
    }
}

fn is_day(v: &Value) -> bool {
    v.as_str().is_some_and(|s| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok())
}

/// The list of legs `step` sends, where one of its arguments is one: objects of the same keys,
/// two of them references (a start and an end, by their names: `fromId`, `toId`), at most one a
/// day.
fn legs_of(step: &MemoryStep) -> Option<Legs<'_>> {
    step.arguments.iter().find_map(|(param, v)| {
        let items = v.as_array().filter(|a| !a.is_empty())?;
        let first = items[0].as_object()?;
        let keys: Vec<&String> = first.keys().collect();
        if !items.iter().all(|x| x.as_object().is_some_and(|o| o.keys().collect::<Vec<_>>() == keys)) {
            return None;
        }
        let refs: Vec<&String> = first.iter().filter(|(_, x)| reference(x).is_some()).map(|(k, _)| k).collect();
        let [a, b] = refs.as_slice() else { return None };
        let (from, to) = match (role(a), role(b)) {
            (Role::Start, _) | (_, Role::End) => (a.to_string(), b.to_string()),
            (Role::End, _) | (_, Role::Start) => (b.to_string(), a.to_string()),
            _ => return None,
        };
        let days: Vec<&String> = first.iter().filter(|(_, x)| is_day(x)).map(|(k, _)| k).collect();
        if days.len() > 1 {
            return None;
        }
        Some(Legs { param, items, from, to, date: days.first().map(|k| k.to_string()) })
    })
}

/// Whether `step` sends a list of legs.
pub(crate) fn sends_legs(step: &MemoryStep) -> bool {
    legs_of(step).is_some()
}

/// The argument of `step` (a lookup) that sent `place`, as the request said it.
fn place_param(step: &MemoryStep, place: &str) -> Option<String> {
    let said = crate::read::reading::words(place);
    step.arguments
        .iter()
        .find(|(_, v)| v.as_str().is_some_and(|s| crate::read::reading::words(s) == said))
        .map(|(k, _)| k.clone())
}

impl Engine {
    /// `step` with its list of legs laid along this request's route (lookups this run lacks made
    /// first); `None` where the step sends no list of legs, either request reads no route, or the
    /// remembered legs do not follow the remembered request's route.
    ///
    /// `fresh`: the step is not replayed but serves as a model of how the list is laid (a call
    /// the search chose): every leg leaves on this route's day, nothing carried by analogy.
    pub(crate) async fn routed_legs(
        &self,
        st: &mut RunState<'_>,
        (old_request, analogy): (&str, &Analogy),
        (chain, step): (&[MemoryStep], &MemoryStep),
        fresh: bool,
    ) -> Option<MemoryStep> {
        let legs = legs_of(step)?;
        // The remembered request's values, as the analogy read them.
        let old = route(old_request, &analogy.old)?;
        let new = route(&st.ctx.request, &st.ctx.values)?;
        // (A route of one leg is no list of legs: a misreading of one that is.)
        if old.stops.len() != legs.items.len() + 1 || new.stops.len() < 3 || new.dates.iter().any(Option::is_none) {
            return None;
        }
        // A remembered leg left on its route's day (as its request read): this leg on this
        // route's, where this request says it (a date or a stay; not a guess); else its day came
        // otherwise (a day after, an output's cheapest day) and is carried by analogy.
        let route_day = |k: usize| -> bool {
            legs.date.as_ref().is_some_and(|key| {
                old.dates.get(k).copied().flatten().is_some_and(|d| {
                    legs.items[k].get(key).and_then(Value::as_str) == Some(&d.format("%Y-%m-%d").to_string())
                })
            })
        };
        // Each remembered leg reads the lookups of its route's places, all of one API.
        let lookup = |item: &Value, key: &str| -> Option<(usize, String)> {
            let (label, path) = reference(item.get(key)?)?;
            let i = label.strip_prefix("var")?.parse::<usize>().ok()?.checked_sub(1)?;
            chain.get(i)?;
            Some((i, path))
        };
        let mut template: Option<(usize, String, String)> = None;
        for (k, item) in legs.items.iter().enumerate() {
            for (key, stop) in [(&legs.from, &old.stops[k]), (&legs.to, &old.stops[k + 1])] {
                let (i, path) = lookup(item, key)?;
                let param = place_param(&chain[i], stop)?;
                if template.as_ref().is_some_and(|t| chain[t.0].api != chain[i].api) {
                    return None;
                }
                template.get_or_insert((i, param, path));
            }
        }
        let (at, param, path) = template?;
        let api = self.apis.get(&chain[at].api).cloned()?;
        // This run's lookup of each place on the new route, made where there is none.
        let mut labels = Vec::with_capacity(new.stops.len());
        for stop in &new.stops {
            let said = crate::read::reading::words(stop);
            let made = st.ctx.path.iter().find(|s| {
                s.api.id == api.id
                    && s.arguments
                        .get(&param)
                        .and_then(Value::as_str)
                        .is_some_and(|v| crate::read::reading::words(v) == said)
            });
            if let Some(s) = made {
                labels.push(s.label.clone());
                continue;
            }
            let mut f = Filled::default();
            for (k, v) in &chain[at].arguments {
                f.arguments.insert(k.clone(), if *k == param { Value::String(stop.clone()) } else { v.clone() });
                f.sources.insert(
                    k.clone(),
                    if *k == param { ArgSource::Request { kind: ROUTE.into() } } else { ArgSource::Default },
                );
            }
            if !self.execute(st, &api, f).await {
                return None;
            }
            labels.push(st.ctx.path.last()?.label.clone());
        }
        let first = legs.items[0].as_object()?;
        let laid: Vec<Value> = (0..new.stops.len() - 1)
            .map(|k| {
                let mut leg: Map<String, Value> = first.clone();
                leg.insert(legs.from.clone(), Reference::new(&labels[k], &path).into());
                leg.insert(legs.to.clone(), Reference::new(&labels[k + 1], &path).into());
                let like = k.min(legs.items.len() - 1);
                match (&legs.date, new.dates[k]) {
                    (Some(key), Some(day)) if fresh || route_day(like) && !new.guessed[k] => {
                        leg.insert(key.clone(), Value::String(day.format("%Y-%m-%d").to_string()));
                    }
                    (Some(key), _) => {
                        let old = legs.items[like].get(key).cloned().unwrap_or(Value::Null);
                        let carried = match analogy.transfer(&old, None) {
                            Transfer::Mapped(v) => v,
                            _ => old,
                        };
                        leg.insert(key.clone(), carried);
                    }
                    _ => {}
                }
                Value::Object(leg)
            })
            .collect();
        let mut routed = step.clone();
        routed.arguments.insert(legs.param.to_string(), Value::Array(laid));
        routed.sources.insert(legs.param.to_string(), ArgSource::Request { kind: ROUTE.into() });
        Some(routed)
    }

    /// A list of legs for `api`, which the search chose and whose parameter of that name
    /// (`missing`: nothing else fills it) remembered calls of it sent one leg per stop: laid
    /// along this request's route (three places or more, each leg's day read) after the nearest
    /// remembered call whose legs follow its own request's route (see [`Engine::routed_legs`],
    /// lookups this run lacks made first). `None` where the request reads no such route or no
    /// remembered call of `api` is such a model.
    pub(crate) async fn route_list(
        &self,
        st: &mut RunState<'_>,
        api: &ApiView,
        missing: &[String],
    ) -> Option<(String, Value)> {
        let new = route(&st.ctx.request, &st.ctx.values)?;
        if new.stops.len() < 3 || new.dates.iter().any(Option::is_none) || !self.settings.use_memory {
            return None;
        }
        let mem = self.memory.as_ref()?;
        let hits = mem.recall_calling(&st.leads.meaning, &api.id, MODELS).await.ok()?;
        for hit in &hits {
            let chain = &hit.entry.chain;
            for step in chain.iter().filter(|s| s.api == api.id) {
                let Some(param) = legs_of(step).map(|l| l.param.to_string()).filter(|p| missing.contains(p)) else {
                    continue;
                };
                let analogy = self.analogy(&st.ctx, &hit.entry.request, chain);
                let routed = self.routed_legs(st, (&hit.entry.request, &analogy), (chain, step), true).await;
                if let Some(list) = routed.and_then(|r| r.arguments.get(&param).cloned()) {
                    return Some((param, list));
                }
            }
        }
        None
    }
}
