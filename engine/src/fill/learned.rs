//! The argument filler's learned part: where each (API, parameter) took its value in recorded runs
//! — which kind of request mention (a date, a time, a counted number, a name), which of several
//! mentions of that kind (the words around it, its order), or one constant — learned from
//! (request, chain) examples: the long-term memory's entries (recorded trajectories a deployment
//! or an evaluation remembers, and every run judged good since). Statistics are kept per (API,
//! parameter) and, to back off for an API never seen, per parameter name across APIs.
//!
//! Choosing among mentions is a naive-Bayes score of the words around each mention (those seen
//! around the mention the parameter took, against those around the mentions it passed over) plus
//! the order the chosen mention had. A slot without enough examples leaves the choice to the
//! rules in [`super::filler`].
//!
//! The model is stored with the graph as counters ([`toolgraph_graph::counts`], under
//! [`ARGUMENT_COUNTS`]): learning examples gives increments ([`ArgModel::learn_counted`]) that
//! the store adds with the run's other counts, never a part read, changed and written back.

use crate::exec::refs::{holds_reference, Reference};
use crate::read::values::RequestValues;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) use crate::read::slots::normalized;
use crate::read::slots::{count_words, cue_weight, is_unset, word_value, MAX_REQUEST_WORDS, MAX_VALUE_WORDS};
pub(crate) use crate::read::slots::{mentions, Kind, Mention};
pub(crate) use crate::read::slots::{Repeat, SlotStats, CALLS, REQUEST};

/// Parameter names as the back-off compares them (`pick_up_time`, `pickUpTime` → `pickuptime`):
/// the one name normalizer.
use toolgraph_schema::fields::name_key;

/// Everything learned: per API and parameter, and per parameter name across APIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArgModel {
    /// (request, chain) examples learned from.
    pub examples: u64,
    /// Per API, per parameter: what its values were taken from.
    pub slots: BTreeMap<String, BTreeMap<String, SlotStats>>,
    /// Per normalized parameter name, across APIs: the fallback for an API with few runs.
    pub by_name: BTreeMap<String, SlotStats>,
    /// Which words ask for which API (see [`crate::read::asks`]).
    pub asks: crate::read::asks::Asks,
}

/// A choice among mentions, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub index: usize,
    /// The best score's lead over the next one (log-odds).
    pub margin: f64,
    /// `api` (this API's own examples) or `name` (the parameter name across APIs).
    pub from: &'static str,
}

use toolgraph_graph::counts;
pub(crate) use toolgraph_graph::counts::ARGUMENT_COUNTS;
use toolgraph_graph::CountDelta;

/// The slots one or more examples changed: what a store update must write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Touched {
    pub apis: BTreeSet<String>,
    pub names: BTreeSet<String>,
    /// Words the ask model counted.
    pub words: BTreeSet<String>,
}

impl Touched {
    pub fn extend(&mut self, other: Touched) {
        self.apis.extend(other.apis);
        self.names.extend(other.names);
        self.words.extend(other.words);
    }
}

