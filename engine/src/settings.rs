//! Configuration loading, layered like qdrant's: built-in defaults (`defaults.toml`, compiled in)
//! → optional config file → `TOOLGRAPH__SECTION__KEY` environment variables → CLI overrides.

use crate::{EngineError, Result};
use config::{Config, Environment, File, FileFormat};
use std::path::Path;
use toolgraph_schema::Settings;

/// The built-in defaults, also shipped as `deploy/config/toolgraph.example.toml`'s base.
pub const DEFAULTS: &str = include_str!("defaults.toml");

/// Load settings. `overrides` are `section.key = value` pairs from the command line (applied last).
pub fn load(file: Option<&Path>, overrides: &[(&str, String)]) -> Result<Settings> {
    let mut b = Config::builder().add_source(File::from_str(DEFAULTS, FileFormat::Toml));
    if let Some(path) = file {
        if !path.exists() {
            return Err(EngineError::Config(format!("config file {} does not exist", path.display())));
        }
        b = b.add_source(File::from(path).format(FileFormat::Toml));
    }
    b = b.add_source(Environment::with_prefix("TOOLGRAPH").prefix_separator("__").separator("__").try_parsing(true));
    for (k, v) in overrides {
        b = b.set_override(*k, v.as_str()).map_err(|e| EngineError::Config(format!("{k}: {e}")))?;
    }
    let cfg = b.build().map_err(|e| EngineError::Config(e.to_string()))?;
    let s: Settings = cfg.try_deserialize().map_err(|e| EngineError::Config(e.to_string()))?;
    crate::graph::weights::validate(s.weights)?;
    if s.ingest.batch_size == 0 || s.store.batch_rows == 0 {
        return Err(EngineError::Config("ingest.batch_size and store.batch_rows must be > 0".into()));
    }
    let r = &s.retrieval;
    if !(0.0..=1.0).contains(&r.lexical_weight) || !(0.0..=1.0).contains(&r.graph_prior) {
        return Err(EngineError::Config(
            "retrieval.lexical_weight and retrieval.graph_prior must be within 0..=1".into(),
        ));
    }
    if r.candidates == 0 || r.index_chunk == 0 || s.vectors.hnsw_ef == 0 {
        return Err(EngineError::Config(
            "retrieval.candidates, retrieval.index_chunk and vectors.hnsw_ef must be > 0".into(),
        ));
    }
    let run = &s.run;
    if run.top_k == 0
        || run.max_depth == 0
        || run.max_calls == 0
        || run.max_planner_calls == 0
        || run.max_failed_calls == 0
    {
        return Err(EngineError::Config(
            "run.top_k, run.max_depth, run.max_calls, run.max_failed_calls and run.max_planner_calls must be > 0"
                .into(),
        ));
    }
    for (name, v) in [
        ("run.memory_threshold", run.memory_threshold as f64),
        ("run.hint_threshold", run.hint_threshold as f64),
        ("run.min_similarity", run.min_similarity),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(EngineError::Config(format!("{name} must be within 0..=1")));
        }
    }
    if s.server.max_in_flight == 0 || s.server.max_body_bytes == 0 {
        return Err(EngineError::Config("server.max_in_flight and server.max_body_bytes must be > 0".into()));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_load() {
        let s = load(None, &[]).unwrap();
        assert!(s.store.uri.starts_with("embedded:"));
        assert!(s.weights.alpha > 0.0 && (0.0..=1.0).contains(&s.weights.beta));
        assert!(s.ingest.max_record_bytes >= 1 << 20);
        // defaults.toml and the structs' Default agree (a library user gets what the CLI gets).
        assert_eq!(s.run, toolgraph_schema::RunSettings::default());
        assert_eq!(s.exec, toolgraph_schema::ExecSettings::default());
        assert_eq!(s.server, toolgraph_schema::ServerSettings::default());
        assert_eq!(s.llm, toolgraph_schema::LlmConfig::default());
    }

    #[test]
    fn the_deploy_example_loads() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/toolgraph.example.toml");
        let s = load(Some(&example), &[]).unwrap();
        assert_eq!(s.store.uri, "neo4j://127.0.0.1:7687");
        assert_eq!(s.store.neo4j_database, "neo4j");
        assert_eq!(s.vectors.uri, "qdrant:http://127.0.0.1:6334");
        assert!(
            crate::store::open_vectors(&s.vectors).is_ok(),
            "the example's vector store URI is one the opener accepts"
        );
        // Its models build (keys absent: none is needed to list them) and keep the default.
        assert_eq!(s.llm.models["openai"].top_p, Some(1.0));
        let models = crate::plan::models::Models::from_config(&s.llm, &[]).unwrap();
        assert_eq!((models.default_name(), models.names()), ("local", vec!["local".to_string(), "openai".to_string()]));
    }

    #[test]
    fn file_and_overrides_layer_in_order() {
        let dir = std::env::temp_dir().join(format!("tg-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(&f, "[weights]\nalpha = 2.0\n[store]\nuri = \"falkordb://127.0.0.1:1\"\n").unwrap();
        let s = load(Some(&f), &[("store.uri", "embedded:/x".to_string())]).unwrap();
        assert_eq!(s.weights.alpha, 2.0);
        assert_eq!(s.store.uri, "embedded:/x");
        assert!(load(Some(&dir.join("missing.toml")), &[]).is_err());
        std::fs::write(&f, "[weights]\nbeta = 3.0\n").unwrap();
        assert!(load(Some(&f), &[]).unwrap_err().to_string().contains("beta"));
        std::fs::write(&f, "[retrieval]\nlexical_weight = 1.5\n").unwrap();
        assert!(load(Some(&f), &[]).unwrap_err().to_string().contains("lexical_weight"));
        std::fs::write(&f, "[run]\nmode = \"dfs-no-graph\"\nmax_calls = 7\n").unwrap();
        let r = load(Some(&f), &[]).unwrap().run;
        assert_eq!(
            (r.mode, r.max_calls, r.top_k),
            (toolgraph_schema::Mode::DfsNoGraph, 7, 5),
            "unset keys keep their defaults"
        );
        std::fs::write(&f, "[run]\nmemory_threshold = 2.0\n").unwrap();
        assert!(load(Some(&f), &[]).unwrap_err().to_string().contains("run.memory_threshold"));
    }
}
