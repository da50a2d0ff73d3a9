//! The kinds of request mention, what the recorded calls of one slot (an API's parameter, or a
//! parameter name) show, and how a repeated call's reference compares with the one before: the
//! statistics the argument model ([`crate::fill::learned::ArgModel`]) keeps and chooses by.

use super::values::RequestValues;
use crate::exec::refs::{holds_reference, Reference};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A kind of request mention the learned filler chooses among.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A date.
    Date,
    /// A time of day.
    Time,
    /// A number.
    Number,
    /// A name.
    Name,
}

impl Kind {
    /// Every kind, in the order models store them.
    pub const ALL: [Kind; 4] = [Kind::Date, Kind::Time, Kind::Number, Kind::Name];
    /// Its name in stored models and traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Date => "date",
            Kind::Time => "time",
            Kind::Number => "number",
            Kind::Name => "name",
        }
    }
}

/// One mention of a request: its normalized value and the words around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mention {
    pub value: String,
    pub cues: Vec<String>,
    /// Its first word's index among the request's words (0 where the reading kept none).
    pub at: usize,
}

/// The mentions of each kind in a request, in order of appearance.
pub fn mentions(v: &RequestValues, kind: Kind) -> Vec<Mention> {
    let pair = |values: Vec<String>, cues: &Vec<Vec<String>>, at: &[usize]| {
        values
            .into_iter()
            .enumerate()
            .map(|(i, value)| Mention {
                value,
                cues: cues.get(i).cloned().unwrap_or_default(),
                at: at.get(i).copied().unwrap_or(0),
            })
            .collect()
    };
    match kind {
        Kind::Date => pair(v.dates.iter().map(|d| super::stamps::date_text(*d)).collect(), &v.date_cues, &v.date_at),
        Kind::Time => pair(v.times.clone(), &v.time_cues, &v.time_at),
        Kind::Number => pair(v.numbers.iter().map(|n| number_text(n.value)).collect(), &v.number_cues, &[]),
        Kind::Name => pair(v.names.iter().map(|n| n.to_lowercase()).collect(), &v.name_cues, &v.name_at),
    }
}

fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// A recorded argument value as a mention of `kind` would read (dates `YYYY-MM-DD`, times
/// `HH:MM`, numbers without a trailing `.0`, names in lower case).
pub(crate) fn normalized(v: &Value, kind: Kind) -> Option<String> {
    match (kind, v) {
        (Kind::Number, Value::Number(n)) => n.as_f64().map(number_text),
        (Kind::Number, Value::String(s)) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()).map(number_text),
        (Kind::Date, Value::String(s)) => super::stamps::date(s.get(..10).unwrap_or(s)).map(super::stamps::date_text),
        (Kind::Time, Value::String(s)) => {
            let (h, m) = s.trim().split_once(':')?;
            let (h, m): (u32, u32) = (h.parse().ok()?, m.get(..2)?.parse().ok()?);
            (h < 24 && m < 60).then(|| format!("{h:02}:{m:02}"))
        }
        (Kind::Name, Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_lowercase()),
        _ => None,
    }
}

/// What the recorded calls of one slot (an API's parameter, or a parameter name) show.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlotStats {
    /// Recorded calls that gave the parameter a literal value (not an earlier output).
    pub support: u32,
    /// How often its value was a mention of each kind.
    pub kinds: BTreeMap<Kind, u32>,
    /// Of the requests with several mentions of that kind: the position of the one it took.
    pub order: BTreeMap<Kind, BTreeMap<usize, u32>>,
    /// Mentions it took and mentions of the same kind it passed over, per kind.
    pub chosen: BTreeMap<Kind, u32>,
    pub passed: BTreeMap<Kind, u32>,
    /// Words around the mentions it took `[0]` and around those it passed over `[1]`, per kind.
    pub cues: BTreeMap<Kind, BTreeMap<String, [u32; 2]>>,
    /// Literal values as sent (JSON text) → times; at most [`MAX_CONSTANTS`] kept.
    pub values: BTreeMap<String, u32>,
    /// A run's repeated calls of the API, when both took the parameter from an earlier output:
    /// how the later reference compared with the one before — `[same, next, newest, other]`
    /// ([`Repeat`]). The second rental search reads the same location (`same`); one call per
    /// compared hotel reads the next hotel's id (`next`); the payment options of each hotel read
    /// the id from that hotel's details call (`newest`).
    #[serde(default, skip_serializing_if = "is_unset")]
    pub on_repeat: [u32; 4],
    /// The request's ordering words ([`super::reading::ordering_words`]) said with each word value it was sent with (value as
    /// JSON text → word → calls; at most [`MAX_VALUE_WORDS`] words a value). Under the API's
    /// [`REQUEST`] pseudo-parameter, key `""`: the words said with every call of the API since it
    /// was first sent a word value, against which a word's pull toward one value is measured.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub words: BTreeMap<String, BTreeMap<String, u32>>,
    /// The APIs whose output recorded calls took the parameter from (a reference to an earlier
    /// call of the run), API id → calls: a hotel search's `dest_id` came from the destination
    /// lookup, not from the nearby-cities call that also outputs one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub producers: BTreeMap<String, u32>,
    /// The words that counted the numbers it took ("within 20 kilometers" → `kilometer`,
    /// see [`unit_word`]) → calls: what a request's "5 km" or "3 tickets" can be sent as.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub units: BTreeMap<String, u32>,
}

