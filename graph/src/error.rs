use std::fmt;

/// How a caller should treat an error: retry it, fix the input, or give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The backend may succeed if asked again (connection lost, timeout, busy).
    Transient,
    /// Retrying will not help (bad query, corrupted store, missing feature).
    Permanent,
    /// The caller's input is wrong.
    BadInput,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Permanent => "permanent",
            ErrorClass::BadInput => "bad input",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{backend} store: {message}")]
    Store { backend: &'static str, class: ErrorClass, message: String },
    #[error("{0}")]
    BadInput(String),
    #[error("{backend} store does not support {what}: {hint}")]
    Unsupported { backend: &'static str, what: &'static str, hint: &'static str },
    #[error("configuration: {0}")]
    Config(String),
    /// Something asked for does not exist (a collection, a run, an API).
    #[error("{0}")]
    NotFound(String),
    /// An outside service the engine calls (the LLM endpoint).
    #[error("{service}: {message}")]
    Service { service: &'static str, class: ErrorClass, message: String },
    /// Asked while as many of its kind are running as may (a user's graph query): retry shortly.
    #[error("{0}")]
    Busy(String),
}

impl EngineError {
    pub fn store(backend: &'static str, class: ErrorClass, message: impl fmt::Display) -> Self {
        EngineError::Store { backend, class, message: message.to_string() }
    }
    pub fn service(service: &'static str, class: ErrorClass, message: impl fmt::Display) -> Self {
        EngineError::Service { service, class, message: message.to_string() }
    }
    pub fn bad_input(message: impl fmt::Display) -> Self {
        EngineError::BadInput(message.to_string())
    }
    pub fn class(&self) -> ErrorClass {
        match self {
            EngineError::Store { class, .. } | EngineError::Service { class, .. } => *class,
            EngineError::BadInput(_) => ErrorClass::BadInput,
            EngineError::Busy(_) => ErrorClass::Transient,
            EngineError::Unsupported { .. } | EngineError::Config(_) | EngineError::NotFound(_) => {
                ErrorClass::Permanent
            }
        }
    }
}

pub type Result<T> = std::result::Result<T, EngineError>;
