//! Requests of a kind no remembered chain has, as a user gets them from the binary: chat
//! transcripts of a cooking assistant are ingested (recipe search → ingredients; recipe search →
//! nutrition facts; never both), and a request asking for the ingredients **and** the nutrition
//! of a dish gets both calls, in data-flow order (the search once, both reading its result), with
//! their arguments; what the words ask for that no remembered part can serve leaves the run
//! `partial`, naming it; a remembered chain of another kind leaves out the call its request's
//! own words asked for that this request's do not. The ask model behind it is learned at ingest
//! and stored with the graph.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

fn tools() -> Value {
    let f = function_tool;
    json!([
        f(
            "recipes__search",
            "Search recipes by the name of a dish",
            json!({"query": {"type": "string"}}),
            json!(["query"])
        ),
        f(
            "recipes__ingredients",
            "The ingredients of a recipe, as a shopping list",
            json!({"recipe_id": {"type": "string"}}),
            json!(["recipe_id"])
        ),
        f(
            "recipes__reviews",
            "Reviews of a recipe: what cooks who made it say",
            json!({"recipe_id": {"type": "string"}}),
            json!(["recipe_id"])
        ),
        f(
            "recipes__nutrition",
            "Nutrition facts of a recipe: calories and protein for a number of portions",
            json!({"recipe_id": {"type": "string"}, "portions": {"type": "integer"}}),
            json!(["recipe_id", "portions"])
        ),
    ])
}

/// One conversation: the request, then the search for `dish` and the `then` call reading its id.
fn conversation(request: &str, dish: &str, then: Option<(&str, Value)>, id: usize) -> String {
    conversation_of(request, dish, then.as_slice(), id)
}

/// One conversation: the request, then the search for `dish` and each `then` call reading its id.
fn conversation_of(request: &str, dish: &str, then: &[(&str, Value)], id: usize) -> String {
    let call = |n: usize, name: &str, args: Value| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{n}"), "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
    };
    let result = |n: usize, content: Value| json!({"role": "tool", "tool_call_id": format!("c{n}"), "content": content.to_string()});
    let rid = format!("r-{id}");
    let mut messages = vec![
        json!({"role": "user", "content": request}),
        call(1, "recipes__search", json!({"query": dish})),
        result(1, json!({"results": [{"id": rid, "title": dish}]})),
    ];
    for (n, (name, args)) in then.iter().enumerate() {
        let mut args = args.clone();
        args["recipe_id"] = json!(rid);
        messages.push(call(n + 2, name, args));
        messages.push(result(n + 2, json!({"ok": true})));
    }
    messages.push(json!({"role": "assistant", "content": "Here it is."}));
    json!({"category": "Food", "messages": messages, "tools": tools()}).to_string()
}

/// Ingested: four "ingredients" conversations, four "nutrition" ones (each for a number of
/// portions the request says), two plain searches. Never ingredients and nutrition together.
fn ingest_kitchen(dir: &Path) -> String {
    ingest_kitchen_with(dir, Vec::new())
}

/// [`ingest_kitchen`] with more conversations (`extra`).
fn ingest_kitchen_with(dir: &Path, extra: Vec<String>) -> String {
    let dishes = ["Moussaka", "Goulash", "Ratatouille", "Shakshuka"];
    let mut lines = Vec::new();
    for (i, d) in dishes.iter().enumerate() {
        lines.push(conversation(
            &format!("Which ingredients do I need to buy for {d}?"),
            d,
            Some(("recipes__ingredients", json!({}))),
            i,
        ));
    }
    for (i, (d, n)) in ["Risotto", "Bibimbap", "Jambalaya", "Tagine"].iter().zip([2, 4, 3, 6]).enumerate() {
        lines.push(conversation(
            &format!("Show the nutrition facts of {d} for {n} portions."),
            d,
            Some(("recipes__nutrition", json!({"portions": n}))),
            10 + i,
        ));
    }
    // The reviews only ever together with the ingredients.
    for (i, d) in ["Lasagne", "Borscht", "Paella Valenciana", "Pad Thai"].iter().enumerate() {
        lines.push(conversation_of(
            &format!("What do cooks say in the reviews of {d}, and which ingredients do I need to buy for it?"),
            d,
            &[("recipes__ingredients", json!({})), ("recipes__reviews", json!({}))],
            30 + i,
        ));
    }
    lines.push(conversation("Find me a recipe for Pierogi.", "Pierogi", None, 20));
    lines.push(conversation("Look up a recipe for Baklava.", "Baklava", None, 21));
    lines.extend(extra);
    ingest_transcripts(dir, "kitchen.jsonl", &lines)
}

