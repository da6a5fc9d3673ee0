//! The booking pages: `/booking/` (book) and `/booking/manage` (see, move
//! or cancel a registration with its access code), plain HTML, CSS and JS
//! served from the binary, over the shared client (`/assets/throng.js`).
//! `/booking/limits.js` gives the form the bounds `Person::validate`
//! checks, written from the same constants.

use axum::response::Redirect;
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use super::model::{
    EMAIL_CHARS_MAX, NAME_CHARS_MAX, NATIONAL_ID_CHARS_MAX, PHONE_DIGITS_MAX, PHONE_DIGITS_MIN,
};
use crate::platform::assets;

const INDEX_HTML: &str = include_str!("page/index.html");
const MANAGE_HTML: &str = include_str!("page/manage.html");
const APP_JS: &str = include_str!("page/app.js");
const MANAGE_JS: &str = include_str!("page/manage.js");
const COMMON_JS: &str = include_str!("page/common.js");
const STYLE_CSS: &str = include_str!("page/style.css");

const JS: &str = assets::JS;
const CSS: &str = assets::CSS;

/// The person's bounds and the place search's, as the pages read them
/// (`BOOKING_LIMITS`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PersonLimits {
    name_chars_max: usize,
    national_id_chars_max: usize,
    phone_digits_min: usize,
    phone_digits_max: usize,
    email_chars_max: usize,
    search_chars_max: usize,
}

const PERSON_LIMITS: PersonLimits = PersonLimits {
    name_chars_max: NAME_CHARS_MAX,
    national_id_chars_max: NATIONAL_ID_CHARS_MAX,
    phone_digits_min: PHONE_DIGITS_MIN,
    phone_digits_max: PHONE_DIGITS_MAX,
    email_chars_max: EMAIL_CHARS_MAX,
    search_chars_max: super::http::SEARCH_CHARS_MAX,
};

fn limits_js() -> String {
    assets::constants_script("BOOKING_LIMITS", &PERSON_LIMITS)
}

/// The booking pages' files (scripts, style, limits), each also under its
/// content-hashed name below `/assets/` (see `assets::Bundle`).
fn bundle() -> assets::Bundle {
    assets::Bundle::new()
        .file("/booking/app.js", JS, APP_JS)
        .file("/booking/manage.js", JS, MANAGE_JS)
        .file("/booking/common.js", JS, COMMON_JS)
        .file("/booking/limits.js", JS, limits_js())
        .file("/booking/style.css", CSS, STYLE_CSS)
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let files = bundle();
    Router::new()
        .route(
            "/booking",
            get(|| async { Redirect::permanent("/booking/") }),
        )
        .route("/booking/", assets::html_page(files.page(INDEX_HTML)))
        .route(
            "/booking/manage",
            assets::html_page(files.page(MANAGE_HTML)),
        )
        .merge(files.router())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limits_script_carries_the_parsers_constants() {
        let js = limits_js();
        let json = js
            .strip_prefix("const BOOKING_LIMITS = Object.freeze(")
            .and_then(|rest| rest.strip_suffix(");\n"))
            .expect("one frozen object");
        let limits: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            limits,
            serde_json::json!({
                "nameCharsMax": NAME_CHARS_MAX,
                "nationalIdCharsMax": NATIONAL_ID_CHARS_MAX,
                "phoneDigitsMin": PHONE_DIGITS_MIN,
                "phoneDigitsMax": PHONE_DIGITS_MAX,
                "emailCharsMax": EMAIL_CHARS_MAX,
                "searchCharsMax": super::super::http::SEARCH_CHARS_MAX,
            })
        );
    }

    #[test]
    fn the_pages_name_every_file_by_its_hashed_name() {
        let files = bundle();
        for html in [INDEX_HTML, MANAGE_HTML] {
            let page = files.page(html);
            for plain in [
                "/assets/throng.js",
                "/assets/i18n.js",
                "/booking/common.js",
                "/booking/limits.js",
                "/booking/style.css",
            ] {
                assert!(html.contains(&format!("\"{plain}\"")), "{plain}");
                assert!(
                    !page.contains(&format!("\"{plain}\"")),
                    "{plain} is renamed"
                );
            }
            assert!(page.contains(files.hashed("/booking/common.js").unwrap()));
            assert!(page.contains(assets::client_path_hashed()));
        }
    }

    #[test]
    fn the_pages_type_no_bound_and_load_the_client_first() {
        for html in [INDEX_HTML, MANAGE_HTML] {
            assert!(!html.contains(" maxlength="), "bounds come from limits.js");
            let client = html.find(r#"src="/assets/throng.js""#).expect("client");
            let limits = html.find(r#"src="/booking/limits.js""#).expect("limits");
            let common = html.find(r#"src="/booking/common.js""#).expect("common");
            assert!(client < common && limits < common);
            // The language is set before the body shows.
            let i18n = html.find(r#"src="/assets/i18n.js""#).expect("languages");
            assert!(i18n < html.find("<body>").expect("body"));
        }
        for key in ["nameCharsMax", "nationalIdCharsMax"] {
            assert!(INDEX_HTML.contains(&format!(r#"data-maxlength="{key}""#)));
        }
    }
}
