//! Reverse Chain, decomposition and plan mode end to end on a small hotel world: chains in
//! ComplexFuncBench format are learned (graph, API index), then requests are planned and executed
//! over HTTP against the replay sandbox serving the chains' responses. The LLM planner talks to
//! `ScriptedOpenAiDouble`, a test double of an OpenAI-compatible endpoint that answers each
//! prompt from a script (by what the prompt asks), so the protocol is exercised for real.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::plan::llm::{LlmPlanner, LlmSettings};
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::plan::Planner;
use toolgraph_engine::run::TraceEvent;
use toolgraph_engine::run::{Engine, Mode, RunSettings, Status};
use toolgraph_eval::chains::{learn, recordings, Learned};
use toolgraph_ingest::complexfuncbench::{Chain, Spec};
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};

const HOST: &str = "hotels-demo.p.rapidapi.com";

fn spec(name: &str, endpoint: &str, description: &str, params: &[(&str, &str, &str)], outputs: Value) -> Value {
    let q: Map<String, Value> = params
        .iter()
        .map(|(n, ty, d)| (n.to_string(), json!({"type": ty, "description": d, "required": true})))
        .collect();
    json!({"name": name, "description": description, "host": HOST, "endpoint": endpoint, "query_parameters": q, "output_parameters": outputs})
}

fn specs() -> Vec<Spec> {
    let obj =
        |fields: &[&str]| Value::Object(fields.iter().map(|f| (f.to_string(), json!({"type": "string"}))).collect());
    let v = json!([
        spec(
            "Find_Hotel",
            "/hotels/find",
            "Find hotels in a city: hotel ids, names and nightly prices.",
            &[("city", "string", "the city")],
            json!({"data": {"type": "array", "items": {"type": "object", "properties": obj(&["hotel_id", "name", "price"])}}})
        ),
        spec(
            "Find_Guest",
            "/guests/find",
            "Find a guest profile by e-mail address: the guest id.",
            &[("email", "string", "the guest's e-mail address")],
            json!({"data": {"type": "object", "properties": obj(&["guest_id", "full_name"])}})
        ),
        spec(
            "Book_Room",
            "/rooms/book",
            "Book a hotel room for a guest on a date: booking id and status.",
            &[
                ("hotel_id", "string", "hotel id"),
                ("guest_id", "string", "guest id"),
                ("date", "string", "check-in date yyyy-mm-dd")
            ],
            json!({"data": {"type": "object", "properties": obj(&["booking_id", "status"])}})
        ),
        spec(
            "List_Hotel_Reviews",
            "/hotels/reviews",
            "List the guest reviews and rating of one hotel.",
            &[("hotel_id", "string", "hotel id")],
            json!({"data": {"type": "array", "items": {"type": "object", "properties": obj(&["rating", "text"])}}})
        ),
        spec(
            "Get_Weather",
            "/weather",
            "Current weather forecast of a city: temperature and conditions.",
            &[("city", "string", "the city")],
            json!({"data": {"type": "object", "properties": obj(&["temperature", "conditions"])}})
        ),
        spec(
            "Find_Restaurant",
            "/restaurants/find",
            "Find restaurants in a city: names and cuisines.",
            &[("city", "string", "the city")],
            json!({"data": {"type": "array", "items": {"type": "object", "properties": obj(&["restaurant_id", "name", "cuisine"])}}})
        ),
    ]);
    serde_json::from_value(v).unwrap()
}

fn call(name: &str, args: Value, label: &str, response: Value) -> Value {
    json!({"name": name, "arguments": args, "label": label, "response": response})
}

fn hotels(city: &str) -> Value {
    let c = &city[..2].to_uppercase();
    json!({"data": [{"hotel_id": format!("H-{c}-1"), "name": format!("{city} Grand"), "price": 120}, {"hotel_id": format!("H-{c}-2"), "name": format!("{city} Inn"), "price": 80}]})
}

