//! Embedding throughput of the configured model on real API texts (RapidAPI docs) and on short
//! sentences, at several batch sizes.
//!
//! cargo bench --bench embed_throughput -- [--texts N]

use std::sync::Arc;
use std::time::Instant;
use toolgraph_engine::adapters::fastembed::FastEmbedder;
use toolgraph_engine::embed::Embedder;
use toolgraph_eval::retrieval as eval_retrieval;
use toolgraph_ingest::catalog;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--texts")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    let data = std::env::var_os("TOOLGRAPH_SHARED_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let mut cat = catalog::Catalog::default();
    catalog::load_tools(&mut cat, &data.join("toolenv/tools.jsonl.gz"), 1 << 26);
    let docs = eval_retrieval::corpus(&cat);
    let api_texts: Vec<String> = docs.iter().step_by((docs.len() / n).max(1)).take(n).map(|d| d.text.clone()).collect();
    let short: Vec<String> =
        docs.iter().step_by((docs.len() / n).max(1)).take(n).map(|d| d.id.replace(['/', '_'], " ")).collect();
    let settings = toolgraph_engine::settings::load(None, &[]).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!("| texts | max_length | batch | n | mean chars | s | sentences/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for max_length in [128usize, 256] {
        for batch in [16usize, 64] {
            let mut s = settings.embed.clone();
            s.batch_size = batch;
            s.max_length = max_length;
            let e = Arc::new(FastEmbedder::load(&s).expect("model (run scripts/setup.sh)"));
            for (name, texts) in [("api docs", &api_texts), ("short", &short)] {
                let chars = texts.iter().map(|t| t.len()).sum::<usize>() / texts.len().max(1);
                let t = Instant::now();
                rt.block_on(e.embed(texts.to_vec())).unwrap();
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "| {name} | {max_length} | {batch} | {} | {chars} | {secs:.2} | {:.0} |",
                    texts.len(),
                    texts.len() as f64 / secs
                );
            }
        }
    }
}
