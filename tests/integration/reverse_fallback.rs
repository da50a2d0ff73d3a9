//! Reverse Chain tries the next provider: where the best provider of a parameter is called and
//! fails, the next best one that gives the same value is called before the user is asked — on a
//! small lending library (chains in ComplexFuncBench's format, learned, executed over HTTP against
//! the replay sandbox, which refuses calls it holds no recording of).

use super::reverse_chain_and_plans::{engine, names, run_settings, world_of};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::run::TraceEvent;
use toolgraph_engine::run::{RunSettings, Status};
use toolgraph_ingest::complexfuncbench::{Chain, Spec};

fn spec(name: &str, endpoint: &str, description: &str, params: &[(&str, &str)], outputs: Value) -> Value {
    let q: Map<String, Value> = params
        .iter()
        .map(|(n, d)| (n.to_string(), json!({"type": "string", "description": d, "required": true})))
        .collect();
    json!({"name": name, "description": description, "host": "library-demo.example.org", "endpoint": endpoint, "query_parameters": q, "output_parameters": outputs})
}

fn specs() -> Vec<Spec> {
    let isbn =
        json!({"data": {"type": "object", "properties": {"isbn": {"type": "string"}, "title": {"type": "string"}}}});
    let v = json!([
        spec(
            "Search_Catalog",
            "/catalog/search",
            "Search the library's own catalog by title: the book's isbn.",
            &[("title", "the book's title")],
            isbn.clone()
        ),
        spec(
            "Lookup_Title",
            "/titles/lookup",
            "Look a title up in the national book registry: its isbn.",
            &[("title", "the book's title")],
            isbn
        ),
        spec(
            "Place_Hold",
            "/holds/place",
            "Place a hold on a book for a reader: the hold's id.",
            &[("isbn", "the book's isbn"), ("reader", "the reader's card number")],
            json!({"data": {"type": "object", "properties": {"hold_id": {"type": "string"}}}})
        ),
    ]);
    serde_json::from_value(v).unwrap()
}

fn call(name: &str, args: Value, label: &str, response: Value) -> Value {
    json!({"name": name, "arguments": args, "label": label, "response": response})
}

/// Holds placed through the catalog (three), a title looked up in the registry (alone), and a
/// hold placed by isbn (alone): the catalog is the isbn's best provider (its isbn feeds the hold
/// in every recorded call), the registry gives an isbn too (its documented output).
fn chains() -> Vec<Chain> {
    let mut v = Vec::new();
    for (title, isbn, reader) in
        [("Dune", "978-0441", "C-11"), ("Emma", "978-0141", "C-12"), ("Ulysses", "978-0679", "C-13")]
    {
        v.push(json!({"input": format!("Place a hold on the book {title} for reader {reader}."), "output": [
            call("Search_Catalog", json!({"title": title}), "var1", json!({"data": {"isbn": isbn, "title": title}})),
            call("Place_Hold", json!({"isbn": "$var1.data.isbn$", "reader": reader}), "var2", json!({"data": {"hold_id": format!("H-{reader}")}})),
        ]}));
    }
    v.push(json!({"input": "Look up the book Beloved in the national book registry.", "output": [
        call("Lookup_Title", json!({"title": "Beloved"}), "var1", json!({"data": {"isbn": "978-1400", "title": "Beloved"}})),
    ]}));
    v.push(json!({"input": "Place a hold on the book with isbn 978-1400 for reader C-14.", "output": [
        call("Place_Hold", json!({"isbn": "978-1400", "reader": "C-14"}), "var1", json!({"data": {"hold_id": "H-C-14"}})),
    ]}));
    v.into_iter().map(|c| serde_json::from_value(c).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_fails_gives_way_to_the_next_one_before_the_user_is_asked() {
    let w = world_of(specs(), chains()).await;
    // The catalog does not hold "Beloved" (the sandbox has no such recording: the call fails);
    // the registry does. Target first (Reverse Chain): the hold's isbn gets the catalog, then the
    // registry, and the hold is placed.
    let request = "Place a hold on the book Beloved for reader C-14.";
    let e = engine(&w, Arc::new(DeterministicPlanner::default()), RunSettings { backward: true, ..run_settings() });
    let r = e.run(request, Map::new(), None).await.unwrap();
    let inserted: Vec<&str> = r
        .trace
        .iter()
        .filter_map(|t| match t {
            TraceEvent::Insert { argument, provider, .. } if argument == "isbn" => provider.rsplit('/').next(),
            _ => None,
        })
        .collect();
    // Without the next provider the user is asked for the isbn, the search calls the registry
    // too late and ends without the hold (partial).
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    assert_eq!(inserted, ["search_catalog", "lookup_title"], "{:#?}", r.trace);
    assert!(r.needs_input.is_none(), "{:?}", r.needs_input);
    assert_eq!(names(&r), ["Lookup_Title", "Place_Hold"], "the failed call is not in the chain: {:#?}", r.trace);
    assert_eq!(r.chain[1].sent["isbn"], json!("978-1400"));
}
