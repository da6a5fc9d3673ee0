//! The booking pages: `/booking/` (book) and `/booking/manage` (see, move
//! or cancel a registration with its access code), plain HTML, CSS and JS
//! served from the binary.

use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("page/index.html");
const MANAGE_HTML: &str = include_str!("page/manage.html");
const APP_JS: &str = include_str!("page/app.js");
const MANAGE_JS: &str = include_str!("page/manage.js");
const COMMON_JS: &str = include_str!("page/common.js");
const STYLE_CSS: &str = include_str!("page/style.css");

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/booking",
            get(|| async { Redirect::permanent("/booking/") }),
        )
        .route("/booking/", page(HTML, INDEX_HTML))
        .route("/booking/manage", page(HTML, MANAGE_HTML))
        .route("/booking/app.js", page(JS, APP_JS))
        .route("/booking/manage.js", page(JS, MANAGE_JS))
        .route("/booking/common.js", page(JS, COMMON_JS))
        .route("/booking/style.css", page(CSS, STYLE_CSS))
}

fn page<S: Clone + Send + Sync + 'static>(
    content_type: &'static str,
    body: &'static str,
) -> axum::routing::MethodRouter<S> {
    get(move || async move { ([(header::CONTENT_TYPE, content_type)], body).into_response() })
}
