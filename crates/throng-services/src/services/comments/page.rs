//! The embeddable widget (`/widget/comments.js`), its demo page
//! (`/comments/`, its controls in `/comments/demo.js`) and the moderation
//! page (`/comments/moderate`, `/comments/moderate.js`, the bounds in
//! `/comments/limits.js`), plain HTML and JS served from the binary.
//!
//! Embed: `<script src="https://HOST/widget/comments.js" data-course="123"></script>`;
//! optional `data-token` (a bearer token the host page made for its signed-in
//! user), `data-rating-type` (`Course`), `data-page-size` (1..20). The host
//! may also call `window.throngComments.setToken(t)` later.
//!
//! The served widget is one script: the shared client, the comment bounds
//! (`COMMENTS_LIMITS`, from the constants the parsers check) and the
//! widget, in one scope (`platform::assets::embeddable`).

use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use super::model::{
    PAGE_SIZE_MAX, RATING_MAX, RATING_MIN, REASON_CHARS_MAX, REMARKS_CHARS_MAX, TITLE_CHARS_MAX,
};
use crate::platform::assets;

const INDEX_HTML: &str = include_str!("page/index.html");
const WIDGET_JS: &str = include_str!("page/comments.js");
const DEMO_JS: &str = include_str!("page/demo.js");
const MODERATE_HTML: &str = include_str!("page/moderate.html");
const MODERATE_JS: &str = include_str!("page/moderate.js");

/// The bounds the widget's forms and paging read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WidgetLimits {
    title_chars_max: usize,
    remarks_chars_max: usize,
    page_size_max: i64,
    rating_min: i64,
    rating_max: i64,
    reason_chars_max: usize,
}

const WIDGET_LIMITS: WidgetLimits = WidgetLimits {
    title_chars_max: TITLE_CHARS_MAX,
    remarks_chars_max: REMARKS_CHARS_MAX,
    page_size_max: PAGE_SIZE_MAX,
    rating_min: RATING_MIN,
    rating_max: RATING_MAX,
    reason_chars_max: REASON_CHARS_MAX,
};

fn widget_js() -> String {
    assets::embeddable(&[
        // The host page's language (or the browser's), every catalogue inside.
        &assets::i18n_embedded_js(&["comments.", "common.", "client.", "error."]),
        &assets::constants_script("COMMENTS_LIMITS", &WIDGET_LIMITS),
        WIDGET_JS,
    ])
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    // Built once per router; a clone of `Bytes` is a reference count.
    let widget = bytes::Bytes::from(widget_js());
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
            get(|| async { assets::script(DEMO_JS) }),
        )
        .route(
            "/comments/moderate",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    MODERATE_HTML,
                )
                    .into_response()
            }),
        )
        .route(
            "/comments/moderate.js",
            get(|| async { assets::script(MODERATE_JS) }),
        )
        .route(
            "/comments/limits.js",
            get(|| async {
                assets::script(assets::constants_script("COMMENTS_LIMITS", &WIDGET_LIMITS))
            }),
        )
        .route(
            "/widget/comments.js",
            get(move || {
                let body = widget.clone();
                async move {
                    (
                        [
                            (header::CONTENT_TYPE, assets::JS),
                            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                            (header::CACHE_CONTROL, "public, max-age=300"),
                        ],
                        body,
                    )
                        .into_response()
                }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widget_carries_the_client_and_the_parsers_bounds() {
        let js = widget_js();
        let limits = format!(
            "const COMMENTS_LIMITS = Object.freeze({{\"titleCharsMax\":{TITLE_CHARS_MAX},\
             \"remarksCharsMax\":{REMARKS_CHARS_MAX},\"pageSizeMax\":{PAGE_SIZE_MAX},\
             \"ratingMin\":{RATING_MIN},\"ratingMax\":{RATING_MAX},\"reasonCharsMax\":{REASON_CHARS_MAX}}});"
        );
        let at = |needle: &str| js.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(at("const Throng = ") < at(&limits));
        assert!(at(&limits) < at("window.throngComments = {"));
        assert!(
            !WIDGET_JS.contains("maxlength: \""),
            "bounds come from COMMENTS_LIMITS"
        );
    }
}