/// Whether the memory a run replayed (its recall event) was a request saying `words`.
fn replayed_one_saying(recall: Option<&Value>, words: &str) -> bool {
    recall.is_some_and(|t| t["request"].as_str().unwrap_or_default().contains(words))
}

/// The calls of a run: (label, API id, arguments).
fn calls(r: &Value) -> Vec<(String, String, Value)> {
    r["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "call")
        .map(|t| {
            (t["label"].as_str().unwrap().to_string(), t["api"].as_str().unwrap().to_string(), t["arguments"].clone())
        })
        .collect()
}

#[test]
fn two_asks_no_remembered_chain_combined_get_both_apis_in_data_flow_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let r = ask_dry(dir.path(), &store, "I want the ingredients and the nutrition facts of Paella for 5 portions.");
    let made = calls(&r);
    let apis: Vec<&str> = made.iter().map(|(_, a, _)| a.as_str()).collect();
    assert_eq!(apis.iter().filter(|a| **a == "food/recipes/search").count(), 1, "one search: {made:#?}");
    assert_eq!(apis[0], "food/recipes/search", "the search first: {made:#?}");
    assert!(apis.contains(&"food/recipes/ingredients") && apis.contains(&"food/recipes/nutrition"), "{r:#}");
    let search = &made[0];
    assert_eq!(search.2["query"], "Paella", "{made:#?}");
    for (_, api, args) in &made[1..] {
        let id = args["recipe_id"].as_str().unwrap_or_default();
        assert!(id.starts_with(&format!("${}.", search.0)), "{api} reads the search's result: {args}");
    }
    let nutrition = made.iter().find(|(_, a, _)| a == "food/recipes/nutrition").unwrap();
    assert_eq!(nutrition.2["portions"], 5, "{made:#?}");
    assert!(
        r["trace"].as_array().unwrap().iter().any(|t| t["type"] == "composed" && t["error"].is_null()),
        "{:#}",
        r["trace"]
    );
}

/// The ingredients are asked for before the nutrition facts, and the memory replayed is a
/// nutrition one (it serves the "2 portions"): the ingredients, composed from another memory,
/// come first all the same — the calls follow the order the request says its asks in (the
/// search once, then the ingredients, then the nutrition), not the replayed chain's.
#[test]
fn asks_composed_around_a_replay_keep_the_order_the_request_says_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let r = ask_dry(
        dir.path(),
        &store,
        "Which ingredients do I need to buy for Gazpacho, and what are its nutrition facts for 2 portions?",
    );
    let replayed = recall_event(&r);
    assert!(
        replayed_one_saying(replayed.as_ref(), "nutrition"),
        "a nutrition memory is the one replayed: {replayed:#?}"
    );
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(apis, ["food/recipes/search", "food/recipes/ingredients", "food/recipes/nutrition"], "{r:#}");
    assert_eq!(r["status"], "answered", "{r:#}");
}

/// Two asks are left to compose after the replay (a nutrition memory, for the portions): the
/// reviews, said first, and the ingredients, said last. They are composed in the order the
/// request says them, not in the order the ask model ranks its cues (both words always asked
/// for their API; the ingredients' API sorts first by name).
#[test]
fn asks_composed_after_a_replay_follow_the_order_the_request_says_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let r = ask_dry(
        dir.path(),
        &store,
        "What are the nutrition facts of Gazpacho for 2 portions, what do cooks say in its reviews, and which ingredients do I need to buy?",
    );
    let replayed = recall_event(&r);
    assert!(replayed_one_saying(replayed.as_ref(), "portions"), "a nutrition memory is replayed: {replayed:#?}");
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(
        apis,
        ["food/recipes/search", "food/recipes/nutrition", "food/recipes/reviews", "food/recipes/ingredients"],
        "{r:#}"
    );
}

/// This request asks for the reviews and the nutrition facts "for 2 portions"; the nearest
/// memory asked for the reviews and the ingredients, and none of its calls this request wants
/// takes a number of portions. The memory whose chain takes them (a nutrition one) is replayed,
/// and the reviews are composed beside it; the ingredients, asked for by no word of this
/// request, are never called.
#[test]
fn a_quantity_said_prefers_the_memory_whose_calls_take_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let r = ask_dry(
        dir.path(),
        &store,
        "What do cooks say in the reviews of Gazpacho, and what are its nutrition facts for 2 portions?",
    );
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    let replayed = recall_event(&r);
    assert!(replayed_one_saying(replayed.as_ref(), "portions"), "the memory taking the portions: {replayed:#?}");
    assert!(apis.contains(&"food/recipes/reviews".to_string()), "{apis:?}");
    assert!(apis.contains(&"food/recipes/nutrition".to_string()), "{apis:?}");
    assert!(!apis.contains(&"food/recipes/ingredients".to_string()), "{apis:?}");
}

