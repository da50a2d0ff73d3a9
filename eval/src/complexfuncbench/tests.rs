//! The protocol's rules, each as a case that fails when the rule is broken.
use super::*;
use crate::gold::GoldCall;
use serde_json::json;

fn spec(name: &str, params: Value) -> Spec {
    serde_json::from_value(
        json!({"name": name, "host": "h.example", "endpoint": format!("/{name}"), "query_parameters": params}),
    )
    .unwrap()
}

fn specs() -> Vec<Spec> {
    let s = |ty: &str, required: bool| json!({"type": ty, "required": required});
    vec![
        spec("Search_Car_Location", json!({"query": s("string", true)})),
        spec(
            "Search_Car_Rentals",
            json!({"pick_up_latitude": s("number", true), "pick_up_longitude": s("number", true), "drop_off_latitude": s("number", true), "drop_off_longitude": s("number", true), "pick_up_date": s("string", true), "pick_up_time": s("string", true), "drop_off_date": s("string", true), "drop_off_time": s("string", true), "driver_age": s("number", false), "currency_code": s("string", false)}),
        ),
        spec(
            "Search_Hotels",
            json!({"dest_id": s("string", true), "search_type": s("string", true), "arrival_date": s("string", true), "departure_date": s("string", true), "sort_by": s("string", false), "categories_filter": s("string", false)}),
        ),
    ]
}

fn gold(calls: Value) -> Gold {
    let calls = calls
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, c)| GoldCall {
            name: c["name"].as_str().unwrap().into(),
            label: Some(format!("var{}", i + 1)),
            arguments: c["args"].as_object().unwrap().clone(),
            resolved: c["args"].as_object().unwrap().clone(),
            response: c.get("response").cloned(),
        })
        .collect();
    Gold { request: "r".into(), calls }
}

fn rec(g: &GoldCall) -> Recording {
    recording(&g.name, &g.resolved, g.response.clone().unwrap())
}

fn recording(name: &str, args: &Map<String, Value>, response: Value) -> Recording {
    let spec = specs().into_iter().find(|s| s.name == name).unwrap();
    Recording {
        api: name.into(),
        route: format!("{}{}", spec.host, spec.endpoint),
        required: spec.query_parameters.iter().filter(|(_, p)| p.required).map(|(n, _)| n.clone()).collect(),
        arguments: args.clone(),
        response,
    }
}

/// The protocol over the golden recordings (and `more`), as the evaluation's sandbox serves.
fn protocol(gold: &Gold, more: Vec<Recording>) -> Protocol {
    let mut recs: Vec<Recording> = gold.calls.iter().map(rec).collect();
    recs.extend(more);
    Protocol::new(&specs(), &recs)
}

fn sent(api: &str, args: Value) -> SentCall {
    SentCall { api: api_key(api), arguments: args.as_object().unwrap().clone(), response: None }
}

/// The golden calls as a model would send them (literal values).
fn as_sent(g: &Gold) -> Vec<SentCall> {
    g.calls
        .iter()
        .map(|c| SentCall { api: api_key(&c.name), arguments: c.resolved.clone(), response: c.response.clone() })
        .collect()
}

fn rentals() -> Value {
    json!({"pick_up_latitude": 32.873055, "pick_up_longitude": -117.215935, "drop_off_latitude": 32.873055, "drop_off_longitude": -117.215935, "pick_up_date": "2024-10-14", "pick_up_time": "08:00", "drop_off_date": "2024-10-15", "drop_off_time": "08:00", "driver_age": 30})
}

/// A location search, then a rental search with its coordinates and an optional driver age.
fn car_gold() -> Gold {
    gold(json!([
        {"name": "Search_Car_Location", "args": {"query": "San Diego Marriott La Jolla"}, "response": [{"city": "San Diego"}]},
        {"name": "Search_Car_Rentals", "args": rentals(), "response": {"data": {"cars": [1, 2, 3]}}},
    ]))
}

fn without(v: Value, key: &str) -> Value {
    let mut m = v.as_object().unwrap().clone();
    m.remove(key);
    Value::Object(m)
}

fn with(v: Value, key: &str, x: Value) -> Value {
    let mut m = v.as_object().unwrap().clone();
    m.insert(key.into(), x);
    Value::Object(m)
}

