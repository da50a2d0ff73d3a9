//! Reverse Chain looks before it calls, on the small hotel world of
//! [`super::reverse_chain_and_plans`]: a call one of whose parameters no chain of providers can
//! reach asks the user before any provider is called.

use super::reverse_chain_and_plans::{engine, names, run_settings, world};
use serde_json::Map;
use std::sync::Arc;
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::run::TraceEvent;
use toolgraph_engine::run::{RunSettings, Status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_chain_that_cannot_finish_asks_the_user_before_any_call() {
    let w = world().await;
    // No e-mail: the guest's id has a provider (Find_Guest) that needs one, which nothing gives.
    // The hotel's id could be found, but the booking could not be made with it: no provider is
    // called for the booking, and the user is asked for what the guest's provider lacks.
    let request = "Book a room at a hotel in Rome for my guest on 2024-06-01.";
    let e = engine(&w, Arc::new(DeterministicPlanner::default()), RunSettings { backward: true, ..run_settings() });
    let r = e.run(request, Map::new(), None).await.unwrap();
    let booking = r
        .trace
        .iter()
        .position(|t| matches!(t, TraceEvent::NeedsInput { api, .. } if api.ends_with("book_room")))
        .unwrap_or_else(|| panic!("the booking needs input: {:#?}", r.trace));
    let before = &r.trace[..booking];
    assert!(
        !before.iter().any(|t| matches!(t, TraceEvent::Call { .. } | TraceEvent::Insert { .. })),
        "no provider inserted or called for a booking that cannot be made: {before:#?}"
    );
    assert!(
        matches!(&r.trace[booking], TraceEvent::NeedsInput { missing, .. } if missing == &["guest_id"]),
        "{:?}",
        r.trace[booking]
    );
    let n = r.needs_input.clone().expect("the user is asked");
    assert!(n.api.ends_with("find_guest") && n.missing == ["email"], "{n:?}");
    assert!(n.message.contains("email"), "{}", n.message);
    assert!(!names(&r).contains(&"Find_Guest"), "{:?}", names(&r));
    // Given the e-mail, the same request is booked: the check refuses nothing reachable.
    let r = e
        .run("Book a room at a hotel in Rome for the guest anna@example.com on 2024-06-01.", Map::new(), None)
        .await
        .unwrap();
    assert_eq!(r.status, Status::Answered, "{:#?}", r.trace);
    assert_eq!(names(&r), ["Find_Guest", "Find_Hotel", "Book_Room"]);
}
