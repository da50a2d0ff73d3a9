//! A parameter's known words — the string values recorded runs sent it, and the values its
//! description lists in capitals — and the one a request names beside the parameter's own name
//! ("a premium economy class seat": `cabinClass` → `PREMIUM_ECONOMY`).

use crate::plan::planner::{ApiView, Context};
use crate::read::reading::word_list;
use serde_json::Value;
use toolgraph_schema::ParamDoc;

/// The string values `api`'s `param` took in recorded runs (an enumeration's known words), and,
/// where its description lists them in capitals ("either ECONOMY, PREMIUM_ECONOMY, BUSINESS or
/// FIRST") with a recorded one among them, the values it lists: a value no recorded run of this
/// API sent is still one of its words. A string parameter no recorded run sent a word knows the
/// values its description lists, two or more (a cabin class no learned chain chose).
pub(crate) fn known_words(ctx: &Context, api: &ApiView, param: &str) -> Vec<String> {
    let slot = ctx.args.as_ref().and_then(|m| m.slots.get(&api.id)).and_then(|s| s.get(param));
    let mut words: Vec<String> = slot
        .map(|slot| slot.values.keys().filter_map(|v| serde_json::from_str::<String>(v).ok()).collect())
        .unwrap_or_default();
    let Some(p) = api.params.iter().find(|p| p.name == param) else { return words };
    if words.is_empty() {
        let listed = if crate::read::values::is_numeric(&p.ty) { Vec::new() } else { listed_values(&p.description) };
        return if listed.len() >= 2 { listed } else { words };
    }
    let listed = listed_values(&p.description);
    if listed.iter().any(|v| words.contains(v)) {
        words.extend(listed.into_iter().filter(|v| !words.contains(v)).collect::<Vec<_>>());
    }
    words
}

/// The values a parameter's description lists in capitals (`ECONOMY`, `PREMIUM_ECONOMY`): words
/// of two or more capital letters, digits or underscores.
pub(crate) fn listed_values(description: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in description.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        let caps = w.len() >= 2 && w.starts_with(|c: char| c.is_ascii_uppercase());
        if caps
            && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && !out.iter().any(|o| o == w)
        {
            out.push(w.to_string());
        }
    }
    out
}

/// The words of a parameter's name (`cabinClass`, `delivery_speed` → `cabin class`, `delivery
/// speed`), lower-case, those of three letters or more.
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut flush = |w: &mut String| {
        if w.chars().count() >= 3 {
            out.push(w.to_lowercase());
        }
        w.clear();
    };
    for c in name.chars() {
        if !c.is_alphanumeric() {
            flush(&mut word);
        } else {
            if c.is_uppercase() && word.chars().last().is_some_and(char::is_lowercase) {
                flush(&mut word);
            }
            word.push(c);
        }
    }
    flush(&mut word);
    out
}

/// Whether `request` names a known value of `p` ([`ordered_value`], [`named_value`]).
pub(crate) fn names_a_value(request: &str, p: &ParamDoc, known: impl Fn() -> Vec<String>) -> bool {
    ordered_value(request, &known).is_some() || named_value(request, p, &known).is_some()
}

/// The known word value (of `known`) whose own words an ordering word of `request` says
/// ([`crate::read::reading::ordering_words`], compared by stem): "the most popular albums" →
/// `popularity`, "the lowest-priced records" → `lowest_price`, "the cheapest" → `lowest_price`
/// (the lexicon's `ordering_glosses`: the plain words of the order it asks for). The value with the most of its
/// words so said; `None` where none is, or two tie. What recorded runs said with a value
/// ([`crate::fill::learned::ArgModel::cued_value`]) goes first: this reads the value's own name.
pub(crate) fn ordered_value(request: &str, known: impl FnOnce() -> Vec<String>) -> Option<Value> {
    // Most parameters know no word value: the request is not read for them (a hot path).
    let known = known();
    if known.is_empty() {
        return None;
    }
    let mut said = crate::read::reading::ordering_words(request);
    if said.is_empty() {
        return None;
    }
    // And the plain words of the order an ordering word asks for ("cheapest": lowest price).
    let glosses = &crate::read::lexicon().ordering_glosses.pairs;
    let plain: Vec<String> =
        glosses.iter().filter(|(w, _)| said.contains(w)).flat_map(|(_, gloss)| word_list(gloss)).collect();
    said.extend(plain);
    let mut best: Vec<(usize, String)> = Vec::new();
    for value in known {
        let words = name_words(&value);
        if words.is_empty() || value.chars().any(|c| !(c.is_ascii_alphabetic() || c == '_')) {
            continue;
        }
        let n = words.iter().filter(|w| said.iter().any(|s| crate::read::asks::same_stem(w, s))).count();
        if n > 0 {
            best.push((n, value));
        }
    }
    best.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    match best.as_slice() {
        [(n, a), (m, b), ..] if n == m && a != b => None,
        [(_, v), ..] => Some(Value::String(v.clone())),
        [] => None,
    }
}

