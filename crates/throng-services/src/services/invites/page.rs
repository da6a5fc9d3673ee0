//! The invitation script `/invite.js` (for customers' pages), the admin
//! page `/invites/admin` (sites, snippets, pausing, results; its script
//! `/invites/admin.js`) and the demo: `/invites/demo` (a host page that
//! loads it for site 1) and the survey it opens, `/invites/demo/survey`.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

const INVITE_JS: &str = include_str!("page/invite.js");
const DEMO_HTML: &str = include_str!("page/demo.html");
const DEMO_PAGE_JS: &str = include_str!("page/demo-page.js");
const SURVEY_HTML: &str = include_str!("page/survey.html");
const ADMIN_HTML: &str = include_str!("page/admin.html");
const ADMIN_JS: &str = include_str!("page/admin.js");

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The script, loadable from any origin (`Cross-Origin-Resource-Policy`)
/// and cached for an hour: customers' pages load it on every view.
fn invite_js() -> Response {
    (
        [
            (header::CONTENT_TYPE, JS),
            (header::CACHE_CONTROL, "public, max-age=3600"),
            (
                header::HeaderName::from_static("cross-origin-resource-policy"),
                "cross-origin",
            ),
        ],
        INVITE_JS,
    )
        .into_response()
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/invite.js", get(|| async { invite_js() }))
        .route("/invites/demo", get(|| async { asset(HTML, DEMO_HTML) }))
        .route("/invites/admin", get(|| async { asset(HTML, ADMIN_HTML) }))
        .route("/invites/admin.js", get(|| async { asset(JS, ADMIN_JS) }))
        .route(
            "/invites/demo/page.js",
            get(|| async { asset(JS, DEMO_PAGE_JS) }),
        )
        .route(
            "/invites/demo/survey",
            get(|| async { asset(HTML, SURVEY_HTML) }),
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_is_small_and_has_no_dependencies() {
        let js = super::INVITE_JS;
        assert!(js.len() < 12 * 1024, "{} bytes", js.len());
        assert!(!js.contains("import "), "no modules");
        assert!(js.contains("role\", \"dialog\""));
    }
}
