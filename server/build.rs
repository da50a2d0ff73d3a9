//! Embed the web console's built assets (`console/dist`, made by `bash scripts/console.sh build`)
//! into the binary. Without a build the console's page says how to make one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" => "application/json",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let console = manifest.join("../console");
    let dist = console.join("dist");
    let mut found = Vec::new();
    if dist.join("index.html").is_file() {
        println!("cargo:rerun-if-changed={}", dist.display());
        files(&dist, &mut found);
        found.sort();
    } else {
        // Watch for a build appearing (the folder's entries, not node_modules' contents).
        println!("cargo:rerun-if-changed={}", console.join("package.json").display());
        println!("cargo:rerun-if-changed={}", console.display());
    }
    let mut code = String::from("/// The console's files: (path under dist/, content type, bytes).\npub static CONSOLE_ASSETS: &[(&str, &str, &[u8])] = &[\n");
    for f in &found {
        let rel = f.strip_prefix(&dist).unwrap().to_string_lossy().replace('\\', "/");
        let abs = f.canonicalize().unwrap();
        writeln!(code, "    ({rel:?}, {:?}, include_bytes!({:?})),", content_type(f), abs.display().to_string())
            .unwrap();
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("console_assets.rs");
    std::fs::write(out, code).unwrap();
}
