use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with one input record. The record is skipped; everything else goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordError {
    pub file: PathBuf,
    /// Which record: `line 12`, `query 3`, `file`, `tree`.
    pub record: String,
    /// The offending field path, when known (`calls[0].tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

impl RecordError {
    pub fn new(file: &Path, record: impl Into<String>, message: impl fmt::Display) -> Self {
        RecordError { file: file.to_path_buf(), record: record.into(), field: None, message: message.to_string() }
    }
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        let f = field.into();
        if !f.is_empty() && f != "." {
            self.field = Some(f);
        }
        self
    }
    /// From a serde error with its path, as serde_path_to_error reports it.
    pub fn from_path_error(
        file: &Path,
        record: impl Into<String>,
        e: serde_path_to_error::Error<serde_json::Error>,
    ) -> Self {
        let field = e.path().to_string();
        RecordError::new(file, record, e.inner()).with_field(field)
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.record)?;
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Errors that stop an ingest (the store failed); bad records never do.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Store(#[from] toolgraph_graph::EngineError),
    #[error("{0}")]
    Input(String),
}

impl std::error::Error for RecordError {}
