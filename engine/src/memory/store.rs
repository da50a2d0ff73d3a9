//! Long-term memory (thesis §4.4.4): judged-good (request → chain) pairs in the vector store's
//! `memory` collection. The same request replaces its old entry; invalidating an API deletes the
//! entries that use it; a new request recalls the nearest entries.

use crate::exec::refs::{date_time, Derive, Part, Reference};
use crate::plan::ArgSource;
use crate::read::reading::whole_at;
use crate::read::stamps;
use crate::vector::{text_hash, CollectionSpec, Conditions, VectorPoint, VectorStore, MEMORY};
use crate::{EngineError, ErrorClass, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One remembered call: the API and where each argument came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryStep {
    pub api: String,
    pub arguments: Map<String, Value>,
    pub sources: HashMap<String, ArgSource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub request: String,
    pub chain: Vec<MemoryStep>,
}

/// A recalled entry and its similarity to the new request.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    pub score: f32,
    pub entry: MemoryEntry,
}

/// The long-term memory: judged-good (request → chain) pairs, embedded by meaning.
pub struct Memory {
    vectors: Arc<dyn VectorStore>,
    collection: String,
}

/// The point id of a request: the same request (case and spacing aside) is one entry.
pub(crate) fn entry_id(request: &str) -> String {
    let norm: String = crate::read::reading::squash(request).to_lowercase();
    format!("mem-{}", text_hash(&norm))
}

impl Memory {
    /// Open (and create if missing) the memory collection for vectors of `dim` dimensions.
    pub async fn open(vectors: Arc<dyn VectorStore>, dim: usize) -> Result<Self> {
        vectors.ensure(&CollectionSpec::new(MEMORY, dim, &["apis"])).await?;
        Ok(Memory { vectors, collection: MEMORY.to_string() })
    }

    /// Remember `request` (embedded by meaning as `vector`) with `chain`: the same request
    /// replaces its old entry.
    pub async fn remember(&self, request: &str, vector: Vec<f32>, chain: Vec<MemoryStep>) -> Result<()> {
        self.remember_all(vec![(request.to_string(), vector, chain)]).await
    }

    /// [`Memory::remember`] each (request, vector, chain), in one write.
    pub async fn remember_all(&self, entries: Vec<(String, Vec<f32>, Vec<MemoryStep>)>) -> Result<()> {
        let mut points: Vec<VectorPoint> = Vec::with_capacity(entries.len());
        let mut at: HashMap<String, usize> = HashMap::new();
        for (request, vector, chain) in entries {
            let mut payload = Map::new();
            let apis: Vec<Value> = chain.iter().map(|s| Value::String(s.api.clone())).collect();
            payload.insert("request".into(), Value::String(request.clone()));
            payload.insert("apis".into(), Value::Array(apis));
            payload.insert(
                "chain".into(),
                Value::String(
                    serde_json::to_string(&chain)
                        .map_err(|e| EngineError::store("memory", ErrorClass::Permanent, e))?,
                ),
            );
            let point = VectorPoint { id: entry_id(&request), vector, payload };
            // The same request twice in one write: the later entry stands, as in two writes.
            match at.get(&point.id) {
                Some(&i) => points[i] = point,
                None => {
                    at.insert(point.id.clone(), points.len());
                    points.push(point);
                }
            }
        }
        if points.is_empty() {
            return Ok(());
        }
        self.vectors.upsert(&self.collection, points).await
    }

    /// The `k` remembered requests nearest to `vector`, nearest first. Requests equally near (a
    /// family of requests whose masked meanings are one text) come in the order of their entry
    /// ids, so a recall does not depend on how the store happened to lay its points out.
    pub async fn recall(&self, vector: &[f32], k: usize) -> Result<Vec<Recalled>> {
        self.recall_where(vector, k, &Conditions::default()).await
    }

    /// The `k` remembered requests nearest to `vector` whose chains call `api`, nearest first.
    pub async fn recall_calling(&self, vector: &[f32], api: &str, k: usize) -> Result<Vec<Recalled>> {
        self.recall_where(vector, k, &Conditions::default().with("apis", api)).await
    }

