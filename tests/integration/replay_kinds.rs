//! A remembered chain of another kind, replayed as a user gets it from the binary: a festival
//! assistant's transcripts are ingested (the lineup of a day, a camping pitch from that day, a
//! shuttle from the station to the pitch), and a request asking only for the lineup and a
//! shuttle to a stage leaves the camping out — although it took the day this request says, the
//! lineup takes that day too, and the week it stayed is a span only the remembered request said —
//! and the shuttle's second stop, which the remembered run read from the camping's answer, is
//! this request's stage, not the station again.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

fn tools() -> Value {
    let f = function_tool;
    let s = json!({"type": "string"});
    json!([
        f("festival__lineup", "The lineup of a festival day: the acts playing", json!({"date": s}), json!(["date"])),
        f(
            "festival__camping",
            "Book a camping pitch at the festival from a day to a day",
            json!({"from_date": s, "to_date": s}),
            json!(["from_date", "to_date"])
        ),
        f("festival__place", "Find a place on the festival map by its name", json!({"query": s}), json!(["query"])),
        f(
            "festival__shuttle",
            "Book a shuttle between two places of the festival map",
            json!({"from_id": s, "to_id": s, "date": s}),
            json!(["from_id", "to_id", "date"])
        ),
    ])
}

/// One transcript: the request, then each (tool, arguments, result).
fn transcript(request: &str, calls: &[(&str, Value, Value)]) -> String {
    chat_transcript("Events", &tools(), request, calls)
}

/// Four transcripts of the three-part request (lineup, camping for a week, a shuttle from the
/// station to the pitch the camping gave), on four days; the lineup, the camping and the map
/// asked for alone too.
fn ingest_festival(dir: &Path) -> String {
    let days = [("May 3, 2025", "2025-05-03", "2025-05-10"), ("June 14, 2025", "2025-06-14", "2025-06-21")];
    let more = [("July 5, 2025", "2025-07-05", "2025-07-12"), ("August 9, 2025", "2025-08-09", "2025-08-16")];
    let mut lines = Vec::new();
    for (i, (said, day, week_on)) in days.iter().chain(more.iter()).enumerate() {
        let pitch = format!("Pine Meadow {}", i + 1);
        lines.push(transcript(
            &format!(
                "Show me the lineup on {said}, book a camping pitch for a week from that day, and a shuttle \
                 from the North Gate to my pitch."
            ),
            &[
                ("festival__lineup", json!({"date": day}), json!({"acts": [{"name": "The Heralds"}]})),
                (
                    "festival__camping",
                    json!({"from_date": day, "to_date": week_on}),
                    json!({"pitch": {"name": pitch}}),
                ),
                ("festival__place", json!({"query": "North Gate"}), json!({"place": {"id": format!("map-place-gate-{i:03}")}})),
                ("festival__place", json!({"query": pitch}), json!({"place": {"id": format!("map-place-pitch-{i:03}")}})),
                (
                    "festival__shuttle",
                    json!({"from_id": format!("map-place-gate-{i:03}"), "to_id": format!("map-place-pitch-{i:03}"), "date": day}),
                    json!({"booked": true}),
                ),
            ],
        ));
    }
    // The lineup and the camping asked for alone too: neither is a lookup every chain goes on from.
    for (i, (said, day, week_on)) in more.iter().enumerate() {
        lines.push(transcript(
            &format!("Who plays in the lineup on {said}?"),
            &[("festival__lineup", json!({"date": day}), json!({"acts": [{"name": "The Heralds"}]}))],
        ));
        lines.push(transcript(
            &format!("Book a camping pitch for a week from {said}."),
            &[(
                "festival__camping",
                json!({"from_date": day, "to_date": week_on}),
                json!({"pitch": {"name": format!("Birch Hollow {i}")}}),
            )],
        ));
    }
    // The map looked up by a name the request says, as it mostly is.
    for (i, place) in ["Cedar Stage", "Willow Stage"].iter().enumerate() {
        lines.push(transcript(
            &format!("Where is the {place} on the festival map?"),
            &[(
                "festival__place",
                json!({"query": place}),
                json!({"place": {"id": format!("map-place-stage-{i:03}")}}),
            )],
        ));
    }
    ingest_transcripts(dir, "festival.jsonl", &lines)
}

#[test]
fn a_call_kept_for_a_value_the_asked_calls_take_too_is_left_out_and_what_read_it_is_this_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_festival(dir.path());
    let request = "Show me the lineup on September 6, 2025, and a shuttle from the North Gate to the Oak Stage.";
    let r = ask_dry(dir.path(), &store, request);
    let recall = recall_event(&r).expect("a memory is replayed");
    let trace = r["trace"].as_array().unwrap();
    assert!(recall["request"].as_str().unwrap_or_default().contains("camping"), "{recall:#}");
    assert_eq!(recall["left_out"], json!(["events/festival/camping"]), "{recall:#}");
    let calls: Vec<(&str, &Value)> =
        trace.iter().filter(|t| t["type"] == "call").map(|t| (t["api"].as_str().unwrap(), &t["arguments"])).collect();
    let apis: Vec<&str> = calls.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        apis,
        ["events/festival/lineup", "events/festival/place", "events/festival/place", "events/festival/shuttle"],
        "{r:#}"
    );
    assert_eq!(calls[0].1["date"], "2025-09-06", "{calls:#?}");
    assert_eq!(calls[1].1["query"], "North Gate", "{calls:#?}");
    assert_eq!(calls[2].1["query"], "Oak Stage", "the second stop is this request's: {calls:#?}");
}
