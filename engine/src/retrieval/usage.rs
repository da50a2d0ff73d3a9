//! Usage vectors: per API, the sum of the embeddings of the requests whose answered chain called
//! it (and how many), kept in the vector store's `usage` collection (the normalized mean as the
//! point's vector, the sum and count in its payload). The retriever reads them to rank APIs that
//! requests like this one used; an ingest and the engine's own answered runs add to them.

use crate::vector::{CollectionSpec, VectorPoint, VectorStore, USAGE};
use crate::Result;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The usage vectors of one vector store, mirrored in memory.
pub struct UsageVectors {
    vectors: Arc<dyn VectorStore>,
    dim: usize,
    /// By API id: (sum of request embeddings, count).
    sums: RwLock<HashMap<String, (Vec<f32>, u64)>>,
}

impl UsageVectors {
    /// Read the usage vectors `vectors` holds (the collection created when missing) for
    /// embeddings of `dim` dimensions; entries of another dimension are left out.
    pub async fn load(vectors: Arc<dyn VectorStore>, dim: usize) -> Result<UsageVectors> {
        vectors.ensure(&CollectionSpec::new(USAGE, dim, &[])).await?;
        let mut sums = HashMap::new();
        for (id, p) in vectors.scan(USAGE, &["sum", "n"]).await? {
            let sum: Vec<f32> = p
                .get("sum")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).map(|x| x as f32).collect())
                .unwrap_or_default();
            let n = p.get("n").and_then(Value::as_u64).unwrap_or(0);
            if n > 0 && sum.len() == dim {
                sums.insert(id, (sum, n));
            }
        }
        Ok(UsageVectors { vectors, dim, sums: RwLock::new(sums) })
    }

    /// Add each request's embedding to the usage vector of every API its chain called (each API
    /// once a request), in one write.
    pub async fn add(&self, chains: &[(&[String], &[f32])]) -> Result<()> {
        let mut touched: Vec<String> = Vec::new();
        let points = {
            let mut sums = self.sums.write().unwrap_or_else(|p| p.into_inner());
            for (apis, request) in chains {
                if request.len() != self.dim {
                    continue;
                }
                let mut ids: Vec<&String> = apis.iter().collect();
                ids.sort();
                ids.dedup();
                for id in ids {
                    let e = sums.entry(id.clone()).or_insert_with(|| (vec![0.0; self.dim], 0));
                    e.0.iter_mut().zip(request.iter()).for_each(|(s, x)| *s += x);
                    e.1 += 1;
                    touched.push(id.clone());
                }
            }
            touched.sort();
            touched.dedup();
            touched
                .iter()
                .filter_map(|id| {
                    let (sum, n) = sums.get(id)?;
                    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
                    let mut payload = serde_json::Map::new();
                    payload.insert("sum".into(), Value::from(sum.iter().map(|x| *x as f64).collect::<Vec<f64>>()));
                    payload.insert("n".into(), Value::from(*n));
                    Some(VectorPoint { id: id.clone(), vector: sum.iter().map(|x| x / norm).collect(), payload })
                })
                .collect::<Vec<_>>()
        };
        if points.is_empty() {
            return Ok(());
        }
        self.vectors.upsert(USAGE, points).await
    }

    /// Whether no API has a usage vector.
    pub fn is_empty(&self) -> bool {
        self.sums.read().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// The cosine of `vector` to each of `ids`' usage vectors (0 where an API has none).
    pub fn similarities<'a>(&self, ids: impl Iterator<Item = &'a str>, vector: &[f32]) -> Vec<f32> {
        let sums = self.sums.read().unwrap_or_else(|p| p.into_inner());
        let qn = vector.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
        ids.map(|id| match sums.get(id) {
            Some((sum, _)) if sum.len() == vector.len() => {
                let sn = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
                (sum.iter().zip(vector).map(|(a, b)| a * b).sum::<f32>() / (sn * qn)).max(0.0)
            }
            _ => 0.0,
        })
        .collect()
    }
}
