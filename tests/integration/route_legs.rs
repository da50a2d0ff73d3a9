//! A list of legs for a request no memory is replayed for (a deployment replaying none): chat transcripts of a haulage desk
//! are ingested (each the depot lookup of every place a shipment passes, then a quote sending
//! one leg per stretch, from and to reading the lookups), and a request of other words (a band's
//! gear on tour) that the search answers gets the quote's legs laid along its own route: as many
//! as its stretches, each reading the lookup of its places (made by the run), each leaving on
//! the day the request says or the stay gives.

use crate::common::*;
use serde_json::{json, Value};

fn tools() -> Value {
    let f = function_tool;
    json!([
        f(
            "haulage__find_depot",
            "Find the depot of a town or city by its name",
            json!({"query": {"type": "string"}}),
            json!(["query"])
        ),
        f(
            "haulage__quote_route",
            "Quote the price of hauling goods along a route of several legs: each leg with fromId, toId and date",
            json!({"legs": {"type": "array"}}),
            json!(["legs"])
        ),
    ])
}

/// One conversation: the request, a depot lookup per place in `route`, then a quote of one leg
/// per stretch leaving on `days`.
fn conversation(request: &str, route: &[&str], days: &[&str]) -> String {
    let call = |n: usize, name: &str, args: Value| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{n}"), "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let result = |n: usize, content: Value| json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": content.to_string()});
    let id = |place: &str| format!("D-{}", place.to_ascii_uppercase());
    let mut messages = vec![json!({"role": "user", "content": request})];
    let mut n = 0;
    let mut looked: Vec<&str> = Vec::new();
    for place in route {
        if looked.contains(place) {
            continue;
        }
        looked.push(place);
        n += 1;
        messages.push(call(n, "haulage__find_depot", json!({"query": place})));
        messages.push(result(n, json!([{"id": id(place), "name": place}])));
    }
    let legs: Vec<Value> =
        route.windows(2).zip(days).map(|(w, d)| json!({"fromId": id(w[0]), "toId": id(w[1]), "date": d})).collect();
    n += 1;
    messages.push(call(n, "haulage__quote_route", json!({ "legs": legs })));
    messages.push(result(n, json!({"price": 1200})));
    messages.push(json!({"role": "assistant", "content": "Here is the quote."}));
    json!({"category": "Logistics", "messages": messages, "tools": tools()}).to_string()
}

#[test]
fn a_route_the_search_quotes_gets_one_leg_per_stretch_of_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        conversation(
            "Quote shipping pallets from Rotterdam to Hamburg on March 3, 2025, with a stop in Bremen.",
            &["Rotterdam", "Bremen", "Hamburg"],
            &["2025-03-03", "2025-03-03"],
        ),
        conversation(
            "Quote a van leaving Lisbon on May 3, 2025, driving to Porto on May 5, 2025 and then to Vigo on May 7, 2025.",
            &["Lisbon", "Porto", "Vigo"],
            &["2025-05-03", "2025-05-05"],
        ),
        conversation(
            "Price the freight from Lagos to Accra on July 1, 2025, via Lome.",
            &["Lagos", "Lome", "Accra"],
            &["2025-07-01", "2025-07-01"],
        ),
    ];
    let store = ingest_transcripts(dir.path(), "haulage.jsonl", &lines);
    // A deployment that replays no memory (its threshold at 1: only the very same request):
    // the search answers, and the remembered quotes are only models of how legs are laid.
    let out = bin_in(dir.path())
        .env("TOOLGRAPH__RUN__MEMORY_THRESHOLD", "1.0")
        .arg("--store")
        .arg(&store)
        .args(["ask", "--dry-run", "--json", "--no-learn"])
        .arg(
        "Our band's gear tours by truck: it leaves Glasgow on April 2, 2025, goes to Leeds and Bristol, then returns to \
         Glasgow. We stay in each city for three days. What would the haulage cost?",
        )
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    // No memory is replayed: the search chose the quote.
    assert!(recall_event(&r).is_none_or(|e| e["replayed"] == false), "{r:#}");
    let trace = r["trace"].as_array().unwrap();
    let calls: Vec<&Value> = trace.iter().filter(|t| t["type"] == "call").collect();
    let quote =
        calls.iter().find(|t| t["api"] == "logistics/haulage/quote_route").unwrap_or_else(|| panic!("a quote: {r:#}"));
    assert_eq!(quote["sources"]["legs"]["kind"], "route", "{quote:#}");
    // Once: the same list laid again is the same call.
    assert_eq!(calls.iter().filter(|t| t["api"] == "logistics/haulage/quote_route").count(), 1, "{r:#}");
    // The depot each reference reads: the query of the lookup it names.
    let looked_up = |reference: &Value| -> String {
        let label = reference.as_str().unwrap().trim_matches('$').split('.').next().unwrap().to_string();
        let lookup = calls.iter().find(|t| t["label"] == label.as_str()).unwrap_or_else(|| panic!("{label}: {r:#}"));
        lookup["arguments"]["query"].as_str().unwrap().to_string()
    };
    let legs = quote["arguments"]["legs"].as_array().unwrap_or_else(|| panic!("{quote:#}"));
    let read: Vec<(String, String, String)> = legs
        .iter()
        .map(|l| (looked_up(&l["fromId"]), looked_up(&l["toId"]), l["date"].as_str().unwrap_or_default().to_string()))
        .collect();
    let want = |a: &str, b: &str, d: &str| (a.to_string(), b.to_string(), d.to_string());
    assert_eq!(
        read,
        [
            want("Glasgow", "Leeds", "2025-04-02"),
            want("Leeds", "Bristol", "2025-04-05"),
            want("Bristol", "Glasgow", "2025-04-08")
        ],
        "{r:#}"
    );
}
