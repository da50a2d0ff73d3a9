//! The catalog of known APIs: tool docs (RapidAPI `tools.jsonl(.gz)`, ToolBench's
//! `tools/<Category>/<tool>.json` folders), the `api_list` of query files, and APIs already in the
//! store. It maps names as trajectories write them back to stable API ids.

use crate::error::RecordError;
use crate::read::{self, Line};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use toolgraph_graph::ApiUpsert;
use toolgraph_schema::{
    category_id, slug, toolbench_function_name, toolbench_standardize, ApiDoc, GraphSnapshot, ParamDoc,
    UNKNOWN_CATEGORY,
};

/// How a name resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Found(String),
    Unknown,
    /// Several APIs share the name; their ids.
    Ambiguous(Vec<String>),
}

#[derive(Default)]
pub struct Catalog {
    apis: BTreeMap<String, ApiDoc>,
    /// ToolBench function name (`<api>_for_<tool>`, standardized, last 64 chars) → ids.
    by_function: HashMap<String, BTreeSet<String>>,
    /// (slug(tool), slug(api)) → ids.
    by_tool_api: HashMap<(String, String), BTreeSet<String>>,
    /// standardized tool name → categories it is filed under.
    tool_categories: HashMap<String, BTreeSet<String>>,
    /// Tool id → (name, description), one canonical value per tool whatever source said it.
    tools: HashMap<String, (String, String)>,
    /// Tool id → its API ids.
    tool_apis: HashMap<String, BTreeSet<String>>,
    /// Category id → name.
    category_names: HashMap<String, String>,
    /// What the store already holds, to write only what changed.
    stored: HashMap<String, ApiUpsert>,
    /// Ids added or changed since the last [`Catalog::drain_changes`].
    changed: BTreeSet<String>,
}

impl Catalog {
    pub fn len(&self) -> usize {
        self.apis.len()
    }
    pub fn is_empty(&self) -> bool {
        self.apis.is_empty()
    }
    pub fn get(&self, id: &str) -> Option<&ApiDoc> {
        self.apis.get(id)
    }
    pub fn apis(&self) -> impl Iterator<Item = &ApiDoc> {
        self.apis.values()
    }

    /// Seed from what a store holds.
    pub fn from_snapshot(snap: &GraphSnapshot) -> Self {
        let mut c = Catalog::default();
        for node in snap.apis.values() {
            let tool = snap.tools.get(&node.tool);
            let category =
                snap.categories.get(&node.category).map(|c| c.name.clone()).unwrap_or_else(|| node.category.clone());
            let params: Vec<ParamDoc> = serde_json::from_str(&node.parameters).unwrap_or_default();
            let doc = ApiDoc {
                category,
                tool: tool.map(|t| t.name.clone()).unwrap_or_else(|| node.tool.clone()),
                api: node.name.clone(),
                tool_description: tool.map(|t| t.description.clone()).unwrap_or_default(),
                description: node.description.clone(),
                method: node.method.clone(),
                url: node.url.clone(),
                params,
                output_fields: node.output_fields.clone(),
            };
            c.insert(doc);
        }
        let rows: Vec<(String, ApiUpsert)> = c.apis.values().map(|d| (d.id(), c.row(d))).collect();
        c.stored = rows.into_iter().collect();
        c.changed.clear();
        c
    }

    /// Add (or merge into) an API; returns its id.
    pub fn add(&mut self, doc: ApiDoc) -> String {
        let id = doc.id();
        self.insert(doc);
        self.changed.insert(id.clone());
        id
    }

    fn insert(&mut self, doc: ApiDoc) {
        let id = doc.id();
        let tool_id = doc.tool_id();
        // Tool-level fields: the first name seen, the longest description (ties: the smaller).
        let (_, desc) = self.tools.entry(tool_id.clone()).or_insert_with(|| (doc.tool.clone(), String::new()));
        let better = doc.tool_description.len() > desc.len()
            || (doc.tool_description.len() == desc.len() && doc.tool_description < *desc);
        if better {
            *desc = doc.tool_description.clone();
            // Every API of the tool carries the tool's description: all change.
            if let Some(ids) = self.tool_apis.get(&tool_id) {
                self.changed.extend(ids.iter().cloned());
            }
        }
        self.tool_apis.entry(tool_id).or_default().insert(id.clone());
        self.category_names.entry(category_id(&doc.category)).or_insert_with(|| doc.category.clone());
        self.by_function.entry(toolbench_function_name(&doc.tool, &doc.api)).or_default().insert(id.clone());
        self.by_tool_api.entry((slug(&doc.tool), slug(&doc.api))).or_default().insert(id.clone());
        self.tool_categories.entry(toolbench_standardize(&doc.tool)).or_default().insert(doc.category.clone());
        match self.apis.get_mut(&id) {
            Some(existing) => existing.merge(&doc),
            None => {
                let mut doc = doc;
                doc.params.sort_by(|a, b| b.required.cmp(&a.required).then(a.name.cmp(&b.name)));
                doc.output_fields.sort();
                doc.output_fields.dedup();
                self.apis.insert(id, doc);
            }
        }
    }

