//! A choice a remembered request made in words is not replayed where this request makes none, as
//! a user gets it from the binary. Chat transcripts of a bookshop assistant are ingested: books
//! searched by author, sorted where the request said how ("the newest books", "the bestselling
//! books": the search's optional `sort`), never plain. Asked for "some books" by another author,
//! the replay of a sorted search sends no order; asked for "the bestselling" ones, it sends that
//! order, whichever memory it replays. A catch-all value the remembered request said in passing
//! ("any books") was no choice and is replayed; a choice typed with a slip ("bestseling") is the
//! word meant.

use crate::common::*;
use serde_json::{json, Value};

fn tools() -> Value {
    json!([function_tool(
        "books__search",
        "Search the shop's books by author",
        json!({"author": {"type": "string"}, "sort": {"type": "string", "enum": ["newest", "bestselling", "top_rated"]}}),
        json!(["author"])
    )])
}

fn conversation(request: &str, args: Value) -> String {
    json!({"category": "Books", "tools": tools(), "messages": [
        {"role": "user", "content": request},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "books__search", "arguments": args.to_string()}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json!({"books": [{"id": "b1"}]}).to_string()},
        {"role": "assistant", "content": "Here they are."}
    ]})
    .to_string()
}

fn bookshop(dir: &std::path::Path) -> String {
    let mut lines = Vec::new();
    for author in ["Ursula Le Guin", "Terry Pratchett", "Zadie Smith", "Haruki Murakami"] {
        lines.push(conversation(
            &format!("Find the newest books by {author}."),
            json!({"author": author, "sort": "newest"}),
        ));
    }
    for author in ["Agatha Christie", "Stephen King", "Toni Morrison"] {
        lines.push(conversation(
            &format!("Find the bestselling books by {author}."),
            json!({"author": author, "sort": "bestselling"}),
        ));
    }
    ingest_transcripts(dir, "books.jsonl", &lines)
}

/// The search calls of a dry run: their arguments.
fn searches(r: &Value) -> Vec<Value> {
    r["trace"].as_array().unwrap().iter().filter(|t| t["type"] == "call").map(|t| t["arguments"].clone()).collect()
}

#[test]
fn an_order_the_remembered_request_chose_in_words_is_not_sent_where_this_one_says_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = bookshop(dir.path());
    let r = ask_dry(dir.path(), &store, "Find some books by Octavia Butler.");
    let replayed = recall_event(&r);
    assert!(replayed.is_some_and(|e| e["replayed"] == true), "a remembered search is replayed: {r:#}");
    let made = searches(&r);
    assert_eq!(made.len(), 1, "{made:#?}");
    assert_eq!(made[0]["author"], "Octavia Butler", "{made:#?}");
    assert!(made[0].get("sort").is_none(), "no order was asked for: {made:#?}");

    // Said, the order is sent (the remembered one's word, or its counterpart here).
    let r = ask_dry(dir.path(), &store, "Find the bestselling books by Octavia Butler.");
    let made = searches(&r);
    assert_eq!(made.len(), 1, "{made:#?}");
    assert_eq!(made[0]["sort"], "bestselling", "{made:#?}");
}

/// A catch-all value the remembered request said in passing ("do you have any books") was no
/// choice in words: it is replayed like any other of the memory's values.
#[test]
fn a_catch_all_value_said_in_passing_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let formats = json!([function_tool(
        "books__search",
        "Search the shop's books by author, in a format",
        json!({"author": {"type": "string"}, "format": {"type": "string", "enum": ["ANY", "PAPERBACK", "HARDCOVER"]}}),
        json!(["author"])
    )]);
    let mut lines = Vec::new();
    for (request, author, format) in [
        ("Do you have any books by Ursula Le Guin?", "Ursula Le Guin", "ANY"),
        ("Do you have any books by Terry Pratchett?", "Terry Pratchett", "ANY"),
        ("Do you have any books by Zadie Smith?", "Zadie Smith", "ANY"),
        ("Do you have paperback books by Agatha Christie?", "Agatha Christie", "PAPERBACK"),
        ("Do you have hardcover books by Stephen King?", "Stephen King", "HARDCOVER"),
    ] {
        let mut line: Value =
            serde_json::from_str(&conversation(request, json!({"author": author, "format": format}))).unwrap();
        line["tools"] = formats.clone();
        lines.push(line.to_string());
    }
    let store = ingest_transcripts(dir.path(), "books.jsonl", &lines);
    let r = ask_dry(dir.path(), &store, "Do you have books by Octavia Butler?");
    let made = searches(&r);
    assert_eq!(made.len(), 1, "{r:#}");
    assert_eq!(made[0]["author"], "Octavia Butler", "{made:#?}");
    assert_eq!(made[0]["format"], "ANY", "{r:#}");
}

/// A typing slip in the word that makes the choice ("bestseling") is read as the word the shop's
/// requests said, and the trace says so.
#[test]
fn a_choice_typed_with_a_slip_is_read_as_the_word() {
    let dir = tempfile::tempdir().unwrap();
    let store = bookshop(dir.path());
    let r = ask_dry(dir.path(), &store, "Find the bestseling books by Octavia Butler.");
    let made = searches(&r);
    assert_eq!(made.len(), 1, "{r:#}");
    assert_eq!(made[0]["author"], "Octavia Butler", "{made:#?}");
    assert_eq!(made[0]["sort"], "bestselling", "{r:#}");
    let respelled: Vec<&Value> = r["trace"].as_array().unwrap().iter().filter(|t| t["type"] == "respelled").collect();
    assert_eq!(respelled.len(), 1, "{r:#}");
    assert_eq!(respelled[0]["words"], json!([{"said": "bestseling", "read": "bestselling"}]));
    assert_eq!(r["request"], "Find the bestselling books by Octavia Butler.");
}