#[test]
fn the_protocol_file_is_the_published_lists() {
    let f: ProtocolFile = serde_json::from_str(PROTOCOL_FILE).unwrap();
    assert_eq!(f.exact_match_values.len(), 46);
    assert_eq!(
        f.exact_match_values["Search_Flights"],
        vec!["currency_code", "toId", "fromId", "returnDate", "departDate", "sort"]
    );
    assert_eq!(f.exact_match_values["Get_Availability"], vec!["currency_code", "languagecode", "slug", "date"]);
    assert_eq!(f.free_functions.len(), 6);
    assert!(!f.dropped_at_end.contains(&"Location_to_Lat_Long".to_string()));
}

#[test]
fn the_golden_calls_sent_as_they_are_succeed_with_every_call_correct() {
    let g = car_gold();
    let s = score(&protocol(&g, vec![]), &g, &as_sent(&g));
    assert_eq!(s, SampleScore { golden: 2, correct: 2, success: true, first_error: None });
}

#[test]
fn one_optional_argument_dropped_is_no_success_though_the_sandbox_answers_alike() {
    let g = car_gold();
    let p = protocol(&g, vec![]);
    let call = sent("Search_Car_Rentals", without(rentals(), "driver_age"));
    // The sandbox's nearest recording gives the golden response: not what the API answered
    // to this call, so it never makes the call right.
    assert!(p.exact_responses("search_car_rentals", &call.arguments).is_empty());
    let s = score(&p, &g, &[as_sent(&g)[0].clone(), call]);
    assert_eq!((s.correct, s.success), (1, false), "{s:?}");
    assert!(s.first_error.as_deref().unwrap().contains("driver_age missing"), "{s:?}");
}

#[test]
fn an_extra_argument_fails_the_rule_match_and_counts_only_by_an_exact_response() {
    let g = car_gold();
    let extra = sent("Search_Car_Rentals", with(rentals(), "currency_code", json!("EUR")));
    let s = score(&protocol(&g, vec![]), &g, &[as_sent(&g)[0].clone(), extra.clone()]);
    assert_eq!((s.correct, s.success), (1, false), "{s:?}");
    // Recorded for exactly that call with the golden response: the API answered alike.
    let same = recording("Search_Car_Rentals", &extra.arguments, g.calls[1].response.clone().unwrap());
    let s = score(&protocol(&g, vec![same]), &g, &[as_sent(&g)[0].clone(), extra.clone()]);
    assert_eq!((s.correct, s.success), (2, true), "{s:?}");
    // Recorded with another response: no.
    let other = recording("Search_Car_Rentals", &extra.arguments, json!({"data": {"cars": [9]}}));
    let s = score(&protocol(&g, vec![other]), &g, &[as_sent(&g)[0].clone(), extra]);
    assert_eq!((s.correct, s.success), (1, false), "{s:?}");
}

#[test]
fn a_place_worded_otherwise_is_right_when_any_recording_of_it_gave_the_golden_answer() {
    let g = car_gold();
    let other_words = sent("Search_Car_Location", json!({"query": "Marriott La Jolla, San Diego"}));
    let calls = |first: &SentCall| vec![first.clone(), as_sent(&g)[1].clone()];
    // Never recorded: what the API would answer is unknown (the published scorer would ask it).
    let s = score(&protocol(&g, vec![]), &g, &calls(&other_words));
    assert!(!s.success && s.first_error.as_deref().unwrap().contains("no match"), "{s:?}");
    // Two samples recorded that query on other days; one answer is the golden one.
    let asked = |r: Value| recording("Search_Car_Location", &other_words.arguments, r);
    let p = protocol(&g, vec![asked(json!([{"city": "La Jolla"}])), asked(json!([{"city": "San Diego"}]))]);
    assert_eq!(p.exact_responses("search_car_location", &other_words.arguments).len(), 2);
    let s = score(&p, &g, &calls(&other_words));
    assert_eq!((s.correct, s.success), (2, true), "{s:?}");
    // Recorded only with another answer: still no match.
    let s = score(&protocol(&g, vec![asked(json!([{"city": "La Jolla"}]))]), &g, &calls(&other_words));
    assert!(!s.success, "{s:?}");
}