    /// APIs added or changed since the last call whose stored form differs, as store rows.
    pub fn drain_changes(&mut self) -> Vec<ApiUpsert> {
        let ids = std::mem::take(&mut self.changed);
        let mut out = Vec::new();
        for id in ids {
            if let Some(doc) = self.apis.get(&id) {
                let row = self.row(doc);
                if self.stored.get(&id) != Some(&row) {
                    self.stored.insert(id, row.clone());
                    out.push(row);
                }
            }
        }
        out
    }

    /// Resolve a ToolBench function name, preferring APIs of `tools` (standardized tool names
    /// the trajectory had access to) when several match.
    pub fn resolve_function(&self, name: &str, tools: &BTreeSet<String>) -> Resolution {
        let Some(ids) = self.by_function.get(name) else { return Resolution::Unknown };
        narrow(ids, |id| self.apis.get(id).map(|d| tools.contains(&toolbench_standardize(&d.tool))).unwrap_or(false))
    }

    /// Resolve (tool, api[, category]) as our JSONL format writes them.
    pub fn resolve_tool_api(&self, tool: &str, api: &str, category: Option<&str>) -> Resolution {
        if let Some(cat) = category {
            let id = toolgraph_schema::api_id(cat, tool, api);
            return if self.apis.contains_key(&id) { Resolution::Found(id) } else { Resolution::Unknown };
        }
        let Some(ids) = self.by_tool_api.get(&(slug(tool), slug(api))) else { return Resolution::Unknown };
        narrow(ids, |_| false)
    }

    /// The category a standardized tool name is filed under, when exactly one.
    pub fn category_of_tool(&self, standardized_tool: &str) -> Option<String> {
        let cats = self.tool_categories.get(standardized_tool)?;
        (cats.len() == 1).then(|| cats.iter().next().cloned()).flatten()
    }
}

fn narrow(ids: &BTreeSet<String>, preferred: impl Fn(&str) -> bool) -> Resolution {
    match ids.len() {
        0 => Resolution::Unknown,
        1 => Resolution::Found(ids.iter().next().cloned().unwrap_or_default()),
        _ => {
            let pref: Vec<&String> = ids.iter().filter(|id| preferred(id)).collect();
            if pref.len() == 1 {
                Resolution::Found(pref[0].clone())
            } else {
                Resolution::Ambiguous(ids.iter().cloned().collect())
            }
        }
    }
}

impl Catalog {
    /// The store row of an API doc, with its tool's and category's canonical names.
    pub fn row(&self, doc: &ApiDoc) -> ApiUpsert {
        let tool_id = doc.tool_id();
        let cat_id = category_id(&doc.category);
        let (tool, tool_description) =
            self.tools.get(&tool_id).cloned().unwrap_or_else(|| (doc.tool.clone(), doc.tool_description.clone()));
        let category = self.category_names.get(&cat_id).cloned().unwrap_or_else(|| doc.category.clone());
        ApiUpsert { tool, tool_description, category, ..upsert_of(doc) }
    }
}

/// The store row of an API doc on its own ([`ApiUpsert::from_doc`]).
pub fn upsert_of(doc: &ApiDoc) -> ApiUpsert {
    ApiUpsert::from_doc(doc)
}

// ---- raw formats --------------------------------------------------------------------------------

#[derive(Deserialize)]
struct RawTool {
    tool_name: String,
    #[serde(default)]
    tool_description: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    api_list: Vec<RawApi>,
}

