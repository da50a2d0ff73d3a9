//! The replay sandbox's unit tests.
use super::*;

fn rec(args: Value, response: Value) -> Recording {
    Recording {
        api: "Search".into(),
        route: "h.example/api/search".into(),
        required: vec!["query".into()],
        arguments: args.as_object().unwrap().clone(),
        response,
    }
}

#[test]
fn normalization_matches_what_travels_as_text() {
    assert_eq!(normalize(&json!(32.8730)), normalize(&json!("32.873")));
    assert_eq!(normalize(&json!(" Paris ")), normalize(&json!("paris")));
    assert_eq!(normalize(&json!([{"b": 1, "a": "X"}])), normalize(&json!("[{\"a\": \"x\", \"b\": 1.0}]")));
    assert_ne!(normalize(&json!("2024-10-14")), normalize(&json!("2024-10-15")));
}

#[test]
fn lookup_exact_then_by_required_arguments() {
    let lib = Library::new([
        rec(json!({"query": "Paris"}), json!({"id": 1})),
        rec(json!({"query": "Rome", "page": 2}), json!({"id": 2})),
        rec(json!({"query": "Rome"}), json!({"id": 3})),
    ]);
    let m = |v: Value| v.as_object().unwrap().clone();
    assert_eq!(*lib.lookup("/h.example/api/search", &m(json!({"query": "paris"}))).unwrap(), json!({"id": 1}));
    assert_eq!(
        *lib.lookup("h.example/api/search", &m(json!({"query": "Rome", "page": "2"}))).unwrap(),
        json!({"id": 2})
    );
    assert_eq!(
        *lib.lookup("h.example/api/search", &m(json!({"query": "Rome", "lang": "en"}))).unwrap(),
        json!({"id": 3})
    );
    assert_eq!(lib.lookup("h.example/api/search", &m(json!({"query": "Oslo"}))).unwrap_err(), Some("Search".into()));
    assert_eq!(lib.lookup("h.example/nope", &m(json!({}))).unwrap_err(), None);
    // Only a recording of exactly these arguments (normalized) is exact.
    assert_eq!(lib.answer("h.example/api/search", &m(json!({"query": " PARIS "}))).unwrap().1, Match::Exact);
    assert_eq!(lib.answer("h.example/api/search", &m(json!({"query": "Rome"}))).unwrap().1, Match::Exact);
    assert_eq!(
        lib.answer("h.example/api/search", &m(json!({"query": "Rome", "lang": "de"}))).unwrap().1,
        Match::Nearest
    );
    assert!(lib.exact("h.example/api/search", &m(json!({"query": "Rome", "lang": "de"}))).is_none());
    assert_eq!(*lib.exact("h.example/api/search", &m(json!({"query": "Rome", "page": 2}))).unwrap(), json!({"id": 2}));
}

#[test]
fn the_replayed_samples_own_recordings_answer_first() {
    // Two samples recorded the same call; the real API answered one in another precision.
    let lib = Library::new([
        rec(json!({"query": "LAX"}), json!({"longitude": -118.402})),
        rec(json!({"query": "LAX"}), json!({"longitude": -118.402000427246})),
        rec(json!({"query": "SFO"}), json!({"longitude": -122.375})),
    ]);
    let sb = Sandbox::new(lib, Faults::default());
    let m = |v: Value| v.as_object().unwrap().clone();
    let route = "h.example/api/search";
    assert_eq!(*sb.answer(route, &m(json!({"query": "LAX"}))).unwrap().0, json!({"longitude": -118.402000427246}));
    sb.answer_first([rec(json!({"query": "LAX"}), json!({"longitude": -118.402}))]);
    assert_eq!(
        sb.answer(route, &m(json!({"query": "lax"}))).unwrap(),
        (Arc::new(json!({"longitude": -118.402})), Match::Exact)
    );
    // A call the sample never made is the library's to answer, nearest ones included.
    assert_eq!(*sb.answer(route, &m(json!({"query": "SFO"}))).unwrap().0, json!({"longitude": -122.375}));
    assert_eq!(sb.answer(route, &m(json!({"query": "SFO", "page": 2}))).unwrap().1, Match::Nearest);
    sb.answer_first([]);
    assert_eq!(*sb.answer(route, &m(json!({"query": "LAX"}))).unwrap().0, json!({"longitude": -118.402000427246}));
}

#[test]
fn faults_follow_their_rates() {
    let sb = Sandbox::new(
        Library::default(),
        Faults {
            server_error_rate: 0.1,
            throttle_rate: 0.1,
            garbage_rate: 0.1,
            timeout_rate: 0.1,
            seed: 7,
            ..Default::default()
        },
    );
    let n = 10_000;
    let drawn: Vec<Option<Fault>> = (0..n).map(|i| sb.draw(i)).collect();
    for f in [Fault::Timeout, Fault::ServerError, Fault::Throttle, Fault::Garbage] {
        let share = drawn.iter().filter(|d| **d == Some(f)).count() as f64 / n as f64;
        assert!((share - 0.1).abs() < 0.02, "{f:?}: {share}");
    }
    assert_eq!(drawn, (0..n).map(|i| sb.draw(i)).collect::<Vec<_>>(), "same seed, same faults");
}

/// `POST /_sandbox/sample` names the sample being replayed (by its request or index): its own
/// recordings answer first, `{}` stops that, and a request no sample holds is refused.
#[test]
fn a_named_sample_answers_first() {
    let sb = Sandbox::new(
        Library::new([rec(json!({"query": "LAX"}), json!({"longitude": -118.402000427246}))]),
        Faults::default(),
    );
    sb.set_samples(vec![
        ("Rent a car at LAX".into(), vec![rec(json!({"query": "LAX"}), json!({"longitude": -118.402}))]),
        ("Rent a car at SFO".into(), vec![]),
    ]);
    let post = |body: Value| {
        let r = sample_reply(&sb, &Bytes::from(body.to_string()));
        r.status()
    };
    let m = json!({"query": "LAX"}).as_object().unwrap().clone();
    let route = "h.example/api/search";
    assert_eq!(post(json!({"request": " Rent a car at LAX "})), StatusCode::OK);
    assert_eq!(*sb.answer(route, &m).unwrap().0, json!({"longitude": -118.402}));
    assert_eq!(post(json!({})), StatusCode::OK);
    assert_eq!(*sb.answer(route, &m).unwrap().0, json!({"longitude": -118.402000427246}));
    assert_eq!(post(json!({"sample": 0})), StatusCode::OK);
    assert_eq!(*sb.answer(route, &m).unwrap().0, json!({"longitude": -118.402}));
    assert_eq!(post(json!({"request": "Rent a car in Oslo"})), StatusCode::BAD_REQUEST);
    assert_eq!(post(json!({"sample": 9})), StatusCode::BAD_REQUEST);
    assert_eq!(post(json!({"sampel": 0})), StatusCode::BAD_REQUEST);
}