fn chains() -> Vec<Chain> {
    let mut v = Vec::new();
    for (city, email, guest, date) in [
        ("Rome", "anna@example.com", "G-101", "2024-06-01"),
        ("Paris", "ben@example.com", "G-202", "2024-07-02"),
        ("Madrid", "cleo@example.com", "G-303", "2024-08-03"),
    ] {
        let c = &city[..2].to_uppercase();
        v.push(json!({"input": format!("Book a room at a hotel in {city} for the guest {email} on {date}."), "output": [
            call("Find_Hotel", json!({"city": city}), "var1", hotels(city)),
            call("Find_Guest", json!({"email": email}), "var2", json!({"data": {"guest_id": guest, "full_name": "A Guest"}})),
            call("Book_Room", json!({"hotel_id": "$var1.data.0.hotel_id$", "guest_id": "$var2.data.guest_id$", "date": date}), "var3", json!({"data": {"booking_id": format!("B-{c}"), "status": "confirmed"}})),
        ]}));
        v.push(json!({"input": format!("Show me the reviews of the hotels in {city}."), "output": [
            call("Find_Hotel", json!({"city": city}), "var1", hotels(city)),
            call("List_Hotel_Reviews", json!({"hotel_id": "$var1.data.0.hotel_id$"}), "var2", json!({"data": [{"rating": "4.5", "text": format!("Lovely stay at {city} Grand")}]})),
            call("List_Hotel_Reviews", json!({"hotel_id": "$var1.data.1.hotel_id$"}), "var3", json!({"data": [{"rating": "3.9", "text": format!("Fine value at {city} Inn")}]})),
        ]}));
        v.push(json!({"input": format!("What is the weather forecast in {city} today?"), "output": [call("Get_Weather", json!({"city": city}), "var1", json!({"data": {"temperature": "21 C", "conditions": "sunny"}}))]}));
        v.push(json!({"input": format!("Find a restaurant in {city}."), "output": [call("Find_Restaurant", json!({"city": city}), "var1", json!({"data": [{"restaurant_id": format!("R-{c}"), "name": format!("Trattoria {city}"), "cuisine": "local"}]}))]}));
        v.push(json!({"input": format!("Find a hotel in {city}."), "output": [call("Find_Hotel", json!({"city": city}), "var1", hotels(city))]}));
    }
    v.into_iter().map(|c| serde_json::from_value(c).unwrap()).collect()
}

fn settings() -> toolgraph_schema::Settings {
    let mut s = toolgraph_engine::settings::load(None, &[]).expect("defaults load");
    s.embed.cache = String::new();
    s
}

