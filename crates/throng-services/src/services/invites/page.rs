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
    static SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(invite_js_text);
    (
        [
            (header::CONTENT_TYPE, JS),
            (header::CACHE_CONTROL, "public, max-age=3600"),
            (
                header::HeaderName::from_static("cross-origin-resource-policy"),
                "cross-origin",
            ),
        ],
        SCRIPT.as_str(),
    )
        .into_response()
}

/// The popup's default texts in every language of the catalogues
/// (`invites.popup.*`), keyed by language.
fn default_texts() -> serde_json::Value {
    let mut all = serde_json::Map::new();
    for (code, _, body) in crate::platform::assets::LANGUAGES {
        let catalogue: serde_json::Value = serde_json::from_str(body).expect("catalogue");
        let text = |field: &str| catalogue[format!("invites.popup.{field}")].clone();
        all.insert(
            (*code).to_string(),
            serde_json::json!({
                "title": text("title"),
                "body": text("body"),
                "yes": text("yes"),
                "no": text("no"),
                "close": text("close"),
            }),
        );
    }
    all.into()
}

/// The script with the default texts of every language written in.
fn invite_js_text() -> String {
    INVITE_JS.replace(
        "/*DEFAULT_TEXTS*/ { en: null }",
        &default_texts().to_string(),
    )
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
            get(|| async {
                // In the visitor's language (`/assets/i18n.js` by its hashed name).
                static PAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                    crate::platform::assets::platform_page(SURVEY_HTML)
                });
                asset(HTML, PAGE.as_str())
            }),
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

    #[test]
    fn the_default_texts_are_the_models_in_english_and_translated() {
        let texts = super::default_texts();
        let en: super::super::model::Texts =
            serde_json::from_value(texts["en"].clone()).expect("English texts");
        assert_eq!(en, super::super::model::Texts::default());
        for code in ["sk", "cs"] {
            let t: super::super::model::Texts =
                serde_json::from_value(texts[code].clone()).expect("texts");
            assert_ne!(t.title, en.title, "{code}");
        }
        let js = super::invite_js_text();
        assert!(!js.contains("/*DEFAULT_TEXTS*/"));
        assert!(js.contains("Pomôžte nám"));
        assert!(js.len() < 14 * 1024, "{} bytes", js.len());
    }
}
