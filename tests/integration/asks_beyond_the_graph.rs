//! An API the request's words ask for that no observed chain reaches from where the search is:
//! the graph search alone (no memory to replay), on a music assistant's chains (ComplexFuncBench's
//! format, learned, executed over HTTP against the replay sandbox). An artist search is followed
//! by one of five things about the artist (albums, tour dates, biography, similar artists, top
//! tracks); the merchandise only ever after the tour dates. "Show me the merchandise of Coldplay"
//! is a kind no chain has: the search, then the merchandise reading its result — not the tour
//! dates no word asked for, and not the five successors the graph's edges offer.

use super::reverse_chain_and_plans::{engine, names, run_settings, world_of};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::run::Status;
use toolgraph_ingest::complexfuncbench::{Chain, Spec};

/// (API, description, a request asking for it with `{}` for the artist; none for the merchandise).
const ABOUT: [(&str, &str, &str); 6] = [
    ("Get_Albums", "The albums an artist released, newest first.", "Which albums did {} release?"),
    ("Get_Tour_Dates", "The tour dates of an artist: upcoming concerts.", "When are the tour dates of {}?"),
    ("Get_Biography", "The biography of an artist: where they come from.", "Tell me the biography of {}."),
    ("Get_Similar_Artists", "Artists similar to an artist, for discovery.", "Which artists are similar to {}?"),
    ("Get_Top_Tracks", "The top tracks of an artist by plays.", "Play the top tracks of {}."),
    ("Get_Merchandise", "The merchandise of an artist: shirts and posters for sale.", ""),
];

fn specs() -> Vec<Spec> {
    let spec = |name: &str, description: &str, param: &str, outputs: Value| {
        json!({"name": name, "description": description, "host": "music-demo.example.org",
            "endpoint": format!("/{}", name.to_lowercase()),
            "query_parameters": {param: {"type": "string", "description": format!("the {param}"), "required": true}},
            "output_parameters": outputs})
    };
    let mut v = vec![spec(
        "Search_Artist",
        "Search an artist by name: the artist's id.",
        "query",
        json!({"data": {"type": "object", "properties": {"artist_id": {"type": "string"}}}}),
    )];
    for (name, description, _) in ABOUT {
        v.push(spec(name, description, "artist_id", json!({"data": {"type": "object"}})));
    }
    serde_json::from_value(Value::Array(v)).unwrap()
}

fn call(name: &str, args: Value, label: &str, response: Value) -> Value {
    json!({"name": name, "arguments": args, "label": label, "response": response})
}

/// `request`: the search for `artist`, then each of `then` reading its id.
fn chain(request: &str, artist: &str, then: &[&str]) -> Value {
    let id = format!("A-{}", artist.to_uppercase());
    let mut calls = vec![call("Search_Artist", json!({"query": artist}), "var1", json!({"data": {"artist_id": id}}))];
    for (i, name) in then.iter().enumerate() {
        let answer = json!({"data": {"artist": artist, "about": format!("{name} of {artist}")}});
        calls.push(call(name, json!({"artist_id": "$var1.data.artist_id$"}), &format!("var{}", i + 2), answer));
    }
    json!({"input": request, "output": calls})
}

fn chains() -> Vec<Chain> {
    let artists = ["Adele", "Radiohead", "Shakira", "Metallica"];
    let mut v = Vec::new();
    for (name, _, request) in ABOUT.iter().filter(|a| !a.2.is_empty()) {
        for a in artists {
            v.push(chain(&request.replace("{}", a), a, &[name]));
        }
    }
    for a in artists.iter().chain(&["Coldplay"]) {
        let request = format!("When are the tour dates of {a}, and what merchandise do they sell?");
        v.push(chain(&request, a, &["Get_Tour_Dates", "Get_Merchandise"]));
    }
    v.push(chain("Find the artist Bjork.", "Bjork", &[]));
    v.into_iter().map(|c| serde_json::from_value(c).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_api_no_chain_reaches_from_here_is_called_where_its_inputs_are_ready() {
    let w = world_of(specs(), chains()).await;
    let e = engine(&w, Arc::new(DeterministicPlanner::default()), run_settings());
    let r = e.run("Show me the merchandise of Coldplay.", Map::new(), None).await.unwrap();
    // Without it, the search's successors are the graph's five (the tour dates first), none of
    // them asked for: the merchandise is reached through the tour dates, or not at all.
    assert_eq!(names(&r), ["Search_Artist", "Get_Merchandise"], "{:#?}", r.trace);
    assert_eq!(r.chain[0].sent["query"], json!("Coldplay"));
    assert_eq!(r.chain[1].sent["artist_id"], json!("A-COLDPLAY"), "it reads the search's result");
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
}
