//! Request bodies: bounded in size and in time, read here whole before any
//! handler runs.
//!
//! - A body that does not arrive within `body_timeout` of its head is
//!   answered 408 `body_timeout` and the connection closed, so a slow
//!   uploader holds an admission slot for that long at most.
//! - A body over the limit gets 413 with the envelope, after reading and
//!   discarding what the client sends (up to an explicit bound, within the
//!   same deadline). Answering before the upload finishes makes the server
//!   close the connection mid-upload, and most clients (reqwest, curl,
//!   browsers) then report a reset instead of the 413.
//!
//! Almost every body the services accept is a small JSON document, so
//! reading it here costs no more than the extractor's own read (which then
//! finds it in memory). A route that takes a large document (an election's
//! roll) is declared by its service with its own bounds ([`LargeBody`]).

use std::time::Duration;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};

use super::error::ApiError;
use crate::base::metrics::METRICS;

/// Bytes of an oversized body read and thrown away at most; past this the
/// connection is closed without reading the rest.
pub const OVERSIZED_BODY_DRAIN_BYTES_MAX: u64 = 2 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct BodyLimits {
    pub bytes_max: usize,
    /// From the request's head to the body's last byte.
    pub timeout: Duration,
    /// Routes with bounds of their own.
    pub large: std::sync::Arc<Vec<LargeBody>>,
}

/// A route whose bodies may be larger than `--body-limit-bytes` allows,
/// with the bounds that apply to it instead (the larger of each): its
/// bytes, and one deadline for the body and for the answer (in place of
/// `--body-timeout-ms` and `--request-timeout-ms` when longer).
#[derive(Clone, Copy, Debug)]
pub struct LargeBody {
    pub method: &'static str,
    /// The route's template: `{name}` matches one non-empty segment.
    pub path: &'static str,
    pub bytes_max: usize,
    pub timeout: Duration,
}

impl LargeBody {
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if !method.eq_ignore_ascii_case(self.method) {
            return false;
        }
        let mut want = self.path.split('/');
        let mut have = path.split('/');
        loop {
            match (want.next(), have.next()) {
                (None, None) => return true,
                (Some(w), Some(h)) if w.starts_with('{') && w.ends_with('}') => {
                    if h.is_empty() {
                        return false;
                    }
                }
                (Some(w), Some(h)) if w == h => {}
                _ => return false,
            }
        }
    }
}

impl BodyLimits {
    /// The bounds of a request: its route's, else the server's.
    fn of(&self, method: &str, path: &str) -> (usize, Duration) {
        match self.large.iter().find(|l| l.matches(method, path)) {
            Some(l) => (l.bytes_max.max(self.bytes_max), l.timeout.max(self.timeout)),
            None => (self.bytes_max, self.timeout),
        }
    }
}

pub async fn middleware(State(limits): State<BodyLimits>, req: Request, next: Next) -> Response {
    let (bytes_max, timeout) = limits.of(req.method().as_str(), req.uri().path());
    let limits = BodyLimits {
        bytes_max,
        timeout,
        large: limits.large.clone(),
    };
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let limit = limits.bytes_max;
    if let Some(len) = declared.filter(|len| *len > limit as u64) {
        let mut close = len > OVERSIZED_BODY_DRAIN_BYTES_MAX;
        if !close {
            let mut body = req.into_body();
            let drained = tokio::time::timeout_at(deadline, async {
                while let Some(Ok(_)) = body.frame().await {}
            });
            close = drained.await.is_err();
        }
        let res = ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is {len} bytes; at most {limit} are accepted"),
        )
        .into_response();
        return if close { closing(res) } else { res };
    }
    if req.body().size_hint().exact() == Some(0) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    match tokio::time::timeout_at(deadline, Limited::new(body, limit).collect()).await {
        Ok(Ok(collected)) => {
            let req = Request::from_parts(parts, Body::from(collected.to_bytes()));
            next.run(req).await
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is over {limit} bytes; at most {limit} are accepted"),
        )
        .into_response(),
        Ok(Err(_)) => closing(
            ApiError::bad_request(
                "bad_body",
                "the request body could not be read (the connection broke or its framing is \
                 invalid); send it again",
            )
            .into_response(),
        ),
        Err(_) => {
            METRICS.http_bodies_timed_out.inc();
            closing(
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    format!(
                        "the request body did not arrive within {} ms of its head (see \
                         --body-timeout-ms); send it at once",
                        limits.timeout.as_millis()
                    ),
                )
                .into_response(),
            )
        }
    }
}

/// The answer with `Connection: close`: the rest of the body is never read.
fn closing(mut res: Response) -> Response {
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_routes_match_their_template_only() {
        let l = LargeBody {
            method: "PUT",
            path: "/api/x/{id}/roll",
            bytes_max: 100,
            timeout: Duration::from_secs(60),
        };
        assert!(l.matches("PUT", "/api/x/7/roll"));
        assert!(!l.matches("POST", "/api/x/7/roll"));
        assert!(!l.matches("PUT", "/api/x//roll"));
        assert!(!l.matches("PUT", "/api/x/7/roll/more"));
        assert!(!l.matches("PUT", "/api/x/7"));
        let limits = BodyLimits {
            bytes_max: 10,
            timeout: Duration::from_secs(1),
            large: std::sync::Arc::new(vec![l]),
        };
        assert_eq!(
            limits.of("PUT", "/api/x/7/roll"),
            (100, Duration::from_secs(60))
        );
        assert_eq!(limits.of("PUT", "/api/x/7"), (10, Duration::from_secs(1)));
    }
}
