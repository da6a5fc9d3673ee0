//! The embeddable widget (`/widget/comments.js`) and its demo page
//! (`/comments/`, its controls in `/comments/demo.js`), plain HTML and JS served from the binary.
//!
//! Embed: `<script src="https://HOST/widget/comments.js" data-course="123"></script>`;
//! optional `data-token` (a bearer token the host page made for its signed-in
//! user), `data-rating-type` (`Course`), `data-page-size` (1..20). The host
//! may also call `window.throngComments.setToken(t)` later.

use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("page/index.html");
const WIDGET_JS: &str = include_str!("page/comments.js");
const DEMO_JS: &str = include_str!("page/demo.js");

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/comments",
            get(|| async { Redirect::permanent("/comments/") }),
        )
        .route(
            "/comments/",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    INDEX_HTML,
                )
                    .into_response()
            }),
        )
        .route(
            "/comments/demo.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    DEMO_JS,
                )
                    .into_response()
            }),
        )
        .route(
            "/widget/comments.js",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                        (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                        (header::CACHE_CONTROL, "public, max-age=300"),
                    ],
                    WIDGET_JS,
                )
                    .into_response()
            }),
        )
}
