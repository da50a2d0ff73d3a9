//! What the API answered: every response recorded for exactly a call's arguments (the scorer's
//! stand-in for the live API) and the replay sandbox's answers.
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use toolgraph_sandbox::{normalized_args, Library, Match, Recording};

/// The responses recorded for exactly a call's arguments: what the real API answered.
#[derive(Default)]
pub struct Recorded {
    library: Library,
    /// API slug → route in the library.
    routes: HashMap<String, String>,
    /// API slug → a call's arguments (normalized) → every response recorded for them: samples
    /// recorded on other days may hold two answers to the same call, and the live API the
    /// published scorer asks gave each of them once.
    every: HashMap<String, Answers>,
}

/// A call's arguments (normalized) → every response recorded for them.
type Answers = HashMap<BTreeMap<String, String>, Vec<Arc<Value>>>;

impl Recorded {
    pub fn new(recordings: &[Recording]) -> Self {
        let routes =
            recordings.iter().map(|r| (api_key(&r.api), r.route.trim_start_matches('/').to_string())).collect();
        let mut every: HashMap<String, Answers> = HashMap::new();
        for r in recordings {
            let answers = every.entry(api_key(&r.api)).or_default().entry(normalized_args(&r.arguments)).or_default();
            if !answers.iter().any(|a| same(a, &r.response)) {
                answers.push(Arc::new(r.response.clone()));
            }
        }
        Recorded { library: Library::new(recordings.iter().cloned()), routes, every }
    }

    /// Every response recorded for exactly these arguments of `api` (a slug or a name).
    pub fn exact(&self, api: &str, args: &Map<String, Value>) -> &[Arc<Value>] {
        self.every
            .get(&api_key(api))
            .and_then(|calls| calls.get(&normalized_args(args)))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// What the replay sandbox answers to this call, and how it found it (`None`: no recording
    /// of the API answers these arguments, or the API has none).
    pub fn answer(&self, api: &str, args: &Map<String, Value>) -> Option<(Arc<Value>, Match)> {
        self.routes.get(&api_key(api)).and_then(|route| self.library.answer(route, args).ok())
    }
}

/// The API part of an id (`travel/booking_com15/search_car_location` → `search_car_location`) or
/// a golden name's slug (`Search_Car_Location` → `search_car_location`).
pub fn api_key(name: &str) -> String {
    toolgraph_schema::slug(name.rsplit('/').next().unwrap_or(name))
}

/// Python's `==` on JSON values: numbers by value, everything else exactly.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
