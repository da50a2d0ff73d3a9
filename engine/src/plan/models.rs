//! Model management: the configured LLMs (`[llm.models.NAME]`) as planners, chosen per request by
//! name, and the deterministic planner beside them. Keys are read once from the environment
//! variable or file each model names and never leave the planner (listings say only whether a
//! key is set).

use super::deterministic::DeterministicPlanner;
use super::llm::{LlmPlanner, LlmSettings};
use super::planner::Planner;
use crate::{EngineError, Result};
use secrecy::SecretString;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use toolgraph_schema::{LlmConfig, ModelSettings};

/// A configured model as `GET /v1/models` shows it (never its key).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelInfo {
    /// The name requests pick it by.
    pub name: String,
    /// The model's name at the endpoint.
    pub model: String,
    /// The endpoint (OpenAI-compatible).
    pub base_url: String,
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling, where set.
    pub top_p: Option<f64>,
    /// The most tokens a completion may generate.
    pub max_tokens: u32,
    /// How long one completion may take.
    pub timeout_ms: u64,
    /// How often a failed completion is asked again.
    pub retries: u32,
    /// What it decides: `open` (what the graph and the rules leave open), `all`, or `unsure`
    /// (only where the reading of the request is unsure: which memory, which mention).
    pub decides: String,
    /// Completions one run may ask of it (0: no limit).
    pub max_calls_per_run: u32,
    /// Whether requests that name no model get it.
    pub default: bool,
    /// Whether an API key was found for it.
    pub key_set: bool,
}

/// The planners a deployment offers.
pub struct Models {
    default: String,
    llms: BTreeMap<String, (ModelInfo, Arc<LlmPlanner>)>,
    deterministic: Arc<DeterministicPlanner>,
}

/// The key a model names: its environment variable, else its file (trimmed); `None` when neither.
fn key_of(m: &ModelSettings) -> Result<Option<SecretString>> {
    if !m.api_key_env.is_empty() {
        if let Ok(k) = std::env::var(&m.api_key_env) {
            if !k.trim().is_empty() {
                return Ok(Some(SecretString::from(k.trim().to_string())));
            }
        }
    }
    if !m.api_key_file.is_empty() {
        let k = std::fs::read_to_string(&m.api_key_file)
            .map_err(|e| EngineError::Config(format!("cannot read the API key file {}: {e}", m.api_key_file)))?;
        if !k.trim().is_empty() {
            return Ok(Some(SecretString::from(k.trim().to_string())));
        }
    }
    Ok(None)
}