pub(crate) fn is_unset(v: &[u32; 4]) -> bool {
    *v == [0; 4]
}

/// How a repeated call's reference compares with the one the call before it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// The same field (`$var1.coordinates.latitude$` both times).
    Same = 0,
    /// The same field of another element of the same list (`$var2.result.0.hotel_id$` →
    /// `$var2.result.1.hotel_id$`; an index left out reads as the first element).
    Next = 1,
    /// The same field of a later call's output (`$var4.hotel_id$` → `$var6.hotel_id$`): the
    /// newest producer.
    Newest = 2,
    /// Anything else (another field).
    Other = 3,
}

impl Repeat {
    pub(crate) const ALL: [Repeat; 4] = [Repeat::Same, Repeat::Next, Repeat::Newest, Repeat::Other];

    /// How reference `now` compares with `before`: the same, the next item of the same list, the
    /// same field of a newer producer, or another field.
    pub fn of(before: &Reference, now: &Reference) -> Repeat {
        if before == now {
            return Repeat::Same;
        }
        fn field(r: &Reference) -> Vec<&str> {
            r.segments().into_iter().filter(|s| s.parse::<usize>().is_err()).collect()
        }
        match (field(before) == field(now), before.label == now.label) {
            (true, true) => Repeat::Next,
            (true, false) => Repeat::Newest,
            _ => Repeat::Other,
        }
    }
}

/// The pseudo-parameter under which an API's slot learns how many times a run called it (when
/// more than once): which counted number of the request said how many options there were.
pub(crate) const CALLS: &str = "#calls";

/// The pseudo-parameter under which an API's slot counts the request words said with all its
/// calls (see [`SlotStats::words`]).
pub(crate) const REQUEST: &str = "#request";

pub(crate) const MAX_CONSTANTS: usize = 8;
pub(crate) const MAX_CUE_WORDS: usize = 400;
/// Words kept per value a parameter was sent with, and per API over all its calls.
pub(crate) const MAX_VALUE_WORDS: usize = 200;
pub(crate) const MAX_REQUEST_WORDS: usize = 1000;

/// A literal that is a word value (`CHEAPEST`, `popularity`, `sort_recent_desc`), not a mention
/// of the request, a reference or free text: what an ordering or enumeration parameter takes.
pub(crate) fn word_value(v: &Value, request: &RequestValues) -> bool {
    let Some(s) = v.as_str() else { return false };
    let s = s.trim();
    !s.is_empty()
        && s.len() <= 40
        && !holds_reference(s)
        && s.chars().any(char::is_alphabetic)
        && super::reading::word_count(s) <= 3
        && !Kind::ALL
            .iter()
            .any(|k| normalized(v, *k).is_some_and(|want| mentions(request, *k).iter().any(|m| m.value == want)))
}

/// The unit a number's counted word names, in one form ("kilometers" → `kilometer`, "USD" →
/// `usd`): `None` for no word, a function word ("2024 for"), or one not made of letters.
pub(crate) fn unit_word(word: &str) -> Option<String> {
    let w = word.to_lowercase();
    if w.chars().count() < 2
        || !w.chars().all(char::is_alphabetic)
        || super::lexicon::lexicon().function_words.contains(&w)
    {
        return None;
    }
    Some(match w.strip_suffix('s') {
        Some(one) if one.chars().count() >= 3 && !one.ends_with('s') => one.to_string(),
        _ => w,
    })
}

