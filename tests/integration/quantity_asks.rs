//! A quantity the request says picks among sibling APIs, and a composed part reads the sibling
//! call made, as a user gets it from the binary. Chat transcripts of a fitness assistant are
//! ingested: gyms searched by city (alone, or with the opening hours of the gym found), and gyms
//! searched near a place's coordinates within a distance ("within 3 kilometers of …", the
//! search's `radius_km`). No transcript asks for a gym within a distance **and** its hours.
//! Asked for both, the engine searches near the place (the search that takes the distance, not
//! the city search the hours were always read from) and reads the hours of the gym that search
//! found; the city search is not sent.

use crate::common::*;
use serde_json::{json, Value};

fn tools() -> Value {
    let f = function_tool;
    json!([
        f(
            "places__geocode",
            "Coordinates of a place, landmark or address",
            json!({"query": {"type": "string"}}),
            json!(["query"])
        ),
        f("gyms__by_city", "Find gyms in a city", json!({"city": {"type": "string"}}), json!(["city"])),
        f(
            "gyms__nearby",
            "Find gyms around coordinates, within a radius in kilometers",
            json!({"lat": {"type": "number"}, "lng": {"type": "number"}, "radius_km": {"type": "number"}}),
            json!(["lat", "lng"])
        ),
        f("gyms__hours", "Opening hours of a gym", json!({"gym_id": {"type": "string"}}), json!(["gym_id"])),
    ])
}

/// One conversation: the request, then each call with its result.
fn conversation(request: &str, calls: &[(&str, Value, Value)]) -> String {
    let mut messages = vec![json!({"role": "user", "content": request})];
    for (n, (name, args, result)) in calls.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{n}"),
            "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": result.to_string()}));
    }
    messages.push(json!({"role": "assistant", "content": "Here it is."}));
    json!({"category": "Fitness", "messages": messages, "tools": tools()}).to_string()
}

fn fitness_transcripts() -> Vec<String> {
    let gyms = |id: String| json!({"gyms": [{"gym_id": id, "name": "Iron"}]});
    let mut lines = Vec::new();
    for (i, city) in ["Lyon", "Porto", "Krakow", "Ghent"].iter().enumerate() {
        lines.push(conversation(
            &format!("Find a gym in {city}."),
            &[("gyms__by_city", json!({"city": city}), gyms(format!("g-{i}")))],
        ));
    }
    for (i, city) in ["Turin", "Bilbao", "Gdansk", "Utrecht"].iter().enumerate() {
        let id = format!("h-{i}");
        lines.push(conversation(
            &format!("Find a gym in {city} and tell me its opening hours."),
            &[
                ("gyms__by_city", json!({"city": city}), gyms(id.clone())),
                ("gyms__hours", json!({"gym_id": id}), json!({"hours": "6-22"})),
            ],
        ));
    }
    let places =
        [("Trevi Fountain", 3, 41.9, 12.48), ("Big Ben", 5, 51.5, -0.12), ("Brandenburg Gate", 2, 52.5, 13.37)];
    for (i, (place, km, lat, lng)) in places.iter().enumerate() {
        lines.push(conversation(
            &format!("Which gyms are within {km} kilometers of {place}?"),
            &[
                ("places__geocode", json!({"query": place}), json!({"lat": lat, "lng": lng})),
                ("gyms__nearby", json!({"lat": lat, "lng": lng, "radius_km": km}), gyms(format!("n-{i}"))),
            ],
        ));
    }
    lines
}

/// (label, API name, arguments) of each call a run made.
fn calls(r: &Value) -> Vec<(String, String, Value)> {
    r["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "call")
        .map(|t| {
            let api = t["api"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
            (t["label"].as_str().unwrap().to_string(), api, t["arguments"].clone())
        })
        .collect()
}

#[test]
fn a_distance_said_picks_the_search_that_takes_it_and_the_hours_read_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_transcripts(dir.path(), "fitness.jsonl", &fitness_transcripts());
    let r =
        ask_dry(dir.path(), &store, "Find a gym within 2 kilometers of Alexanderplatz and tell me its opening hours.");
    let made = calls(&r);
    let apis: Vec<&str> = made.iter().map(|(_, a, _)| a.as_str()).collect();
    assert_eq!(apis, ["geocode", "nearby", "hours"], "{made:#?}");
    assert_eq!(made[0].2["query"], "Alexanderplatz", "{made:#?}");
    assert_eq!(made[1].2["radius_km"], 2, "the distance said is the radius: {made:#?}");
    let nearby = &made[1].0;
    let id = made[2].2["gym_id"].as_str().unwrap_or_default();
    assert!(id.starts_with(&format!("${nearby}.")), "the hours read the gym the nearby search found: {made:#?}");
    assert_eq!(r["status"], "answered", "{r:#}");
}

/// Without a distance the same words ask for the city search and its hours, as remembered.
#[test]
fn without_a_distance_the_city_search_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_transcripts(dir.path(), "fitness.jsonl", &fitness_transcripts());
    let r = ask_dry(dir.path(), &store, "Find a gym in Dublin and tell me its opening hours.");
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(apis, ["by_city", "hours"], "{r:#}");
}
