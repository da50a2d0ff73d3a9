//! The one error contract: every error body is `{"message", "code", "type"}`; 429 and 503 carry
//! `Retry-After`. Messages never hold secrets (API keys are not echoed, URLs lose their queries).

use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, OptionalFromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable machine-readable code (`invalid_request`, `not_found`, `rate_limited`, …).
    pub code: &'static str,
    pub message: String,
    pub retry_after_s: Option<u64>,
}

/// Every error answer's body.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// What went wrong, for a person (never a secret or an internal address).
    message: String,
    /// Stable, machine-readable (`invalid_request`, `not_found`, `rate_limited`, …).
    code: String,
    /// The error class: who has to act (`invalid_request_error`, `authentication_error`, …).
    #[serde(rename = "type")]
    kind: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), retry_after_s: None }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
    pub fn unavailable(code: &'static str, message: impl Into<String>, retry_after_s: u64) -> Self {
        ApiError { retry_after_s: Some(retry_after_s), ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message) }
    }
    pub fn with_retry_after(mut self, s: u64) -> Self {
        self.retry_after_s = Some(s);
        self
    }
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = code;
        self
    }

    /// The contract's body (also what a stream's `error` event carries).
    pub fn body(&self) -> serde_json::Value {
        serde_json::to_value(self.error_body()).unwrap_or_default()
    }

    /// The contract's body of this error.
    pub fn error_body(&self) -> ErrorBody {
        ErrorBody { message: self.message.clone(), code: self.code.into(), kind: self.kind().into() }
    }

    /// The error class (`type`): who has to act.
    pub fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            409 => "conflict_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 => "overloaded_error",
            504 => "timeout_error",
            s if s < 500 => "invalid_request_error",
            _ => "api_error",
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut r =
            (self.status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response();
        if let Some(s) = self.retry_after_s {
            if let Ok(v) = HeaderValue::from_str(&s.max(1).to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        r
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        "the request body is larger than server.max_body_bytes",
    )
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => ApiError::invalid(r.body_text()),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ),
            _ => ApiError::invalid(format!("invalid JSON body: {}", r.body_text())),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::invalid(format!("invalid query string: {}", r.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::invalid(format!("invalid path: {}", r.body_text()))
    }
}

/// A short id that ties an error a client sees to the log line holding its details.
pub fn reference() -> String {
    crate::state::random_id("ref", 6)
}

impl From<toolgraph_engine::EngineError> for ApiError {
    /// Bad input, unsupported requests and missing things are the caller's to read. A backend's
    /// failure (the graph store, the LLM, an embedder) says only which backend failed and a
    /// reference: its details — URLs, response bodies, library messages — go to the log.
    fn from(e: toolgraph_engine::EngineError) -> Self {
        use toolgraph_engine::{EngineError, ErrorClass};
        match (&e, e.class()) {
            (EngineError::NotFound(m), _) => ApiError::not_found(m.clone()),
            (EngineError::Busy(m), _) => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "busy", m.clone()).with_retry_after(1)
            }
            (EngineError::Unsupported { .. }, _) => ApiError::invalid(e.to_string()),
            (_, ErrorClass::BadInput) => ApiError::invalid(e.to_string()),
            (_, class) => {
                let what = match &e {
                    EngineError::Service { service: "llm", .. } => "the LLM".to_string(),
                    EngineError::Service { service, .. } => format!("the {service} service"),
                    EngineError::Store { backend, .. } => format!("the {backend} store"),
                    _ => "a backend".to_string(),
                };
                let r = reference();
                if class == ErrorClass::Transient {
                    tracing::warn!(reference = %r, error = %e, "a backend is unavailable");
                    ApiError::unavailable(
                        "backend_unavailable",
                        format!("{what} is unavailable; retry shortly (reference {r} in the daemon's log)"),
                        1,
                    )
                } else {
                    tracing::error!(reference = %r, error = %e, "a backend failed");
                    ApiError::internal(format!("{what} failed (reference {r} in the daemon's log)"))
                }
            }
        }
    }
}

impl From<crate::state::StateError> for ApiError {
    fn from(e: crate::state::StateError) -> Self {
        tracing::error!(error = %e, "state store");
        ApiError::unavailable("state_unavailable", e.0, 1)
    }
}

/// `Json` whose rejections follow the error contract.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let axum::Json(v) = <axum::Json<T> as FromRequest<S>>::from_request(req, state).await?;
        Ok(ApiJson(v))
    }
}

/// An optional JSON body (none without a JSON content type) whose rejections follow the error
/// contract: a malformed one is a 400 like any other body.
impl<S: Send + Sync, T: DeserializeOwned> OptionalFromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        let v = <axum::Json<T> as OptionalFromRequest<S>>::from_request(req, state).await?;
        Ok(v.map(|axum::Json(v)| ApiJson(v)))
    }
}