    async fn recall_where(&self, vector: &[f32], k: usize, conditions: &Conditions) -> Result<Vec<Recalled>> {
        let wider = k.saturating_mul(4).max(k + 32);
        // The order from ids and scores alone; then only the `k` kept are read (a chain's JSON
        // is most of what a recall costs).
        let mut hits = self.vectors.search_ids(&self.collection, vector, wider, conditions).await?;
        let level = |s: f32| (f64::from(s) * 1e5).round() as i64;
        hits.sort_by(|a, b| level(b.1).cmp(&level(a.1)).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(k);
        let ids: Vec<String> = hits.iter().map(|(id, _)| id.clone()).collect();
        let mut payloads: HashMap<String, Map<String, Value>> =
            self.vectors.retrieve(&self.collection, &ids).await?.into_iter().collect();
        Ok(hits
            .into_iter()
            .filter_map(|(id, score)| {
                let payload = payloads.remove(&id)?;
                let request = payload.get("request")?.as_str()?.to_string();
                let chain: Vec<MemoryStep> = serde_json::from_str(payload.get("chain")?.as_str()?).ok()?;
                Some(Recalled { score, entry: MemoryEntry { request, chain } })
            })
            .collect())
    }

    /// Delete every memory whose chain uses `api_id`.
    pub async fn forget_api(&self, api_id: &str) -> Result<usize> {
        self.vectors.delete_matching(&self.collection, &Conditions::default().with("apis", api_id)).await
    }

    /// Every stored entry: (point id, entry), newest writes not ordered (the console sorts).
    pub async fn list(&self) -> Result<Vec<(String, MemoryEntry)>> {
        let points = self.vectors.scan(&self.collection, &["request", "chain"]).await?;
        Ok(points
            .into_iter()
            .filter_map(|(id, p)| {
                let request = p.get("request")?.as_str()?.to_string();
                let chain: Vec<MemoryStep> = serde_json::from_str(p.get("chain")?.as_str()?).ok()?;
                Some((id, MemoryEntry { request, chain }))
            })
            .collect())
    }

    /// Delete one entry by its point id; false when there was none.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        let exists = self.vectors.scan(&self.collection, &[]).await?.iter().any(|(p, _)| p == id);
        if exists {
            self.vectors.delete(&self.collection, &[id.to_string()]).await?;
        }
        Ok(exists)
    }

    /// How many pairs it holds.
    pub async fn len(&self) -> Result<usize> {
        self.vectors.count(&self.collection).await
    }

    /// Whether it holds none.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }
}

/// One call of a recorded chain, as [`recorded_steps`] reads it: the API id, its label
/// (`var1`…), the arguments as sent and the response it got.
pub struct RecordedCall<'a> {
    /// The API's id.
    pub api: &'a str,
    /// The call's output label (`var1`).
    pub label: &'a str,
    /// The arguments as planned.
    pub arguments: &'a Map<String, Value>,
    /// The response, where there was one.
    pub response: Option<&'a Value>,
}

/// Memory steps of a recorded chain, with where each value came from made explicit: a literal
/// the request never says but an earlier call's response holds (an id, coordinates, a name the
/// annotator copied from a result) becomes a reference to that field (`$var3.result.1.hotel_id$`,
/// indexes kept), wherever it stands — inside arrays and objects too. A time of day the request
/// never says that is a response's date-time shifted by a span the request says ("one hour after
/// I land": the flight's arrival + 60 minutes) becomes a derived reference
/// (`$var3.….arrivalTime@time+60$`), and the same call's date that is that moment's day
/// (`@date+60`). Where the request asks for a superlative ("the cheapest day") and the chain
/// took one element of a list (not the first) that holds the least or greatest value of a field,
/// the index becomes that choice (`$var3.min(price:units).departureDate$`). What the request says
/// stays literal (the replay maps it to the new request's mention).
pub fn recorded_steps(request: &str, calls: &[RecordedCall<'_>]) -> Vec<MemoryStep> {
    let read = crate::read::RequestValues::extract(request, chrono::NaiveDate::default());
    let said = Said {
        text: request.to_lowercase(),
        names: read.names.iter().map(|n| n.to_lowercase()).collect(),
        typed: read.dates.iter().map(|d| stamps::date_text(*d)).chain(read.times.iter().cloned()).collect(),
    };
    let mut all: Vec<Map<String, Value>> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let earlier = &calls[..i];
            let mut arguments: Map<String, Value> =
                c.arguments.iter().map(|(k, v)| (k.clone(), provenance(v, &said, earlier))).collect();
            derive_times(&mut arguments, &read, earlier);
            arguments
        })
        .collect();
    if !crate::read::reading::ordering_words(request).is_empty() {
        let responses: Vec<(&str, Option<&Value>)> = calls.iter().map(|c| (c.label, c.response)).collect();
        super::extremes::choose_extremes(&mut all, &responses, field_holding);
    }
    calls
        .iter()
        .zip(all)
        .map(|(c, arguments)| {
            let sources = arguments
                .iter()
                .map(|(k, v)| {
                    (k.clone(), ArgSource::of_reference(v).unwrap_or(ArgSource::Request { kind: "recorded".into() }))
                })
                .collect();
            MemoryStep { api: c.api.to_string(), arguments, sources }
        })
        .collect()
}

