//! Tool documentation: what an API is, how it is called, what it returns.

use serde::{Deserialize, Serialize};

/// One parameter of an API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParamDoc {
    pub name: String,
    /// Declared type as the docs give it (`string`, `NUMBER`, `ENUM`, ...).
    #[serde(default, rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// Everything known about one API from documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiDoc {
    pub category: String,
    pub tool: String,
    pub api: String,
    #[serde(default)]
    pub tool_description: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub params: Vec<ParamDoc>,
    /// Field names the API is known to return (flattened keys of `template_response` or an output
    /// schema), used for I/O coupling (FEEDS edges).
    #[serde(default)]
    pub output_fields: Vec<String>,
}

impl ApiDoc {
    pub fn id(&self) -> String {
        crate::ids::api_id(&self.category, &self.tool, &self.api)
    }
    pub fn tool_id(&self) -> String {
        crate::ids::tool_id(&self.category, &self.tool)
    }
    pub fn required_params(&self) -> impl Iterator<Item = &ParamDoc> {
        self.params.iter().filter(|p| p.required)
    }

    /// Merge another description of the same API into this one: fields this one lacks are taken
    /// from `other`, output fields and parameters are united. Deterministic whatever the order
    /// of sources, so re-ingesting gives the same node.
    pub fn merge(&mut self, other: &ApiDoc) {
        fn fill(a: &mut String, b: &str) {
            if a.is_empty() || (!b.is_empty() && b.len() > a.len()) {
                *a = b.to_string();
            }
        }
        fill(&mut self.tool_description, &other.tool_description);
        fill(&mut self.description, &other.description);
        if self.method.is_empty() {
            self.method = other.method.clone();
        }
        if self.url.is_empty() {
            self.url = other.url.clone();
        }
        for p in &other.params {
            if !self.params.iter().any(|q| q.name == p.name) {
                self.params.push(p.clone());
            }
        }
        self.params.sort_by(|a, b| b.required.cmp(&a.required).then(a.name.cmp(&b.name)));
        for f in &other.output_fields {
            if !self.output_fields.contains(f) {
                self.output_fields.push(f.clone());
            }
        }
        self.output_fields.sort();
    }
}
