//! Replay by analogy: a remembered (request → chain) pair is a worked example of where each
//! argument came from. A new request told the same way — the same words around other places,
//! dates and times — takes the remembered chain with every literal that was a mention of the old
//! request replaced by the new request's corresponding mention:
//!
//! - the two requests' mentions of each kind (dates, times, counted numbers, names) are aligned
//!   (in order where both have as many, else by the words around them);
//! - a recorded value that *is* a mention takes its counterpart; a name inside a longer value
//!   (`"CN Tower, Toronto"`) is replaced where it stands; a date no mention gave is kept as the
//!   offset from the nearest earlier date (or from "today": "the night after", "a 24-hour
//!   rental");
//! - a value the old request never said is a constant of the call or came from an earlier
//!   output: the engine decides with the shared filler.
//!
//! Which remembered request is analogous is read by meaning: [`crate::read::reading::meaning_text`] masks every mention
//! and number (`rent a car at X at N am on M N`) and the memory compares embeddings of that.
//! Mentions are aligned by role, not by where they stand: dates (and the times that go with them)
//! by their order in time, the rest by the role the old mention played in the remembered chain
//! (learned from recorded runs), then the words around them.

use super::align::align;
pub(crate) use super::align::Roles;
use super::spans;
use crate::fill::learned::{mentions, Kind, Mention};
use crate::plan::planner::UnsureMentions;
use crate::read::names::is_stop_name;
use crate::read::reading::{mistyped, says, shortened, tokens, whole_at, words, Token};
use crate::read::stamps;
use crate::read::values::{words_before, RequestValues};
use chrono::{Duration, NaiveDate};
use serde_json::Value;
use std::collections::HashSet;

/// What a recorded literal becomes for the new request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transfer {
    /// A mention (or a value derived from one) of the old request: the new request's counterpart.
    Mapped(Value),
    /// The old request's mention has no counterpart in the new one.
    Unmatched(Kind),
    /// Not something the old request said: a constant, or an earlier output's value.
    Unsaid,
}

/// One kind's mentions of the old request, of the new one, and old index → new index.
type Aligned = (Vec<Mention>, Vec<Mention>, Vec<Option<usize>>);

/// The two requests' mentions, aligned kind by kind.
#[derive(Debug, Clone)]
pub(crate) struct Analogy {
    /// The two requests' words, lower-case (enumeration words are looked up in them).
    old_words: String,
    new_words: String,
    pub(crate) old: std::sync::Arc<RequestValues>,
    pub(crate) new: RequestValues,
    /// Per kind (in [`Kind::ALL`] order): the old mentions, the new ones, old index → new index.
    kinds: Vec<Aligned>,
    /// Per kind: the reading is unsure of its alignment (see [`Analogy::unsure`]).
    unsure: Vec<bool>,
}

