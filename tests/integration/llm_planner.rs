//! The LLM planner over HTTP. `MockOpenAiServer` (a test double of an OpenAI-compatible endpoint,
//! on 127.0.0.1) checks the protocol and answers from a script — valid, invalid and failing — so
//! the validation and retry paths are exercised. With `TOOLGRAPH_LLM_URL` set (e.g. from
//! `scripts/llama.sh start`), the same planner also runs against that real server.

use crate::common::mock_openai_server;
use serde_json::json;
use std::sync::Arc;
use toolgraph_engine::plan::llm::{Decides, LlmPlanner, LlmSettings};
use toolgraph_engine::plan::{
    ApiView, Candidate, Context, Decision, MemoryView, Planner, Recollection, Source, UnsureMentions,
};
use toolgraph_engine::read::RequestValues;
use toolgraph_schema::ParamDoc;

fn api(name: &str) -> Arc<ApiView> {
    Arc::new(ApiView {
        id: format!("travel/booking/{name}"),
        name: name.into(),
        tool: "booking".into(),
        category: "travel".into(),
        description: format!("{name} of the booking API"),
        params: vec![
            ParamDoc {
                name: "query".into(),
                ty: "string".into(),
                description: "a place".into(),
                required: true,
                default: None,
            },
            ParamDoc {
                name: "adults".into(),
                ty: "number".into(),
                description: String::new(),
                required: false,
                default: None,
            },
        ],
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
        Candidate {
            id: "travel/booking/Search_Hotel_Destination".into(),
            source: Source::Retriever,
            weight: 0.0,
            similarity: 1.0,
            hint: 0.0,
            api: Some(api("Search_Hotel_Destination")),
        },
        Candidate { id: "END".into(), source: Source::Graph, weight: 0.2, similarity: 0.0, hint: 0.0, api: None },
    ]
}

fn planner(url: &str) -> LlmPlanner {
    LlmPlanner::new(
        LlmSettings {
            base_url: url.into(),
            model: "mock".into(),
            timeout_ms: 5_000,
            retries: 2,
            decides: Decides::All,
            ..Default::default()
        },
        Some(secrecy::SecretString::from("sk-test-123")),
    )
    .unwrap()
}

#[tokio::test]
async fn invalid_answers_are_rejected_then_asked_again() {
    let (url, script) = mock_openai_server(vec![
        (503, json!(null)),                                                     // transient: retried
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
    let p = LlmPlanner::new(
        LlmSettings {
            base_url: url.clone(),
            retries: 1,
            timeout_ms: 1_000,
            decides: Decides::All,
            ..Default::default()
        },
        Some(secrecy::SecretString::from("sk-secret-999")),
    )
    .unwrap();
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
    let p = LlmPlanner::new(
        LlmSettings {
            base_url: url,
            model: "smollm2".into(),
            timeout_ms: 120_000,
            max_tokens: 128,
            decides: Decides::All,
            ..Default::default()
        },
        None,
    )
    .unwrap();
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

fn open_planner(url: &str) -> LlmPlanner {
    LlmPlanner::new(
        LlmSettings { base_url: url.into(), model: "mock".into(), timeout_ms: 5_000, retries: 0, ..Default::default() },
        None,
    )
    .unwrap()
}

/// Deciding only what is open: a clear choice, a fill the rules complete, the decomposition, the
/// judge and the answer cost no completion; a close choice is asked among the close candidates
/// only, and its index maps back to the whole list.
#[tokio::test]
async fn a_model_deciding_what_is_open_is_asked_only_that() {
    let (url, script) =
        mock_openai_server(vec![(200, json!({"action": "call", "index": 1, "reason": "the cities first"}))]).await;
    let p = open_planner(&url);
    let c = ctx();
    // One API against END: the deterministic choice stands.
    assert!(matches!(p.choose(&c, &candidates()).await.unwrap(), Decision::Call { index: 0, .. }));
    assert_eq!(p.decompose(&c).await.unwrap().len(), toolgraph_engine::plan::subtasks_of(c.request()).len());
    assert!(
        p.fill(&c, &api("Search_Hotel_Destination"), &[]).await.unwrap().missing.is_empty(),
        "the rules fill `query` with Rome"
    );
    assert!(!p.answer(&c).await.unwrap().is_empty());
    assert_eq!(script.lock().unwrap().requests.len(), 0, "nothing was open");
    // Three APIs, two of them close: the model sees those two.
    let far = Candidate {
        id: "travel/booking/Far".into(),
        source: Source::Retriever,
        weight: 0.0,
        similarity: 0.2,
        hint: 0.0,
        api: Some(api("Far")),
    };
    let near = Candidate {
        id: "travel/booking/Search_Hotels".into(),
        source: Source::Retriever,
        weight: 0.0,
        similarity: 0.95,
        hint: 0.0,
        api: Some(api("Search_Hotels")),
    };
    let mut cands = candidates();
    cands.insert(0, far);
    cands.push(near);
    let d = p.choose(&c, &cands).await.unwrap();
    assert_eq!(
        d,
        Decision::Call { index: 3, reason: "the cities first".into() },
        "the model's [1] is the whole list's [3]"
    );
    let s = script.lock().unwrap();
    assert_eq!(s.requests.len(), 1);
    let user = s.requests[0].0["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("[0] Search_Hotel_Destination(query*: string, adults: number)")
            && user.contains("[1] Search_Hotels("),
        "{user}"
    );
    assert!(!user.contains("Far(") && !user.contains("END"), "{user}");
    assert_eq!(s.requests[0].0["response_format"]["json_schema"]["schema"]["properties"]["index"]["maximum"], 1);
}

/// An open fill asks only the parameters the rules left open, shows what they filled, and keeps
/// it: the model's answer is merged, never allowed to drop a rule's value.
#[tokio::test]
async fn an_open_fill_asks_only_the_open_parameters() {
    let (url, script) = mock_openai_server(vec![(
        200,
        json!({"arguments": {"sort_by": "popularity"}, "from_api": [], "ask_user": []}),
    )])
    .await;
    let p = open_planner(&url);
    let mut hotels = (*api("Search_Hotels")).clone();
    hotels.params.push(ParamDoc {
        name: "sort_by".into(),
        ty: "string".into(),
        description: "popularity, price or distance".into(),
        required: true,
        default: None,
    });
    let f = p.fill(&ctx(), &hotels, &[]).await.unwrap();
    assert_eq!(
        (f.arguments.get("query"), f.arguments.get("sort_by")),
        (Some(&json!("Rome")), Some(&json!("popularity"))),
        "{f:?}"
    );
    let s = script.lock().unwrap();
    let user = s.requests[0].0["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("Already filled: query=\"Rome\"")
            && user.contains("- sort_by*: string — popularity, price or distance"),
        "{user}"
    );
    assert!(!user.contains("- query"), "a filled parameter is not asked: {user}");
    let schema = &s.requests[0].0["response_format"]["json_schema"]["schema"]["properties"]["arguments"]["properties"];
    assert_eq!(schema.as_object().unwrap().keys().collect::<Vec<_>>(), vec!["sort_by"]);
}

fn unsure_planner(url: &str) -> LlmPlanner {
    LlmPlanner::new(
        LlmSettings {
            base_url: url.into(),
            model: "mock".into(),
            timeout_ms: 5_000,
            retries: 0,
            decides: Decides::Unsure,
            ..Default::default()
        },
        None,
    )
    .unwrap()
}

/// Deciding only where the reading is unsure: choices, fills, plans, the judge and the answer
/// are the rules' (no completion); which remembered chain and which mention are asked once each,
/// in a short prompt, and an invalid answer is not asked again (the rules' order stands).
#[tokio::test]
async fn a_model_deciding_where_the_reading_is_unsure_is_asked_which_memory_and_which_mention() {
    let (url, script) = mock_openai_server(vec![
        (200, json!({"pick": 2})),
        (200, json!({"pick": 9})),
        (200, json!({"counterparts": ["Madrid", "Seville"]})),
        (200, json!({"counterparts": ["Seville", "Seville"]})),
    ])
    .await;
    let p = unsure_planner(&url);
    let c = ctx();
    let mut cands = candidates();
    cands.push(Candidate {
        id: "travel/booking/Search_Hotels".into(),
        source: Source::Retriever,
        weight: 0.0,
        similarity: 0.95,
        hint: 0.0,
        api: Some(api("Search_Hotels")),
    });
    assert!(matches!(p.choose(&c, &cands).await.unwrap(), Decision::Call { .. }));
    let hotels = api("Search_Hotel_Destination");
    assert!(p.fill(&c, &hotels, &[]).await.unwrap().missing.is_empty());
    assert!(!p.answer(&c).await.unwrap().is_empty());
    assert!(!p.wants_offers());
    assert_eq!(script.lock().unwrap().requests.len(), 0, "nothing but the reading is the model's");

    let memories = vec![
        MemoryView {
            request: "Find hotels in Paris for 2 adults next week".into(),
            chain: vec!["Search_Hotel_Destination".into()],
        },
        MemoryView {
            request: "Find hotels in Paris for 2 adults next week and their reviews".into(),
            chain: vec!["Search_Hotel_Destination".into(), "Search_Hotels".into(), "Get_Hotel_Reviews".into()],
        },
    ];
    assert_eq!(p.choose_memory(&c, &memories).await.unwrap(), Some(Recollection::Replay(1)));
    assert_eq!(p.choose_memory(&c, &memories).await.unwrap(), None, "pick 9 of 2: the rules' order");
    let unsure = UnsureMentions {
        kind: "name".into(),
        old: vec!["Paris".into(), "Lyon".into()],
        new: vec!["Seville".into(), "Madrid".into()],
        guess: vec![0, 1],
    };
    let old = "Compare hotels in Paris and Lyon";
    assert_eq!(p.align_mentions(&c, old, &unsure).await.unwrap(), Some(vec![1, 0]));
    assert_eq!(p.align_mentions(&c, old, &unsure).await.unwrap(), None, "Seville twice: not one-to-one");
    let s = script.lock().unwrap();
    assert_eq!(s.requests.len(), 4, "one completion a question, never asked again");
    let recall = s.requests[0].0["messages"][1]["content"].as_str().unwrap();
    assert!(
        recall.contains("2. Find hotels in Paris for 2 adults next week and their reviews")
            && recall.contains("chain: Search_Hotel_Destination → Search_Hotels → Get_Hotel_Reviews")
            && recall.contains("New request: Find hotels in Rome"),
        "{recall}"
    );
    assert_eq!(s.requests[0].0["response_format"]["json_schema"]["schema"]["properties"]["pick"]["maximum"], 2);
    let align = s.requests[2].0["messages"][1]["content"].as_str().unwrap();
    assert!(
        align.contains("Earlier names, in order: \"Paris\", \"Lyon\"")
            && align.contains("New names: \"Seville\", \"Madrid\"")
            && align.contains("\"Paris\" → \"Seville\", \"Lyon\" → \"Madrid\""),
        "{align}"
    );
    let items = &s.requests[2].0["response_format"]["json_schema"]["schema"]["properties"]["counterparts"];
    assert_eq!((items["minItems"].as_u64(), items["items"]["enum"].as_array().map(Vec::len)), (Some(2), Some(2)));
    for (body, _) in &s.requests {
        let prompt: String =
            body["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("")).collect();
        assert!(toolgraph_engine::plan::llm::approx_tokens(&prompt) <= 800, "{prompt}");
    }
}
