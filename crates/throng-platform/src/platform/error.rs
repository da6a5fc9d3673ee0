//! One error type for every handler, rendered as the one JSON envelope
//! `{"error":{"code":"...","message":"..."}}`. Server faults are logged here
//! and answered without their details.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after_s: None,
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    /// A field that parsed but is not acceptable; the message names it.
    pub fn invalid_field(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_field", message)
    }
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn too_many_requests(retry_after_s: u64, message: impl Into<String>) -> Self {
        ApiError {
            retry_after_s: Some(retry_after_s.max(1)),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", message)
        }
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            retry_after_s: Some(1),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            )
        }
    }
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; it was logged",
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "store unavailable");
                ApiError::unavailable("the database is unavailable; retry shortly")
            }
            StoreError::Internal(detail) => {
                tracing::error!(%detail, "store error");
                ApiError::internal()
            }
        }
    }
}

pub fn envelope(code: &str, message: &str) -> serde_json::Value {
    serde_json::json!({ "error": { "code": code, "message": message } })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&envelope(self.code, &self.message)).unwrap_or_default();
        let mut res = (self.status, body).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(s) = self.retry_after_s {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        res
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
