//! ComplexFuncBench chains (real recorded responses) convert into toolgraph's JSONL runs and
//! ingest into a graph that holds their chains and I/O coupling.

use crate::common::*;

#[test]
fn complexfuncbench_converts_and_ingests() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, tools, out) = convert_complexfuncbench(dir.path());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["runs"], 613);
    assert_eq!(summary["apis"], 40);

    // Every line is a valid run of the documented format, data flow references included.
    let text = std::fs::read_to_string(&runs).unwrap();
    let first: toolgraph_schema::RecordedRun = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(first.request.contains("San Diego Marriott La Jolla"));
    assert_eq!(first.calls[0].api, "Search_Car_Location");
    assert_eq!(first.calls[1].arguments["pick_up_latitude"], "$var1.coordinates.latitude$");
    assert!(first.calls[0].response.is_some());

    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    let report = dir.path().join("r.json");
    run_ok(
        bin()
            .arg("--store")
            .arg(&store)
            .arg("ingest")
            .arg("--tools")
            .arg(&tools)
            .arg("--trajectories")
            .arg(&runs)
            .arg("--report")
            .arg(&report),
    );
    let r = read_json(&report);
    assert_eq!(r["runs_read"], 613);
    assert_eq!(r["runs_kept"], 613);
    assert_eq!(r["nodes"]["apis"], 40);
    let snap = snapshot(&store, "toolgraph");
    assert_weights_sum_to_one(&snap);
    let loc = "travel/booking_com15/search_car_location".to_string();
    let rentals = "travel/booking_com15/search_car_rentals".to_string();
    assert!(snap.next[&(loc.clone(), rentals.clone())].count >= 1);
    // Search_Hotel_Destination returns dest_id, which Search_Hotels takes: a derived FEEDS edge.
    let dest = "travel/booking_com15/search_hotel_destination".to_string();
    let hotels = "travel/booking_com15/search_hotels".to_string();
    assert!(
        snap.feeds.get(&(dest, hotels)).is_some_and(|f| f.contains(&"dest_id".to_string())),
        "{:?}",
        snap.feeds.keys().take(10).collect::<Vec<_>>()
    );
    assert!(snap.apis[&loc].output_fields.iter().any(|f| f == "coordinates.latitude"));
}
