//! Ingest at ToolBench scale. The corpus is GENERATED (the full ToolBench set is not reachable
//! here): ToolBench-format DFSDT answer files over the real RapidAPI tool docs of
//! ../shared/data/toolenv/tools.jsonl.gz — G1-like (one tool), G2-like (tools of one category) and
//! G3-like (any tools) chains of 1–6 calls, some attempts failing (code 12), 8% given up.
//!
//! cargo bench --bench ingest_scale -- [--trajectories N] [--stores embedded,falkordb,neo4j] [--keep DIR]
//!
//! Prints, per store: tool-doc ingest time, then trajectories/s for the generated corpus.

use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;
use toolgraph_engine::GraphStore;
use toolgraph_ingest::{catalog, ingest, Inputs, NoProgress};
use toolgraph_schema::{toolbench_function_name, toolbench_standardize, ApiDoc};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn data() -> PathBuf {
    std::env::var_os("TOOLGRAPH_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
}

fn schema(doc: &ApiDoc) -> serde_json::Value {
    let props: serde_json::Map<String, serde_json::Value> =
        doc.params.iter().map(|p| (p.name.clone(), json!({"type": "string", "description": p.description}))).collect();
    json!({
        "name": toolbench_function_name(&doc.tool, &doc.api),
        "description": format!("This is the subfunction for tool \"{}\", you can use this tool.The description of this function is: \"{}\"",
            toolbench_standardize(&doc.tool), doc.description.chars().take(120).collect::<String>()),
        "parameters": {"type": "object", "properties": props,
            "required": doc.params.iter().filter(|p| p.required).map(|p| p.name.clone()).collect::<Vec<_>>(), "optional": []}
    })
}

/// Write `n` generated answer files; returns (files, path calls, attempts).
fn generate(dir: &Path, n: usize, docs: &[ApiDoc]) -> (usize, usize, usize) {
    let mut by_tool: BTreeMap<String, Vec<&ApiDoc>> = BTreeMap::new();
    for d in docs {
        by_tool.entry(d.tool_id()).or_default().push(d);
    }
    let tools: Vec<&Vec<&ApiDoc>> = by_tool.values().filter(|v| v.len() >= 2).collect();
    let mut by_cat: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in tools.iter().enumerate() {
        by_cat.entry(t[0].category.as_str()).or_default().push(i);
    }
    let cats: Vec<&Vec<usize>> = by_cat.values().collect();
    let mut rng = Rng(0x2545F4914F6CDD1D);
    let (mut calls_total, mut attempts_total) = (0, 0);
    for i in 0..n {
        let mut offered: Vec<&ApiDoc> = Vec::new();
        match i % 3 {
            0 => offered.extend(tools[rng.below(tools.len())].iter().take(10)),
            1 => {
                let cat = cats[rng.below(cats.len())];
                for _ in 0..3 {
                    offered.extend(tools[cat[rng.below(cat.len())]].iter().take(4));
                }
            }
            _ => {
                for _ in 0..3 {
                    offered.extend(tools[rng.below(tools.len())].iter().take(4));
                }
            }
        }
        let len = [1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 6][rng.below(12)];
        let gave_up = rng.below(100) < 8;
        let mut messages = vec![
            json!({"role": "system", "content": "You are AutoGPT (generated benchmark corpus)."}),
            json!({"role": "user", "content": format!("generated request {i}")}),
        ];
        let mut chain_nodes: Vec<serde_json::Value> = Vec::new();
        for step in 0..len {
            let doc = offered[rng.below(offered.len())];
            let name = toolbench_function_name(&doc.tool, &doc.api);
            if rng.below(10) == 0 {
                let bad = offered[rng.below(offered.len())];
                chain_nodes.push(json!({"node_type": "Action", "description": toolbench_function_name(&bad.tool, &bad.api), "children": [
                    {"node_type": "Action Input", "description": "{}", "observation_code": 12,
                     "observation": "{\"error\": \"request invalid, data error. status_code=500\", \"response\": \"\"}", "children": []}]}));
                attempts_total += 1;
            }
            let args = format!("{{\"q\": \"{i}-{step}\"}}");
            messages.push(
                json!({"role": "assistant", "content": null, "function_call": {"name": name, "arguments": args}}),
            );
            messages.push(json!({"role": "function", "name": name, "content": format!("{{\"error\": \"\", \"response\": \"result {step}\"}}")}));
            chain_nodes.push(json!({"node_type": "Action", "description": name, "children": [
                {"node_type": "Action Input", "description": args, "observation_code": 0,
                 "observation": format!("{{\"error\": \"\", \"response\": \"result {step}\"}}"), "children": []}]}));
            calls_total += 1;
            attempts_total += 1;
        }
        let rt = if gave_up { "give_up_and_restart" } else { "give_answer" };
        messages.push(json!({"role": "assistant", "content": null,
            "function_call": {"name": "Finish", "arguments": format!("{{\"return_type\": \"{rt}\", \"final_answer\": \"generated\"}}")}}));
        // Nest the attempts the way DFSDT trees do: each step under the previous step's input.
        let mut tree = json!({"node_type": "Action Input", "description": "", "children": []});
        {
            let mut cursor = &mut tree;
            for node in chain_nodes {
                let children = cursor["children"].as_array_mut().unwrap();
                children.push(node);
                let last = children.last_mut().unwrap();
                cursor = &mut last["children"][0];
            }
        }
        let doc = json!({
            "win": !gave_up,
            "tree": {"size": len, "max_length": 12, "tree": tree},
            "answer_generation": {
                "valid_data": !gave_up, "finish_type": if gave_up { "give_up" } else { "give_answer" },
                "query": format!("generated request {i}"),
                "function": offered.iter().map(|d| schema(d)).collect::<Vec<_>>(),
                "train_messages": [messages], "final_answer": "generated", "chain": [], "query_count": len, "total_tokens": 0
            }
        });
        let f = std::fs::File::create(dir.join(format!("{i}_generated_DFS_woFilter_w2.json"))).unwrap();
        serde_json::to_writer(std::io::BufWriter::new(f), &doc).unwrap();
    }
    (n, calls_total, attempts_total)
}

/// Run `scripts/falkordb.sh CMD PORT` with the server's data in `dir`.
fn falkordb_script(cmd: &str, port: u16, dir: &Path) -> bool {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Command::new("bash")
        .arg(root.join("scripts/falkordb.sh"))
        .args([cmd, &port.to_string()])
        .env("TOOLGRAPH_FALKORDB_DATA", dir)
        .current_dir(&root)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn start_falkordb(dir: &Path) -> u16 {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    assert!(falkordb_script("start", port, dir), "falkordb did not start (run scripts/setup.sh)");
    port
}

/// Run `scripts/neo4j.sh CMD PORT` with the server's data and password in `dir`.
fn neo4j_script(cmd: &str, port: u16, dir: &Path, password: &str) -> bool {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Command::new("bash")
        .arg(root.join("scripts/neo4j.sh"))
        .args([cmd, &port.to_string()])
        .env("TOOLGRAPH_NEO4J_DATA", dir)
        .env("TOOLGRAPH_NEO4J_PASSWORD", password)
        .env("TOOLGRAPH_NEO4J_PARENT_PID", std::process::id().to_string())
        .current_dir(&root)
        .stdout(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let n: usize = arg("--trajectories").and_then(|s| s.parse().ok()).unwrap_or(126_486);
    let stores = arg("--stores").unwrap_or_else(|| "embedded,falkordb".into());
    let work = tempfile::tempdir().unwrap();
    let corpus = match arg("--keep") {
        Some(d) => PathBuf::from(d),
        None => work.path().join("answers"),
    };
    std::fs::create_dir_all(&corpus).unwrap();

    let tools_file = data().join("toolenv/tools.jsonl.gz");
    let mut cat = catalog::Catalog::default();
    let load = catalog::load_tools(&mut cat, &tools_file, 1 << 26);
    assert!(load.errors.is_empty(), "{:?}", load.errors);
    let docs: Vec<ApiDoc> = cat.apis().cloned().collect();
    let t = Instant::now();
    let (files, calls, attempts) = generate(&corpus, n, &docs);
    println!(
        "generated corpus (GENERATED, ToolBench DFSDT format over real tool docs): {files} trajectories, {calls} path calls, {attempts} attempted calls, in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let settings = toolgraph_engine::settings::load(None, &[]).unwrap();
    println!("\n| store | docs ingest s | trajectories | kept | calls kept | record errors | NEXT edges | ingest s | trajectories/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for store_name in stores.split(',') {
        let dir = work.path().join(store_name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut falkor_port = None;
        let mut neo4j_port = None;
        let neo4j_password = format!("bench-{}", std::process::id());
        let store: Arc<dyn GraphStore> = rt.block_on(async {
            let mut s = settings.store.clone();
            if store_name == "neo4j" {
                let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
                assert!(neo4j_script("start", port, &dir, &neo4j_password), "neo4j did not start (scripts/neo4j.sh)");
                neo4j_port = Some(port);
                let uri = format!("neo4j://127.0.0.1:{port}");
                let password = secrecy::SecretString::from(neo4j_password.clone());
                let store = toolgraph_engine::adapters::neo4j::connect(
                    &uri,
                    &s.neo4j_user,
                    &password,
                    &s.neo4j_database,
                    s.batch_rows,
                )
                .await
                .unwrap();
                store.setup().await.unwrap();
                return Arc::new(store) as Arc<dyn GraphStore>;
            }
            s.uri = match store_name {
                "embedded" => format!("embedded:{}", dir.join("g.redb").display()),
                "falkordb" => {
                    let port = start_falkordb(&dir);
                    falkor_port = Some(port);
                    format!("falkordb://127.0.0.1:{port}")
                }
                other => panic!("unknown store {other}"),
            };
            toolgraph_engine::store::open(&s).await.unwrap()
        });
        let t = Instant::now();
        rt.block_on(ingest(
            store.clone(),
            Inputs { tools: vec![tools_file.clone()], ..Default::default() },
            &settings,
            Arc::new(NoProgress),
        ))
        .unwrap();
        let docs_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let report = rt
            .block_on(ingest(
                store.clone(),
                Inputs { toolbench: vec![corpus.clone()], ..Default::default() },
                &settings,
                Arc::new(NoProgress),
            ))
            .unwrap();
        let s = t.elapsed().as_secs_f64();
        // Record errors are real: some tool names exist in several categories, and a ToolBench
        // function name cannot tell them apart (reported, not guessed).
        println!(
            "| {store_name} | {docs_s:.1} | {} | {} | {} | {} | {} | {s:.1} | {:.0} |",
            report.tally.runs_read,
            report.tally.runs_kept,
            report.tally.calls_kept,
            report.errors_total,
            report.edges.next,
            report.tally.runs_read as f64 / s
        );
        drop(store);
        if let Some(port) = falkor_port {
            falkordb_script("stop", port, &dir);
        }
        if let Some(port) = neo4j_port {
            neo4j_script("stop", port, &dir, &neo4j_password);
        }
    }
}