/// What a request says, as [`recorded_steps`] compares arguments with it: its text (lower-case),
/// its names (lower-case), and its dates and times as arguments write them (`2024-11-10` for
/// "November 10, 2024", `14:00` for "2 p.m.").
struct Said {
    text: String,
    names: Vec<String>,
    typed: std::collections::HashSet<String>,
}

/// The literal's text if it is worth tracing to an earlier output: a string of three or more
/// characters, or a number that is not a small count; neither said in the request, in its words
/// or as a date or time it says in other words (a hotel's check-in day that is the day the
/// request names stays the request's: a replay leaving the hotel out still has it).
fn traceable(v: &Value, said: &Said) -> Option<String> {
    let text = match v {
        Value::String(s) if s.trim().chars().count() >= 3 && !crate::exec::refs::holds_reference(s) => {
            s.trim().to_string()
        }
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0 || f.abs() >= 100.0) => n.to_string(),
        _ => return None,
    };
    (!said.text.contains(&text.to_lowercase()) && !said.typed.contains(&text)).then_some(text)
}

fn provenance(v: &Value, said: &Said, earlier: &[RecordedCall<'_>]) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|x| provenance(x, said, earlier)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), provenance(x, said, earlier))).collect()),
        _ => {
            let Some(text) = traceable(v, said) else { return v.clone() };
            // The most recent producer first, its shallowest field holding the value.
            earlier
                .iter()
                .rev()
                .find_map(|c| field_holding(c.response?, &text).map(|path| Reference::new(c.label, path).into()))
                .or_else(|| spliced(&text, &said.text, &said.names, earlier).map(Value::String))
                .unwrap_or_else(|| v.clone())
        }
    }
}