pub(crate) fn count_words(map: &mut BTreeMap<String, u32>, words: &[String], cap: usize) {
    for w in words {
        if map.len() < cap || map.contains_key(w) {
            *map.entry(w.clone()).or_default() += 1;
        }
    }
}

impl SlotStats {
    pub(crate) fn observe(&mut self, value: &Value, request: &RequestValues) {
        self.support += 1;
        let text = value.to_string();
        if self.values.contains_key(&text) || self.values.len() < MAX_CONSTANTS {
            *self.values.entry(text).or_default() += 1;
        }
        for kind in Kind::ALL {
            let Some(want) = normalized(value, kind) else { continue };
            let ms = mentions(request, kind);
            let Some(pick) = ms.iter().position(|m| m.value == want) else { continue };
            *self.kinds.entry(kind).or_default() += 1;
            if let Some(u) = request.numbers.get(pick).filter(|_| kind == Kind::Number).and_then(|c| unit_word(&c.word))
            {
                if self.units.len() < MAX_CUE_WORDS || self.units.contains_key(&u) {
                    *self.units.entry(u).or_default() += 1;
                }
            }
            // A value is one mention: the first kind it reads as.
            let others: Vec<&Mention> = ms.iter().filter(|m| m.value != want).collect();
            if others.is_empty() {
                break;
            }
            *self.order.entry(kind).or_default().entry(pick).or_default() += 1;
            *self.chosen.entry(kind).or_default() += 1;
            *self.passed.entry(kind).or_default() += others.len() as u32;
            let cues = self.cues.entry(kind).or_default();
            for w in dedup(&ms[pick].cues) {
                if cues.len() < MAX_CUE_WORDS || cues.contains_key(w) {
                    cues.entry(w.to_string()).or_default()[0] += 1;
                }
            }
            for m in others {
                for w in dedup(&m.cues) {
                    if cues.len() < MAX_CUE_WORDS || cues.contains_key(w) {
                        cues.entry(w.to_string()).or_default()[1] += 1;
                    }
                }
            }
            break;
        }
    }

    /// Requests with several mentions of `kind` in which this slot took one.
    pub(crate) fn decided(&self, kind: Kind) -> u32 {
        self.chosen.get(&kind).copied().unwrap_or(0)
    }

    /// Each mention's log-odds of being the one this slot takes.
    pub fn scores(&self, kind: Kind, ms: &[Mention]) -> Vec<f64> {
        let chosen = f64::from(self.decided(kind));
        let passed = f64::from(self.passed.get(&kind).copied().unwrap_or(0));
        let (no_cues, no_order) = (BTreeMap::new(), BTreeMap::new());
        let cues = self.cues.get(&kind).unwrap_or(&no_cues);
        let order = self.order.get(&kind).unwrap_or(&no_order);
        ms.iter()
            .enumerate()
            .map(|(i, m)| {
                let words: f64 = dedup(&m.cues)
                    .iter()
                    .filter_map(|w| cues.get(*w))
                    .map(|counts| cue_weight(*counts, chosen, passed))
                    .sum();
                let at = f64::from(order.get(&i).copied().unwrap_or(0));
                words + ((at + 0.5) / (chosen + 0.5 * ms.len() as f64)).ln()
            })
            .collect()
    }

    /// The value it always takes, when it does: at least three recorded calls, 80 % of them alike.
    pub fn constant(&self) -> Option<Value> {
        let (text, n) = self.values.iter().max_by_key(|(_, n)| **n)?;
        (self.support >= 3 && f64::from(*n) >= 0.8 * f64::from(self.support))
            .then(|| serde_json::from_str(text).ok())
            .flatten()
    }
}

/// A cue word's log-odds: seen `[with, against]` times around the `chosen` mentions and the
/// `passed` ones (add-½ smoothing).
pub(crate) fn cue_weight([with, against]: [u32; 2], chosen: f64, passed: f64) -> f64 {
    ((f64::from(with) + 0.5) / (chosen + 1.0)).ln() - ((f64::from(against) + 0.5) / (passed + 1.0)).ln()
}

pub(crate) fn dedup(words: &[String]) -> Vec<&str> {
    let mut out: Vec<&str> = words.iter().map(String::as_str).collect();
    out.sort_unstable();
    out.dedup();
    out
}
