//! Rendered prompts are snapshot-tested: a change to a prompt file or to how the context is
//! rendered shows up as a reviewed snapshot diff.

use serde_json::{json, Map};
use std::sync::Arc;
use toolgraph_engine::plan::llm::{
    approx_tokens, render, render_align, render_choose, render_fill, render_judge, render_plan, render_recall,
    DECISION_TOKENS, DECOMPOSE, PLAN_TOKENS, SYSTEM,
};
use toolgraph_engine::plan::{
    ApiView, Candidate, Context, DeadEnd, MemoryView, Offer, SolutionView, Source, Step, UnsureMentions,
};
use toolgraph_engine::read::RequestValues;
use toolgraph_schema::ParamDoc;

fn api(name: &str, params: Vec<ParamDoc>) -> Arc<ApiView> {
    Arc::new(ApiView {
        id: format!("travel/booking-com15/{name}"),
        name: name.into(),
        tool: "booking-com15".into(),
        category: "travel".into(),
        description: format!("{name}: booking.com endpoint"),
        params,
        output_fields: vec![],
        availability: Some(0.9),
        ends: None,
    })
}

fn p(name: &str, ty: &str, required: bool, d: &str) -> ParamDoc {
    ParamDoc { name: name.into(), ty: ty.into(), description: d.into(), required, default: None }
}

fn context() -> Context {
    let r = "Today is October 13th, 2024. Rent a car at the San Diego Marriott La Jolla tomorrow at 8 AM.";
    let mut c = Context::new(r, RequestValues::extract(r, chrono::NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()));
    c.push_step(Step {
        api: api("Search_Car_Location", vec![p("query", "string", true, "a place")]),
        label: "var1".into(),
        arguments: json!({"query": "San Diego Marriott La Jolla"}).as_object().unwrap().clone(),
        sources: Default::default(),
        observation: r#"[{"coordinates":{"latitude":32.87,"longitude":-117.21},"name":"San Diego Marriott La Jolla"}]"#
            .into(),
        response: json!([]).into(),
        repeat: 0,
    });
    c.push_dead_end(DeadEnd {
        api: "travel/booking-com15/Search_Taxi".into(),
        arguments: Default::default(),
        reason: "missing pick_up_place_id".into(),
    });
    c.push_note("round 1: step 2 returned nothing usable".into());
    c
}

#[test]
fn choose_prompt() {
    let rent = api("Search_Car_Rentals", vec![]);
    let cands = vec![
        Candidate {
            id: rent.id.clone(),
            source: Source::Graph,
            weight: 0.875,
            similarity: 0.93,
            hint: 0.0,
            api: Some(rent),
        },
        Candidate { id: "END".into(), source: Source::Graph, weight: 0.125, similarity: 0.0, hint: 0.0, api: None },
    ];
    insta::assert_snapshot!(render_choose(&context(), &cands));
}

/// The car rental API and Search_Car_Location offered for its latitude.
fn rent_with_offers() -> (Arc<ApiView>, Vec<Offer>) {
    let rent = api(
        "Search_Car_Rentals",
        vec![
            p("pick_up_latitude", "number", true, "Latitude"),
            p("pick_up_date", "string", true, "yyyy-mm-dd"),
            p("currency_code", "string", false, ""),
        ],
    );
    let mut loc = (*api("Search_Car_Location", vec![p("query", "string", true, "a place")])).clone();
    loc.output_fields = vec!["coordinates.latitude".into(), "coordinates.longitude".into(), "name".into()];
    (rent, vec![Offer { param: "pick_up_latitude".into(), providers: vec![Arc::new(loc)] }])
}

#[test]
fn fill_prompt() {
    let (rent, offers) = rent_with_offers();
    // A model deciding everything is asked every parameter …
    insta::assert_snapshot!(render_fill(&context(), &rent, &offers, &Map::new()));
}

#[test]
fn open_fill_prompt() {
    let (rent, offers) = rent_with_offers();
    // … one deciding what is open only the required parameters the rules left open.
    let filled = json!({"pick_up_date": "2024-10-14"}).as_object().unwrap().clone();
    insta::assert_snapshot!(render_fill(&context(), &rent, &offers, &filled));
}

fn memories() -> Vec<MemoryView> {
    vec![
        MemoryView {
            request: "Today is November 15th, 2024. Rent a car at Los Angeles International Airport tomorrow at 8 AM."
                .into(),
            chain: vec!["Search_Car_Location".into(), "Search_Car_Rentals".into()],
        },
        MemoryView {
            request: "Rent a car at the Bellagio tomorrow at 9 AM and tell me about its supplier.".into(),
            chain: vec!["Search_Car_Location".into(), "Search_Car_Rentals".into(), "Vehicle_Supplier_Details".into()],
        },
    ]
}

fn unsure() -> UnsureMentions {
    UnsureMentions {
        kind: "name".into(),
        old: vec!["Melbourne Airport".into(), "Brisbane Airport".into()],
        new: vec!["Downtown San Francisco".into(), "San Francisco International Airport".into()],
        guess: vec![0, 1],
    }
}

