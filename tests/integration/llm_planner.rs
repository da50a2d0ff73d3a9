//! The LLM planner over HTTP. `MockOpenAiServer` (a test double of an OpenAI-compatible endpoint,
//! on 127.0.0.1) checks the protocol and answers from a script — valid, invalid and failing — so
//! the validation and retry paths are exercised. With `TOOLGRAPH_LLM_URL` set (e.g. from
//! `scripts/llama.sh start`), the same planner also runs against that real server.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use toolgraph_engine::plan::llm::{LlmPlanner, LlmSettings};
use toolgraph_engine::plan::values::RequestValues;
use toolgraph_engine::plan::{ApiView, Candidate, Context, Decision, Planner, Source};
use toolgraph_schema::ParamDoc;

#[derive(Default)]
struct Script {
    /// Answers to give, in order: (HTTP status, content of the message).
    answers: Vec<(u16, Value)>,
    /// What the server received.
    requests: Vec<(Value, Option<String>)>,
}

type Shared = Arc<Mutex<Script>>;

async fn completions(State(s): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let mut s = s.lock().unwrap();
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    s.requests.push((body, auth));
    let (status, content) = if s.answers.is_empty() { (200, json!({})) } else { s.answers.remove(0) };
    let reply = json!({"choices": [{"message": {"role": "assistant", "content": content.to_string()}}], "usage": {"prompt_tokens": 100, "completion_tokens": 7}});
    (StatusCode::from_u16(status).unwrap(), Json(reply))
}

/// A test double of an OpenAI-compatible chat-completions endpoint.
async fn mock_openai_server(answers: Vec<(u16, Value)>) -> (String, Shared) {
    let shared: Shared = Arc::new(Mutex::new(Script { answers, requests: Vec::new() }));
    let app = Router::new().route("/v1/chat/completions", post(completions)).with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), shared)
}

fn api(name: &str) -> Arc<ApiView> {
    Arc::new(ApiView {
        id: format!("travel/booking/{name}"),
        name: name.into(),
        tool: "booking".into(),
        category: "travel".into(),
        description: format!("{name} of the booking API"),
        params: vec![ParamDoc { name: "query".into(), ty: "string".into(), description: "a place".into(), required: true, default: None }, ParamDoc { name: "adults".into(), ty: "number".into(), description: String::new(), required: false, default: None }],
        output_fields: vec!["dest_id".into()],
        availability: Some(1.0),
        ends: None,
    })
}

fn ctx() -> Context {
    let r = "Find hotels in Rome for 2 adults tomorrow";
    Context::new(r, RequestValues::extract(r, chrono::NaiveDate::from_ymd_opt(2024, 5, 1).unwrap()))
}

fn candidates() -> Vec<Candidate> {
    vec![
        Candidate { id: "travel/booking/Search_Hotel_Destination".into(), source: Source::Retriever, weight: 0.0, similarity: 1.0, hint: 0.0, api: Some(api("Search_Hotel_Destination")) },
        Candidate { id: "END".into(), source: Source::Graph, weight: 0.2, similarity: 0.0, hint: 0.0, api: None },
    ]
}

fn planner(url: &str) -> LlmPlanner {
    LlmPlanner::new(LlmSettings { base_url: url.into(), model: "mock".into(), timeout_ms: 5_000, retries: 2, ..Default::default() }, Some(secrecy::SecretString::from("sk-test-123"))).unwrap()
}

