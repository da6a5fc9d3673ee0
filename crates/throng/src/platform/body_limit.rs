//! Rejects a request whose declared body is over the limit with 413 and the
//! envelope, after reading and discarding what the client sends (up to an
//! explicit bound). Answering before the upload finishes makes the server
//! close the connection mid-upload, and most clients (reqwest, curl,
//! browsers) then report a reset instead of the 413.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::error::ApiError;

/// Bytes of an oversized body read and thrown away at most; past this the
/// connection is closed without reading the rest.
pub const OVERSIZED_BODY_DRAIN_BYTES_MAX: u64 = 2 * 1024 * 1024;

pub async fn middleware(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(len) if len > limit as u64 => {
            if len <= OVERSIZED_BODY_DRAIN_BYTES_MAX {
                let mut body = req.into_body();
                while let Some(Ok(_)) = body.frame().await {}
            }
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("the request body is {len} bytes; at most {limit} are accepted"),
            )
            .into_response()
        }
        _ => next.run(req).await,
    }
}