#[test]
fn a_value_of_the_exact_list_that_differs_fails_even_with_the_same_response() {
    let args = json!({"dest_id": "-2092174", "search_type": "city", "arrival_date": "2024-11-20", "departure_date": "2024-11-22", "sort_by": "class_descending"});
    let g = gold(json!([{"name": "Search_Hotels", "args": args, "response": {"hotels": [1]}}]));
    let popular = with(args.clone(), "sort_by", json!("popularity"));
    let same = recording("Search_Hotels", popular.as_object().unwrap(), json!({"hotels": [1]}));
    let s = score(&protocol(&g, vec![same]), &g, &[sent("Search_Hotels", popular)]);
    assert!(!s.success && s.correct == 0, "{s:?}");
    assert!(s.first_error.as_deref().unwrap().contains("value_error: sort_by \"popularity\""), "{s:?}");
    // The same for a rental's drop-off time (on Search_Car_Rentals' list).
    let g2 = car_gold();
    let mut calls = as_sent(&g2);
    calls[1].arguments.insert("drop_off_time".into(), json!("17:00"));
    let s = score(
        &protocol(
            &g2,
            vec![recording("Search_Car_Rentals", &calls[1].arguments, g2.calls[1].response.clone().unwrap())],
        ),
        &g2,
        &calls,
    );
    assert!(s.first_error.as_deref().unwrap().contains("value_error: drop_off_time"), "{s:?}");
}

#[test]
fn a_location_search_left_out_does_not_fail_the_sample() {
    let g = car_gold();
    let s = score(&protocol(&g, vec![]), &g, &as_sent(&g)[1..]);
    assert_eq!(s, SampleScore { golden: 2, correct: 1, success: true, first_error: None });
    // A location search made with other words than the golden one is a wrong call.
    let s = score(
        &protocol(&g, vec![]),
        &g,
        &[sent("Search_Car_Location", json!({"query": "Marriott La Jolla"})), as_sent(&g)[1].clone()],
    );
    assert!(!s.success && s.correct == 0, "{s:?}");
}

#[test]
fn a_categories_filter_in_another_order_passes() {
    let args = json!({"dest_id": "-2092174", "search_type": "city", "arrival_date": "2024-11-20", "departure_date": "2024-11-22", "categories_filter": "class::2,free_cancellation::1"});
    let g = gold(json!([{"name": "Search_Hotels", "args": args, "response": {"hotels": [1]}}]));
    let s = score(
        &protocol(&g, vec![]),
        &g,
        &[sent("Search_Hotels", with(args.clone(), "categories_filter", json!("free_cancellation::1, class::2")))],
    );
    assert!(s.success, "{s:?}");
    let s = score(
        &protocol(&g, vec![]),
        &g,
        &[sent("Search_Hotels", with(args, "categories_filter", json!("free_cancellation::1")))],
    );
    assert!(!s.success, "{s:?}");
}

#[test]
fn the_first_wrong_call_ends_the_sample_and_a_call_after_the_last_is_wrong() {
    let g = car_gold();
    let calls = as_sent(&g);
    let s = score(
        &protocol(&g, vec![]),
        &g,
        &[
            calls[0].clone(),
            sent("Search_Car_Rentals", with(rentals(), "pick_up_date", json!("2024-10-15"))),
            calls[1].clone(),
        ],
    );
    assert_eq!((s.correct, s.success), (1, false), "{s:?}");
    let s = score(&protocol(&g, vec![]), &g, &[calls[0].clone(), calls[1].clone(), calls[1].clone()]);
    assert_eq!((s.correct, s.success), (2, false), "{s:?}");
    assert!(s.first_error.unwrap().contains("func_hallucination"));
    // Stopping before the last golden call: no success.
    let s = score(&protocol(&g, vec![]), &g, &calls[..1]);
    assert_eq!((s.correct, s.success), (1, false));
    assert!(s.first_error.unwrap().starts_with("stopped early"));
}

#[test]
fn a_malformed_call_is_not_counted_and_does_not_end_the_sample() {
    let g = car_gold();
    let calls = as_sent(&g);
    // A string where the spec says number, then the right call.
    let bad = sent("Search_Car_Rentals", with(rentals(), "pick_up_latitude", json!("32.873055")));
    let s = score(&protocol(&g, vec![]), &g, &[calls[0].clone(), bad, calls[1].clone()]);
    assert_eq!((s.correct, s.success), (2, true), "{s:?}");
}

