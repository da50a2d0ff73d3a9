//! Tests of [`super`]: the deterministic argument filler.
use super::*;

#[test]
fn one_canonical_form_at_every_depth() {
    let a = json!({"ingredients": {"flour": 2, "eggs": 3}, "servings": 4});
    let b = json!({"servings": 4, "ingredients": {"eggs": 3, "flour": 2}});
    let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
    assert_eq!(canonical(a), canonical(b));
    assert_eq!(canonical(a), r#"{"ingredients":{"eggs":3,"flour":2,},"servings":4,}"#);
    assert_ne!(canonical(a), canonical(json!({"servings": 5}).as_object().unwrap()));
}
use crate::plan::test_support::{api, ctx, p};
use crate::plan::Step;
use serde_json::json;
use std::sync::Arc;

#[test]
fn a_later_turn_takes_what_the_request_lacks_from_earlier_turns() {
    let mut c = ctx("Book the first one for me");
    let book = api("book", vec![p("hotel_id", "number", true), p("currency", "string", false)]);
    assert_eq!(fill_arguments(&c, &book).missing, vec!["hotel_id".to_string()]);
    let older = Arc::new(json!({"data": [{"hotel_id": 7}]}));
    let newer = Arc::new(json!({"data": {"hotels": [{"hotel_id": 42, "name": "Ritz"}]}}));
    c.earlier = vec![
        crate::plan::Earlier::new(1, "hotels in Rome", "search", older),
        crate::plan::Earlier::new(2, "hotels in Paris", "search", newer),
    ];
    let f = fill_arguments(&c, &book);
    assert_eq!(f.arguments["hotel_id"], json!(42), "the most recent turn wins");
    assert!(matches!(&f.sources["hotel_id"], ArgSource::Earlier { turn: 2, .. }));
    assert!(!f.arguments.contains_key("currency"), "optional parameters are not filled from earlier turns");
}

/// The learned filler in the fill: without it both times take the first mention (the
/// issue's rental: drop-off at the pick-up time); learned from three recorded rentals, the
/// drop-off takes the time said with "return", and a required parameter nothing fills takes
/// the constant those runs always sent.
#[test]
fn learned_cues_choose_the_mention_and_constants_fill_what_nothing_else_does() {
    let rent = api(
        "car/rent",
        vec![p("pick_up_time", "string", true), p("drop_off_time", "string", true), p("currency_code", "string", true)],
    );
    let request = "Rent a car at Seattle-Tacoma International Airport at 11 AM on December 25th, 2024, and return it at the same place at 5 PM seven days later.";
    let mut c = ctx(request);
    let f = fill_arguments(&c, &rent);
    assert_eq!(
        (f.arguments["pick_up_time"].as_str(), f.arguments["drop_off_time"].as_str()),
        (Some("11:00"), Some("11:00")),
        "the rules alone"
    );
    assert_eq!(f.missing, vec!["currency_code".to_string()]);
    let mut model = crate::fill::learned::ArgModel::default();
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    for (req, pick, drop) in [
        (
            "Rent a car at Miami airport at 9 AM on July 3rd, 2024 and return it there at 6 PM on July 5th.",
            "09:00",
            "18:00",
        ),
        (
            "I want to return the car at 8 PM on August 9th, 2024; pick it up at LAX at 10 AM on August 2nd.",
            "10:00",
            "20:00",
        ),
        ("Pick up a car in Denver at 7 AM on May 1st, 2024, return it at 11 PM two days later.", "07:00", "23:00"),
    ] {
        let args = json!({"pick_up_time": pick, "drop_off_time": drop, "currency_code": "USD"});
        model.learn(req, [("car/rent", args.as_object().unwrap())], day);
    }
    c.args = Some(Arc::new(model));
    let f = fill_arguments(&c, &rent);
    assert_eq!(f.arguments["pick_up_time"], json!("11:00"));
    assert_eq!(f.arguments["drop_off_time"], json!("17:00"));
    assert_eq!(f.arguments["currency_code"], json!("USD"));
    assert!(f.missing.is_empty());
}

/// A booking's end said as a length after its start: the end date and time are the start
/// plus the span (here past midnight); a request that says its end leaves them to the rules.
#[test]
fn an_end_said_as_a_span_after_the_start_is_the_start_plus_the_span() {
    let book = api(
        "studio/book",
        vec![
            p("start_date", "string", true),
            p("start_time", "string", true),
            p("end_date", "string", true),
            p("end_time", "string", true),
        ],
    );
    let c = ctx("Book the recording studio on March 3rd, 2025 at 10 PM and keep it until 5 hours later.");
    let f = fill_arguments(&c, &book);
    let got: Vec<&str> = ["start_date", "start_time", "end_date", "end_time"]
        .iter()
        .map(|k| f.arguments[*k].as_str().unwrap())
        .collect();
    assert_eq!(got, ["2025-03-03", "22:00", "2025-03-04", "03:00"]);
    let c = ctx("Book the recording studio on March 3rd, 2025 from 10 PM to 11 PM.");
    let f = fill_arguments(&c, &book);
    assert!(
        !matches!(&f.sources["end_time"], ArgSource::Request { kind } if kind == "span"),
        "an end said is not a span: {:?}",
        f.sources["end_time"]
    );
}

/// A number no word ties to the parameter ("2 adults" would): recorded runs point at the
/// mention (the rules alone leave it out).
#[test]
fn learned_numbers_follow_the_recorded_runs_where_no_word_ties_them() {
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let mut model = crate::fill::learned::ArgModel::default();
    for (req, rooms, city) in [
        ("Book 3 nights in Rome for 2 of us in Milan style, we need 1 please", 1, "Rome"),
        ("In Paris, for 4 days, 2 guests, need 1 in the Paris Hilton area please", 1, "Paris"),
        ("Five nights, 2 people, need 3 please, near Berlin or Hamburg", 3, "Berlin"),
    ] {
        let args = json!({"room_qty": rooms, "city": city});
        model.learn(req, [("h/book", args.as_object().unwrap())], day);
    }
    let book = api("h/book", vec![p("room_qty", "integer", true), p("city", "string", true)]);
    let mut c = ctx("Stay 6 nights, 3 travellers, we need 2 please, in Lisbon or Porto");
    assert_eq!(fill_arguments(&c, &book).arguments.get("room_qty"), None, "no word ties a number to room_qty");
    c.args = Some(Arc::new(model));
    let f = fill_arguments(&c, &book);
    assert_eq!(f.arguments["room_qty"], json!(2.0), "the number said before `please`");
}

/// A number counted by a unit the parameter's own runs never took, while another parameter took
/// it ("a three-day fair" for a print run counted in flyers, posters, …), is not the one sent.
#[test]
fn a_number_counted_by_another_parameters_unit_is_not_chosen() {
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let mut model = crate::fill::learned::ArgModel::default();
    for (req, qty, days) in [
        ("Print 50 flyers and ship them within 2 days", 50, 2),
        ("Print 200 posters and ship them within 5 days", 200, 5),
        ("Print 30 flyers and ship them within 3 days", 30, 3),
        ("Print 80 posters and ship them within 4 days", 80, 4),
    ] {
        let print = json!({"quantity": qty});
        let ship = json!({"days": days});
        model.learn(
            req,
            [("print/order", print.as_object().unwrap()), ("ship/schedule", ship.as_object().unwrap())],
            day,
        );
    }
    let order = api("print/order", vec![p("quantity", "integer", true)]);
    let request = "Print 3-day passes for the fair, 120 badges in all";
    let values = RequestValues::extract(request, day);
    let ms = mentions(&values, Kind::Number);
    let first = model.choose("print/order", "quantity", Kind::Number, &ms).map(|c| ms[c.index].value.clone());
    assert_eq!(first.as_deref(), Some("3"), "the learned order alone picks the first number");
    let mut c = ctx(request);
    c.args = Some(Arc::new(model));
    let f = fill_arguments(&c, &order);
    assert_eq!(f.arguments["quantity"], json!(120.0), "days are what the shipping took, never a print run");
}

/// A parameter whose recorded numbers were never counted by a word (a coordinate) takes no
/// counted number ("a 3-hour hike").
#[test]
fn a_parameter_that_never_took_a_counted_number_takes_none() {
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let mut model = crate::fill::learned::ArgModel::default();
    for (req, lat) in [
        ("What is the weather at 45.52, -122.68 this weekend?", 45.52),
        ("Forecast at 40.71, -74.01 please", 40.71),
        ("The weather at 51.5, -0.12 on the hill", 51.5),
    ] {
        let args = json!({"lat": lat});
        model.learn(req, [("weather/at", args.as_object().unwrap())], day);
    }
    let at = api("weather/at", vec![p("lat", "number", true)]);
    let request = "For a 3-hour hike, what is the weather at 47.61, -122.33?";
    let values = RequestValues::extract(request, day);
    let ms = mentions(&values, Kind::Number);
    let first = model.choose("weather/at", "lat", Kind::Number, &ms).map(|c| ms[c.index].value.clone());
    assert_eq!(first.as_deref(), Some("3"), "the learned order alone picks the first number");
    let mut c = ctx(request);
    c.args = Some(Arc::new(model));
    assert_eq!(fill_arguments(&c, &at).arguments["lat"], json!(47.61));
}

#[test]
fn fills_from_outputs_then_request_then_defaults() {
    let mut c = ctx("Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow.");
    let loc = api("loc", vec![p("query", "string", true)]);
    let f = fill_arguments(&c, &loc);
    assert_eq!(f.arguments["query"], json!("San Diego Marriott La Jolla"));
    assert!(f.missing.is_empty());
    c.path.push(Step {
        api: loc,
        label: "var1".into(),
        arguments: f.arguments,
        sources: f.sources,
        observation: String::new(),
        response: json!([{"city": "San Diego", "coordinates": {"latitude": 32.87, "longitude": -117.2}}]).into(),
        repeat: 0,
    });
    let mut with_default = p("currency", "string", true);
    with_default.default = Some(json!("USD"));
    let rent = api(
        "rent",
        vec![
            p("pick_up_latitude", "number", true),
            p("pick_up_date", "string", true),
            p("drop_off_date", "string", true),
            p("pick_up_time", "string", true),
            with_default,
            p("driver_id", "string", true),
            p("adults", "number", false),
        ],
    );
    let f = fill_arguments(&c, &rent);
    assert_eq!(f.arguments["pick_up_latitude"], json!("$var1.coordinates.latitude$"));
    assert_eq!(f.arguments["pick_up_date"], json!("2024-10-14"));
    assert_eq!(f.arguments["drop_off_date"], json!("2024-10-15"));
    assert_eq!(f.arguments["pick_up_time"], json!("08:00"));
    assert_eq!(f.arguments["currency"], json!("USD"));
    assert_eq!(f.missing, vec!["driver_id"]);
    assert!(!f.arguments.contains_key("adults"), "optional with no value stays out");
}

/// One call per option, learned: recorded runs called the details API once per hotel of the
/// search's list, as many times as the request's count said. An unseen request ("two
/// hotels") gets the first, then the second hotel's id, and no third call; without the model
/// the repeat takes the first hotel again (a call the search never repeats).
#[test]
fn a_call_per_option_takes_the_next_element_as_many_times_as_the_request_counts() {
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let mut model = crate::fill::learned::ArgModel::default();
    for (req, n) in [
        ("Find three hotels in Rome near the Colosseum and tell me about each.", 3),
        ("I want the two cheapest hotels in Paris for 4 nights and their details.", 2),
        ("Show me 3 hotels in Berlin for 2 adults with their descriptions.", 3),
    ] {
        let search = json!({"city": "x"});
        let details: Vec<Map<String, Value>> = (0..n)
            .map(|i| json!({"hotel_id": format!("$var1.result.{i}.hotel_id$")}).as_object().cloned().unwrap())
            .collect();
        let calls =
            std::iter::once(("h/search", search.as_object().unwrap())).chain(details.iter().map(|d| ("h/details", d)));
        model.learn(req, calls, day);
    }
    assert!(model.advances("h/details", "hotel_id"));
    assert!(model.advances("other/details", "hotel_id"), "backed off to the parameter name");
    let details = api("h/details", vec![p("hotel_id", "string", true)]);
    let search = api("h/search", vec![p("city", "string", true)]);
    let mut c = ctx("Find two hotels in Lisbon for 5 nights and describe them.");
    let push = |c: &mut Context, a: &Arc<ApiView>, f: Filled, response: Value| made(c, a, f, response);
    let f = fill_arguments(&c, &search);
    push(&mut c, &search, f, json!({"result": [{"hotel_id": 11}, {"hotel_id": 12}, {"hotel_id": 13}]}));
    let first = fill_arguments(&c, &details);
    assert_eq!(first.arguments["hotel_id"], json!("$var1.result.hotel_id$"));
    push(&mut c, &details, first, json!({"description": "a"}));
    // Without the model: the same hotel again.
    let plain = Context { args: None, ..c.clone() };
    assert_eq!(fill_arguments(&plain, &details).arguments["hotel_id"], json!("$var1.result.hotel_id$"));
    assert_eq!(option_count(&plain, &details), None);
    c.args = Some(Arc::new(model));
    assert_eq!(option_count(&c, &details), Some(2), "`two hotels`");
    let second = fill_arguments(&c, &details);
    assert_eq!(second.arguments["hotel_id"], json!("$var1.result.1.hotel_id$"));
    push(&mut c, &details, second, json!({"description": "b"}));
    assert_eq!(
        fill_arguments(&c, &details).arguments["hotel_id"],
        json!("$var1.result.1.hotel_id$"),
        "two options, two calls: a third repeats"
    );
    // A request that compares and names no count: as many as the list holds.
    let mut all = c.clone();
    all.request = "Compare the hotels in Lisbon and describe each.".into();
    all.values = RequestValues::extract(&all.request, day);
    assert_eq!(fill_arguments(&all, &details).arguments["hotel_id"], json!("$var1.result.2.hotel_id$"));
    let f = fill_arguments(&all, &details);
    push(&mut all, &details, f, json!({"description": "c"}));
    assert_eq!(
        fill_arguments(&all, &details).arguments["hotel_id"],
        json!("$var1.result.2.hotel_id$"),
        "the list holds no fourth"
    );
}

/// Interleaved options: recorded runs called the payment API after each hotel's details call,
/// with the id the newest details call returned. The second payment call reads the second
/// details call, not the first one's output again.
#[test]
fn a_call_per_option_reads_the_newest_producer_where_recorded_runs_did() {
    let repeat = |a: &str, b: &str| Repeat::of(&Reference::whole(a).unwrap(), &Reference::whole(b).unwrap());
    assert_eq!(repeat("$var4.hotel_id$", "$var6.hotel_id$"), Repeat::Newest);
    assert_eq!(repeat("$var2.result.0.id$", "$var2.result.1.id$"), Repeat::Next);
    assert_eq!(repeat("$var2.result.id$", "$var2.result.1.id$"), Repeat::Next, "a left-out index is the first");
    assert_eq!(repeat("$var1.lat$", "$var1.lat$"), Repeat::Same);
    assert_eq!(repeat("$var1.lat$", "$var1.lon$"), Repeat::Other);
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let mut model = crate::fill::learned::ArgModel::default();
    for req in [
        "Find two hotels in Rome and their details and payment methods.",
        "Check 2 hotels in Oslo: details and how to pay.",
        "Two hotels in Bergen, please: details, then payment.",
    ] {
        let a = |v: Value| v.as_object().cloned().unwrap();
        let calls = [
            ("h/search", a(json!({"city": "x"}))),
            ("h/details", a(json!({"hotel_id": "$var1.result.0.hotel_id$"}))),
            ("h/pay", a(json!({"hotel_id": "$var2.hotel_id$"}))),
            ("h/details", a(json!({"hotel_id": "$var1.result.1.hotel_id$"}))),
            ("h/pay", a(json!({"hotel_id": "$var4.hotel_id$"}))),
        ];
        model.learn(req, calls.iter().map(|(api, m)| (*api, m)), day);
    }
    assert_eq!(model.repeat_of("h/pay", "hotel_id"), Some(Repeat::Newest));
    assert_eq!(model.repeat_of("h/details", "hotel_id"), Some(Repeat::Next));
    let (search, details, pay) = (
        api("h/search", vec![p("city", "string", true)]),
        api("h/details", vec![p("hotel_id", "string", true)]),
        api("h/pay", vec![p("hotel_id", "string", true)]),
    );
    let mut c = ctx("Find two hotels in Lisbon with their details and payment options.");
    c.args = Some(Arc::new(model));
    let call = |c: &mut Context, a: &Arc<ApiView>, response: Value| -> Value {
        let f = fill_arguments(c, a);
        let sent = f.arguments.get("hotel_id").cloned().unwrap_or(Value::Null);
        made(c, a, f, response);
        sent
    };
    call(&mut c, &search, json!({"result": [{"hotel_id": 11}, {"hotel_id": 12}]}));
    assert_eq!(call(&mut c, &details, json!({"hotel_id": 11, "name": "A"})), json!("$var1.result.hotel_id$"));
    assert_eq!(call(&mut c, &pay, json!({"cards": ["visa"]})), json!("$var2.hotel_id$"));
    assert_eq!(call(&mut c, &details, json!({"hotel_id": 12, "name": "B"})), json!("$var1.result.1.hotel_id$"));
    assert_eq!(fill_arguments(&c, &pay).arguments["hotel_id"], json!("$var4.hotel_id$"), "the newest details call");
}

/// A replayed lookup again, whose every parameter read where the first one read (the arrival
/// hall a concert-goer's first map search took from the ticket): sending the same search twice
/// finds nothing new, so a replay fills it as a first call — the venue the request names that no
/// call took yet. The search's own fill (not a replay) keeps reading where the first one read.
#[test]
fn a_replayed_call_again_that_would_repeat_the_same_arguments_takes_what_no_call_took() {
    let tickets = api("t/tickets", vec![p("event", "string", true)]);
    let map = api("t/map", vec![p("query", "string", true)]);
    let mut c = ctx("Get my tickets for the Orchard Festival and a route to Harbour Hall.");
    let push = |c: &mut Context, a: &Arc<ApiView>, arguments, sources, response: Value| {
        made(c, a, Filled { arguments, sources, ..Filled::default() }, response)
    };
    let event = json!({"event": "Orchard Festival"}).as_object().cloned().unwrap();
    let said = [("event".to_string(), ArgSource::Request { kind: "name".into() })].into_iter().collect();
    push(&mut c, &tickets, event, said, json!({"entrance": {"hall": "North Arrivals"}}));
    // The first map search, replayed: it read the ticket's hall.
    let read = ArgSource::Output { label: "var1".into(), path: "entrance.hall".into() };
    let args = json!({"query": "$var1.entrance.hall$"}).as_object().cloned().unwrap();
    push(&mut c, &map, args, [("query".to_string(), read)].into_iter().collect(), json!({"place": "n1"}));
    assert_eq!(fill_arguments(&c, &map).arguments["query"], json!("$var1.entrance.hall$"));
    let again = fill_distinct(&c, &map);
    assert_eq!(again.arguments["query"], json!("Harbour Hall"), "{again:?}");
}

/// `a` called with `f`'s arguments, answering `response`: the next step of `c`'s path.
fn made(c: &mut Context, a: &Arc<ApiView>, f: Filled, response: Value) {
    let label = format!("var{}", c.path.len() + 1);
    c.path.push(Step {
        api: a.clone(),
        label,
        arguments: f.arguments,
        sources: f.sources,
        observation: String::new(),
        response: response.into(),
        repeat: 0,
    });
}

/// One date said: a venue's optional end date is not made up (the booking is for that day); a
/// required one is the day after.
#[test]
fn one_date_leaves_an_optional_end_unsent_and_a_required_end_the_next_day() {
    let c = ctx("Reserve the community hall on March 3, 2025 for the choir.");
    let optional = api("venue/reserve", vec![p("start_date", "string", true), p("end_date", "string", false)]);
    let f = fill_arguments(&c, &optional);
    assert_eq!(f.arguments["start_date"], json!("2025-03-03"));
    assert!(!f.arguments.contains_key("end_date"), "{:?}", f.arguments);
    let required = api("venue/reserve", vec![p("start_date", "string", true), p("end_date", "string", true)]);
    let f = fill_arguments(&c, &required);
    assert_eq!(f.arguments["end_date"], json!("2025-03-04"));
    let two = ctx("Reserve the community hall from March 3, 2025 to March 5, 2025.");
    assert_eq!(fill_arguments(&two, &optional).arguments["end_date"], json!("2025-03-05"));
}

/// A trade fair's dates, and the crew's own said from them: the booth is rented from the day
/// before the fair opens to the day after it closes.
#[test]
fn dates_said_as_spans_outwards_from_an_event_are_the_start_and_the_end() {
    let rent = api("booth/rent", vec![p("start_date", "string", true), p("end_date", "string", true)]);
    let c = ctx("The trade fair runs from May 10 to 12, 2025. Our crew sets up the booth the day before and clears it the day after.");
    let f = fill_arguments(&c, &rent);
    assert_eq!(
        (f.arguments["start_date"].as_str(), f.arguments["end_date"].as_str()),
        (Some("2025-05-09"), Some("2025-05-13"))
    );
    // Said as the fair's own dates, they are taken as said.
    let c = ctx("The trade fair runs from May 10 to 12, 2025. Rent us a booth for it.");
    let f = fill_arguments(&c, &rent);
    assert_eq!(
        (f.arguments["start_date"].as_str(), f.arguments["end_date"].as_str()),
        (Some("2025-05-10"), Some("2025-05-12"))
    );
}

/// A count of options said in a request, pointed back at, where the recorded runs repeated the
/// details call for other reasons (one more until one fits, no count said): the details API,
/// which the runs called once per element of a search's list, is called as many times as the
/// request counts, each on the next element, and the run is not done before. The top match of
/// a lookup (a name's id) is no list of options.
#[test]
fn a_count_of_options_the_request_points_back_at_is_one_call_each() {
    let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
    let mut model = crate::fill::learned::ArgModel::default();
    for req in [
        "Look through the graph search repositories and keep checking the next one until one has a licence.",
        "Check the Rust parser repositories one by one until you find one updated this year.",
        "Go down the list of compiler repositories until one has fewer than ten open issues.",
    ] {
        let search = json!({"topic": "x"});
        let details: Vec<Map<String, Value>> = (0..2)
            .map(|i| json!({"repo_id": format!("$var1.items.{i}.repo_id$")}).as_object().cloned().unwrap())
            .collect();
        let calls = std::iter::once(("code/search", search.as_object().unwrap()))
            .chain(details.iter().map(|d| ("code/issues", d)));
        model.learn(req, calls, day);
    }
    let (search, issues) =
        (api("code/search", vec![p("topic", "string", true)]), api("code/issues", vec![p("repo_id", "string", true)]));
    let mut c = ctx("List the two most-starred repositories on graph search and show their open issues.");
    c.args = Some(Arc::new(model));
    let listed = json!({"items": [{"repo_id": "r1"}, {"repo_id": "r2"}, {"repo_id": "r3"}]});
    let f = fill_arguments(&c, &search);
    made(&mut c, &search, f, listed.clone());
    let f = fill_arguments(&c, &issues);
    made(&mut c, &issues, f, json!({"open": 4}));
    assert_eq!(option_count(&c, &issues), Some(2), "`the two … their`");
    let open = |c: &Context| {
        crate::read::coverage::assess(c)
            .into_iter()
            .filter(|r| r.kind == crate::read::coverage::Kind::Options && !r.covered())
            .count()
    };
    assert_eq!(open(&c), 1, "one of two calls made: {:?}", crate::read::coverage::assess(&c));
    let second = fill_arguments(&c, &issues);
    assert_eq!(second.arguments["repo_id"], json!("$var1.items.1.repo_id$"));
    made(&mut c, &issues, second, json!({"open": 9}));
    assert_eq!(open(&c), 0);
    assert_eq!(fill_arguments(&c, &issues).arguments["repo_id"], json!("$var1.items.1.repo_id$"), "no third");
    // The same list from a lookup (calls go on after it, never end there): its first element is
    // the name's match, not one of two options.
    let mut lookup = (*search).clone();
    lookup.ends = Some(0.0);
    let mut l = Context { path: Vec::new(), ..c.clone() };
    let f = fill_arguments(&l, &lookup);
    made(&mut l, &Arc::new(lookup), f, listed);
    let f = fill_arguments(&l, &issues);
    made(&mut l, &issues, f, json!({"open": 4}));
    assert_eq!(option_count(&l, &issues), None);
}

/// A theme park's family ticket: the children's ages go where a parameter takes ages (joined by
/// commas, as it documents), not where it counts children; a level its description lists in
/// capitals, which no learned run ever chose, is sent where the request names it beside the
/// parameter's own word.
#[test]
fn the_childrens_ages_and_a_listed_value_named_beside_its_parameter_are_sent() {
    let doc = |name: &str, ty: &str, description: &str| toolgraph_schema::ParamDoc {
        description: description.into(),
        ..p(name, ty, false)
    };
    let tickets = api(
        "park/tickets",
        vec![
            doc("children", "string", "The children's ages, e.g. `children: 0,4,12`."),
            doc("child_count", "integer", "How many children."),
            doc("guide_level", "string", "Tour depth: either BASIC, STANDARD or EXPERT."),
        ],
    );
    let c = ctx("Two day passes for me and my wife with our 4-year-old and 11-year-old sons, expert guide level.");
    let f = fill_arguments(&c, &tickets);
    assert_eq!(f.arguments.get("children"), Some(&json!("4,11")));
    assert_eq!(f.arguments.get("child_count"), None, "a count is not the ages");
    assert_eq!(f.arguments.get("guide_level"), Some(&json!("EXPERT")));
    let plain = ctx("Two day passes for me and my wife, an expert says the park is great.");
    let f = fill_arguments(&plain, &tickets);
    assert_eq!((f.arguments.get("children"), f.arguments.get("guide_level")), (None, None));
}

/// A laptop shop: a price range said in words bounds the search by its low and high ends; no
/// range said, nothing is made up for them.
#[test]
fn a_range_said_fills_the_parameters_named_for_its_ends() {
    let search = api(
        "shop/laptops",
        vec![p("minPrice", "number", false), p("price_max", "integer", false), p("ram_gb", "integer", false)],
    );
    let f = fill_arguments(&ctx("Find laptops between $500 and $800 with 16 GB of RAM."), &search);
    assert_eq!((f.arguments.get("minPrice"), f.arguments.get("price_max")), (Some(&json!(500.0)), Some(&json!(800.0))));
    let f = fill_arguments(&ctx("Find laptops with a budget from 450 to 700 euros."), &search);
    assert_eq!((f.arguments.get("minPrice"), f.arguments.get("price_max")), (Some(&json!(450.0)), Some(&json!(700.0))));
    let f = fill_arguments(&ctx("Find laptops from Lenovo with 16 GB of RAM, delivered from May 3 to May 9."), &search);
    assert_eq!((f.arguments.get("minPrice"), f.arguments.get("price_max")), (None, None));
}

/// A trail finder: a distance said in the unit its parameter is measured in goes there, not a
/// count of people; a unit the description does not measure in goes nowhere.
#[test]
fn a_number_said_in_the_unit_a_parameter_measures_in_fills_it() {
    let doc = |name: &str, description: &str| toolgraph_schema::ParamDoc {
        description: description.into(),
        ..p(name, "number", false)
    };
    let trails =
        api("outdoors/trails", vec![doc("reach", "How far from the town the trails may be, measured in miles.")]);
    let f = fill_arguments(&ctx("Find trails within 5 miles of Boulder for 2 people."), &trails);
    assert_eq!(f.arguments.get("reach"), Some(&json!(5.0)));
    let f = fill_arguments(&ctx("Find trails within 8 kilometers of Boulder."), &trails);
    assert_eq!(f.arguments.get("reach"), None, "kilometers are not what it measures in");
}
