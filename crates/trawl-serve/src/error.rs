//! [`ApiError`]: every error the service answers, as a status and a JSON body
//! `{"error": {"code": "...", "message": "..."}}`.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use trawl::ErrorKind;

/// An error answered to a request.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code (`invalid_input`, `not_found`, `unauthorized`, ...).
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// Seconds a client should wait before retrying (`429`, `503`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error of `status` and `code`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// `400 invalid_input`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }

    /// `404 not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// `413 too_large`.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// `429 overloaded` with a `Retry-After`.
    pub fn overloaded(message: impl Into<String>, retry_after: u64) -> Self {
        Self {
            retry_after: Some(retry_after.max(1)),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "overloaded", message)
        }
    }

    /// `503 unavailable` with a `Retry-After` (an index still opening, a server shutting down).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            retry_after: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
        }
    }

    /// `500 internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The answer to a library error: its kind decides the status (a caller's mistake `400`,
    /// a damaged index or a failing device `500`, with the library's message).
    pub fn from_kind(kind: ErrorKind, message: String) -> Self {
        match kind {
            ErrorKind::InvalidInput => Self::invalid(message),
            ErrorKind::NotFound => Self::not_found(message),
            ErrorKind::Cancelled => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "cancelled", message)
            }
            ErrorKind::Corrupt => Self::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt", message),
            ErrorKind::Storage => Self::new(StatusCode::INTERNAL_SERVER_ERROR, "storage", message),
            ErrorKind::Internal => Self::internal(message),
        }
    }
}

impl From<trawl::kinds::Error> for ApiError {
    fn from(e: trawl::kinds::Error) -> Self {
        Self::from_kind(e.kind(), e.to_string())
    }
}

impl From<trawl::kinds::graph::updates::live::LiveError> for ApiError {
    fn from(e: trawl::kinds::graph::updates::live::LiveError) -> Self {
        Self::from_kind(e.kind(), e.to_string())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": {"code": self.code, "message": self.message}
        });
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut().insert("retry-after", HeaderValue::from(s));
        }
        r
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;