#[test]
fn turns_follow_the_data_flow_and_parallel_calls_score_together() {
    // Two rentals reading the location search: one turn after it.
    let g = gold(json!([
        {"name": "Search_Car_Location", "args": {"query": "LAX"}, "response": [{"coordinates": {"latitude": 33.94, "longitude": -118.4}}]},
        {"name": "Search_Car_Rentals", "args": with(rentals(), "pick_up_date", json!("2024-10-14")), "response": {"day": 1}},
        {"name": "Search_Car_Rentals", "args": with(rentals(), "pick_up_date", json!("2024-10-15")), "response": {"day": 2}},
    ]));
    let p = protocol(&g, vec![]);
    let (_, turns) = golden_turns(
        &p,
        &gold(json!([
            {"name": "Search_Car_Location", "args": {"query": "LAX"}},
            {"name": "Search_Car_Rentals", "args": {"pick_up_latitude": "$var1.coordinates.latitude$"}},
            {"name": "Search_Car_Rentals", "args": {"pick_up_latitude": "$var1.coordinates.latitude$"}},
            {"name": "Search_Car_Location", "args": {"query": "SAN"}},
        ])),
    );
    assert_eq!(turns, vec![vec![0], vec![1, 2, 3]]);
    // A turn of the model with one right and one wrong call goes on; the wrong one fails
    // the sample only if that turn is the last.
    let calls = as_sent(&g);
    let wrong = sent("Search_Car_Rentals", with(rentals(), "pick_up_date", json!("2024-10-16")));
    let s =
        score_turns(&p, &g, &[vec![calls[0].clone()], vec![calls[1].clone(), wrong.clone()], vec![calls[2].clone()]]);
    assert_eq!((s.correct, s.success), (3, true), "{s:?}");
    let s = score_turns(&p, &g, &[vec![calls[0].clone()], vec![calls[1].clone(), wrong]]);
    assert_eq!((s.correct, s.success), (2, false), "{s:?}");
    assert!(s.first_error.unwrap().contains("value_error: pick_up_date"));
}

#[test]
fn values_through_references_are_typed_by_the_spec() {
    let p = Protocol::new(&specs(), &[]);
    let mut g = gold(json!([{"name": "Search_Hotels", "args": {"dest_id": "$var0.dest_id$"}}]));
    g.calls[0].resolved.insert("dest_id".into(), json!(-2092174));
    let (calls, _) = golden_turns(&p, &g);
    assert_eq!(calls[0].arguments["dest_id"], json!("-2092174"));
}

#[test]
fn sent_calls_are_what_went_out_and_calls_refused_before_sending_are_none() {
    use std::sync::Arc;
    use toolgraph_engine::exec::{ArgProblem, CallError};
    use toolgraph_engine::run::TraceEvent;
    let args = |v: Value| v.as_object().unwrap().clone();
    let call = |label: &str, api: &str, a: Value| TraceEvent::Call {
        label: label.into(),
        api: format!("travel/booking_com15/{api}"),
        arguments: args(a),
        sources: Default::default(),
    };
    let response = |label: &str, api: &str, status: u16, body: Value, sent: Option<Value>| TraceEvent::Response {
        label: label.into(),
        api: format!("travel/booking_com15/{api}"),
        status,
        attempts: 1,
        elapsed_ms: 1.0,
        observation: String::new(),
        response: Arc::new(body),
        sent: sent.map(args),
    };
    let trace = vec![
        call("var1", "search_car_location", json!({"query": "X"})),
        response("var1", "search_car_location", 200, json!([{"coordinates": {"latitude": 32.8}}]), None),
        // Refused by the executor before sending: not a call the API saw.
        call("var2", "search_car_rentals", json!({"pick_up_latitude": "north"})),
        TraceEvent::CallFailed {
            api: "travel/booking_com15/search_car_rentals".into(),
            arguments: args(json!({"pick_up_latitude": "north"})),
            error: CallError::InvalidArguments {
                problems: vec![ArgProblem { argument: "pick_up_latitude".into(), problem: "expected number".into() }],
            },
            sent: None,
        },
        // Sent as the schema types it (the trace's `sent`), references resolved otherwise.
        call("var2", "search_car_rentals", json!({"pick_up_latitude": "$var1.0.coordinates.latitude$", "days": "2"})),
        response(
            "var2",
            "search_car_rentals",
            200,
            json!({"data": 1}),
            Some(json!({"pick_up_latitude": 32.8, "days": 2})),
        ),
        call("var3", "search_car_rentals", json!({"pick_up_latitude": "$var1.0.coordinates.latitude$"})),
        response("var3", "search_car_rentals", 404, json!({"error": "no recording"}), None),
    ];
    let s = sent_calls(&trace);
    assert_eq!(s.len(), 3, "{s:?}");
    assert_eq!(s[0].api, "search_car_location");
    assert_eq!(s[0].response, Some(json!([{"coordinates": {"latitude": 32.8}}])));
    assert_eq!(s[1].arguments, args(json!({"pick_up_latitude": 32.8, "days": 2})));
    assert_eq!(s[2].arguments["pick_up_latitude"], json!(32.8));
    assert_eq!(s[2].response, None, "a failed call has no response");
}
