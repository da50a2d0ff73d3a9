//! A remembered run that put a name its request said in its own words: a weather assistant's
//! transcripts look a place up before the forecast, mostly by the name the request says, but the
//! airport the user called "Oslo Airport" was looked up — twice, in two runs — as "Oslo Gardermoen
//! Airport". Replayed for another airport, the lookup takes the name this request says, not the
//! remembered run's wording of another place (that wording is no constant of the call).

use crate::common::*;
use serde_json::{json, Value};

fn tools() -> Value {
    let f = function_tool;
    let s = json!({"type": "string"});
    json!([
        f("geo__lookup", "Find a place by its name: its coordinates", json!({"query": s}), json!(["query"])),
        f(
            "weather__forecast",
            "The weather forecast at coordinates on a day",
            json!({"lat": s, "lon": s, "date": s}),
            json!(["lat", "lon", "date"])
        ),
    ])
}

fn transcript(request: &str, query: &str, day: &str, at: (f64, f64)) -> String {
    let call = |id: &str, name: &str, args: Value| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let messages = json!([
        {"role": "user", "content": request},
        call("c0", "geo__lookup", json!({"query": query})),
        {"role": "tool", "tool_call_id": "c0", "content": json!({"lat": at.0, "lon": at.1}).to_string()},
        call("c1", "weather__forecast", json!({"lat": at.0, "lon": at.1, "date": day})),
        {"role": "tool", "tool_call_id": "c1", "content": json!({"sky": "clear", "high_c": 18}).to_string()},
        {"role": "assistant", "content": "Clear, 18 °C."}
    ]);
    json!({"category": "Weather", "messages": messages, "tools": tools()}).to_string()
}

#[test]
fn a_name_the_remembered_run_put_in_its_own_words_is_this_requests_in_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for (said, day) in [("May 3, 2025", "2025-05-03"), ("June 14, 2025", "2025-06-14")] {
        lines.push(transcript(
            &format!("Will it rain at Oslo Airport on {said}? My plane lands there."),
            "Oslo Gardermoen Airport",
            day,
            (60.19, 11.1),
        ));
    }
    for (place, said, day) in [
        ("Lisbon", "July 5, 2025", "2025-07-05"),
        ("Porto", "August 9, 2025", "2025-08-09"),
        ("Bergen", "March 2, 2025", "2025-03-02"),
        ("Seville", "April 20, 2025", "2025-04-20"),
    ] {
        lines.push(transcript(&format!("What is the weather in {place} on {said}?"), place, day, (40.0, -8.0)));
    }
    let store = ingest_transcripts(dir.path(), "weather.jsonl", &lines);

    let request = "Will it rain at Helsinki Airport on September 6, 2025? My plane lands there.";
    let r = ask_dry(dir.path(), &store, request);
    let recall = recall_event(&r).expect("a memory is replayed");
    let trace = r["trace"].as_array().unwrap();
    assert!(recall["request"].as_str().unwrap_or_default().contains("Oslo Airport"), "{recall:#}");
    let lookup = trace
        .iter()
        .find(|t| t["type"] == "call" && t["api"] == "weather/geo/lookup")
        .unwrap_or_else(|| panic!("no lookup: {r:#}"));
    assert_eq!(lookup["arguments"]["query"], "Helsinki Airport", "{lookup:#}");
}