/// The known value (of `known`) that `request` says right beside a word of `p`'s own name — "a
/// premium economy class seat", "in size large" — the longest so said; `None` when none is, or two
/// different ones as long are. A known word said elsewhere ("a business trip", "the first date")
/// names nothing: said alone it is an ordinary word. `known` is asked for only where the request
/// says a word of the name at all (it reads the recorded values).
pub(crate) fn named_value(request: &str, p: &ParamDoc, known: impl FnOnce() -> Vec<String>) -> Option<Value> {
    let names = name_words(&p.name);
    let said = word_list(request);
    if !said.iter().any(|w| names.contains(w)) {
        return None;
    }
    let known = known();
    let mut best: Vec<(usize, &String)> = Vec::new();
    for value in &known {
        let words: Vec<String> = value
            .split(|c: char| c == '_' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() || words.iter().any(|w| !w.chars().all(char::is_alphabetic)) {
            continue;
        }
        let n = words.len();
        let beside = (0..said.len().saturating_sub(n - 1)).any(|i| {
            said[i..i + n] == words[..]
                && (said.get(i + n).is_some_and(|w| names.contains(w))
                    || i.checked_sub(1).and_then(|j| said.get(j)).is_some_and(|w| names.contains(w)))
        });
        if beside {
            best.push((n, value));
        }
    }
    best.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    match best.as_slice() {
        [] => None,
        [(n, a), (m, b), ..] if n == m && a != b => None,
        [(_, v), ..] => Some(Value::String((*v).clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A record shop's catalogue sorts by `popularity`, `release_date` or `lowest_price`.
    #[test]
    fn an_ordering_word_names_the_sort_value_it_shares_a_stem_with() {
        let known = || vec!["popularity".to_string(), "release_date".to_string(), "lowest_price".to_string()];
        assert_eq!(ordered_value("Show me the most popular jazz albums.", known), Some(json!("popularity")));
        assert_eq!(ordered_value("I want the lowest-priced vinyl records.", known), Some(json!("lowest_price")));
        assert_eq!(ordered_value("Find the newest albums by Miles Davis.", known), None, "no value's word");
        assert_eq!(ordered_value("Find popular albums by Miles Davis.", known), None, "no ordering said");
        // An ordering word that names the order in other words: the cheapest is by the lowest price.
        assert_eq!(ordered_value("Show me the three cheapest jazz records.", known), Some(json!("lowest_price")));
    }

    #[test]
    fn a_description_lists_its_values_in_capitals() {
        let d = "Search for flights that match the cabin class specified. Cabin call can be either ECONOMY, PREMIUM_ECONOMY, BUSINESS or FIRST.";
        assert_eq!(listed_values(d), ["ECONOMY", "PREMIUM_ECONOMY", "BUSINESS", "FIRST"]);
        assert!(listed_values("The id of the hotel (e.g. from a search).").is_empty());
    }

    /// A shop's order: the size and the delivery are named beside their parameter's own words;
    /// the same words said elsewhere name nothing.
    #[test]
    fn a_known_value_said_beside_its_parameters_name_is_the_value() {
        let param = |name: &str| ParamDoc {
            name: name.into(),
            ty: "string".into(),
            description: String::new(),
            required: false,
            default: None,
        };
        let (size, speed) = (param("shirtSize"), param("delivery_speed"));
        let sizes: Vec<String> = ["SMALL", "LARGE", "EXTRA_LARGE"].map(String::from).to_vec();
        let speeds: Vec<String> = ["STANDARD", "EXPRESS"].map(String::from).to_vec();
        let ask = "Order two blue shirts in extra large size for a large party, express delivery please.";
        assert_eq!(named_value(ask, &size, || sizes.clone()), Some(json!("EXTRA_LARGE")));
        assert_eq!(named_value(ask, &speed, || speeds.clone()), Some(json!("EXPRESS")));
        let plain = "Order a large batch of shirts by express courier for a standard event.";
        assert_eq!(named_value(plain, &size, || sizes.clone()), None, "a size word said alone names no size");
        assert_eq!(named_value(plain, &speed, || speeds.clone()), None);
        assert_eq!(name_words("cabinClass"), ["cabin", "class"]);
    }
}
