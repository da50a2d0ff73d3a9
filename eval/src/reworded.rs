//! Requests reworded by hand (`--reworded FILE`): the same request another person would write —
//! other words, another order, terse or chatty — with every place, name, date, time and count
//! kept verbatim. A line is `{"index": I, "original_sha256": "…", "reworded": "…"}`: `index` is
//! the chain's position in the chains file the folds are drawn from, `original_sha256` the first
//! 16 hex digits of the SHA-256 of its request (trimmed), so a rewording is never scored against
//! another request when the data changes. The harness runs each rewording in the fold where its
//! original is held out, against the original's gold; nothing is learned from it.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use toolgraph_ingest::complexfuncbench::Chain;
use toolgraph_ingest::IngestError;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    index: usize,
    original_sha256: String,
    reworded: String,
}

/// The first 16 hex digits of the SHA-256 of a request (trimmed).
pub fn request_hash(request: &str) -> String {
    let d = Sha256::digest(request.trim().as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The rewordings by chain index, and the lines skipped (with their line number and why).
pub fn read(path: &Path, chains: &[Chain]) -> Result<(HashMap<usize, String>, Vec<String>), IngestError> {
    let f = std::fs::File::open(path).map_err(|e| IngestError::Input(format!("{}: {e}", path.display())))?;
    let mut out = HashMap::new();
    let mut skipped = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| IngestError::Input(format!("{}:{n}: {e}", path.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = match serde_json::from_str(&line) {
            Ok(l) => l,
            Err(e) => {
                skipped.push(format!("{}:{n}: not a rewording ({e})", path.display()));
                continue;
            }
        };
        match chains.get(l.index) {
            None => {
                skipped.push(format!("{}:{n}: index {} is past the {} chains", path.display(), l.index, chains.len()))
            }
            Some(c) if request_hash(&c.input) != l.original_sha256 => skipped.push(format!(
                "{}:{n}: chain {} is not the request this line rewords (its SHA-256 differs)",
                path.display(),
                l.index
            )),
            Some(_) if l.reworded.trim().is_empty() => {
                skipped.push(format!("{}:{n}: `reworded` is empty", path.display()))
            }
            Some(_) => {
                if out.insert(l.index, l.reworded.trim().to_string()).is_some() {
                    skipped.push(format!(
                        "{}:{n}: chain {} is reworded on an earlier line too (the last is used)",
                        path.display(),
                        l.index
                    ));
                }
            }
        }
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_checked_against_the_request_they_reword() {
        let chains: Vec<Chain> = serde_json::from_value(serde_json::json!([{"input": " Rent a car at LAX. ", "output": []}, {"input": "Find a hotel.", "output": []}])).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        let ok = serde_json::json!({"index": 0, "original_sha256": request_hash("Rent a car at LAX."), "reworded": "LAX: I need a rental car."});
        let wrong =
            serde_json::json!({"index": 1, "original_sha256": request_hash("Rent a car at LAX."), "reworded": "x"});
        std::fs::write(
            &p,
            format!(
                "{ok}\n{wrong}\nnot json\n{}\n",
                serde_json::json!({"index": 9, "original_sha256": "0", "reworded": "y"})
            ),
        )
        .unwrap();
        let (by, skipped) = read(&p, &chains).unwrap();
        assert_eq!(by.len(), 1);
        assert_eq!(by[&0], "LAX: I need a rental car.");
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped[0].contains(":2: chain 1 is not the request"), "{skipped:?}");
        assert!(skipped[1].contains(":3: not a rewording"), "{skipped:?}");
        assert!(skipped[2].contains(":4: index 9 is past"), "{skipped:?}");
    }

    #[test]
    fn the_committed_set_rewords_requests_of_the_shared_data() {
        let data = std::env::var_os("TOOLGRAPH_SHARED_DATA")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
        let chains =
            toolgraph_ingest::complexfuncbench::read_chains(&data.join("complexfuncbench/data.json.gz"), 1 << 30)
                .unwrap();
        let (by, skipped) =
            read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("data/reworded/complexfuncbench-dev.jsonl"), &chains)
                .unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        assert!(by.len() >= 150, "{}", by.len());
        // Reworded, not copied: no rewording is its original.
        assert!(by.iter().all(|(i, r)| r.trim() != chains[*i].input.trim()));
    }
}