pub(crate) struct World {
    learned: Learned,
    graph: Arc<toolgraph_schema::GraphSnapshot>,
    sandbox: Arc<Sandbox>,
    addr: std::net::SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

pub(crate) async fn world() -> World {
    world_of(specs(), chains()).await
}

/// Learn `chains` (with their APIs' `specs`) and serve their responses from a sandbox.
pub(crate) async fn world_of(specs: Vec<Spec>, chains: Vec<Chain>) -> World {
    let s = settings();
    let embedder: Arc<dyn Embedder> = Arc::new(
        toolgraph_engine::adapters::fastembed::FastEmbedder::load(&s.embed).expect("model files: run scripts/setup.sh"),
    );
    let dir = tempfile::tempdir().unwrap();
    let train: Vec<&Chain> = chains.iter().collect();
    let learned = learn(dir.path(), &train, &specs, &s, embedder, None).await.unwrap();
    let graph = Arc::new(learned.stack.store.snapshot().await.unwrap());
    let (recs, errors) = recordings(&chains, &specs);
    assert!(errors.is_empty(), "{errors:?}");
    let sandbox = Sandbox::new(Library::new(recs), Faults::default());
    let (addr, stop) = sandbox::spawn("127.0.0.1:0", sandbox.clone()).await.unwrap();
    World { learned, graph, sandbox, addr, _stop: stop, _dir: dir }
}

pub(crate) fn run_settings() -> RunSettings {
    RunSettings { use_memory: false, learn: false, remember: false, ..RunSettings::default() }
}

pub(crate) fn engine(w: &World, planner: Arc<dyn Planner>, run: RunSettings) -> Engine {
    let exec = Executor::new(ExecSettings {
        rewrites: vec![("https://".into(), format!("http://{}/", w.addr))],
        allow_private: vec!["127.0.0.1/32".into()],
        timeout_ms: 2_000,
        retries: 0,
        ..ExecSettings::default()
    })
    .unwrap();
    w.learned.stack(&settings(), exec, planner).engine_over(w.graph.clone(), w.learned.retriever.clone(), run, None)
}

pub(crate) fn names(r: &toolgraph_engine::run::RunReport) -> Vec<&str> {
    r.chain.iter().map(|c| c.name.as_str()).collect()
}

// --- the scripted OpenAI-compatible test double -------------------------------------------

type Script = Arc<dyn Fn(&str, &str) -> Value + Send + Sync>;

#[derive(Clone)]
struct Double {
    script: Script,
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

async fn completions(State(d): State<Double>, Json(body): Json<Value>) -> Json<Value> {
    let kind = body["response_format"]["json_schema"]["name"].as_str().unwrap_or_default().to_string();
    let user = body["messages"][1]["content"].as_str().unwrap_or_default().to_string();
    let content = (d.script)(&kind, &user);
    d.asked.lock().unwrap().push((kind, user));
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": content.to_string()}}], "usage": {"prompt_tokens": 50, "completion_tokens": 10}}),
    )
}

/// A test double of an OpenAI-compatible endpoint: `script(prompt kind, user prompt)` answers.
async fn scripted_openai_double(script: Script) -> (LlmPlanner, Arc<Mutex<Vec<(String, String)>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(Double { script, asked: asked.clone() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let p = LlmPlanner::new(
        LlmSettings {
            name: "mock".into(),
            base_url: format!("http://{addr}/v1"),
            model: "mock".into(),
            timeout_ms: 5_000,
            retries: 0,
            // The scripts answer every decision (decompose, plan, fill, judge, answer).
            decides: toolgraph_engine::plan::llm::Decides::All,
            max_calls_per_run: 0,
            ..Default::default()
        },
        None,
    )
    .unwrap();
    (p, asked)
}

/// The index of the candidate line `[i] NAME(params)` in a choose prompt.
fn offered(prompt: &str, name: &str) -> Option<usize> {
    prompt.lines().find_map(|l| {
        let rest = l.strip_prefix('[')?;
        let (i, tail) = rest.split_once("] ")?;
        tail.starts_with(&format!("{name}(")).then(|| i.parse().ok()).flatten()
    })
}

/// The API a fill prompt is about.
fn fill_api(prompt: &str) -> String {
    prompt
        .lines()
        .find_map(|l| l.strip_prefix("API: "))
        .and_then(|l| l.split(" — ").next())
        .unwrap_or_default()
        .to_string()
}

/// The lines of a fill prompt's earlier outputs (`var1 API {arguments} → observation`).
fn output_lines(prompt: &str) -> Vec<&str> {
    let section = prompt
        .split("Earlier outputs: ")
        .nth(1)
        .unwrap_or_default()
        .split("\nAPIs that can provide")
        .next()
        .unwrap_or_default();
    section.lines().collect()
}

/// The label of the earlier output (in a fill prompt) whose line mentions `field`.
fn label_with(prompt: &str, field: &str) -> String {
    output_lines(prompt)
        .into_iter()
        .find(|l| l.starts_with("var") && l.contains(field))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("var0")
        .to_string()
}

/// Whether a fill prompt shows the earlier output `label`.
fn has_output(prompt: &str, label: &str) -> bool {
    output_lines(prompt).iter().any(|l| l.starts_with(&format!("{label} ")))
}

fn judge_pass() -> Value {
    json!({"pass": true, "grade": 1.0, "first_bad_step": null, "irrelevant_tools": [], "missing": [], "scores": [], "reason": "served"})
}

fn one_subtask(prompt: &str) -> Value {
    let req = prompt.rsplit("Request: ").next().unwrap_or_default().trim();
    json!({"subtasks": [{"name": "the request", "description": req, "category": null, "request": req}]})
}

// --- Reverse Chain ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_missing_ids_are_filled_by_two_providers_in_both_planners() {
    let w = world().await;
    let request = "Book a room at a hotel in Rome for the guest anna@example.com on 2024-06-01.";

    // Deterministic, target first: Book_Room is called first; hotel_id and guest_id each get
    // their provider inserted before it (Reverse Chain), not one of them only.
    let e = engine(&w, Arc::new(DeterministicPlanner::default()), RunSettings { backward: true, ..run_settings() });
    let r = e.run(request, Map::new(), None).await.unwrap();
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    // Parameters in the API's order (guest_id, hotel_id), each with its own provider.
    assert_eq!(names(&r), ["Find_Guest", "Find_Hotel", "Book_Room"], "{:#?}", r.trace);
    let inserted: Vec<(String, String)> = r
        .trace
        .iter()
        .filter_map(|t| match t {
            TraceEvent::Insert { argument, provider, .. } => {
                Some((argument.clone(), provider.rsplit('/').next().unwrap().to_lowercase()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        inserted,
        [("guest_id".to_string(), "find_guest".to_string()), ("hotel_id".to_string(), "find_hotel".to_string())],
        "{inserted:?}"
    );
    let book = &r.chain[2];
    assert_eq!(
        (book.sent["hotel_id"].clone(), book.sent["guest_id"].clone(), book.sent["date"].clone()),
        (json!("H-RO-1"), json!("G-101"), json!("2024-06-01"))
    );
    assert!(
        book.arguments["hotel_id"].as_str().unwrap().starts_with("$var2.")
            && book.arguments["guest_id"].as_str().unwrap().starts_with("$var1."),
        "data flow by reference: {:?}",
        book.arguments
    );

    // The LLM planner: it names the providers (`from_api`), the engine calls them, then the model
    // fills the ids by reference.
    let script: Script = Arc::new(|kind: &str, p: &str| match kind {
        "decompose" => one_subtask(p),
        "choose" => match offered(p, "Book_Room") {
            Some(i) if !p.contains("Book_Room {") => {
                json!({"action": "call", "index": i, "reason": "book"})
            }
            _ => json!({"action": "finish", "index": 0, "reason": "booked"}),
        },
        "fill" => match fill_api(p).as_str() {
            "Book_Room" if has_output(p, "var2") => {
                json!({"arguments": {"hotel_id": format!("${}.data.0.hotel_id$", label_with(p, "hotel_id")), "guest_id": format!("${}.data.guest_id$", label_with(p, "guest_id")), "date": "2024-06-01"}, "from_api": [], "ask_user": []})
            }
            "Book_Room" => {
                json!({"arguments": {"date": "2024-06-01"}, "from_api": [{"param": "hotel_id", "api": "Find_Hotel", "field": "data.hotel_id"}, {"param": "guest_id", "api": "Find_Guest", "field": "data.guest_id"}], "ask_user": []})
            }
            "Find_Hotel" => json!({"arguments": {"city": "Rome"}, "from_api": [], "ask_user": []}),
            "Find_Guest" => {
                json!({"arguments": {"email": "anna@example.com"}, "from_api": [], "ask_user": []})
            }
            other => panic!("unexpected fill of {other}"),
        },
        "judge" => judge_pass(),
        "answer" => json!({"answer": "Booked B-RO at Rome Grand."}),
        other => panic!("unexpected prompt {other}"),
    });
    let (llm, asked) = scripted_openai_double(script).await;
    let e = engine(&w, Arc::new(llm), run_settings());
    let r = e.run(request, Map::new(), None).await.unwrap();
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    assert_eq!(names(&r), ["Find_Guest", "Find_Hotel", "Book_Room"]);
    assert_eq!(
        (r.chain[2].sent["guest_id"].clone(), r.chain[2].sent["hotel_id"].clone()),
        (json!("G-101"), json!("H-RO-1"))
    );
    // The fill prompt offered the providers of each id.
    let asked = asked.lock().unwrap();
    let first_fill = &asked.iter().find(|(k, p)| k == "fill" && fill_api(p) == "Book_Room").unwrap().1;
    assert!(
        first_fill.contains("hotel_id: Find_Hotel (outputs") && first_fill.contains("guest_id: Find_Guest (outputs"),
        "{first_fill}"
    );
    // Every LLM call is counted under the model's name.
    let u = r.stats.llm.get("mock").copied().unwrap_or_default();
    assert_eq!(u.calls as usize, asked.len());
    assert_eq!(u.prompt_tokens, 50 * u.calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invented_id_is_rejected_and_an_unknown_one_asks_the_user_in_llm_mode() {
    let w = world().await;
    // The request names no guest: the model first invents ids (rejected, never sent), then —
    // asked again with the reason — names the hotel's provider and says only the user knows the guest.
    let request = "Book a room at a hotel in Rome for me on 2024-06-01.";
    let script: Script = Arc::new(|kind: &str, p: &str| match kind {
        "decompose" => one_subtask(p),
        "choose" => match offered(p, "Book_Room") {
            Some(i) if !p.contains("Book_Room {") && !p.contains("- travel/") => {
                json!({"action": "call", "index": i, "reason": "book"})
            }
            _ => json!({"action": "finish", "index": 0, "reason": "nothing more"}),
        },
        "fill" => match fill_api(p).as_str() {
            "Book_Room" if has_output(p, "var1") => {
                json!({"arguments": {"hotel_id": "$var1.data.0.hotel_id$", "date": "2024-06-01"}, "from_api": [], "ask_user": ["guest_id"]})
            }
            "Book_Room" if p.contains("was rejected") => {
                json!({"arguments": {"date": "2024-06-01"}, "from_api": [{"param": "hotel_id", "api": "Find_Hotel", "field": "data.hotel_id"}], "ask_user": ["guest_id"]})
            }
            "Book_Room" => {
                json!({"arguments": {"hotel_id": "H-XX-9", "guest_id": "G-777", "date": "2024-06-01"}, "from_api": [], "ask_user": []})
            }
            "Find_Hotel" => json!({"arguments": {"city": "Rome"}, "from_api": [], "ask_user": []}),
            "Find_Guest" => json!({"arguments": {}, "from_api": [], "ask_user": ["email"]}),
            other => panic!("unexpected fill of {other}"),
        },
        "judge" => {
            json!({"pass": false, "grade": 0.3, "first_bad_step": null, "irrelevant_tools": [], "missing": ["the booking"], "scores": [], "reason": "not booked"})
        }
        "answer" => json!({"answer": "Found hotels, no booking."}),
        other => panic!("unexpected prompt {other}"),
    });
    let (llm, asked) = scripted_openai_double(script).await;
    let llm = Arc::new(llm);
    let e = engine(&w, llm.clone(), run_settings());
    let r = e.run(request, Map::new(), None).await.unwrap();
    assert_eq!(r.status, Status::NeedsInput, "{:#?}", r.trace);
    let n = r.needs_input.clone().unwrap();
    assert_eq!(n.missing, ["guest_id"], "exactly the parameter only the user knows: {n:?}");
    assert!(n.message.contains("Book_Room needs guest_id"), "{}", n.message);
    // The invented ids never reached an API; the rejection said why.
    assert_eq!(names(&r), ["Find_Hotel"], "the hotel's provider ran; the booking waits for the guest");
    let sent: Vec<&Value> = r
        .trace
        .iter()
        .filter_map(|t| match t {
            TraceEvent::Call { arguments, .. } => Some(arguments.values()),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(!sent.contains(&&json!("G-777")) && !sent.contains(&&json!("H-XX-9")), "{sent:?}");
    assert_eq!(llm.usage().rejected, 1, "{:?}", llm.usage());
    let named = asked.lock().unwrap().iter().any(|(k, p)| k == "fill" && p.contains("invented identifier"));
    assert!(named, "the retry names the problem");
    // With the value given, the run books.
    let mut given = Map::new();
    given.insert("guest_id".into(), json!("G-101"));
    let det = engine(&w, Arc::new(DeterministicPlanner::default()), RunSettings { backward: true, ..run_settings() });
    let r = det.run(request, given, None).await.unwrap();
    assert!(names(&r).contains(&"Book_Room"), "{:#?}", r.trace);
    assert_eq!(r.chain.iter().find(|c| c.name == "Book_Room").unwrap().sent["guest_id"], json!("G-101"));
}

// --- decomposition --------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_part_request_is_searched_and_answered_per_subtask() {
    let w = world().await;
    let e = engine(&w, Arc::new(DeterministicPlanner::default()), run_settings());
    let r = e
        .run(
            "Find a hotel in Rome. What is the weather forecast in Rome today? Find a restaurant in Rome.",
            Map::new(),
            None,
        )
        .await
        .unwrap();
    let subtasks: Vec<&str> = r
        .trace
        .iter()
        .filter_map(|t| match t {
            TraceEvent::Subtask { request, .. } => Some(request.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(subtasks.len(), 3, "{subtasks:?}");
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    let mut served: Vec<(&str, Option<usize>)> = r.chain.iter().map(|c| (c.name.as_str(), c.subtask)).collect();
    served.dedup();
    assert_eq!(
        served,
        [("Find_Hotel", Some(0)), ("Get_Weather", Some(1)), ("Find_Restaurant", Some(2))],
        "{:#?}",
        r.chain
    );
    // One answer, in parts that say which subtask each answers.
    let a = &r.answer;
    let (p1, p2, p3) = (a.find("[1] ").unwrap(), a.find("[2] ").unwrap(), a.find("[3] ").unwrap());
    assert!(p1 < p2 && p2 < p3, "{a}");
    assert!(
        a[p1..p2].contains("Find_Hotel") && a[p2..p3].contains("Get_Weather") && a[p3..].contains("Find_Restaurant"),
        "{a}"
    );
    assert!(a[p2..p3].contains("sunny") || a[p2..p3].contains("21 C"), "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_decomposition_is_structured_and_prompted_from_a_file() {
    let w = world().await;
    let script: Script = Arc::new(|kind: &str, p: &str| match kind {
        "decompose" => {
            assert!(p.contains("Categories: Travel"), "the graph's categories are offered: {p}");
            json!({"subtasks": [
                {"name": "weather", "description": "the forecast", "category": "Travel", "request": "What is the weather forecast in Rome today?"},
                {"name": "dinner", "description": "a restaurant", "category": null, "request": "Find a restaurant in Rome."}
            ]})
        }
        "choose" => {
            let pick = ["Get_Weather", "Find_Restaurant"]
                .iter()
                .find_map(|n| offered(p, n).filter(|_| !p.contains(&format!(" {n} {{"))));
            match pick {
                Some(i) => json!({"action": "call", "index": i, "reason": "serves the subtask"}),
                None => json!({"action": "finish", "index": 0, "reason": "done"}),
            }
        }
        "fill" => json!({"arguments": {"city": "Rome"}, "from_api": [], "ask_user": []}),
        "judge" => judge_pass(),
        "answer" => json!({"answer": "Sunny; Trattoria Rome."}),
        other => panic!("unexpected prompt {other}"),
    });
    let (llm, _) = scripted_openai_double(script).await;
    let llm = llm.with_categories(w.graph.categories.values().map(|c| c.name.clone()).collect());
    let e = engine(&w, Arc::new(llm), run_settings());
    let r = e.run("Tell me the weather in Rome today and find me a restaurant there.", Map::new(), None).await.unwrap();
    let subtasks: Vec<(String, Option<String>)> = r
        .trace
        .iter()
        .filter_map(|t| match t {
            TraceEvent::Subtask { name, category, .. } => Some((name.clone(), category.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(subtasks, [("weather".to_string(), Some("Travel".to_string())), ("dinner".to_string(), None)]);
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    assert_eq!(names(&r), ["Get_Weather", "Find_Restaurant"]);
    assert!(
        r.answer.starts_with("Sunny; Trattoria Rome.")
            && r.answer.contains("[1] weather")
            && r.answer.contains("[2] dinner"),
        "{}",
        r.answer
    );
}

// --- plan mode ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_with_for_each_runs_in_two_llm_calls() {
    let w = world().await;
    let script: Script = Arc::new(|kind: &str, p: &str| match kind {
        "plan" => {
            assert!(p.contains("Find_Hotel → List_Hotel_Reviews"), "the solution library offers the coupled path: {p}");
            json!({"solution": 0, "steps": [
                {"api": "Find_Hotel", "arguments": {"city": "Rome"}},
                {"api": "List_Hotel_Reviews", "for_each": "$var1.data$", "arguments": {"hotel_id": "$item.hotel_id$"}, "if": {"ref": "$var1.data$", "op": "nonempty"}}
            ]})
        }
        "answer" => json!({"answer": "Rome Grand 4.5, Rome Inn 3.9."}),
        other => panic!("plan mode asks no {other}"),
    });
    let (llm, asked) = scripted_openai_double(script).await;
    let e = engine(&w, Arc::new(llm), RunSettings { mode: Mode::Plan, ..run_settings() });
    let r = e.run("Show me the reviews of the hotels in Rome.", Map::new(), None).await.unwrap();
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    assert_eq!(names(&r), ["Find_Hotel", "List_Hotel_Reviews", "List_Hotel_Reviews"]);
    assert_eq!(
        (r.chain[1].sent["hotel_id"].clone(), r.chain[2].sent["hotel_id"].clone()),
        (json!("H-RO-1"), json!("H-RO-2"))
    );
    assert_eq!(r.chain[2].arguments["hotel_id"], json!("$var1.data.1.hotel_id$"), "each element by reference");
    assert!(r.stats.planned && r.stats.plan_fallback_at.is_none());
    assert_eq!(asked.lock().unwrap().iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["plan", "answer"]);
    assert_eq!(r.stats.llm["mock"].calls, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_failing_at_step_2_falls_back_to_the_search_from_step_2() {
    let w = world().await;
    let request = "Book a room at a hotel in Rome for the guest anna@example.com on 2024-06-01.";
    let script: Script = Arc::new(|kind: &str, p: &str| match kind {
        // Step 2 takes the guest id from the wrong output: no such booking, the call fails.
        "plan" => json!({"steps": [
            {"api": "Find_Hotel", "arguments": {"city": "Rome"}},
            {"api": "Book_Room", "arguments": {"hotel_id": "$var1.data.0.hotel_id$", "guest_id": "$var1.data.0.name$", "date": "2024-06-01"}}
        ]}),
        "choose" => {
            let path = p.split("Calls made").nth(1).unwrap_or_default();
            let pick = if path.contains("Find_Guest {") { offered(p, "Book_Room") } else { offered(p, "Find_Guest") };
            match pick {
                Some(i) if !path.contains("Book_Room {\"date\":\"2024-06-01\",\"guest_id\":\"$var2") => {
                    json!({"action": "call", "index": i, "reason": "next"})
                }
                _ => json!({"action": "finish", "index": 0, "reason": "booked"}),
            }
        }
        "fill" => match fill_api(p).as_str() {
            "Find_Guest" => {
                json!({"arguments": {"email": "anna@example.com"}, "from_api": [], "ask_user": []})
            }
            "Book_Room" => {
                json!({"arguments": {"hotel_id": "$var1.data.0.hotel_id$", "guest_id": "$var2.data.guest_id$", "date": "2024-06-01"}, "from_api": [], "ask_user": []})
            }
            other => panic!("unexpected fill of {other}"),
        },
        "judge" => judge_pass(),
        "answer" => json!({"answer": "Booked."}),
        other => panic!("unexpected prompt {other}"),
    });
    let (llm, _) = scripted_openai_double(script).await;
    let before = w.sandbox.stats().requests;
    let e = engine(&w, Arc::new(llm), RunSettings { mode: Mode::Plan, ..run_settings() });
    let r = e.run(request, Map::new(), None).await.unwrap();
    let failed = r.trace.iter().find_map(|t| match t {
        TraceEvent::PlanFailed { step, reason } => Some((*step, reason.clone())),
        _ => None,
    });
    assert_eq!(failed.as_ref().map(|f| f.0), Some(2), "{failed:?}");
    assert_eq!(r.stats.plan_fallback_at, Some(2));
    // Step 1's call is kept (not made again); the search went on from there.
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    assert_eq!(names(&r), ["Find_Hotel", "Find_Guest", "Book_Room"]);
    assert_eq!(r.chain[2].sent["guest_id"], json!("G-101"));
    let calls = r.trace.iter().filter(|t| matches!(t, TraceEvent::Call { .. })).count();
    assert_eq!(calls, 4, "Find_Hotel once, the failed booking, Find_Guest, the booking");
    assert_eq!(w.sandbox.stats().requests - before, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deterministic_plan_follows_the_best_solution_and_completes_it_backwards() {
    let w = world().await;
    let e = engine(&w, Arc::new(DeterministicPlanner::default()), RunSettings { mode: Mode::Plan, ..run_settings() });
    let r = e
        .run("Book a room at a hotel in Madrid for the guest cleo@example.com on 2024-08-03.", Map::new(), None)
        .await
        .unwrap();
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    let plan = r
        .trace
        .iter()
        .find_map(|t| match t {
            TraceEvent::Plan { steps, source, .. } => Some((source.clone(), steps.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(plan.0, "deterministic");
    assert!(plan.1.last().unwrap().ends_with("book_room"), "{plan:?}");
    assert_eq!(names(&r).last(), Some(&"Book_Room"));
    assert_eq!(r.chain.last().unwrap().sent["guest_id"], json!("G-303"));
    assert!(r.stats.planned && r.stats.plan_fallback_at.is_none(), "{:?}", r.stats);
    // Plan, then the answer: two decisions, none per step.
    assert_eq!(r.stats.planner_calls, 2, "{:?}", r.stats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_plans_the_chain_with_its_data_flow_and_sends_nothing() {
    let w = world().await;
    let request = "Book a room at a hotel in Rome for the guest anna@example.com on 2024-06-01.";
    let served = w.sandbox.stats().served;
    let e = engine(
        &w,
        Arc::new(DeterministicPlanner::default()),
        RunSettings { backward: true, remember: true, ..run_settings() },
    );
    let opts = toolgraph_engine::run::RunOptions { dry_run: true, ..Default::default() };
    let r = e.run_with(request, Map::new(), Vec::new(), None, opts).await.unwrap();
    assert_eq!(w.sandbox.stats().served, served, "a dry run sends nothing");
    assert!(r.stats.dry_run && r.stats.http_calls == 0, "{:?}", r.stats);
    // The same chain as the executed run, with the data flow as references into the outputs'
    // documented fields.
    assert_eq!(names(&r), ["Find_Guest", "Find_Hotel", "Book_Room"], "{:#?}", r.trace);
    let book = &r.chain[2].arguments;
    assert_eq!(book["guest_id"], json!("$var1.data.guest_id$"), "{book:?}");
    assert_eq!(book["hotel_id"], json!("$var2.data.hotel_id$"), "{book:?}");
    assert_eq!(book["date"], json!("2024-06-01"));
    // The answer says what was planned (there are no results to report).
    assert!(r.answer.starts_with("Planned 3 calls (a dry run: nothing was sent): var1 = Find_Guest("), "{}", r.answer);
    assert!(r.answer.contains("guest_id=$var1.data.guest_id$"), "{}", r.answer);
    // A planned-only chain is never remembered as a good plan.
    let v = w.learned.retriever.embedder().embed(vec![request.to_string()]).await.unwrap().pop().unwrap();
    let before = w.learned.stack.memory.recall(&v, 1000).await.unwrap().len();
    assert!(before < 1000, "every memory is counted");
    let fresh = "Book a room at a hotel in Paris for the guest anna@example.com on 2024-09-01.";
    let again = e
        .run_with(
            fresh,
            Map::new(),
            Vec::new(),
            None,
            toolgraph_engine::run::RunOptions { dry_run: true, ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(again.status, Status::Answered, "{:#?}", again.trace);
    assert_eq!(w.learned.stack.memory.recall(&v, 1000).await.unwrap().len(), before);
}