/// This request asks for less than the nearest memory: only the reviews, where the remembered
/// request asked for the reviews and the ingredients. The ingredients call, asked for by a word
/// this request does not say and taking nothing it says, is left out; the run answers with the
/// search and the reviews.
#[test]
fn a_request_asking_for_less_than_the_remembered_one_gets_only_what_it_asks() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let request = "What do cooks say in the reviews of Gazpacho?";
    let r = ask_dry(dir.path(), &store, request);
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    let replayed = recall_event(&r);
    assert!(
        replayed_one_saying(replayed.as_ref(), "ingredients"),
        "a reviews-and-ingredients memory is the one replayed: {replayed:#?}"
    );
    assert_eq!(apis, ["food/recipes/search", "food/recipes/reviews"], "{r:#}");
    assert_eq!(r["status"], "answered", "{r:#}");
    // The trace says which remembered calls the replay left out, and the text answer says it.
    let left_out = replayed.as_ref().map(|t| t["left_out"].clone()).unwrap_or_default();
    assert_eq!(left_out, serde_json::json!(["food/recipes/ingredients"]), "{replayed:#?}");
    let out = bin_in(dir.path())
        .arg("--store")
        .arg(&store)
        .args(["ask", request, "--dry-run", "--no-learn"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("left out of the replay: its calls of ingredients (what only the remembered request asked for)"),
        "{text}"
    );
}

/// A remembered request pointed to its last call by a word only the API's documentation ties to
/// it ("what those who made it think": the reviews are "what cooks who made it say"), too seldom
/// said for the ask model to have learned it. This request says none of that: the reviews are
/// left out, and the run answers with the search alone.
#[test]
fn a_last_call_only_the_remembered_words_documented_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["Couscous", "Moqueca"]
        .iter()
        .enumerate()
        .map(|(i, d)| {
            conversation(
                &format!("Get the {d} recipe for tonight, and what those who made it think."),
                d,
                Some(("recipes__reviews", json!({}))),
                40 + i,
            )
        })
        .collect();
    let store = ingest_kitchen_with(dir.path(), extra);
    let r = ask_dry(dir.path(), &store, "Get the Tiramisu recipe for tonight.");
    let replayed = recall_event(&r);
    assert!(
        replayed_one_saying(replayed.as_ref(), "made it"),
        "a search-and-reviews memory is the one replayed: {replayed:#?}"
    );
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    assert_eq!(apis, ["food/recipes/search"], "{r:#}");
    assert_eq!(r["status"], "answered", "{r:#}");
}

/// The nutrition facts need a number of portions, which this request does not say: no
/// remembered part can serve "nutrition", and the run says so instead of answering.
#[test]
fn an_ask_no_remembered_part_serves_ends_partial_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let r = ask_dry(dir.path(), &store, "Which ingredients do I need for Paella, and what are its nutrition facts?");
    let apis: Vec<String> = calls(&r).into_iter().map(|(_, a, _)| a).collect();
    assert!(apis.contains(&"food/recipes/ingredients".to_string()), "{apis:?}");
    assert!(!apis.contains(&"food/recipes/nutrition".to_string()), "{apis:?}");
    assert_eq!(r["status"], "partial", "{r:#}");
    let said = r.to_string();
    assert!(said.contains("a call of nutrition (for \\\"nutrition\\\")"), "the answer names what is missing: {said}");
}

/// The counts behind it are the argument model's, stored with the graph by `ingest`.
#[test]
fn the_ask_model_is_learned_at_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_kitchen(dir.path());
    let counts = runtime().block_on(async {
        let mut s = toolgraph_engine::settings::load(None, &[]).unwrap().store;
        s.uri = store.clone();
        let g = toolgraph_engine::store::open(&s).await.unwrap();
        g.model_counts(toolgraph_engine::graph::counts::ARGUMENT_COUNTS).await.unwrap()
    });
    let model = toolgraph_engine::fill::ArgModel::from_counts(&counts).unwrap().unwrap();
    assert_eq!(model.asks.words.get("ingredient"), Some(&8), "{:?}", model.asks.words);
    assert_eq!(model.asks.apis["food/recipes/ingredients"].get("ingredient"), Some(&8));
    assert_eq!(model.asks.apis["food/recipes/nutrition"].get("nutrition"), Some(&4));
    assert_eq!(model.asks.apis["food/recipes/search"].get("recipe"), Some(&2));
}
