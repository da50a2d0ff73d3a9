//! A remembered chain of another kind whose calls, once what only its request asked for is left
//! out, are all ones observed chains go on from: a library assistant remembers "books of a
//! branch, with their details and late fees" (branch → shelf → catalog record → fees: the record
//! is only ever read by the fees). Asked for a branch's books and their reader reviews, the
//! replay keeps the branch and the shelf (the first call serving the "book" ask, whose word asks
//! most often for the catalog, and what it reads) and leaves the record and the fees out; the
//! search goes on from the shelf to the reviews. Before, with nothing left but such calls, the
//! whole remembered chain was replayed (branch, shelf, record, fees, then the reviews).

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

fn tools() -> Value {
    let f = function_tool;
    let s = json!({"type": "string"});
    json!([
        f("library__branch", "Find a library branch by its name", json!({"query": s}), json!(["query"])),
        f(
            "library__shelf",
            "List the books and novels on the shelves of a branch about a subject",
            json!({"branch_id": s, "subject": s}),
            json!(["branch_id", "subject"])
        ),
        f("library__catalog", "Search the book catalog by title", json!({"title": s}), json!(["title"])),
        f(
            "library__record",
            "The catalog record of an item: details of its edition",
            json!({"book_id": s}),
            json!(["book_id"])
        ),
        f("library__fees", "The late fees of a loan of an item", json!({"book_id": s}), json!(["book_id"])),
        f("library__reviews", "Reader reviews of an item", json!({"book_id": s}), json!(["book_id"])),
    ])
}

/// One transcript: the request, then each (tool, arguments, result).
fn transcript(request: &str, calls: &[(&str, Value, Value)]) -> String {
    chat_transcript("Education", &tools(), request, calls)
}

fn ingest_library(dir: &Path) -> String {
    let branches =
        [("Elm Street", "gardening"), ("Mill Lane", "astronomy"), ("Harbour View", "chess"), ("Kings Park", "pottery")];
    let mut lines = Vec::new();
    for (i, (branch, subject)) in branches.iter().enumerate() {
        let (b, book) = (format!("br-{i:03}"), format!("bk-{i:03}"));
        let shelf = json!({"books": [{"book_id": book, "title": format!("A Guide to {subject}")}]});
        // What the assistant remembers: the books of a branch, with their details and fees.
        lines.push(transcript(
            &format!("Find books about {subject} at the {branch} branch, with their details and late fees."),
            &[
                ("library__branch", json!({"query": branch}), json!({"branch_id": b})),
                ("library__shelf", json!({"branch_id": b, "subject": subject}), shelf.clone()),
                ("library__record", json!({"book_id": book}), json!({"book_id": book, "edition": "2nd"})),
                ("library__fees", json!({"book_id": book}), json!({"per_day": 0.25})),
            ],
        ));
        // Reader reviews, asked another way, of a branch's shelf.
        if i < 3 {
            lines.push(transcript(
                &format!("What do people say about the {subject} shelf of {branch}? I want the reader reviews."),
                &[
                    ("library__branch", json!({"query": branch}), json!({"branch_id": b})),
                    ("library__shelf", json!({"branch_id": b, "subject": subject}), shelf.clone()),
                    ("library__reviews", json!({"book_id": book}), json!({"reviews": [{"stars": 4}]})),
                ],
            ));
        }
    }
    // A book looked up by its title: the word "book" asks for the catalog most often.
    for title in ["Middlemarch", "Persuasion", "Dracula", "Ivanhoe", "Emma", "Beloved"] {
        lines.push(transcript(
            &format!("Is the book {title} in the catalog?"),
            &[("library__catalog", json!({"title": title}), json!({"books": [{"book_id": format!("bk-{title}")}]}))],
        ));
    }
    ingest_transcripts(dir, "library.jsonl", &lines)
}

#[test]
fn a_replay_left_with_searches_only_keeps_the_one_serving_the_ask_and_composes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = ingest_library(dir.path());
    let request = "Find books about cooking at the Oak Road branch, with their reader reviews.";
    let r = ask_dry(dir.path(), &store, request);
    let recall = recall_event(&r).expect("a memory is recalled");
    assert!(recall["request"].as_str().unwrap_or_default().contains("late fees"), "{recall:#}");
    assert_eq!(recall["replayed"], true, "{recall:#}");
    assert_eq!(recall["left_out"], json!(["education/library/record", "education/library/fees"]), "{recall:#}");
    let calls: Vec<(&str, &Value)> = r["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "call")
        .map(|t| (t["api"].as_str().unwrap(), &t["arguments"]))
        .collect();
    let apis: Vec<&str> = calls.iter().map(|(a, _)| *a).collect();
    assert_eq!(apis, ["education/library/branch", "education/library/shelf", "education/library/reviews"], "{r:#}");
    assert_eq!(calls[0].1["query"], "Oak Road", "{calls:#?}");
    assert_eq!(calls[2].1["book_id"], "$var2.books.0.book_id$", "the reviews read the shelf: {calls:#?}");
}
