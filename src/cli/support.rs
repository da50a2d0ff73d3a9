//! What every command shares: the global flags and the settings they load, the store and the
//! embedder opened from them, the planner flags, argument parsers and JSON output.

use anyhow::{Context, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toolgraph_engine::{settings, store, GraphStore};
use toolgraph_schema::{Mode, PlannerKind, Settings};

/// The flags every command takes: where the settings and the graph come from.
#[derive(Args)]
pub(super) struct Global {
    /// Config file (TOML), layered over the built-in defaults and under TOOLGRAPH__* variables.
    #[arg(long, global = true, env = "TOOLGRAPH_CONFIG")]
    config: Option<PathBuf>,
    /// Graph store: embedded:PATH | neo4j://HOST:PORT | falkordb://HOST:PORT (overrides config).
    #[arg(long, global = true)]
    pub store: Option<String>,
}

/// Who decides in `ask` and `serve`.
#[derive(Args, Clone)]
pub(super) struct PlannerArgs {
    /// Who decides: the deterministic planner (default) or an OpenAI-compatible LLM.
    #[arg(long, default_value = "deterministic", value_parser = PossibleValuesParser::new(PlannerKind::names()).try_map(|p| p.parse::<PlannerKind>()))]
    pub planner: PlannerKind,
    /// For --planner llm: a model configured under [llm.models.NAME] (default: llm.default).
    #[arg(long, value_name = "NAME")]
    llm_model: Option<String>,
    /// For --planner llm: an OpenAI-compatible base URL used instead of the configured models
    /// (key from TOOLGRAPH_LLM_API_KEY or TOOLGRAPH_LLM_API_KEY_FILE).
    #[arg(long, env = "TOOLGRAPH_LLM_URL", value_name = "URL")]
    llm_url: Option<String>,
    /// With --llm-url: the model name the endpoint expects.
    #[arg(long, env = "TOOLGRAPH_LLM_MODEL", default_value = "local", value_name = "MODEL")]
    llm_endpoint_model: String,
}

pub(super) fn load_settings(cli: &Global) -> Result<Settings> {
    let mut overrides = Vec::new();
    if let Some(s) = &cli.store {
        overrides.push(("store.uri", s.clone()));
    }
    Ok(settings::load(cli.config.as_deref(), &overrides)?)
}

pub(super) async fn open_store(s: &Settings) -> Result<Arc<dyn GraphStore>> {
    store::open(&s.store).await.with_context(|| format!("opening store {}", s.store.uri))
}

pub(super) async fn load_embedder(s: &Settings) -> Result<Arc<dyn toolgraph_engine::embed::Embedder>> {
    Ok(toolgraph_engine::stack::load_embedder(&s.embed).await?)
}

/// Parses `--mode`: one of [`Mode::names`] (clap lists them in the help and in its error).
pub(super) fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(Mode::names()).try_map(|m| m.parse::<Mode>())
}

/// NAME=VALUE pairs; the value is JSON, or a plain string when it is not JSON.
pub(super) fn pairs(items: &[String], what: &str) -> Result<Vec<(String, serde_json::Value)>> {
    items
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').with_context(|| format!("{what} `{p}` is not NAME=VALUE"))?;
            Ok((k.to_string(), serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()))))
        })
        .collect()
}

/// Execution settings from the config, with `--rewrite` targets on this machine allow-listed (the
/// user pointed the calls there, e.g. at the replay sandbox).
impl PlannerArgs {
    /// The planner these flags choose.
    pub(super) fn choice(&self) -> toolgraph_engine::stack::PlannerChoice {
        toolgraph_engine::stack::PlannerChoice {
            kind: self.planner,
            model: self.llm_model.clone(),
            url: self.llm_url.clone(),
            endpoint_model: self.llm_endpoint_model.clone(),
        }
    }
}

/// `--rewrite FROM=TO` pairs.
pub(super) fn rewrites_of(items: &[String]) -> Result<Vec<(String, String)>> {
    Ok(pairs(items, "--rewrite")?
        .into_iter()
        .map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
        .collect())
}

pub(super) fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(v)?).with_context(|| format!("writing {}", path.display()))
}
