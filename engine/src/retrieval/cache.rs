//! A persistent embedding cache (redb): vectors keyed by model and text, so re-indexing embeds
//! only new or changed texts.

use crate::embed::Embedder;
use crate::{EngineError, ErrorClass, Result};
use redb::{Database, TableDefinition};
use sha2::{Digest, Sha256};
use std::path::Path;

const VECTORS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("vectors");

fn err(e: impl std::fmt::Display) -> EngineError {
    EngineError::store("embedding cache", ErrorClass::Permanent, e)
}

/// Embeddings of API texts kept on disk by text hash, so a re-index embeds only what changed.
pub struct EmbeddingCache {
    db: Database,
}

fn key(model: &str, text: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    h.finalize().into()
}

impl EmbeddingCache {
    /// Opens (or creates) the cache at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(p) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(p).map_err(err)?;
        }
        let db = Database::create(path).map_err(err)?;
        let tx = db.begin_write().map_err(err)?;
        tx.open_table(VECTORS).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(EmbeddingCache { db })
    }

    /// Vectors for `texts`, embedding (in chunks of `chunk`) only those not cached; returns the
    /// vectors in order and how many were embedded now. `progress` gets (embedded so far, to embed).
    pub async fn embed_all(
        &self,
        embedder: &dyn Embedder,
        texts: &[String],
        chunk: usize,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<(Vec<Vec<f32>>, usize)> {
        let model = embedder.model().to_string();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        {
            let tx = self.db.begin_read().map_err(err)?;
            let t = tx.open_table(VECTORS).map_err(err)?;
            for (i, text) in texts.iter().enumerate() {
                if let Some(v) = t.get(key(&model, text).as_slice()).map_err(err)? {
                    out[i] =
                        Some(v.value().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect());
                }
            }
        }
        let missing: Vec<usize> = (0..texts.len()).filter(|i| out[*i].is_none()).collect();
        let mut done = 0;
        for part in missing.chunks(chunk.max(1)) {
            let batch: Vec<String> = part.iter().map(|i| texts[*i].clone()).collect();
            let vectors = embedder.embed(batch).await?;
            let tx = self.db.begin_write().map_err(err)?;
            {
                let mut t = tx.open_table(VECTORS).map_err(err)?;
                for (i, v) in part.iter().zip(vectors) {
                    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                    t.insert(key(&model, &texts[*i]).as_slice(), bytes.as_slice()).map_err(err)?;
                    out[*i] = Some(v);
                }
            }
            tx.commit().map_err(err)?;
            done += part.len();
            progress(done, missing.len());
        }
        Ok((out.into_iter().map(|v| v.unwrap_or_default()).collect(), missing.len()))
    }
}