/// A phrase the annotator composed of an earlier output and words of its own ("Longueuil Shopping
/// Mall": the nearby city a call found, then "Shopping Mall"): the output's part spliced in as a
/// reference (`$var4.data.0.name$ Shopping Mall`), so that a replay names its own run's city. The
/// longest word-bounded part of four or more characters that an earlier response holds as a
/// whole string and the request never says; the rest must hold a word and no name the request
/// says ("Paris, France" stays: "Paris" is the request's).
fn spliced(text: &str, said: &str, names: &[String], earlier: &[RecordedCall<'_>]) -> Option<String> {
    if !text.contains(' ') {
        return None;
    }
    let mut best: Option<(usize, String, Reference)> = None;
    for c in earlier.iter().rev() {
        let Some(response) = c.response else { continue };
        for (path, x) in breadth_first(response) {
            let Value::String(part) = x else { continue };
            let part = part.trim();
            let longer = best.as_ref().is_none_or(|(_, b, _)| part.len() > b.len());
            if part.len() < 4 || part.len() >= text.len() || !longer {
                continue;
            }
            if let Some(at) = whole_at(text, part, 0).filter(|_| !said.contains(&part.to_lowercase())) {
                best = Some((at, part.to_string(), Reference::new(c.label, path)));
            }
        }
    }
    let (at, part, reference) = best?;
    let rest = format!("{} {}", &text[..at], &text[at + part.len()..]).to_lowercase();
    let names_one = names.iter().any(|n| rest.contains(n.as_str()));
    (rest.chars().any(char::is_alphabetic) && !names_one)
        .then(|| format!("{}{reference}{}", &text[..at], &text[at + part.len()..]))
}

/// `HH:MM` of a recorded time argument (`10:10`, `10:10:00`).
fn time_of_day(v: &Value) -> Option<chrono::NaiveTime> {
    let s = v.as_str()?.trim();
    stamps::time(s.get(..5)?).filter(|_| s.len() == 5 || s.len() == 8)
}

/// Times of day the request never says, traced to an earlier response's date-time shifted by a
/// span the request says (or by none): `$label.path@time±M$`; then the date argument named like
/// it (`pick_up_date` for `pick_up_time`) where it is the traced moment's day,
/// `$label.path@date±M$`. The most recent producer first, its shallowest date-time first.
fn derive_times(arguments: &mut Map<String, Value>, read: &crate::read::RequestValues, earlier: &[RecordedCall<'_>]) {
    let shifts: Vec<i64> = read.shifts.iter().copied().chain([0]).collect();
    let mut traced: Vec<(String, Reference, chrono::NaiveDateTime)> = Vec::new();
    for (k, v) in arguments.iter_mut() {
        let Some(t) = time_of_day(v) else { continue };
        if read.times.contains(&stamps::time_text(t)) {
            continue;
        }
        let found = earlier.iter().rev().find_map(|c| {
            date_times(c.response?).into_iter().find_map(|(path, at)| {
                let m = *shifts.iter().find(|m| (at + chrono::Duration::minutes(**m)).time() == t)?;
                Some((Reference::new(c.label, path).derived(Derive { part: Part::Time, minutes: m }), at, m))
            })
        });
        if let Some((r, at, m)) = found {
            *v = r.clone().into();
            traced.push((k.replace("time", "date"), r, at + chrono::Duration::minutes(m)));
        }
    }
    for (date_param, r, moment) in traced {
        let Some(v) = arguments.get_mut(&date_param) else { continue };
        let day = v.as_str().and_then(|s| stamps::date(s.trim()));
        if day == Some(moment.date()) {
            let minutes = r.derive.map_or(0, |d| d.minutes);
            *v = r.derived(Derive { part: Part::Date, minutes }).into();
        }
    }
}

/// Every date-time a response holds, breadth first (shallowest first), with its path.
fn date_times(response: &Value) -> Vec<(String, chrono::NaiveDateTime)> {
    breadth_first(response).filter_map(|(path, v)| date_time(v).map(|at| (path, at))).collect()
}

/// The path (keys and indexes, dot-separated) of the first scalar equal to `text`, breadth first.
fn field_holding(response: &Value, text: &str) -> Option<String> {
    breadth_first(response).find_map(|(path, v)| {
        let equal = match v {
            Value::String(s) => s.trim() == text,
            Value::Number(n) => {
                n.to_string() == text || n.as_f64().zip(text.parse::<f64>().ok()).is_some_and(|(a, b)| a == b)
            }
            _ => false,
        };
        equal.then_some(path)
    })
}

/// A response's scalars with their paths (keys and indexes, dot-separated), breadth first:
/// shallowest first, and in a list the first element's before the next's. At most 20,000 nodes
/// are visited.
fn breadth_first(response: &Value) -> impl Iterator<Item = (String, &Value)> {
    let mut queue: std::collections::VecDeque<(&Value, String)> =
        std::collections::VecDeque::from([(response, String::new())]);
    let join = |p: &str, k: &str| if p.is_empty() { k.to_string() } else { format!("{p}.{k}") };
    let mut seen = 0;
    std::iter::from_fn(move || {
        while let Some((node, path)) = queue.pop_front() {
            seen += 1;
            if seen > 20_000 {
                return None;
            }
            match node {
                Value::Object(m) => m.iter().for_each(|(k, x)| queue.push_back((x, join(&path, k)))),
                Value::Array(items) => {
                    items.iter().enumerate().for_each(|(i, x)| queue.push_back((x, join(&path, &i.to_string()))))
                }
                v => return Some((path, v)),
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_phrase_composed_of_an_output_and_words_splices_the_output_in_as_a_reference() {
        let request = "At 2 PM, we'll take a taxi to a shopping mall in a nearby city around McGill University.";
        let nearby = json!({"data": [{"name": "Longueuil", "country": "Canada"}]});
        let (find, taxi, paris) = (
            json!({"query": "McGill University"}),
            json!({"query": "Longueuil Shopping Mall"}),
            json!({"query": "McGill University, Canada"}),
        );
        let calls = [
            RecordedCall {
                api: "nearby",
                label: "var1",
                arguments: find.as_object().unwrap(),
                response: Some(&nearby),
            },
            RecordedCall { api: "taxi", label: "var2", arguments: taxi.as_object().unwrap(), response: None },
            RecordedCall { api: "taxi", label: "var3", arguments: paris.as_object().unwrap(), response: None },
        ];
        let steps = recorded_steps(request, &calls);
        assert_eq!(steps[1].arguments["query"], json!("$var1.data.0.name$ Shopping Mall"));
        assert!(matches!(&steps[1].sources["query"], ArgSource::Output { label, .. } if label == "var1"));
        // The rest names a place the request says: the phrase stays the request's.
        assert_eq!(steps[2].arguments["query"], json!("McGill University, Canada"));
        let outputs = std::collections::HashMap::from([("var1".to_string(), &nearby)]);
        let resolved = crate::exec::refs::resolve(&steps[1].arguments, &outputs);
        assert_eq!(resolved.unwrap()["query"], json!("Longueuil Shopping Mall"));
    }

    /// A concert's listing holds the evening's date, which the request says in words: a later
    /// call's date is the request's (not the listing's field, which a replay leaving the
    /// listing out would not have), and the day of the moment its time is derived from.
    #[test]
    fn a_date_the_request_says_in_words_is_not_traced_to_an_output_holding_it() {
        let request = "Find the jazz concert at the Blue Note on March 3, 2025, and book a cab to pick me up \
                       one hour after the show ends.";
        let shows = json!({"shows": [{"day": "2025-03-03", "ends": "2025-03-03T22:30:00", "hall": "Main Room"}]});
        let find = json!({"venue": "Blue Note", "date": "2025-03-03"});
        let cab = json!({"date": "2025-03-03", "time": "23:30", "start": "Main Room"});
        let calls = [
            RecordedCall {
                api: "concerts",
                label: "var1",
                arguments: find.as_object().unwrap(),
                response: Some(&shows),
            },
            RecordedCall { api: "cabs", label: "var2", arguments: cab.as_object().unwrap(), response: None },
        ];
        let steps = recorded_steps(request, &calls);
        let args = &steps[1].arguments;
        assert_eq!(args["time"], json!("$var1.shows.0.ends@time+60$"));
        assert_eq!(args["date"], json!("$var1.shows.0.ends@date+60$"), "the moment's day, not the listing's day field");
        assert_eq!(args["start"], json!("$var1.shows.0.hall$"), "a value the request never says is still traced");
        assert_eq!(steps[0].arguments["date"], json!("2025-03-03"));
    }

    #[test]
    fn a_time_derived_from_an_output_by_a_said_span_is_remembered_as_a_derived_reference() {
        let request = "Find the cheapest flight from Amsterdam to Rome on December 1st, 2024. I'll pick up a car \
                       at the airport one hour after I land and return it at 8 AM on December 8th.";
        let flights = json!({"flightOffers": [{"segments": [
            {"departureTime": "2024-12-01T20:55:00", "arrivalTime": "2024-12-01T23:10:00"}
        ]}]});
        let search = json!({"fromId": "AMS.AIRPORT", "departDate": "2024-12-01"});
        let rent = json!({"pick_up_time": "00:10", "pick_up_date": "2024-12-02", "drop_off_time": "08:00",
                          "drop_off_date": "2024-12-08", "landed": "23:10"});
        let calls = [
            RecordedCall {
                api: "flights",
                label: "var1",
                arguments: search.as_object().unwrap(),
                response: Some(&flights),
            },
            RecordedCall { api: "cars", label: "var2", arguments: rent.as_object().unwrap(), response: None },
        ];
        let steps = recorded_steps(request, &calls);
        let args = &steps[1].arguments;
        assert_eq!(args["pick_up_time"], json!("$var1.flightOffers.0.segments.0.arrivalTime@time+60$"));
        assert_eq!(args["pick_up_date"], json!("$var1.flightOffers.0.segments.0.arrivalTime@date+60$"), "the next day");
        assert_eq!(
            args["landed"],
            json!("$var1.flightOffers.0.segments.0.arrivalTime@time$"),
            "no span: the time itself"
        );
        assert_eq!(args["drop_off_time"], json!("08:00"), "a time the request says stays the request's");
        assert_eq!(args["drop_off_date"], json!("2024-12-08"));
        assert_eq!(steps[0].arguments["departDate"], json!("2024-12-01"), "nothing earlier to derive from");
        assert!(matches!(steps[1].sources["pick_up_time"], ArgSource::Output { .. }));
    }
}