#[derive(Deserialize)]
struct RawApi {
    name: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    required_parameters: Vec<RawParam>,
    #[serde(default)]
    optional_parameters: Vec<RawParam>,
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    template_response: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct RawParam {
    name: String,
    #[serde(default, rename = "type")]
    ty: Option<Value>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    default: Option<Value>,
}

#[derive(Deserialize)]
struct RawQuery {
    #[serde(default)]
    api_list: Vec<RawQueryApi>,
}

#[derive(Deserialize)]
struct RawQueryApi {
    category_name: String,
    tool_name: String,
    api_name: String,
    #[serde(default)]
    api_description: Option<String>,
    #[serde(default)]
    required_parameters: Vec<RawParam>,
    #[serde(default)]
    optional_parameters: Vec<RawParam>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    template_response: Option<Value>,
}

fn params(required: Vec<RawParam>, optional: Vec<RawParam>) -> Vec<ParamDoc> {
    let conv = |p: RawParam, req: bool| ParamDoc {
        name: p.name,
        ty: match p.ty {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        },
        description: p.description.unwrap_or_default(),
        required: req,
        default: p.default.filter(|d| !d.is_null()),
    };
    required.into_iter().map(|p| conv(p, true)).chain(optional.into_iter().map(|p| conv(p, false))).collect()
}

pub use toolgraph_schema::output_fields;

fn api_doc_of_tool(tool: &RawTool, category: &str, a: RawApi) -> ApiDoc {
    let mut fields = Vec::new();
    if let Some(s) = a.schema.as_ref().filter(|s| s.is_object() || s.is_array()) {
        fields.extend(output_fields(s));
    }
    if let Some(t) = a.template_response.as_ref() {
        fields.extend(output_fields(t));
    }
    ApiDoc {
        category: category.to_string(),
        tool: tool.tool_name.clone(),
        api: a.name,
        tool_description: tool.tool_description.clone().unwrap_or_default(),
        description: a.description.unwrap_or_default(),
        method: a.method.unwrap_or_default(),
        url: a.url.unwrap_or_default(),
        params: params(a.required_parameters, a.optional_parameters),
        output_fields: fields,
    }
}

/// What loading a docs source did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DocsLoad {
    pub files: u64,
    pub records: u64,
    pub apis: u64,
    pub errors: Vec<RecordError>,
}

fn add_tool(c: &mut Catalog, tool: RawTool, category: &str, load: &mut DocsLoad) {
    let tool_shell = RawTool {
        tool_name: tool.tool_name,
        tool_description: tool.tool_description,
        category: None,
        api_list: vec![],
    };
    for a in tool.api_list {
        c.add(api_doc_of_tool(&tool_shell, category, a));
        load.apis += 1;
    }
}

/// Load tool docs: a `tools.jsonl(.gz)` file (one tool per line with `category`), a ToolBench
/// `tools/` folder (`<Category>/<tool>.json`), or one such `.json` file.
pub fn load_tools(c: &mut Catalog, path: &Path, max_record: u64) -> DocsLoad {
    let mut load = DocsLoad::default();
    if path.is_dir() {
        let mut files: Vec<_> = walkdir::WalkDir::new(path)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "json"))
            .map(|e| e.into_path())
            .collect();
        files.sort();
        for f in files {
            let category = f
                .parent()
                .filter(|p| p != &path)
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().replace('_', " "))
                .unwrap_or_else(|| UNKNOWN_CATEGORY.to_string());
            load_tool_file(c, &f, &category, max_record, &mut load);
        }
        return load;
    }
    let name = path.to_string_lossy();
    if name.ends_with(".json") {
        load_tool_file(c, path, UNKNOWN_CATEGORY, max_record, &mut load);
        return load;
    }
    load.files += 1;
    let lines = match read::Lines::open(path, max_record) {
        Ok(l) => l,
        Err(e) => {
            load.errors.push(RecordError::new(path, "file", format!("cannot read: {e}")));
            return load;
        }
    };
    for line in lines {
        match line {
            Err(e) => {
                load.errors.push(RecordError::new(path, "file", format!("read failed: {e}")));
                break;
            }
            Ok(Line::TooLong { number, len }) => load.errors.push(RecordError::new(
                path,
                format!("line {number}"),
                format!("record of {len} bytes is over the {max_record}-byte limit; skipped"),
            )),
            Ok(Line::Record { number, bytes }) => {
                load.records += 1;
                let de = &mut serde_json::Deserializer::from_slice(&bytes);
                match serde_path_to_error::deserialize::<_, RawTool>(de) {
                    Ok(tool) => {
                        let category = tool.category.clone().filter(|s| !s.trim().is_empty());
                        let category = category.unwrap_or_else(|| UNKNOWN_CATEGORY.to_string());
                        add_tool(c, tool, &category, &mut load);
                    }
                    Err(e) => load.errors.push(RecordError::from_path_error(path, format!("line {number}"), e)),
                }
            }
        }
    }
    load
}

fn load_tool_file(c: &mut Catalog, f: &Path, category: &str, max_record: u64, load: &mut DocsLoad) {
    load.files += 1;
    let bytes = match read::read_document(f, max_record) {
        Ok(b) => b,
        Err(e) => {
            load.errors.push(e);
            return;
        }
    };
    load.records += 1;
    let de = &mut serde_json::Deserializer::from_slice(&bytes);
    match serde_path_to_error::deserialize::<_, RawTool>(de) {
        Ok(tool) => {
            let cat = tool.category.clone().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| category.to_string());
            add_tool(c, tool, &cat, load);
        }
        Err(e) => load.errors.push(RecordError::from_path_error(f, "file", e)),
    }
}

