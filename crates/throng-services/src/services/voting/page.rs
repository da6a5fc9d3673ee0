//! The voting pages, plain HTML, JS and CSS served from the binary:
//! `/voting/` (pick the district's ballot, choose a party and up to N of its
//! candidates, seal the choice in the page to the election's key, vote, see
//! the ballot's tracker) and `/voting/results` (turnout, then the published
//! results as bars, updated over Server-Sent Events, polling when no stream
//! is to be had), `/voting/receipt` (a tracker found on the board) and
//! `/voting/admin` (an election authority's lifecycle: definition, roll,
//! credentials, steps, log), each over the shared client
//! (`/assets/throng.js`).
//! `/voting` redirects to `/voting/`.

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("page/index.html");
const RESULTS_HTML: &str = include_str!("page/results.html");
const VOTE_JS: &str = include_str!("page/vote.js");
const RESULTS_JS: &str = include_str!("page/results.js");
const RECEIPT_HTML: &str = include_str!("page/receipt.html");
const RECEIPT_JS: &str = include_str!("page/receipt.js");
const VOTING_CSS: &str = include_str!("page/voting.css");
const ADMIN_HTML: &str = include_str!("page/admin.html");
const ADMIN_JS: &str = include_str!("page/admin.js");
/// @hpke/core, bundled (scripts/vendor-hpke): seals the ballot in the page.
const HPKE_JS: &str = include_str!("page/hpke.js");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/voting", get(|| async { Redirect::permanent("/voting/") }))
        .route("/voting/", get(|| async { asset(HTML, INDEX_HTML) }))
        .route(
            "/voting/results",
            get(|| async { asset(HTML, RESULTS_HTML) }),
        )
        .route(
            "/voting/receipt",
            get(|| async { asset(HTML, RECEIPT_HTML) }),
        )
        .route("/voting/admin", get(|| async { asset(HTML, ADMIN_HTML) }))
        .route("/voting/admin.js", get(|| async { asset(JS, ADMIN_JS) }))
        .route("/voting/vote.js", get(|| async { asset(JS, VOTE_JS) }))
        .route("/voting/hpke.js", get(|| async { asset(JS, HPKE_JS) }))
        .route(
            "/voting/receipt.js",
            get(|| async { asset(JS, RECEIPT_JS) }),
        )
        .route(
            "/voting/results.js",
            get(|| async { asset(JS, RESULTS_JS) }),
        )
        .route(
            "/voting/voting.css",
            get(|| async { asset(CSS, VOTING_CSS) }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn get(path: &str) -> (StatusCode, String, String) {
        let res = router::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = res.status();
        let ct = res
            .headers()
            .get(header::CONTENT_TYPE)
            .or_else(|| res.headers().get(header::LOCATION))
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn pages_and_assets_have_their_content_types() {
        for (path, ct) in [
            ("/voting/", HTML),
            ("/voting/results", HTML),
            ("/voting/receipt", HTML),
            ("/voting/admin", HTML),
            ("/voting/admin.js", JS),
            ("/voting/vote.js", JS),
            ("/voting/receipt.js", JS),
            ("/voting/results.js", JS),
            ("/voting/voting.css", CSS),
        ] {
            let (status, got, body) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(got, ct, "{path}");
            assert!(!body.is_empty(), "{path}");
        }
        let (status, location, _) = get("/voting").await;
        assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
        assert_eq!(location, "/voting/");
    }

    #[test]
    fn pages_load_only_their_own_assets() {
        for html in [INDEX_HTML, RESULTS_HTML, RECEIPT_HTML, ADMIN_HTML] {
            assert!(!html.contains("http://") && !html.contains("https://"));
            assert!(html.contains(r#"href="/voting/voting.css""#));
        }
        for (html, script) in [
            (INDEX_HTML, "vote.js"),
            (RESULTS_HTML, "results.js"),
            (RECEIPT_HTML, "receipt.js"),
            (ADMIN_HTML, "admin.js"),
        ] {
            let own = html
                .find(&format!(r#"src="/voting/{script}""#))
                .expect(script);
            let client = html.find(r#"src="/assets/throng.js""#).expect("client");
            assert!(client < own, "{script} runs after the client");
        }
    }
}
