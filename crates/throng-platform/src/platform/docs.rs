//! The API reference page at `/docs/`: plain HTML and JS served from the
//! binary, rendering `/openapi.json` in the browser (no third-party code).

use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("docs/index.html");
const APP_JS: &str = include_str!("docs/app.js");

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/docs", get(|| async { Redirect::permanent("/docs/") }))
        .route(
            "/docs/",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    INDEX_HTML,
                )
                    .into_response()
            }),
        )
        .route(
            "/docs/app.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    APP_JS,
                )
                    .into_response()
            }),
        )
}
