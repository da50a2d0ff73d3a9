//! A count of options the request points back at, as a user gets it from the binary: a library
//! catalogue's chains are ingested (a loan check of the best-rated novel on a day with its
//! details; the details of one book after another until one fits; one book's details; a list
//! alone), the replay sandbox serves their recorded responses, and a request that states its
//! days ("spending the spring in Oxford from April 2 to April 20") and asks for "the two
//! best-rated books … detailed information about them" gets the details of the first and the
//! second book — and no loan check: the remembered check took a day, but this request's days are
//! only the setting of what it asks, and no call is owed to them.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

const TITLES: [&str; 4] = ["Middlemarch", "Persuasion", "Bleak House", "Ivanhoe"];

fn param(kind: &str, description: &str) -> Value {
    json!({"type": kind, "description": description, "required": true, "enum": [], "default": null})
}

fn field(kind: &str) -> Value {
    json!({"title": "", "type": kind, "description": "", "enum": [], "required": [], "properties": {}, "items": null})
}

/// The catalogue's four APIs, as ComplexFuncBench documents an API.
fn spec() -> Value {
    let api = |name: &str, description: &str, endpoint: &str, params: Value, out: Value| {
        json!({"id": null, "name": name, "description": description, "host": "library-catalogue.p.rapidapi.com",
            "endpoint": endpoint, "query_parameters": params, "output_parameters": out})
    };
    json!([
        api(
            "Search_Library_Location",
            "Find a public library by the name of its town or city.",
            "/api/v1/libraries/search",
            json!({"query": param("string", "Name of a town or city")}),
            json!({"id": field("string"), "name": field("string")})
        ),
        api(
            "Search_Books",
            "Search the books a library holds, best rated first.",
            "/api/v1/books/search",
            json!({"library_id": param("string", "The library's id, from Search_Library_Location as id")}),
            json!({"books": field("array")})
        ),
        api(
            "Get_Book_Details",
            "Get detailed information about a book: pages, summary, author.",
            "/api/v1/books/details",
            json!({"book_id": param("string", "The book's id, from Search_Books as book_id")}),
            json!({"title": field("string"), "pages": field("number")})
        ),
        api(
            "Get_Loan_Availability",
            "Check whether a book can be borrowed on a date.",
            "/api/v1/books/availability",
            json!({"book_id": param("string", "The book's id"), "date": param("string", "Loan date\nFormat: YYYY-MM-DD")}),
            json!({"available": field("boolean")})
        ),
    ])
}

/// One chain: the request and each (API, arguments, response).
fn chain(request: &str, calls: Vec<(&str, Value, Value)>) -> Value {
    let output: Vec<Value> = calls
        .into_iter()
        .enumerate()
        .map(|(i, (name, arguments, response))| {
            json!({"name": name, "arguments": arguments, "label": format!("var{}", i + 1), "errors": [], "response": response})
        })
        .collect();
    json!({"input": request, "output": output, "var_result": {}, "errors": [], "num_successful_calls": output.len()})
}

fn library(town: &str) -> (&'static str, Value, Value) {
    let id = format!("lib-{}", town.to_lowercase());
    ("Search_Library_Location", json!({"query": town}), json!([{"id": id, "name": format!("{town} Central Library")}]))
}

fn books(town: &str) -> (&'static str, Value, Value) {
    let prefix = town.to_lowercase();
    let listed: Vec<Value> = TITLES
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"book_id": format!("{prefix}-b{i}"), "title": t, "rating": 9 - i}))
        .collect();
    ("Search_Books", json!({"library_id": "$var1.0.id$"}), json!({ "books": listed }))
}

fn details(i: usize) -> (&'static str, Value, Value) {
    let reference = format!("$var2.books.{i}.book_id$");
    ("Get_Book_Details", json!({ "book_id": reference }), json!({"title": TITLES[i], "pages": 200 + 50 * i}))
}