#[test]
fn recall_prompt() {
    insta::assert_snapshot!(render_recall(&context(), &memories()));
}

#[test]
fn align_prompt() {
    let old = "I'll rent a car at Melbourne Airport at 9 AM and return it at Brisbane Airport at 4 PM.";
    insta::assert_snapshot!(render_align(&context(), old, &unsure()));
}

/// The reading's questions stay within a decision's budget however long the requests are, each
/// memory's chain and every mention kept.
#[test]
fn the_readings_questions_fit_a_decisions_budget() {
    let mut ctx = context();
    ctx.set_request("A very long request. ".repeat(200));
    let mut ms = memories();
    ms.push(MemoryView {
        request: "Another long remembered request. ".repeat(200),
        chain: vec!["Search_Hotels".into(); 12],
    });
    for m in &mut ms {
        m.request = m.request.repeat(20);
    }
    let old = "An old request. ".repeat(300);
    for (name, text) in [("recall", render_recall(&ctx, &ms)), ("align", render_align(&ctx, &old, &unsure()))] {
        let tokens = approx_tokens(SYSTEM) + approx_tokens(&text);
        assert!(tokens <= DECISION_TOKENS, "{name}: ~{tokens} tokens > {DECISION_TOKENS}\n{text}");
    }
    let recall = render_recall(&ctx, &ms);
    assert!(recall.contains("1. ") && recall.contains("2. ") && recall.contains("3. "), "{recall}");
    assert!(recall.matches("chain: ").count() == 3, "{recall}");
    let align = render_align(&ctx, &old, &unsure());
    assert!(align.contains("\"San Francisco International Airport\"") && align.contains("\"Brisbane Airport\""));
}

/// Long paths, many candidates and solutions are cut to the budgets, the request kept.
#[test]
fn prompts_fit_their_budgets() {
    let mut ctx = context();
    let big = api(
        "Search_Hotels",
        (0..12).map(|i| p(&format!("param_{i}"), "string", i < 3, &"a long description ".repeat(20))).collect(),
    );
    for i in 0..30 {
        ctx.push_step(Step {
            api: big.clone(),
            label: format!("var{}", i + 2),
            arguments: json!({"param_0": "x".repeat(100)}).as_object().unwrap().clone(),
            sources: Default::default(),
            observation: "{\"data\": 1}".repeat(200),
            response: json!([]).into(),
            repeat: 0,
        });
        ctx.push_dead_end(DeadEnd {
            api: big.id.clone(),
            arguments: Default::default(),
            reason: "HTTP 500 ".repeat(20),
        });
    }
    let cands: Vec<Candidate> = (0..4)
        .map(|_| Candidate {
            id: big.id.clone(),
            source: Source::Retriever,
            weight: 0.0,
            similarity: 0.5,
            hint: 0.0,
            api: Some(big.clone()),
        })
        .collect();
    let solutions: Vec<SolutionView> = (0..10)
        .map(|i| SolutionView { index: i, score: 1.0, apis: vec![big.clone(), big.clone(), big.clone()] })
        .collect();
    let offers = vec![Offer { param: "param_0".into(), providers: vec![big.clone(), big.clone()] }];
    for (name, text, budget) in [
        ("choose", render_choose(&ctx, &cands), DECISION_TOKENS),
        ("fill", render_fill(&ctx, &big, &offers, &Map::new()), DECISION_TOKENS),
        ("judge", render_judge(&ctx), DECISION_TOKENS),
        ("plan", render_plan(&ctx, &solutions), PLAN_TOKENS),
    ] {
        let tokens = approx_tokens(SYSTEM) + approx_tokens(&text);
        assert!(tokens <= budget, "{name}: ~{tokens} tokens > {budget}\n{text}");
        assert!(text.contains(ctx.request()), "{name} keeps the request");
        assert!(text.contains(" more"), "{name} says what it left out");
    }
}

#[test]
fn decompose_prompt() {
    insta::assert_snapshot!(render(DECOMPOSE, &[("request", context().request()), ("categories", "Travel, Data")]));
}

#[test]
fn plan_prompt() {
    let mut loc = (*api("Search_Car_Location", vec![p("query", "string", true, "a place")])).clone();
    loc.output_fields = vec!["coordinates.latitude".into(), "coordinates.longitude".into()];
    let rent = api(
        "Search_Car_Rentals",
        vec![p("pick_up_latitude", "number", true, "Latitude"), p("pick_up_date", "string", true, "yyyy-mm-dd")],
    );
    let solutions = vec![SolutionView { index: 3, score: 1.2, apis: vec![Arc::new(loc), rent] }];
    let mut ctx = context();
    ctx.clear_path();
    insta::assert_snapshot!(render_plan(&ctx, &solutions));
}

#[test]
fn judge_prompt() {
    insta::assert_snapshot!(render_judge(&context()));
}
