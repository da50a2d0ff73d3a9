//! The vector-store port on its backends: the embedded Qdrant engine always, a Qdrant server when
//! `QDRANT_URL` is set (e.g. `QDRANT_URL=http://127.0.0.1:6334`, see README). Both run the same
//! exercise; the embedded one also has to survive a reopen.

use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use toolgraph_engine::adapters::qdrant::QdrantStore;
use toolgraph_engine::adapters::qdrant_edge::EdgeVectorStore;
use toolgraph_engine::vector::{CollectionSpec, Conditions, VectorPoint, VectorStore};

fn payload(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn unit(v: [f32; 4]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

fn points() -> Vec<VectorPoint> {
    vec![
        VectorPoint {
            id: "weather/hub/forecast".into(),
            vector: unit([1.0, 0.1, 0.0, 0.0]),
            payload: payload(json!({"category": "weather", "tool": "hub", "status": "active"})),
        },
        VectorPoint {
            id: "weather/hub/geocode".into(),
            vector: unit([0.8, 0.6, 0.0, 0.0]),
            payload: payload(json!({"category": "weather", "tool": "hub", "status": "active"})),
        },
        VectorPoint {
            id: "finance/fx/convert".into(),
            vector: unit([0.0, 0.0, 1.0, 0.2]),
            payload: payload(json!({"category": "finance", "tool": "fx", "status": "active"})),
        },
        VectorPoint {
            id: "memory/1".into(),
            vector: unit([0.9, 0.0, 0.0, 0.4]),
            payload: payload(
                json!({"category": "weather", "tool": "hub", "status": "active", "apis": ["weather/hub/forecast", "finance/fx/convert"]}),
            ),
        },
    ]
}

fn ids(hits: &[toolgraph_engine::vector::VectorHit]) -> Vec<&str> {
    hits.iter().map(|h| h.id.as_str()).collect()
}

/// The same exercise for every backend; returns after leaving the collection `name` populated.
async fn exercise(store: &dyn VectorStore, name: &str) {
    let spec = CollectionSpec::new(name, 4, &["category", "tool", "status", "apis"]);
    store.ensure(&spec).await.unwrap();
    store.ensure(&spec).await.unwrap(); // idempotent
    let wrong = CollectionSpec::new(name, 8, &[]);
    let e = store.ensure(&wrong).await.unwrap_err().to_string();
    assert!(e.contains('4') && e.contains('8'), "a size mismatch names both sizes: {e}");

    store.upsert(name, points()).await.unwrap();
    assert_eq!(store.count(name).await.unwrap(), 4);

    let q = unit([1.0, 0.0, 0.0, 0.0]);
    let hits = store.search(name, &q, 2, &Conditions::default()).await.unwrap();
    assert_eq!(ids(&hits), ["weather/hub/forecast", "memory/1"]);
    assert!(hits[0].score > hits[1].score && hits[0].score <= 1.0001);
    assert_eq!(hits[0].payload["category"], "weather");

    // Ids and scores alone: the same points, in the same order (twice: the ids seen are kept).
    for _ in 0..2 {
        let bare = store.search_ids(name, &q, 3, &Conditions::default()).await.unwrap();
        let full = store.search(name, &q, 3, &Conditions::default()).await.unwrap();
        assert_eq!(bare.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ids(&full));
        assert!(bare.iter().zip(&full).all(|((_, s), h)| (s - h.score).abs() < 1e-6));
    }

    // Points read by id, with their payloads, in the order asked; a missing id is left out.
    let asked = ["memory/1".to_string(), "missing".into(), "weather/hub/geocode".into()];
    let got = store.retrieve(name, &asked).await.unwrap();
    assert_eq!(got.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["memory/1", "weather/hub/geocode"]);
    assert_eq!(got[0].1["apis"], json!(["weather/hub/forecast", "finance/fx/convert"]));
    assert!(store.retrieve(name, &[]).await.unwrap().is_empty());

    let finance = store.search(name, &q, 5, &Conditions::default().with("category", "finance")).await.unwrap();
    assert_eq!(ids(&finance), ["finance/fx/convert"]);
    let by_array = store.search(name, &q, 5, &Conditions::default().with("apis", "finance/fx/convert")).await.unwrap();
    assert_eq!(ids(&by_array), ["memory/1"]);

    // Payload updates are visible to filters; unknown ids report false.
    assert!(store.set_payload(name, "weather/hub/forecast", payload(json!({"status": "invalid"}))).await.unwrap());
    assert!(!store.set_payload(name, "nope", payload(json!({"status": "invalid"}))).await.unwrap());
    let active = store.search(name, &q, 5, &Conditions::default().with("status", "active")).await.unwrap();
    assert!(!ids(&active).contains(&"weather/hub/forecast"));

    // Replacing a point by id keeps one point.
    let mut p = points().remove(2);
    p.vector = unit([1.0, 0.0, 0.0, 0.0]);
    store.upsert(name, vec![p]).await.unwrap();
    assert_eq!(store.count(name).await.unwrap(), 4);
    assert!(
        store.search(name, &q, 1, &Conditions::default().with("category", "finance")).await.unwrap()[0].score > 0.99
    );

    // Deleting the memories that use an API.
    assert_eq!(
        store.delete_matching(name, &Conditions::default().with("apis", "weather/hub/forecast")).await.unwrap(),
        1
    );
    assert!(
        store.delete_matching(name, &Conditions::default()).await.is_err(),
        "an empty filter never deletes everything"
    );
    store.delete(name, &["weather/hub/geocode".to_string(), "missing".to_string()]).await.unwrap();
    let mut scanned: Vec<String> = store
        .scan(name, &["status"])
        .await
        .unwrap()
        .into_iter()
        .map(|(id, p)| {
            assert!(p.contains_key("status"));
            id
        })
        .collect();
    scanned.sort();
    assert_eq!(scanned, ["finance/fx/convert", "weather/hub/forecast"]);
    store.optimize(name).await.unwrap();

    // A rebuild fills a staging collection; searches see the old one until it is committed.
    let staging = store.begin_rebuild(&spec).await.unwrap();
    store.upsert(&staging, vec![points().remove(1)]).await.unwrap();
    assert_eq!(store.count(name).await.unwrap(), 2);
    store.commit_rebuild(name, &staging).await.unwrap();
    assert_eq!(ids(&store.search(name, &q, 5, &Conditions::default()).await.unwrap()), ["weather/hub/geocode"]);
    store.upsert(name, points()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_works_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let store = EdgeVectorStore::open(dir.path(), 64).unwrap();
        exercise(&store, "apis").await;
        store.optimize("apis").await.unwrap();
        store.search("apis", &unit([1.0, 0.0, 0.0, 0.0]), 4, &Conditions::default()).await.unwrap()
    };
    // A new process's view: open the folder again.
    let store: Arc<dyn VectorStore> = Arc::new(EdgeVectorStore::open(dir.path(), 64).unwrap());
    assert_eq!(store.count("apis").await.unwrap(), 4);
    let after = store.search("apis", &unit([1.0, 0.0, 0.0, 0.0]), 4, &Conditions::default()).await.unwrap();
    assert_eq!(ids(&before), ids(&after));
    let e = store.count("nothing_here").await.unwrap_err().to_string();
    assert!(e.contains("toolgraph index"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qdrant_server_store_when_available() {
    let Ok(url) = std::env::var("QDRANT_URL") else {
        eprintln!("QDRANT_URL not set: skipping the Qdrant server test");
        return;
    };
    let prefix = format!("tgtest{}", std::process::id());
    let store = QdrantStore::connect(&url, None, &prefix, 64, Duration::from_secs(10)).unwrap();
    exercise(&store, "apis").await;
}