#[tokio::test]
async fn invalid_answers_are_rejected_then_asked_again() {
    let (url, script) = mock_openai_server(vec![
        (503, json!(null)),                                                    // transient: retried
        (200, json!({"action": "call", "index": 7, "reason": "hallucinated"})), // rejected
        (200, json!({"action": "call", "index": 0, "reason": "find the city id first"})),
    ])
    .await;
    let p = planner(&url);
    let d = p.choose(&ctx(), &candidates()).await.unwrap();
    assert_eq!(d, Decision::Call { index: 0, reason: "find the city id first".into() });
    let u = p.usage();
    assert_eq!((u.calls, u.rejected), (2, 1), "{u:?}");
    assert_eq!(u.prompt_tokens, 200);
    let s = script.lock().unwrap();
    assert_eq!(s.requests.len(), 3);
    let (body, auth) = &s.requests[2];
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-123"));
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"]["properties"]["index"]["maximum"], 1);
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("[0] Search_Hotel_Destination") && user.contains("[1] END"), "{user}");
    assert!(user.contains("was rejected: index 7 is not one of the 2 candidates"), "the retry says why: {user}");
}

#[tokio::test]
async fn twice_invalid_falls_back_to_the_deterministic_planner() {
    let (url, _) = mock_openai_server(vec![(200, json!("not json at all")), (200, json!({"action": "dance"}))]).await;
    let p = planner(&url);
    let d = p.choose(&ctx(), &candidates()).await.unwrap();
    match d {
        Decision::Call { index: 0, reason } => assert!(reason.starts_with("model answers were invalid"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(p.usage().rejected, 2);
}

#[tokio::test]
async fn arguments_are_checked_against_the_schema() {
    let (url, script) = mock_openai_server(vec![
        (200, json!({"arguments": {"city": "Rome"}, "from_api": [], "ask_user": []})),
        (200, json!({"arguments": {"query": "Rome", "adults": 2}, "from_api": [], "ask_user": []})),
    ])
    .await;
    let p = planner(&url);
    let f = p.fill(&ctx(), &api("Search_Hotel_Destination"), &[]).await.unwrap();
    assert_eq!(f.arguments["query"], json!("Rome"));
    assert_eq!(f.arguments["adults"], json!(2));
    assert_eq!(p.usage().rejected, 1);
    let s = script.lock().unwrap();
    let schema = &s.requests[0].0["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["required"], json!(["arguments", "from_api", "ask_user"]));
    assert_eq!(schema["properties"]["arguments"]["properties"]["adults"]["type"], json!(["number", "string"]));
    let retry = s.requests[1].0["messages"][1]["content"].as_str().unwrap();
    assert!(retry.contains("`city` is not a parameter") && retry.contains("required `query` has no value"), "{retry}");
}

#[tokio::test]
async fn a_dead_endpoint_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let p = LlmPlanner::new(LlmSettings { base_url: url.clone(), retries: 1, timeout_ms: 1_000, ..Default::default() }, Some(secrecy::SecretString::from("sk-secret-999"))).unwrap();
    let e = p.choose(&ctx(), &candidates()).await.unwrap_err().to_string();
    assert!(e.contains("failed after 2 attempts") && e.contains(&url), "{e}");
    assert!(!e.contains("sk-secret-999"), "secrets never in errors: {e}");
}

/// Against a real OpenAI-compatible server (llama.cpp's llama-server with SmolLM2-135M from
/// `scripts/llama.sh`): the protocol works and every answer is valid or replaced.
#[tokio::test]
async fn real_server_protocol_when_configured() {
    let Ok(url) = std::env::var("TOOLGRAPH_LLM_URL") else {
        eprintln!("TOOLGRAPH_LLM_URL not set: skipping the real-server LLM test");
        return;
    };
    let p = LlmPlanner::new(LlmSettings { base_url: url, model: "smollm2".into(), timeout_ms: 120_000, max_tokens: 128, ..Default::default() }, None).unwrap();
    let c = ctx();
    let d = p.choose(&c, &candidates()).await.unwrap();
    if let Decision::Call { index, .. } = d {
        assert!(index < 2);
    }
    let f = p.fill(&c, &api("Search_Hotel_Destination"), &[]).await.unwrap();
    assert!(f.arguments.contains_key("query"), "{f:?}");
    let u = p.usage();
    assert!(u.calls >= 2 && u.prompt_tokens > 0 && u.completion_tokens > 0, "{u:?}");
}