/// The chains learned from: none of the request's kind (two books' details, no loan check).
fn learned() -> Vec<Value> {
    let mut out = Vec::new();
    for (town, said, day) in [("Leeds", "March 3, 2025", "2025-03-03"), ("Bath", "May 9, 2025", "2025-05-09")]
        .into_iter()
        .chain([("York", "June 2, 2025", "2025-06-02")])
    {
        let loan = (
            "Get_Loan_Availability",
            json!({"book_id": "$var2.books.0.book_id$", "date": day}),
            json!({"available": true}),
        );
        out.push(chain(
            &format!("Check the loan availability of the best-rated novel at the {town} library on {said}, and give me detailed information about it."),
            vec![library(town), books(town), loan, details(0)],
        ));
    }
    for town in ["Hull", "Derby", "Ely"] {
        out.push(chain(
            &format!("Go through the history books at the {town} library and keep checking the next one until one has more than 300 pages."),
            vec![library(town), books(town), details(0), details(1)],
        ));
    }
    for town in ["Kent", "Wells"] {
        out.push(chain(
            &format!("Find the newest cookbooks at the {town} library and tell me about the first one."),
            vec![library(town), books(town), details(0)],
        ));
        out.push(chain(&format!("Which books does the {town} library hold?"), vec![library(town), books(town)]));
    }
    out
}

const REQUEST: &str = "We are spending the spring in Oxford from April 2 to April 20, 2025. Help us find the two \
                       best-rated books at the Oxford library and give us detailed information about them.";

fn write(dir: &Path, name: &str, v: &Value) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

#[test]
fn two_options_pointed_back_at_get_a_call_each_and_days_said_as_the_setting_get_none() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "spec.json", &spec());
    let train = write(dir.path(), "train.json", &Value::Array(learned()));
    // The sandbox also holds the recordings of this request's own calls (as the benchmark's do).
    let mut all = learned();
    all.push(chain(REQUEST, vec![library("Oxford"), books("Oxford"), details(0), details(1)]));
    let served = write(dir.path(), "served.json", &Value::Array(all));
    let (runs, tools, _) = convert_chains(dir.path(), &train, &spec);
    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    ingest_runs(dir.path(), &store, &tools, &runs);
    let mut sandbox = bin();
    sandbox.args(["sandbox", "--chains"]).arg(&served).arg("--spec").arg(&spec).args(["--port", "0"]);
    let (_sb, port) = spawn_listening(sandbox, "replay sandbox:", None);
    let out = bin_in(dir.path())
        .arg("--store")
        .arg(&store)
        .args(["ask", REQUEST, "--no-learn", "--json", "--rewrite", &format!("https://=http://127.0.0.1:{port}/")])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let trace = r["trace"].as_array().unwrap();
    let calls: Vec<(&str, &Value)> = trace
        .iter()
        .filter(|t| t["type"] == "call")
        .map(|t| (t["api"].as_str().unwrap().rsplit('/').next().unwrap(), &t["arguments"]))
        .collect();
    let apis: Vec<&str> = calls.iter().map(|(a, _)| *a).collect();
    assert_eq!(apis, ["search_library_location", "search_books", "get_book_details", "get_book_details"], "{r:#}");
    assert_eq!(calls[2].1["book_id"], "$var2.books.0.book_id$", "{calls:#?}");
    assert_eq!(calls[3].1["book_id"], "$var2.books.1.book_id$", "the second option: {calls:#?}");
    assert_eq!(r["status"], "answered", "{r:#}");
    let coverage = r["judgement"]["coverage"].as_array().unwrap();
    assert!(coverage.iter().all(|c| c["kind"] != "date"), "the spring's days are owed no call: {coverage:#?}");
    assert!(
        coverage.iter().any(|c| c["kind"] == "options" && c["covered_by"] == "var4"),
        "two calls, one per book: {coverage:#?}"
    );
}
