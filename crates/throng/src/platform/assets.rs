//! What every page shares: the client module `/assets/throng.js` (fetch
//! that honours 429/503 + Retry-After, JSON decoding, the error envelope in
//! words; a page loads it before its own script), scripts of constants
//! written from the Rust constants the parsers check (a form's limits are
//! never typed twice), and embeddable scripts that carry the client inside
//! them (a widget on another site's page is one file and adds no global).

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;

/// Where pages load the client from.
pub const CLIENT_PATH: &str = "/assets/throng.js";
/// The client's source; it defines one name, `Throng`.
pub const CLIENT_JS: &str = include_str!("assets/throng.js");

pub const JS: &str = "text/javascript; charset=utf-8";

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new().route(CLIENT_PATH, get(|| async { script(CLIENT_JS) }))
}

/// A script answer.
pub fn script(body: impl Into<axum::body::Body>) -> Response {
    ([(header::CONTENT_TYPE, JS)], body.into()).into_response()
}

/// A script defining `const {name}` as a frozen object of `values`' fields
/// (serialized as JSON, which is a JavaScript expression).
pub fn constants_script(name: &str, values: &impl Serialize) -> String {
    debug_assert!(
        name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && name.starts_with(|c: char| c.is_ascii_alphabetic()),
        "{name} is not a plain identifier"
    );
    let json = serde_json::to_string(values).expect("constants serialize");
    format!("const {name} = Object.freeze({json});\n")
}

/// One script for other sites' pages: the client, then `parts` in order, in
/// one function scope (strict, as the client asks), so the host page gains
/// no global and loads one file.
pub fn embeddable(parts: &[&str]) -> String {
    let mut out = String::from("(() => {\n");
    out.push_str(CLIENT_JS);
    for part in parts {
        out.push('\n');
        out.push_str(part);
    }
    out.push_str("\n})();\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.js` file under `dir`.
    fn scripts(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                scripts(&path, out);
            } else if path.extension().is_some_and(|e| e == "js") {
                out.push(path);
            }
        }
    }

    #[test]
    fn only_the_client_reads_retry_after_or_the_envelope() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        scripts(&src, &mut files);
        assert!(files.len() > 10, "{} scripts found", files.len());
        // `/invite.js` runs on customers' pages and fails closed: it never
        // waits for an overloaded server and carries nothing it does not use.
        let own_rules = ["services/invites/page/invite.js"];
        let copies: Vec<String> = files
            .iter()
            .filter(|f| !f.ends_with("platform/assets/throng.js"))
            .filter(|f| !own_rules.iter().any(|o| f.ends_with(o)))
            .filter(|f| {
                let text = std::fs::read_to_string(f).expect("script");
                ["\"Retry-After\"", "body.error", "json.error"]
                    .iter()
                    .any(|p| text.contains(p))
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(
            copies.is_empty(),
            "use Throng (/assets/throng.js): {copies:?}"
        );
    }

    #[test]
    fn constants_are_a_frozen_object_of_the_values() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Limits {
            name_chars_max: usize,
        }
        let js = constants_script("LIMITS", &Limits { name_chars_max: 7 });
        assert_eq!(js, "const LIMITS = Object.freeze({\"nameCharsMax\":7});\n");
    }

    #[test]
    fn an_embeddable_script_starts_strict_and_keeps_its_names_inside() {
        let js = embeddable(&["const A = 1;", "use(A);"]);
        let body = js.strip_prefix("(() => {\n").expect("opens a function");
        let first_statement = body
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("//"));
        assert_eq!(first_statement, Some("\"use strict\";"));
        assert!(js.ends_with("use(A);\n})();\n"));
        let client = js.find("const Throng").unwrap();
        assert!(client < js.find("const A = 1;").unwrap());
    }
}
