//! The embedding model loads offline from the files scripts/setup.sh fetched, and gives
//! meaningful vectors; missing files are clear errors naming the setup command.

use std::path::PathBuf;
use toolgraph_engine::adapters::fastembed::FastEmbedder;
use toolgraph_engine::embed::{cosine, Embedder};
use toolgraph_schema::EmbedSettings;

fn settings() -> EmbedSettings {
    let assets = std::env::var("TOOLGRAPH_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.assets"));
    assert!(
        assets.join("minilm/model.onnx").exists(),
        "model missing under {}: run scripts/setup.sh",
        assets.display()
    );
    let mut s = toolgraph_engine::settings::load(None, &[]).unwrap().embed;
    s.model_dir = assets.join("minilm").display().to_string();
    s.ort_library = assets.join("ort/libonnxruntime.so").display().to_string();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_loads_offline_and_paraphrases_score_higher_than_unrelated_texts() {
    let e = tokio::task::spawn_blocking(|| FastEmbedder::load(&settings())).await.unwrap().unwrap();
    assert_eq!(e.dim(), 384);
    let texts = [
        "What will the weather be like in Paris tomorrow?",
        "Tomorrow's weather forecast for Paris",
        "Convert 100 US dollars to euros",
        "Find hotels near the Eiffel Tower",
    ];
    let v = e.embed(texts.iter().map(|s| s.to_string()).collect()).await.unwrap();
    assert_eq!(v.len(), 4);
    for x in &v {
        let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "not unit length: {norm}");
    }
    let para = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    assert!(para > 0.7, "paraphrase similarity {para}");
    assert!(para > unrelated + 0.3, "paraphrase {para} vs unrelated {unrelated}");
    // Same text, same vector; batch composition does not change a text's vector.
    let again = e.embed(vec![texts[1].to_string()]).await.unwrap();
    assert!(cosine(&again[0], &v[1]) > 0.9999);
}

#[test]
fn a_missing_model_or_runtime_names_the_setup_command() {
    let mut s = settings();
    s.model_dir = "/nonexistent/model".into();
    let e = FastEmbedder::load(&s).err().expect("must fail");
    assert!(e.to_string().contains("scripts/setup.sh") && e.to_string().contains("/nonexistent/model"), "{e}");

    let mut s = settings();
    s.ort_library = "/nonexistent/libonnxruntime.so".into();
    let e = FastEmbedder::load(&s).err().expect("must fail");
    assert!(e.to_string().contains("scripts/setup.sh") && e.to_string().contains("libonnxruntime.so"), "{e}");
}