fn kind_index(kind: Kind) -> usize {
    Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

impl Analogy {
    #[cfg(test)]
    pub(crate) fn new(old_request: &str, new_request: &str, new: &RequestValues, today: NaiveDate) -> Self {
        Self::of_read(
            old_request,
            std::sync::Arc::new(RequestValues::extract(old_request, today)),
            new_request,
            new,
            None,
        )
    }

    /// The analogy of `old_request` (`old` its values) to `new_request` (`new` its values, read
    /// on the same day): mentions aligned by the roles the old ones played where `roles` knows
    /// them.
    pub(crate) fn of_read(
        old_request: &str,
        old: std::sync::Arc<RequestValues>,
        new_request: &str,
        new: &RequestValues,
        roles: Option<Roles<'_>>,
    ) -> Self {
        let dates = (mentions(&old, Kind::Date), mentions(new, Kind::Date));
        // Each request tokenized once for the words before every mention.
        let read = |text| {
            let toks = tokens(text);
            let lower: Vec<String> = toks.iter().map(|t| t.text.to_lowercase()).collect();
            (toks, lower)
        };
        let (old_read, new_read) = (read(old_request), read(new_request));
        let mut unsure = Vec::new();
        let kinds = Kind::ALL
            .iter()
            .map(|k| {
                let (o, n) = (mentions(&old, *k), mentions(new, *k));
                let lead = |(toks, lower): &(Vec<Token<'_>>, Vec<String>), ms: &[Mention]| -> Vec<Vec<String>> {
                    let phrase = |m: &Mention| if *k == Kind::Name { m.value.clone() } else { String::new() };
                    ms.iter().map(|m| words_before(toks, lower, &phrase(m), m.at)).collect()
                };
                let leads = if *k == Kind::Number {
                    (Vec::new(), Vec::new())
                } else {
                    (lead(&old_read, &o), lead(&new_read, &n))
                };
                let (map, doubt) = align(*k, (&o, &n), (&dates.0, &dates.1), (&leads.0, &leads.1), roles);
                unsure.push(doubt);
                (o, n, map)
            })
            .collect();
        Analogy { old_words: words(old_request), new_words: words(new_request), old, new: new.clone(), kinds, unsure }
    }

    /// The first kind of mention whose alignment the reading is unsure of (2–3 mentions on each
    /// side that nothing learned or said tells apart), as a planner is asked about it: each
    /// mention as its request spells it. `None`: every alignment is sure.
    pub(crate) fn unsure(&self) -> Option<(Kind, UnsureMentions)> {
        let at = self.unsure.iter().position(|u| *u)?;
        let kind = Kind::ALL[at];
        let (old, new, map) = &self.kinds[at];
        let guess: Option<Vec<usize>> = map.iter().copied().collect();
        let shown = |v: &RequestValues, m: &Mention| match kind {
            Kind::Name => {
                v.names.iter().find(|n| n.to_lowercase() == m.value).cloned().unwrap_or_else(|| m.value.clone())
            }
            _ => m.value.clone(),
        };
        Some((
            kind,
            UnsureMentions {
                kind: kind.as_str().to_string(),
                old: old.iter().map(|m| shown(&self.old, m)).collect(),
                new: new.iter().map(|m| shown(&self.new, m)).collect(),
                guess: guess?,
            },
        ))
    }

    /// Align `kind`'s mentions as a planner answered where the reading was unsure: old mention i
    /// ↔ new mention `map[i]`. `false` (nothing changed): not a one-to-one map of that kind's
    /// mentions.
    pub(crate) fn realign(&mut self, kind: Kind, map: &[usize]) -> bool {
        let at = kind_index(kind);
        let (old, new, current) = &mut self.kinds[at];
        let mut seen = HashSet::new();
        if map.len() != old.len() || map.iter().any(|j| *j >= new.len() || !seen.insert(*j)) {
            return false;
        }
        *current = map.iter().map(|j| Some(*j)).collect();
        self.unsure[at] = false;
        true
    }

    /// An enumeration word: `value` is one of the values a parameter is known to take
    /// (`vocabulary`, learned from recorded runs: `ECONOMY`, `BUSINESS`, `FIRST`) and the old
    /// request says it (`business class`); the new request's counterpart is the one known value
    /// it says instead. `None`: not a word the old request says, or no single counterpart.
    pub(crate) fn transfer_word(&self, value: &str, vocabulary: &[String]) -> Option<String> {
        let said = |text: &str, v: &str| says(text, v);
        if vocabulary.len() < 2 || !said(&self.old_words, value) {
            return None;
        }
        if said(&self.new_words, value) {
            return Some(value.to_string());
        }
        // Of the known values it says, the longest reading ("premium economy" is not "economy").
        let said_new: Vec<&String> =
            vocabulary.iter().filter(|v| v.as_str() != value && said(&self.new_words, v)).collect();
        let mut others = said_new.iter().filter(|v| !said_new.iter().any(|w| w != *v && says(&words(w), v)));
        match (others.next(), others.next()) {
            (Some(one), None) => Some((*one).clone()),
            _ => None,
        }
    }

    /// The counterpart of the old request's mention `i` of `kind`.
    pub(crate) fn counterpart(&self, kind: Kind, i: usize) -> Option<&Mention> {
        let (_, new, map) = &self.kinds[kind_index(kind)];
        map.get(i).copied().flatten().and_then(|j| new.get(j))
    }

    pub(crate) fn old_mentions(&self, kind: Kind) -> &[Mention] {
        &self.kinds[kind_index(kind)].0
    }

    /// The new value of a recorded literal. `mention_kinds`: the kinds of mention this parameter
    /// is known to take (learned from recorded runs; empty: it takes none), `None` when nothing
    /// was learned (then any kind).
    pub(crate) fn transfer(&self, value: &Value, mention_kinds: Option<&[Kind]>) -> Transfer {
        let allows = |k: Kind| mention_kinds.is_none_or(|ks| ks.contains(&k));
        match value {
            Value::String(s) => {
                // A list of numbers each said (children's ages), whatever the parameter took before.
                if let Some(t) = self.transfer_numbers(s) {
                    return t;
                }
                if allows(Kind::Date) {
                    if let Some(t) = self.transfer_date(s) {
                        return t;
                    }
                }
                if allows(Kind::Time) {
                    if let Some(t) = self.transfer_time(s) {
                        return t;
                    }
                }
                if allows(Kind::Number) {
                    if let Ok(n) = s.trim().parse::<f64>() {
                        return match self.transfer_number(n) {
                            Transfer::Mapped(Value::Number(m)) => Transfer::Mapped(Value::String(m.to_string())),
                            other => other,
                        };
                    }
                }
                if allows(Kind::Name) {
                    return self.transfer_name(s);
                }
                Transfer::Unsaid
            }
            Value::Number(n) if allows(Kind::Number) => {
                n.as_f64().map(|n| self.transfer_number(n)).unwrap_or(Transfer::Unsaid)
            }
            _ => Transfer::Unsaid,
        }
    }

    /// Whether the new request's mention of `kind` reading `value` has a counterpart in the old
    /// request (`Some(false)`: this request says something the old one did not; `None`: no such
    /// mention).
    pub(crate) fn has_counterpart(&self, kind: Kind, value: &str) -> Option<bool> {
        let (_, new, map) = &self.kinds[kind_index(kind)];
        let want = value.trim().to_lowercase();
        let j = new.iter().position(|m| {
            m.value == want || m.value.parse::<f64>().ok().zip(want.parse::<f64>().ok()).is_some_and(|(a, b)| a == b)
        })?;
        Some(map.contains(&Some(j)))
    }

    /// This request's dates, times and names the remembered request had no counterpart for.
    pub(crate) fn unserved(&self) -> usize {
        [Kind::Date, Kind::Time, Kind::Name]
            .iter()
            .map(|k| {
                let (_, new, map) = &self.kinds[kind_index(*k)];
                (0..new.len()).filter(|j| !map.contains(&Some(*j))).count()
            })
            .sum()
    }

    /// [`Analogy::transfer`] through arrays and objects (the legs of a multi-stop search): each
    /// value inside transferred, references and values the old request never said kept; `Err`
    /// names the kind of a mention with no counterpart.
    pub(crate) fn transfer_deep(&self, value: &Value, mention_kinds: Option<&[Kind]>) -> Result<Value, Kind> {
        match value {
            Value::Array(items) => items
                .iter()
                .map(|x| self.transfer_deep(x, mention_kinds))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(m) => m
                .iter()
                .map(|(k, x)| self.transfer_deep(x, mention_kinds).map(|v| (k.clone(), v)))
                .collect::<Result<serde_json::Map<_, _>, _>>()
                .map(Value::Object),
            Value::String(s) if crate::exec::refs::holds_reference(s) => Ok(Value::String(self.reshift(s))),
            _ => match self.transfer(value, mention_kinds) {
                Transfer::Mapped(v) => Ok(v),
                Transfer::Unmatched(k) => Err(k),
                Transfer::Unsaid => Ok(value.clone()),
            },
        }
    }

    /// Whether a recorded value holds something the new request says: a mention of the old
    /// request (or a date or time derived from one) with its counterpart here, or a reference
    /// derived by a span ("one hour after" the landing) the new request says a counterpart of;
    /// inside arrays and objects too. A constant or a plain earlier output is nothing said.
    pub(crate) fn says_any(&self, value: &Value, mention_kinds: Option<&[Kind]>) -> bool {
        match value {
            Value::Array(items) => items.iter().any(|x| self.says_any(x, mention_kinds)),
            Value::Object(m) => m.values().any(|x| self.says_any(x, mention_kinds)),
            Value::String(s) if crate::exec::refs::holds_reference(s) => crate::exec::refs::Reference::all_in(s)
                .iter()
                .filter_map(|r| r.derive.as_ref())
                .any(|d| spans::counterpart(&self.old.shifts, &self.new.shifts, d.minutes).is_some()),
            _ => matches!(self.transfer(value, mention_kinds), Transfer::Mapped(_)),
        }
    }

    /// [`Analogy::says_any`] for the values the new request says itself: a date derived only by
    /// its distance from a said one (a check-out a week after the flight's day, where this
    /// request says no span of days) is not what this request says, it is what the old chain did.
    pub(crate) fn says_own(&self, value: &Value, mention_kinds: Option<&[Kind]>) -> bool {
        match value {
            Value::Array(items) => items.iter().any(|x| self.says_own(x, mention_kinds)),
            Value::Object(m) => m.values().any(|x| self.says_own(x, mention_kinds)),
            Value::String(s) if !crate::exec::refs::holds_reference(s) => {
                self.says_any(value, mention_kinds) && !self.date_by_distance_only(s)
            }
            _ => self.says_any(value, mention_kinds),
        }
    }

    /// `s` is a date the old request did not say, derived from the nearest said one by a number
    /// of days no request says.
    fn date_by_distance_only(&self, s: &str) -> bool {
        let Some(d) = s.get(..10).and_then(stamps::date) else { return false };
        let olds = self.old_mentions(Kind::Date);
        if olds.iter().any(|m| m.value == stamps::date_text(d)) {
            return false;
        }
        match Self::nearest_date(olds, d) {
            Some((_, o)) => {
                let (old_days, new_days) = (spans::day_counts(&self.old), spans::day_counts(&self.new));
                spans::days_counterpart(&old_days, &new_days, (d - o).num_days()).is_none()
            }
            None => true,
        }
    }

    /// The said date `d` is derived from: the nearest earlier one, else the nearest later one,
    /// within a month (index among `olds`, its date).
    fn nearest_date(olds: &[Mention], d: NaiveDate) -> Option<(usize, NaiveDate)> {
        olds.iter()
            .enumerate()
            .filter_map(|(i, m)| stamps::date(&m.value).map(|o| (i, o)))
            .min_by_key(|(_, o)| (*o > d, (d - *o).num_days().abs()))
            .filter(|(_, o)| (d - *o).num_days().abs() <= 31)
    }

    /// `s` with each derived reference's span the new request's counterpart (see [`spans`]).
    pub(crate) fn reshift(&self, s: &str) -> String {
        spans::reshift(s, &self.old.shifts, &self.new.shifts)
    }

    fn transfer_date(&self, s: &str) -> Option<Transfer> {
        let head = s.get(..10)?;
        let d = stamps::date(head)?;
        let rest = &s[10..];
        let render = |n: NaiveDate| Transfer::Mapped(Value::String(format!("{}{rest}", stamps::date_text(n))));
        let olds = self.old_mentions(Kind::Date);
        let key = stamps::date_text(d);
        if let Some(i) = olds.iter().position(|m| m.value == key) {
            return Some(match self.counterpart(Kind::Date, i) {
                Some(m) => render(stamps::date(&m.value)?),
                None => Transfer::Unmatched(Kind::Date),
            });
        }
        // Derived: the offset from the nearest earlier date mention, else from the nearest later
        // one ("arrive the day before" the conference), else from "today".
        if let Some((i, o)) = Self::nearest_date(olds, d) {
            let base = self.counterpart(Kind::Date, i).and_then(|m| stamps::date(&m.value));
            let (old_days, new_days) = (spans::day_counts(&self.old), spans::day_counts(&self.new));
            let stays = spans::days_counterpart(&old_days, &new_days, (d - o).num_days());
            return Some(match (base, stays) {
                (Some(b), Some(days)) => render(b + Duration::days(days)),
                (Some(b), None) => render(spans::shift_date(o, d, b, says(&self.old_words, "month"))?),
                (None, _) => Transfer::Unmatched(Kind::Date),
            });
        }
        match (self.old.today, self.new.today) {
            (Some(o), Some(n)) if d >= o && (d - o).num_days() <= 31 => {
                Some(render(n + Duration::days((d - o).num_days())))
            }
            _ => None,
        }
    }

    fn transfer_time(&self, s: &str) -> Option<Transfer> {
        let (h, m) = s.trim().split_once(':')?;
        let (h, m): (u32, u32) = (h.parse().ok()?, m.get(..2)?.parse().ok()?);
        if h >= 24 || m >= 60 {
            return None;
        }
        let key = format!("{h:02}:{m:02}");
        let rest = &s.trim()[s.trim().find(':')? + 3..];
        let olds = self.old_mentions(Kind::Time);
        if let Some(i) = olds.iter().position(|x| x.value == key) {
            return Some(match self.counterpart(Kind::Time, i) {
                Some(x) => Transfer::Mapped(Value::String(format!("{}{rest}", x.value))),
                None => Transfer::Unmatched(Kind::Time),
            });
        }
        // Derived: a time the old request said, shifted by a span it said ("at 11:15 … a taxi 35
        // minutes after my train gets there" → 11:50): the counterpart time by the counterpart span.
        let time_of = stamps::time;
        let at = time_of(&key)?;
        let (i, shift) = olds.iter().enumerate().find_map(|(i, x)| {
            let said = time_of(&x.value)?;
            let s = self.old.shifts.iter().find(|s| **s != 0 && said + Duration::minutes(**s) == at)?;
            Some((i, *s))
        })?;
        let new_time = self.counterpart(Kind::Time, i).and_then(|x| time_of(&x.value));
        let shifted = new_time.zip(spans::counterpart(&self.old.shifts, &self.new.shifts, shift));
        Some(shifted.map_or(Transfer::Unmatched(Kind::Time), |(t, s)| {
            Transfer::Mapped(Value::String(format!("{}{rest}", stamps::time_text(t + Duration::minutes(s)))))
        }))
    }

    /// The new request's word for `w`, a word the old request said and the new one does not: the
    /// one word the new request says in the same frame — right before or after the same content
    /// word ("beach activities" → "fishing activities") — and the old request says nowhere.
    /// `None`: no such frame, or more than one such word.
    fn counterpart_word(&self, w: &str) -> Option<String> {
        let old: Vec<&str> = self.old_words.split(' ').collect();
        let new: Vec<&str> = self.new_words.split(' ').collect();
        let content = |x: &str| x.len() >= 3 && x.chars().all(char::is_alphabetic) && !is_stop_name(x);
        let in_a_name = |x: &str| self.new.names.iter().any(|n| says(&words(n), x));
        let mut found: Vec<&str> = Vec::new();
        for p in (0..old.len()).filter(|p| old[*p] == w) {
            for (q, cand) in new.iter().enumerate() {
                let right = p + 1 < old.len() && q + 1 < new.len() && old[p + 1] == new[q + 1] && content(old[p + 1]);
                let left = p > 0 && q > 0 && old[p - 1] == new[q - 1] && content(old[p - 1]);
                if (right || left) && content(cand) && !old.contains(cand) && !in_a_name(cand) && !found.contains(cand)
                {
                    found.push(cand);
                }
            }
        }
        match found.as_slice() {
            [one] => Some(one.to_string()),
            _ => None,
        }
    }

    /// A part of a recorded value that the old request said around a name ("Beach" of "Beach,
    /// Barcelona"): each of its words the new request does not say takes the new request's word in
    /// the same frame ([`Analogy::counterpart_word`]), spelled as the recorded word was (capital,
    /// upper case); the rest stays.
    fn reworded_part(&self, part: &str) -> String {
        let mut out = String::new();
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut String| {
            if word.is_empty() {
                return;
            }
            let l = word.to_lowercase();
            let swap =
                (says(&self.old_words, &l) && !says(&self.new_words, &l)).then(|| self.counterpart_word(&l)).flatten();
            match swap {
                Some(c) if word.chars().all(char::is_uppercase) => out.push_str(&c.to_uppercase()),
                Some(c) if word.chars().next().is_some_and(char::is_uppercase) => {
                    let mut cs = c.chars();
                    out.extend(cs.next().map(|f| f.to_ascii_uppercase()));
                    out.push_str(cs.as_str());
                }
                Some(c) => out.push_str(&c),
                None => out.push_str(word),
            }
            word.clear();
        };
        for ch in part.chars() {
            if ch.is_alphabetic() {
                word.push(ch);
            } else {
                flush(&mut word, &mut out);
                out.push(ch);
            }
        }
        flush(&mut word, &mut out);
        out
    }

    /// The remembered request's words, lower-case.
    pub(crate) fn old_words(&self) -> &str {
        &self.old_words
    }

    /// The new request's own spelling of its name mention `m`.
    fn spelled(&self, m: &Mention) -> String {
        self.new.names.iter().find(|n| n.to_lowercase() == m.value).cloned().unwrap_or_else(|| m.value.clone())
    }

    /// A name: the whole value, or names of the old request inside it, replaced by their
    /// counterparts (longest first, each place once); a whole value that is one old mention
    /// mistyped ("San Francisc", "Machester") or shortened ("Stanford" of "Stanford
    /// University", see [`shortened`]) is that mention.
    fn transfer_name(&self, s: &str) -> Transfer {
        let lower = s.to_lowercase();
        let olds = self.old_mentions(Kind::Name);
        let mut found: Vec<(usize, usize, usize)> = Vec::new(); // (start, end, mention)
        let mut order: Vec<usize> = (0..olds.len()).collect();
        order.sort_by_key(|i| std::cmp::Reverse(olds[*i].value.len()));
        for i in order {
            let name = &olds[i].value;
            if name.len() < 3 {
                continue;
            }
            let mut from = 0;
            while let Some(at) = whole_at(&lower, name, from) {
                let end = at + name.len();
                if !found.iter().any(|(a, b, _)| at < *b && *a < end) {
                    found.push((at, end, i));
                }
                from = end;
            }
        }
        if found.is_empty() {
            let mut typo: Vec<usize> = (0..olds.len()).filter(|i| mistyped(&lower, &olds[*i].value)).collect();
            if typo.is_empty() {
                typo = (0..olds.len()).filter(|i| shortened(&lower, &olds[*i].value)).collect();
            }
            return match typo.as_slice() {
                [i] => self
                    .counterpart(Kind::Name, *i)
                    .map_or(Transfer::Unmatched(Kind::Name), |m| Transfer::Mapped(Value::String(self.spelled(m)))),
                _ => Transfer::Unsaid,
            };
        }
        found.sort_unstable();
        // One place the old request named in one phrase of several names joined by a word
        // ("Four Seasons Resort Orlando at Walt Disney World Resort"): where the new request has
        // no counterpart for a part of it, its counterpart is the head's alone.
        if let [(first, _, head), .., (_, last_end, _)] = found.as_slice() {
            let joined_by_word = found.windows(2).any(|w| s[w[0].1..w[1].0].chars().any(char::is_alphabetic));
            if joined_by_word && says(&self.old_words, &s[*first..*last_end]) {
                let unmatched = found.iter().any(|(_, _, i)| self.counterpart(Kind::Name, *i).is_none());
                if let (true, Some(new_head)) = (unmatched, self.counterpart(Kind::Name, *head)) {
                    return Transfer::Mapped(Value::String(self.spelled(new_head)));
                }
            }
        }
        let mut out = String::new();
        let mut at = 0;
        // Around the names: what the remembered request said, as one phrase, stays ("CN Tower,
        // Toronto"); a head or tail it never said so ("Orlando, US", "by Hilton Hotel San Pedro"
        // of "DoubleTree by Hilton San Pedro") was the remembered call's own, not this request's,
        // and is left out.
        let said = |part: &str| words(part).is_empty() || says(&self.old_words, part);
        let last = found.len() - 1;
        for (n, (start, end, i)) in found.into_iter().enumerate() {
            let Some(new) = self.counterpart(Kind::Name, i) else { return Transfer::Unmatched(Kind::Name) };
            let gap = &s[at..start];
            if n > 0 || said(gap) {
                out.push_str(&self.reworded_part(gap));
            }
            out.push_str(&self.spelled(new));
            at = end;
            // A tail of signs alone ("St." of "717 Bay St.") was the old name's spelling.
            if n == last && said(&s[at..]) && s[at..].chars().any(char::is_alphanumeric) {
                out.push_str(&self.reworded_part(&s[at..]));
            }
        }
        Transfer::Mapped(Value::String(out))
    }
}

#[cfg(test)]
#[path = "analogy_tests.rs"]
mod tests;