impl Models {
    /// Build every configured model (URLs checked, keys read); `categories` are the graph's tool
    /// categories the LLM decomposition may name.
    pub fn from_config(cfg: &LlmConfig, categories: &[String]) -> Result<Self> {
        let mut llms = BTreeMap::new();
        for (name, m) in &cfg.models {
            if name.is_empty()
                || name.len() > 64
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(EngineError::Config(format!(
                    "llm.models: `{name}` is not a valid model name (1-64 of a-z 0-9 - _ .)"
                )));
            }
            if let Some(p) = m.top_p {
                if !(0.0..=1.0).contains(&p) {
                    return Err(EngineError::Config(format!("llm.models.{name}.top_p must be within 0..=1")));
                }
            }
            if !(0.0..=2.0).contains(&m.temperature) || m.max_tokens == 0 {
                return Err(EngineError::Config(format!(
                    "llm.models.{name}: temperature must be within 0..=2 and max_tokens > 0"
                )));
            }
            if let Err(e) = super::llm::Decides::parse(&m.decides) {
                return Err(EngineError::Config(format!("llm.models.{name}.decides: {e}")));
            }
            let key = key_of(m)?;
            let info = ModelInfo {
                name: name.clone(),
                model: m.model.clone(),
                base_url: m.base_url.clone(),
                temperature: m.temperature,
                top_p: m.top_p,
                max_tokens: m.max_tokens,
                timeout_ms: m.timeout_ms,
                retries: m.retries,
                decides: super::llm::Decides::parse(&m.decides).unwrap_or_default().as_str().to_string(),
                max_calls_per_run: m.max_calls_per_run,
                default: *name == cfg.default,
                key_set: key.is_some(),
            };
            let planner = LlmPlanner::new(LlmSettings::of(name, m), key)
                .map_err(|e| EngineError::Config(format!("llm.models.{name}: {e}")))?
                .with_categories(categories.to_vec());
            llms.insert(name.clone(), (info, Arc::new(planner)));
        }
        if !cfg.default.is_empty() && !llms.contains_key(&cfg.default) {
            return Err(EngineError::Config(format!(
                "llm.default = `{}` is not one of the configured models ({})",
                cfg.default,
                llms.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(Models { default: cfg.default.clone(), llms, deterministic: Arc::new(DeterministicPlanner::default()) })
    }

    /// One ad-hoc model (CLI `--llm-url`), which is also the default.
    pub fn single(name: &str, planner: LlmPlanner) -> Self {
        let s = planner.settings().clone();
        let info = ModelInfo {
            name: name.into(),
            model: s.model.clone(),
            base_url: s.base_url.clone(),
            temperature: s.temperature,
            top_p: s.top_p,
            max_tokens: s.max_tokens,
            timeout_ms: s.timeout_ms,
            retries: s.retries,
            decides: s.decides.as_str().to_string(),
            max_calls_per_run: s.max_calls_per_run,
            default: true,
            key_set: false,
        };
        let mut llms = BTreeMap::new();
        llms.insert(name.to_string(), (info, Arc::new(planner)));
        Models { default: name.into(), llms, deterministic: Arc::new(DeterministicPlanner::default()) }
    }

    /// The planner for `planner` (`deterministic` or `llm`) and `model` (a configured name; the
    /// default when `None`). An unknown name is an error listing the known ones.
    pub fn planner(&self, planner: &str, model: Option<&str>) -> std::result::Result<Arc<dyn Planner>, String> {
        match planner.parse::<toolgraph_schema::PlannerKind>()? {
            toolgraph_schema::PlannerKind::Deterministic => {
                if model.is_some() {
                    return Err("`model` applies to the llm planner only".into());
                }
                Ok(self.deterministic.clone())
            }
            toolgraph_schema::PlannerKind::Llm => {
                let name = model.unwrap_or(&self.default);
                self.llms
                    .get(name)
                    .map(|(_, p)| p.clone() as Arc<dyn Planner>)
                    .ok_or_else(|| format!("no model `{name}`; configured: {}", self.names().join(", ")))
            }
        }
    }

    /// The configured model `model` (the default when `None`) as the OpenAI-compatible planner it
    /// is, for callers that ask it directly (the evaluation's `llm-direct` baseline).
    pub fn llm(&self, model: Option<&str>) -> Option<Arc<LlmPlanner>> {
        self.llms.get(model.unwrap_or(&self.default)).map(|(_, p)| p.clone())
    }

    /// The models' names.
    pub fn names(&self) -> Vec<String> {
        self.llms.keys().cloned().collect()
    }

    /// The models, as `models` lists them.
    pub fn list(&self) -> Vec<ModelInfo> {
        self.llms.values().map(|(i, _)| i.clone()).collect()
    }

    /// The name of the default model.
    pub fn default_name(&self) -> &str {
        &self.default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_chosen_by_name_and_never_show_keys() {
        let mut cfg = LlmConfig::default();
        let var = format!("TG_TEST_KEY_{}", std::process::id());
        std::env::set_var(&var, "sk-very-secret");
        cfg.models.insert(
            "big".into(),
            ModelSettings {
                model: "gpt-x".into(),
                api_key_env: var.clone(),
                top_p: Some(0.9),
                ..ModelSettings::default()
            },
        );
        let m = Models::from_config(&cfg, &[]).unwrap();
        assert_eq!(m.names(), vec!["big".to_string(), "local".to_string()]);
        assert_eq!(m.planner("llm", None).unwrap().name(), "llm");
        assert!(m.planner("llm", Some("nope")).err().unwrap().contains("configured: big, local"));
        assert_eq!(m.planner("deterministic", None).unwrap().name(), "deterministic");
        let listed = serde_json::to_string(&m.list()).unwrap();
        assert!(listed.contains("\"key_set\":true") && !listed.contains("sk-very-secret"), "{listed}");
        cfg.default = "missing".into();
        assert!(Models::from_config(&cfg, &[]).err().unwrap().to_string().contains("not one of the configured models"));
        cfg.default = "local".into();
        cfg.models.get_mut("big").unwrap().decides = "most".into();
        assert!(Models::from_config(&cfg, &[])
            .err()
            .unwrap()
            .to_string()
            .contains("llm.models.big.decides: `most` is not one of open, all, unsure"));
        cfg.models.get_mut("big").unwrap().decides = "all".into();
        assert!(serde_json::to_string(&Models::from_config(&cfg, &[]).unwrap().list())
            .unwrap()
            .contains("\"decides\":\"all\""));
        cfg.models.get_mut("big").unwrap().top_p = Some(1.5);
        assert!(Models::from_config(&cfg, &[]).err().unwrap().to_string().contains("top_p"));
    }
}