impl ArgModel {
    /// Learn from one example: a request and the calls made for it (API id, arguments as sent).
    /// Values that reference an earlier output (`$varN.field$`) are the graph's FEEDS, not this.
    /// Returns the slots it changed.
    pub fn learn<'a>(
        &mut self,
        request: &str,
        calls: impl IntoIterator<Item = (&'a str, &'a Map<String, Value>)>,
        today: chrono::NaiveDate,
    ) -> Touched {
        let values = RequestValues::extract(request, today);
        let said = crate::read::reading::ordering_words(request);
        self.examples += 1;
        let mut touched = Touched::default();
        // The last reference each (API, parameter) took in this run, and the calls per API.
        let mut last_ref: BTreeMap<(&str, &str), Reference> = BTreeMap::new();
        let mut calls_per_api: BTreeMap<&str, u32> = BTreeMap::new();
        let calls: Vec<(&str, &Map<String, Value>)> = calls.into_iter().collect();
        for (i, &(api, args)) in calls.iter().enumerate() {
            *calls_per_api.entry(api).or_default() += 1;
            for (param, value) in args {
                if let Some(r) = value.as_str().and_then(Reference::whole) {
                    // A recorded chain's step k is labelled `var{k}` (as memories are replayed).
                    let producer = r.label.strip_prefix("var").and_then(|k| k.parse::<usize>().ok());
                    if let Some(&(from, _)) = producer.filter(|k| (1..=i).contains(k)).and_then(|k| calls.get(k - 1)) {
                        for slot in [
                            self.slots.entry(api.to_string()).or_default().entry(param.clone()).or_default(),
                            self.by_name.entry(name_key(param)).or_default(),
                        ] {
                            *slot.producers.entry(from.to_string()).or_default() += 1;
                        }
                        touched.apis.insert(api.to_string());
                        touched.names.insert(name_key(param));
                    }
                    if let Some(before) = last_ref.insert((api, param.as_str()), r.clone()) {
                        let how = Repeat::of(&before, &r) as usize;
                        self.slots.entry(api.to_string()).or_default().entry(param.clone()).or_default().on_repeat
                            [how] += 1;
                        self.by_name.entry(name_key(param)).or_default().on_repeat[how] += 1;
                        touched.apis.insert(api.to_string());
                        touched.names.insert(name_key(param));
                    }
                    continue;
                }
                if value.is_null()
                    || value.as_str().is_some_and(holds_reference)
                    || value.is_object()
                    || value.is_array()
                {
                    continue;
                }
                self.slots
                    .entry(api.to_string())
                    .or_default()
                    .entry(param.clone())
                    .or_default()
                    .observe(value, &values);
                self.by_name.entry(name_key(param)).or_default().observe(value, &values);
                touched.apis.insert(api.to_string());
                touched.names.insert(name_key(param));
            }
            self.learn_words(api, args, &values, &said, &mut touched);
        }
        for api in calls_per_api.keys() {
            touched.apis.insert(api.to_string());
        }
        touched.words.extend(self.asks.learn(request, calls_per_api.keys().copied()));
        // How many times the run called an API it called more than once: a counted number of
        // the request ("three hotels", "the two cheapest") or not.
        for (api, n) in calls_per_api.into_iter().filter(|(_, n)| *n >= 2) {
            self.slots
                .entry(api.to_string())
                .or_default()
                .entry(CALLS.to_string())
                .or_default()
                .observe(&Value::from(n), &values);
            touched.apis.insert(api.to_string());
        }
        touched
    }

    /// Count the request's words with the word values `api` was sent (and with all its calls,
    /// from its first word value on): what [`ArgModel::cued_value`] reads.
    fn learn_words(
        &mut self,
        api: &str,
        args: &Map<String, Value>,
        values: &RequestValues,
        said: &[String],
        touched: &mut Touched,
    ) {
        let sent: Vec<(&String, String)> =
            args.iter().filter(|(_, v)| word_value(v, values)).map(|(p, v)| (p, v.to_string())).collect();
        if sent.is_empty() && !self.slots.get(api).is_some_and(|s| s.contains_key(REQUEST)) {
            return;
        }
        let slots = self.slots.entry(api.to_string()).or_default();
        let all = slots.entry(REQUEST.to_string()).or_default();
        all.support += 1;
        // (No empty maps: the stored counters hold none, and the model reads back as it was.)
        if !said.is_empty() {
            count_words(all.words.entry(String::new()).or_default(), said, MAX_REQUEST_WORDS);
        }
        for (param, value) in sent {
            let slot = slots.entry(param.clone()).or_default();
            // Only the values the slot keeps (at most MAX_CONSTANTS): the words stay bounded.
            if slot.values.contains_key(&value) && !said.is_empty() {
                count_words(slot.words.entry(value).or_default(), said, MAX_VALUE_WORDS);
            }
        }
        touched.apis.insert(api.to_string());
    }

    /// The word value `api`'s `param` takes for `request`, by the words recorded runs said with
    /// it: each value scores the calls of the words this request says that went (four times in
    /// five or more, and twice or more) with that value among all calls of the API — "cheapest"
    /// with `CHEAPEST`, "top-rated" with `attr_book_score`, "nearest" with `distance`. `None`
    /// when no word pulls toward one value, or two values tie.
    pub fn cued_value(&self, api: &str, param: &str, request: &str) -> Option<Value> {
        // Most parameters were never sent a word value: nothing to read the request for.
        if self.slots.get(api)?.get(param)?.words.is_empty() {
            return None;
        }
        let said = crate::read::reading::ordering_words(request);
        if said.is_empty() {
            return None;
        }
        let mut scored: Vec<(u32, String)> = self
            .value_cues(api, param)
            .into_iter()
            .map(|(v, cues)| (cues.iter().filter(|(w, _)| said.contains(w)).map(|(_, n)| n).sum(), v))
            .filter(|(score, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        match scored.as_slice() {
            [] => None,
            [(a, _), (b, _), ..] if a == b => None,
            [(_, v), ..] => serde_json::from_str(v).ok(),
        }
    }

    /// Per word value `api`'s `param` was sent twice or more (JSON text): the words that go with
    /// it — said with it in two calls or more, and in four of five calls of the API that said them.
    pub fn value_cues(&self, api: &str, param: &str) -> BTreeMap<String, Vec<(String, u32)>> {
        let Some(slots) = self.slots.get(api) else { return BTreeMap::new() };
        let (Some(all), Some(slot)) = (slots.get(REQUEST).and_then(|s| s.words.get("")), slots.get(param)) else {
            return BTreeMap::new();
        };
        slot.words
            .iter()
            .filter(|(v, _)| slot.values.get(*v).is_some_and(|n| *n >= 2))
            .map(|(v, with)| {
                let cues = with
                    .iter()
                    .filter(|(w, n)| **n >= 2 && all.get(*w).is_some_and(|total| 5 * **n >= 4 * total))
                    .map(|(w, n)| (w.clone(), *n))
                    .collect::<Vec<_>>();
                (v.clone(), cues)
            })
            .filter(|(_, cues)| !cues.is_empty())
            .collect()
    }

    /// Where a repeated call of `api` takes `param` from, relative to the call before it: what
    /// most (over half) of its recorded repeated calls did — at least two of its own, else three
    /// of the parameter name's across APIs. `None` when too little is known or nothing is most.
    pub fn repeat_of(&self, api: &str, param: &str) -> Option<Repeat> {
        let most = |r: [u32; 4]| -> Option<Repeat> {
            let total: u32 = r.iter().sum();
            Repeat::ALL.into_iter().find(|k| 2 * r[*k as usize] > total)
        };
        let own =
            self.slots.get(api).and_then(|s| s.get(param)).map(|s| s.on_repeat).filter(|r| r.iter().sum::<u32>() >= 2);
        match own {
            Some(r) => most(r),
            None => self
                .by_name
                .get(&name_key(param))
                .map(|s| s.on_repeat)
                .filter(|r| r.iter().sum::<u32>() >= 3)
                .and_then(most),
        }
    }

    /// Whether a repeated call of `api` takes `param` from the next element of the list the call
    /// before it read (one call per option).
    pub fn advances(&self, api: &str, param: &str) -> bool {
        self.repeat_of(api, param) == Some(Repeat::Next)
    }

    /// Whether recorded runs call `api` once per option: a parameter that advances along a list,
    /// or one that reads the newest call of its producer (a call per option of that one; this
    /// counts on three or more of the API's own repeated calls).
    pub fn per_option(&self, api: &str, params: &[toolgraph_schema::ParamDoc]) -> bool {
        let own = |p: &str| self.slots.get(api).and_then(|s| s.get(p)).map_or(0, |s| s.on_repeat.iter().sum::<u32>());
        params.iter().any(|p| match self.repeat_of(api, &p.name) {
            Some(Repeat::Next) => true,
            Some(Repeat::Newest) => own(&p.name) >= 3,
            _ => false,
        })
    }

    /// How many options the request asks `api` to be called for, where its recorded runs learned
    /// that a counted number says so (most of the runs that called it more than once had that
    /// count in the request): the one counted number between 2 and 10, or the one the words
    /// around them choose ("find **three** hotels … each"). `None` when nothing was learned or the
    /// request does not say.
    pub fn options(&self, api: &str, values: &RequestValues) -> Option<usize> {
        let slot = self.slots.get(api)?.get(CALLS)?;
        let said = slot.kinds.get(&Kind::Number).copied().unwrap_or(0);
        if slot.support < 2 || 2 * said <= slot.support {
            return None;
        }
        let ms = mentions(values, Kind::Number);
        let count = |m: &Mention| m.value.parse::<usize>().ok().filter(|n| (2..=10).contains(n));
        let fit: Vec<usize> = (0..ms.len()).filter(|i| count(&ms[*i]).is_some()).collect();
        match fit.as_slice() {
            [] => None,
            [one] => count(&ms[*one]),
            _ => {
                self.choose_among(api, CALLS, Kind::Number, &ms, |i| fit.contains(&i)).and_then(|c| count(&ms[c.index]))
            }
        }
    }

    /// The model's counters as the store keeps them ([`counts::flatten`] under
    /// [`ARGUMENT_COUNTS`]): every one, or only the slots of these APIs and parameter names (and
    /// the example count).
    pub fn counts(&self, only: Option<&Touched>) -> BTreeMap<String, i64> {
        let tree = match only {
            None => serde_json::to_value(self),
            Some(Touched { apis, names, words }) => serde_json::to_value(ArgModel {
                examples: self.examples,
                slots: self
                    .slots
                    .iter()
                    .filter(|(k, _)| apis.contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                by_name: self
                    .by_name
                    .iter()
                    .filter(|(k, _)| names.contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                asks: self.asks.only(apis, words),
            }),
        };
        counts::flatten(ARGUMENT_COUNTS, &tree.unwrap_or_default())
    }

    /// The model the store's counters hold (keys under [`ARGUMENT_COUNTS`]); `None` when it holds
    /// none, an error naming the counter that does not read.
    pub fn from_counts(stored: &[(String, i64)]) -> Result<Option<ArgModel>, String> {
        if !stored.iter().any(|(k, _)| k.starts_with(ARGUMENT_COUNTS)) {
            return Ok(None);
        }
        let tree = counts::unflatten(ARGUMENT_COUNTS, stored)?;
        serde_json::from_value(tree).map(Some).map_err(|e| format!("the stored argument model does not read: {e}"))
    }

    /// Learn what `learn` learns (calls of [`ArgModel::learn`] with examples whose calls name
    /// only `apis` and parameters whose names normalise to `names`), and return the counter
    /// increments it made: what the store adds (those slots, compared before and after — once for
    /// a whole batch of examples, so a batch costs one pass over the slots it touched).
    pub fn learn_counted(&mut self, only: &Touched, learn: impl FnOnce(&mut ArgModel)) -> Vec<CountDelta> {
        let before = self.counts(Some(only));
        learn(self);
        counts::delta(&before, &self.counts(Some(only)))
    }

    /// The share of the recorded calls of `api`'s `param` that took it from an output of
    /// `producer`: the slot's own when it took a reference twice or more, else the parameter
    /// name's (three or more); `None` where neither has.
    pub fn producer_share(&self, api: &str, param: &str, producer: &str) -> Option<f64> {
        let share = |s: &SlotStats, min: u32| {
            let total: u32 = s.producers.values().sum();
            (total >= min).then(|| f64::from(s.producers.get(producer).copied().unwrap_or(0)) / f64::from(total))
        };
        let own = self.slots.get(api).and_then(|s| s.get(param)).and_then(|s| share(s, 2));
        own.or_else(|| self.by_name.get(&name_key(param)).and_then(|s| share(s, 3)))
    }

    /// Whether a parameter of `api` took numbers counted by `unit` (see
    /// [`crate::read::slots::unit_word`]) in recorded runs, twice or more: a hotel search by
    /// coordinates takes "20 kilometers" as its radius, a search by city does not.
    pub fn takes_unit(&self, api: &str, unit: &str) -> bool {
        self.slots.get(api).is_some_and(|s| s.values().any(|slot| slot.units.get(unit).is_some_and(|n| *n >= 2)))
    }

    /// Whether some parameter took numbers counted by `unit` twice or more (by parameter name,
    /// across APIs): a number so counted is a quantity some call can be sent.
    pub fn knows_unit(&self, unit: &str) -> bool {
        self.by_name.values().any(|slot| slot.units.get(unit).is_some_and(|n| *n >= 2))
    }

    /// Whether recorded calls of `api` read an output of `producer` (any parameter).
    pub fn reads_from(&self, api: &str, producer: &str) -> bool {
        self.slots.get(api).is_some_and(|s| s.values().any(|slot| slot.producers.get(producer).is_some_and(|n| *n > 0)))
    }

    /// The APIs whose outputs recorded calls of `api` read (any parameter): its providers.
    pub fn producers(&self, api: &str) -> BTreeSet<&str> {
        self.slots
            .get(api)
            .into_iter()
            .flat_map(|s| s.values())
            .flat_map(|slot| slot.producers.iter().filter(|(_, n)| **n > 0).map(|(p, _)| p.as_str()))
            .collect()
    }

    /// The slot that speaks for `api`'s `param` on mentions of `kind`: its own examples when it
    /// has decided between mentions twice or more, else the parameter name's (three or more).
    pub fn slot(&self, api: &str, param: &str, kind: Kind) -> Option<(&SlotStats, &'static str)> {
        let own = self.slots.get(api).and_then(|s| s.get(param)).filter(|s| s.decided(kind) >= 2).map(|s| (s, "api"));
        own.or_else(|| {
            self.by_name.get(&name_key(param)).filter(|s| param != CALLS && s.decided(kind) >= 3).map(|s| (s, "name"))
        })
    }

    /// Which of several mentions of `kind` `api`'s `param` takes; `None` with fewer than two
    /// mentions, too few examples, or a tie.
    pub fn choose(&self, api: &str, param: &str, kind: Kind, ms: &[Mention]) -> Option<Choice> {
        self.choose_among(api, param, kind, ms, |_| true)
    }

    /// [`ArgModel::choose`] among the mentions `allowed` admits (scored in the whole request, so
    /// the order learned still means the same position): `None` with fewer than two allowed.
    pub fn choose_among(
        &self,
        api: &str,
        param: &str,
        kind: Kind,
        ms: &[Mention],
        allowed: impl Fn(usize) -> bool,
    ) -> Option<Choice> {
        let mut order: Vec<usize> = (0..ms.len()).filter(|i| allowed(*i)).collect();
        if order.len() < 2 {
            return None;
        }
        let (slot, from) = self.slot(api, param, kind)?;
        let scores = slot.scores(kind, ms);
        order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
        let margin = scores[order[0]] - scores[order[1]];
        (margin > 1e-9).then(|| Choice { index: order[0], margin, from })
    }

    /// A value `api`'s `param` was sent with in recorded runs that `request` says in words (an
    /// enumeration: `install`, `buy`, `business`): its own examples, else the parameter name's;
    /// the most frequent of those said, `None` when none is or two tie.
    pub fn said_value(&self, api: &str, param: &str, request: &str) -> Option<Value> {
        let text = crate::read::reading::words(request);
        let pick = |slot: &SlotStats| -> Option<String> {
            let mut said: Vec<(&String, u32)> = slot
                .values
                .iter()
                .filter(|(v, _)| {
                    serde_json::from_str::<String>(v)
                        .is_ok_and(|s| s.chars().any(char::is_alphabetic) && crate::read::reading::says(&text, &s))
                })
                .map(|(v, n)| (v, *n))
                .collect();
            said.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            match said.as_slice() {
                [] => None,
                [(_, n), (_, m), ..] if n == m => None,
                [(a, _), ..] => Some((*a).clone()),
            }
        };
        let own = self.slots.get(api).and_then(|s| s.get(param)).and_then(pick);
        own.or_else(|| self.by_name.get(&name_key(param)).and_then(pick)).and_then(|v| serde_json::from_str(&v).ok())
    }

    /// A constant `api`'s `param` is always sent with (its own examples only).
    pub fn constant(&self, api: &str, param: &str) -> Option<Value> {
        self.slots.get(api)?.get(param)?.constant()
    }

    /// Whether recorded calls gave `api`'s `param` a literal value (what a request says, or a
    /// constant) more often than they read it from an earlier call's output.
    pub fn mostly_literal(&self, api: &str, param: &str) -> bool {
        let slot = self.slots.get(api).and_then(|s| s.get(param));
        slot.is_some_and(|s| s.support > s.producers.values().sum::<u32>())
    }

    /// What was learned for `api`'s parameters, for people: source kinds, the strongest cue
    /// words either way, the order taken, constants, the APIs its references were taken from and
    /// support counts.
    pub fn describe(&self, api: &str) -> Value {
        let Some(slots) = self.slots.get(api) else { return Value::Null };
        let mut out = Map::new();
        for (param, s) in slots.iter().filter(|(p, _)| p.as_str() != REQUEST) {
            let mut kinds = Map::new();
            for (kind, n) in &s.kinds {
                let mut k = serde_json::json!({"times": n});
                if s.decided(*kind) > 0 {
                    let chosen = f64::from(s.decided(*kind));
                    let passed = f64::from(s.passed.get(kind).copied().unwrap_or(0));
                    let mut weights: Vec<(String, f64, [u32; 2])> = s
                        .cues
                        .get(kind)
                        .into_iter()
                        .flatten()
                        .map(|(w, counts)| (w.clone(), cue_weight(*counts, chosen, passed), *counts))
                        .collect();
                    weights.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    let show = |w: &[(String, f64, [u32; 2])]| {
                        w.iter().map(|(w, s, [c, p])| serde_json::json!({"word": w, "weight": (s * 100.0).round() / 100.0, "with": c, "against": p})).collect::<Vec<_>>()
                    };
                    let against: Vec<(String, f64, [u32; 2])> = weights.iter().rev().take(5).cloned().collect();
                    k["decided"] = serde_json::json!(s.decided(*kind));
                    k["order"] = serde_json::json!(s.order.get(kind));
                    k["cues_for"] = serde_json::json!(show(&weights[..weights.len().min(5)]));
                    k["cues_against"] = serde_json::json!(show(&against));
                }
                kinds.insert(kind.as_str().into(), k);
            }
            let mut shown = serde_json::json!({"support": s.support, "kinds": kinds, "constant": s.constant()});
            let cues = self.value_cues(api, param);
            if !cues.is_empty() {
                shown["value_cues"] = serde_json::json!(cues
                    .into_iter()
                    .map(|(v, mut ws)| {
                        ws.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                        ws.truncate(8);
                        (
                            serde_json::from_str::<Value>(&v)
                                .map_or(v, |v| v.as_str().map_or(v.to_string(), str::to_string)),
                            ws,
                        )
                    })
                    .collect::<BTreeMap<_, _>>());
            }
            if !s.producers.is_empty() {
                shown["taken_from"] = serde_json::json!(s.producers);
            }
            if !is_unset(&s.on_repeat) {
                let [same, next, newest, other] = s.on_repeat;
                let usual = self.repeat_of(api, param).map(|r| format!("{r:?}").to_lowercase());
                shown["on_repeat"] = serde_json::json!({"same": same, "next_item": next, "newest_producer": newest, "other": other, "usual": usual});
            }
            out.insert(param.clone(), shown);
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn day() -> chrono::NaiveDate {
        chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    /// Where recorded runs took a parameter from another call's output is learned per API and
    /// per parameter name: an order's `customer_id` came from the customer lookup (not from the
    /// order list that outputs one too), and a refund API never seen takes its `customer_id` from
    /// where the name's other slots took it.
    #[test]
    fn the_api_a_parameter_was_taken_from_is_learned() {
        let mut m = ArgModel::default();
        let (find, list, order) = ("shop/find_customer", "shop/list_orders", "shop/create_order");
        for i in 0..3 {
            let lookup = args(json!({"email": format!("c{i}@example.com")}));
            let listed = args(json!({"customer_id": "$var1.customers.0.id$"}));
            let ordered = args(json!({"customer_id": "$var1.customers.0.id$", "sku": "$var2.orders.0.sku$"}));
            m.learn(
                "Order again what I ordered last time",
                [(find, &lookup), (list, &listed), (order, &ordered)],
                day(),
            );
        }
        assert_eq!(m.producer_share(order, "customer_id", find), Some(1.0));
        assert_eq!(m.producer_share(order, "customer_id", list), Some(0.0));
        assert_eq!(m.producer_share(order, "sku", list), Some(1.0));
        // Another API's parameter of the same name: the name's slots speak.
        assert_eq!(m.producer_share("shop/refund", "customer_id", find), Some(1.0));
        // A label no earlier call has teaches nothing.
        let mut fresh = ArgModel::default();
        for _ in 0..3 {
            fresh.learn("refund", [(order, &args(json!({"customer_id": "$var2.id$"})))], day());
        }
        assert_eq!(fresh.producer_share(order, "customer_id", find), None);
        // The counts go into the store and read back.
        let stored: Vec<(String, i64)> = m.counts(None).into_iter().collect();
        assert_eq!(ArgModel::from_counts(&stored).unwrap().unwrap(), m);
        assert_eq!(m.describe(order)["customer_id"]["taken_from"][find], 3);
    }

    /// The words that counted the numbers a parameter took are learned per API: a bike-station
    /// search near a point took "within 2 kilometers" as its `radius`; the search by district
    /// never took a distance. "adults" counts no distance; "2024 for" is no unit.
    #[test]
    fn the_unit_a_parameter_took_its_numbers_in_is_learned() {
        let mut m = ArgModel::default();
        let (near, district) = ("bikes/stations_near", "bikes/stations_in_district");
        for (km, place) in [(2, "the harbour"), (3, "the old town"), (5, "the stadium")] {
            let a = args(json!({"lat": "$var1.lat$", "radius": km}));
            m.learn(&format!("Bike stations within {km} kilometers of {place}, please."), [(near, &a)], day());
        }
        for d in ["Mitte", "Neukolln"] {
            m.learn(&format!("Bike stations in {d} for 2 adults"), [(district, &args(json!({"district": d})))], day());
        }
        assert!(m.takes_unit(near, "kilometer") && !m.takes_unit(district, "kilometer"));
        assert!(m.knows_unit("kilometer") && !m.knows_unit("mile"));
        assert_eq!(crate::read::slots::unit_word("Kilometers").as_deref(), Some("kilometer"));
        assert_eq!(crate::read::slots::unit_word("km").as_deref(), Some("km"));
        assert_eq!(crate::read::slots::unit_word("for"), None);
        // The counts go into the store and read back.
        let stored: Vec<(String, i64)> = m.counts(None).into_iter().collect();
        assert_eq!(ArgModel::from_counts(&stored).unwrap().unwrap(), m);
    }

    /// Three recorded rentals teach `drop_off_time` to take the time said after "return" — even
    /// where it comes first — and an unseen request gets it right.
    #[test]
    fn a_parameter_learns_its_cue_from_a_few_runs_and_fills_an_unseen_request() {
        let mut m = ArgModel::default();
        let runs = [
            (
                "Rent a car at Miami airport at 9 AM on July 3rd, 2024 and return it there at 6 PM on July 5th.",
                "09:00",
                "18:00",
            ),
            (
                "I want to return the car at 8 PM on August 9th, 2024; pick it up at LAX at 10 AM on August 2nd.",
                "10:00",
                "20:00",
            ),
            ("Pick up a car in Denver at 7 AM on May 1st, 2024, return it at 11 PM two days later.", "07:00", "23:00"),
        ];
        for (req, pick, drop) in runs {
            let a = args(json!({"pick_up_time": pick, "drop_off_time": drop, "pick_up_latitude": "$var1.latitude$"}));
            m.learn(req, [("car/rent", &a)], day());
        }
        let unseen = RequestValues::extract("Today is June 1st, 2024. I need to return the rental at 5 PM, and I will collect it at 11 AM on June 4th, 2024 in Seattle.", day());
        let times = mentions(&unseen, Kind::Time);
        assert_eq!(times.iter().map(|t| t.value.as_str()).collect::<Vec<_>>(), ["17:00", "11:00"]);
        let drop = m.choose("car/rent", "drop_off_time", Kind::Time, &times).expect("learned");
        assert_eq!(times[drop.index].value, "17:00", "the time after `return`, though it comes first");
        let pick = m.choose("car/rent", "pick_up_time", Kind::Time, &times).expect("learned");
        assert_eq!(times[pick.index].value, "11:00");
        // An API never seen backs off to the parameter's name across APIs (three examples).
        let other = m.choose("car/other_rent", "drop_off_time", Kind::Time, &times).expect("backed off");
        assert_eq!((times[other.index].value.as_str(), other.from), ("17:00", "name"));
        // References are FEEDS, not mentions: nothing learned for them.
        assert!(!m.slots["car/rent"].contains_key("pick_up_latitude"));
        assert!(m.describe("car/rent")["drop_off_time"]["kinds"]["time"]["cues_for"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["word"] == "return"));
    }

    /// The words recorded requests said with each sort value choose it for a request that never
    /// names the value; words said with every value, and a call that sent none, choose nothing.
    #[test]
    fn an_ordering_word_picks_the_sort_value_recorded_runs_used_with_it() {
        let mut m = ArgModel::default();
        let runs = [
            ("Find the cheapest flight from Paris to Rome on May 3rd.", Some("CHEAPEST")),
            ("I need the cheapest tickets from Oslo to Lima.", Some("CHEAPEST")),
            ("Book the fastest flight from Berlin to Madrid.", Some("FASTEST")),
            ("What is the fastest way to fly from Tokyo to Seoul on June 9th?", Some("FASTEST")),
            ("Show me the best flight from Dublin to Vienna.", Some("BEST")),
            ("Which flight from Cairo to Doha is best?", Some("BEST")),
            ("Any flight from Quito to Bogota on June 2nd.", None),
            ("A flight from Accra to Dakar, please.", None),
        ];
        for (req, sort) in runs {
            let mut a = args(json!({"from": "$var1.id$"}));
            if let Some(sort) = sort {
                a.insert("sort".into(), json!(sort));
            }
            m.learn(req, [("f/search", &a)], day());
        }
        let cue = |req: &str| m.cued_value("f/search", "sort", req);
        assert_eq!(cue("Get me the cheapest seats from Nice to Porto."), Some(json!("CHEAPEST")));
        assert_eq!(cue("Which is the fastest connection from Lyon to Turin?"), Some(json!("FASTEST")));
        assert_eq!(cue("A flight from Nice to Porto on May 1st."), None, "`flight` is said with every value");
        assert_eq!(cue("The cheapest or the fastest, from Nice to Porto?"), None, "a tie chooses nothing");
        let shown = m.describe("f/search");
        assert!(shown["sort"]["value_cues"]["CHEAPEST"].as_array().unwrap().iter().any(|c| c[0] == "cheapest"));
        assert!(shown.get(REQUEST).is_none(), "the pseudo-parameter is not shown as a parameter");
    }

    #[test]
    fn a_constant_needs_support_and_agreement_and_one_mention_is_no_choice() {
        let mut m = ArgModel::default();
        for (i, cur) in ["USD", "USD", "USD", "EUR"].iter().enumerate() {
            m.learn(&format!("hotels in Rome number {i}"), [("h/search", &args(json!({"currency": cur})))], day());
        }
        assert_eq!(m.constant("h/search", "currency"), None, "3 of 4 is under 80 %");
        m.learn("hotels in Paris", [("h/search", &args(json!({"currency": "USD"})))], day());
        assert_eq!(m.constant("h/search", "currency"), Some(json!("USD")));
        // A recorded value the request says in words fills an enumeration.
        for (req, op) in [("buy some AAPL", "buy"), ("sell my TSLA", "sell"), ("buy MSFT", "buy")] {
            m.learn(req, [("h/stock", &args(json!({"operation": op})))], day());
        }
        assert_eq!(m.said_value("h/stock", "operation", "Please sell the Apple stock I hold."), Some(json!("sell")));
        assert_eq!(
            m.said_value("h/other_stock", "operation", "Buy Apple."),
            Some(json!("buy")),
            "backed off to the name"
        );
        assert_eq!(m.said_value("h/stock", "operation", "What is Apple worth?"), None);
        let one = vec![Mention { value: "10:00".into(), cues: vec![], at: 0 }];
        assert_eq!(m.choose("h/search", "currency", Kind::Time, &one), None);
    }
}