/// Load the `api_list` of ToolBench / StableToolBench query files (a JSON array of queries).
pub fn load_queries(c: &mut Catalog, path: &Path, max_record: u64) -> DocsLoad {
    let mut load = DocsLoad { files: 1, ..Default::default() };
    let bytes = match read::read_document(path, max_record) {
        Ok(b) => b,
        Err(e) => {
            load.errors.push(e);
            return load;
        }
    };
    let items: Vec<Value> = match serde_json::from_slice(&bytes) {
        Ok(Value::Array(items)) => items,
        Ok(_) => {
            load.errors.push(RecordError::new(path, "file", "expected a JSON array of queries"));
            return load;
        }
        Err(e) => {
            load.errors.push(RecordError::new(path, "file", e));
            return load;
        }
    };
    for (i, item) in items.into_iter().enumerate() {
        load.records += 1;
        match serde_path_to_error::deserialize::<_, RawQuery>(item) {
            Ok(q) => {
                for a in q.api_list {
                    let fields = a.template_response.as_ref().map(output_fields).unwrap_or_default();
                    c.add(ApiDoc {
                        category: a.category_name,
                        tool: a.tool_name,
                        api: a.api_name,
                        tool_description: String::new(),
                        description: a.api_description.unwrap_or_default(),
                        method: a.method.unwrap_or_default(),
                        url: String::new(),
                        params: params(a.required_parameters, a.optional_parameters),
                        output_fields: fields,
                    });
                    load.apis += 1;
                }
            }
            Err(e) => {
                let field = e.path().to_string();
                load.errors.push(RecordError::new(path, format!("query {i}"), e.into_inner()).with_field(field))
            }
        }
    }
    load
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_fields_flatten_examples_and_schemas() {
        let t = serde_json::json!({"date": "str", "line_up": [{"link": "str", "name": "str", "_list_length": 2}], "loc": {"city": "str"}});
        assert_eq!(output_fields(&t), vec!["date", "line_up", "line_up.link", "line_up.name", "loc", "loc.city"]);
        let s = serde_json::json!({"type": "object", "properties": {"id": {"type": "string"}, "geo": {"type": "object", "properties": {"lat": {"type": "number"}}}}});
        assert_eq!(output_fields(&s), vec!["geo", "geo.lat", "id"]);
    }

    #[test]
    fn collisions_are_narrowed_by_the_tools_offered() {
        let mut c = Catalog::default();
        for (cat, tool) in [("Data", "Weather API"), ("Travel", "Weather-API")] {
            c.add(ApiDoc {
                category: cat.into(),
                tool: tool.into(),
                api: "forecast".into(),
                tool_description: String::new(),
                description: String::new(),
                method: "GET".into(),
                url: String::new(),
                params: vec![],
                output_fields: vec![],
            });
        }
        let none = BTreeSet::new();
        assert!(
            matches!(c.resolve_function("forecast_for_weather_api", &none), Resolution::Ambiguous(ids) if ids.len() == 2)
        );
        assert_eq!(c.resolve_function("nope_for_x", &none), Resolution::Unknown);
        assert!(
            matches!(c.resolve_tool_api("Weather API", "forecast", Some("Data")), Resolution::Found(id) if id == "data/weather_api/forecast")
        );
    }

    #[test]
    fn toolbench_tools_folders_load_with_their_category() {
        let dir = tempfile::tempdir().unwrap();
        let cat_dir = dir.path().join("tools").join("Business_Software");
        std::fs::create_dir_all(&cat_dir).unwrap();
        let tool = serde_json::json!({
            "tool_name": "Invoice Maker", "tool_description": "makes invoices", "title": "Invoice Maker",
            "api_list": [{"name": "Create Invoice", "url": "https://x/create", "method": "POST", "description": "create",
                          "required_parameters": [{"name": "customer_id", "type": "STRING", "description": "", "default": ""}],
                          "optional_parameters": [], "schema": {"type": "object", "properties": {"invoice_id": {"type": "string"}}}}]
        });
        std::fs::write(cat_dir.join("invoice_maker.json"), tool.to_string()).unwrap();
        std::fs::write(cat_dir.join("broken.json"), "{\"tool_name\": 3}").unwrap();
        let mut c = Catalog::default();
        let load = load_tools(&mut c, &dir.path().join("tools"), 1 << 20);
        assert_eq!((load.files, load.apis), (2, 1));
        assert_eq!(load.errors.len(), 1);
        assert_eq!(load.errors[0].field.as_deref(), Some("tool_name"));
        let doc = c.get("business_software/invoice_maker/create_invoice").expect("api by category folder");
        assert_eq!(doc.category, "Business Software");
        assert_eq!(doc.output_fields, vec!["invoice_id"]);
        assert!(doc.params[0].required);
        assert_eq!(
            c.resolve_function("create_invoice_for_invoice_maker", &BTreeSet::new()),
            Resolution::Found(doc.id())
        );
    }
}
