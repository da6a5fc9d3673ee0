//! What every page shares: the client module `/assets/throng.js` (fetch
//! that honours 429/503 + Retry-After, JSON decoding, the error envelope in
//! words; a page loads it before its own script), scripts of constants
//! written from the Rust constants the parsers check (a form's limits are
//! never typed twice), and embeddable scripts that carry the client inside
//! them (a widget on another site's page is one file and adds no global).
//!
//! A page's own files go in a [`Bundle`]: each is also served under a name
//! carrying a hash of its content below `/assets/` (`/booking/app.js` at
//! `/assets/booking/app.1f2e3d4c5b.js`), cached for a year as `immutable`,
//! and the page's HTML names those. Admission lets every `/assets/` request
//! through (`admission::is_static`): a file answered from memory costs what
//! its refusal would, and a refused script would leave a page blank.

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
pub const CSS: &str = "text/css; charset=utf-8";
pub const HTML: &str = "text/html; charset=utf-8";

/// The prefix of the files served from memory under content-hashed names.
pub const STATIC_PREFIX: &str = "/assets/";

/// How a content-hashed file is cached: its name changes with its content.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// How a page and a file under its plain name are cached: kept, but asked
/// for again each time (a new release changes what the page names).
pub const REVALIDATE: &str = "no-cache";

/// The client's content-hashed path (`/assets/throng.<hash>.js`).
pub fn client_path_hashed() -> &'static str {
    static PATH: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| hashed_path(CLIENT_PATH, CLIENT_JS.as_bytes()));
    &PATH
}

/// Where pages load the language script from (`i18n.js`, after the
/// catalogues' addresses and the English catalogue).
pub const I18N_PATH: &str = "/assets/i18n.js";
const I18N_JS: &str = include_str!("assets/i18n.js");

/// The pages' languages: code, name in its own language, catalogue (flat
/// JSON: key -> message, or -> {plural category -> message}). English is
/// the reference every other catalogue has exactly the keys of, and the
/// fallback for a missing one; a language is added with its file here.
pub const LANGUAGES: &[(&str, &str, &str)] = &[
    ("en", "English", include_str!("assets/i18n/en.json")),
    ("sk", "Slovenčina", include_str!("assets/i18n/sk.json")),
    ("cs", "Čeština", include_str!("assets/i18n/cs.json")),
];

/// A catalogue's plain path (`/assets/i18n/sk.json`).
fn catalogue_path(code: &str) -> String {
    format!("{STATIC_PREFIX}i18n/{code}.json")
}

/// Each catalogue's plain and hashed paths and its body.
fn catalogues() -> &'static [(String, String, &'static str)] {
    static ALL: std::sync::LazyLock<Vec<(String, String, &'static str)>> =
        std::sync::LazyLock::new(|| {
            LANGUAGES
                .iter()
                .map(|(code, _, body)| {
                    let plain = catalogue_path(code);
                    let hashed = hashed_path(&plain, body.as_bytes());
                    (plain, hashed, *body)
                })
                .collect()
        });
    &ALL
}

/// The languages' constants the script starts from. A page's carry the
/// catalogues' hashed addresses and the English catalogue; a widget's on
/// another site's page (`embedded`: the host page's language, no switcher)
/// carry every catalogue, as it cannot fetch them from its host's origin.
fn i18n_constants(embedded: Option<&[&str]>) -> String {
    let languages: Vec<serde_json::Value> = LANGUAGES
        .iter()
        .map(|(code, name, _)| serde_json::json!({ "code": code, "name": name }))
        .collect();
    // A widget carries only the keys it uses (those under its prefixes).
    let parse = |code: &str, body: &str| -> serde_json::Value {
        let all: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("the {code} catalogue: {e}"));
        match embedded {
            Some(prefixes) => all
                .into_iter()
                .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
                .collect(),
            None => all,
        }
        .into()
    };
    let mut constants = serde_json::json!({
        "languages": languages,
        "en": parse("en", LANGUAGES[0].2),
        "embedded": embedded.is_some(),
    });
    if embedded.is_some() {
        let all: serde_json::Map<String, serde_json::Value> = LANGUAGES
            .iter()
            .map(|(code, _, body)| ((*code).to_string(), parse(code, body)))
            .collect();
        constants["catalogues"] = all.into();
    } else {
        let urls: serde_json::Map<String, serde_json::Value> = LANGUAGES
            .iter()
            .zip(catalogues())
            .map(|((code, _, _), (_, hashed, _))| ((*code).to_string(), hashed.clone().into()))
            .collect();
        constants["urls"] = urls.into();
    }
    constants_script("THRONG_I18N", &constants)
}

/// The language script pages load (`/assets/i18n.js`).
pub fn i18n_js() -> &'static str {
    static JS_TEXT: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{}{I18N_JS}", i18n_constants(None)));
    &JS_TEXT
}

/// The language script for [`embeddable`] widgets: every catalogue inside,
/// with the keys under `prefixes` (e.g. `["comments.", "common."]`).
pub fn i18n_embedded_js(prefixes: &[&str]) -> String {
    format!("{}{I18N_JS}", i18n_constants(Some(prefixes)))
}

/// The language script's content-hashed path.
pub fn i18n_path_hashed() -> &'static str {
    static PATH: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| hashed_path(I18N_PATH, i18n_js().as_bytes()));
    &PATH
}

fn json(body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new()
        .route(CLIENT_PATH, get(|| async { script(CLIENT_JS) }))
        .route(
            client_path_hashed(),
            get(|| async { with_cache(script(CLIENT_JS), IMMUTABLE) }),
        )
        .route(
            I18N_PATH,
            get(|| async { with_cache(script(i18n_js()), REVALIDATE) }),
        )
        .route(
            i18n_path_hashed(),
            get(|| async { with_cache(script(i18n_js()), IMMUTABLE) }),
        );
    for (plain, hashed, body) in catalogues() {
        router = router
            .route(
                plain,
                get(move || async move { with_cache(json(body), REVALIDATE) }),
            )
            .route(
                hashed,
                get(move || async move { with_cache(json(body), IMMUTABLE) }),
            );
    }
    router
}

/// `html` naming the platform's files (the client, the language script)
/// by their content-hashed paths.
pub fn platform_page(html: &str) -> String {
    html.replace(
        &format!("\"{CLIENT_PATH}\""),
        &format!("\"{}\"", client_path_hashed()),
    )
    .replace(
        &format!("\"{I18N_PATH}\""),
        &format!("\"{}\"", i18n_path_hashed()),
    )
}

/// `plain` served below [`STATIC_PREFIX`] with a hash of `body` before its
/// extension: `/booking/app.js` -> `/assets/booking/app.<10 hex>.js`.
pub fn hashed_path(plain: &str, body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(body);
    let hash = hex::encode(&digest[..5]);
    let inner = plain.strip_prefix(STATIC_PREFIX).unwrap_or(plain);
    let inner = inner.trim_start_matches('/');
    let (stem, ext) = match inner.rfind('.') {
        Some(i) if !inner[i..].contains('/') => inner.split_at(i),
        _ => (inner, ""),
    };
    format!("{STATIC_PREFIX}{stem}.{hash}{ext}")
}

fn with_cache(mut res: Response, cache: &'static str) -> Response {
    res.headers_mut().insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static(cache),
    );
    res
}

/// A page's static files (scripts, styles), each served under its plain
/// path (`Cache-Control: no-cache`, for pages a browser loaded before a
/// release) and under its content-hashed path (immutable); pages are
/// written with the plain paths and [`Bundle::page`] names the hashed ones.
#[derive(Clone, Default)]
pub struct Bundle {
    files: Vec<BundleFile>,
}

#[derive(Clone)]
struct BundleFile {
    plain: &'static str,
    hashed: String,
    content_type: &'static str,
    body: bytes::Bytes,
}

impl Bundle {
    pub fn new() -> Bundle {
        Bundle::default()
    }

    /// Adds the file pages name `plain` (an absolute path).
    pub fn file(
        mut self,
        plain: &'static str,
        content_type: &'static str,
        body: impl Into<bytes::Bytes>,
    ) -> Bundle {
        let body = body.into();
        assert!(plain.starts_with('/'), "{plain}: an absolute path");
        assert!(
            !plain.starts_with(STATIC_PREFIX),
            "{plain}: below {STATIC_PREFIX} only by its hashed name"
        );
        let hashed = hashed_path(plain, &body);
        self.files.push(BundleFile {
            plain,
            hashed,
            content_type,
            body,
        });
        self
    }

    /// The hashed path of the file named `plain`.
    pub fn hashed(&self, plain: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.plain == plain)
            .map(|f| f.hashed.as_str())
    }

    /// `html` with each quoted plain path of this bundle's files (and the
    /// client's) replaced by its hashed path.
    pub fn page(&self, html: &str) -> String {
        let mut out = platform_page(html);
        for f in &self.files {
            out = out.replace(&format!("\"{}\"", f.plain), &format!("\"{}\"", f.hashed));
        }
        out
    }

    /// Routes for every file under both its names.
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let mut router = Router::new();
        for f in &self.files {
            for (path, cache) in [(f.plain, REVALIDATE), (f.hashed.as_str(), IMMUTABLE)] {
                let body = f.body.clone();
                let content_type = f.content_type;
                router = router.route(
                    path,
                    get(move || {
                        let body = body.clone();
                        async move {
                            with_cache(
                                ([(header::CONTENT_TYPE, content_type)], body).into_response(),
                                cache,
                            )
                        }
                    }),
                );
            }
        }
        router
    }
}

/// A page's HTML answer, asked for again each time (it names the release's
/// files).
pub fn html_page<S: Clone + Send + Sync + 'static>(html: String) -> axum::routing::MethodRouter<S> {
    let body = bytes::Bytes::from(html);
    get(move || {
        let body = body.clone();
        async move {
            with_cache(
                ([(header::CONTENT_TYPE, HTML)], body).into_response(),
                REVALIDATE,
            )
        }
    })
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
        // Every crate's pages: the workspace's crates folder.
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for krate in std::fs::read_dir(&crates).expect("crates folder") {
            let src = krate.expect("entry").path().join("src");
            if src.is_dir() {
                scripts(&src, &mut files);
            }
        }
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

    /// The `{name}` and `{0}` marks of a message (every form of a plural).
    fn marks(message: &serde_json::Value) -> std::collections::BTreeSet<String> {
        let texts: Vec<&str> = match message {
            serde_json::Value::String(s) => vec![s.as_str()],
            serde_json::Value::Object(forms) => forms.values().filter_map(|v| v.as_str()).collect(),
            _ => vec![],
        };
        texts.into_iter().flat_map(regex_lite_marks).collect()
    }

    fn regex_lite_marks(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close)
                    if !after[..close].is_empty()
                        && after[..close]
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    out.push(after[..close].to_string());
                    rest = &after[close + 1..];
                }
                _ => rest = after,
            }
        }
        out
    }

    fn catalogue(code: &str) -> serde_json::Map<String, serde_json::Value> {
        let (_, _, body) = LANGUAGES.iter().find(|l| l.0 == code).expect("language");
        match serde_json::from_str(body) {
            Ok(serde_json::Value::Object(map)) => map,
            other => panic!("the {code} catalogue is not one JSON object: {other:?}"),
        }
    }

    const PLURAL_FORMS: [&str; 6] = ["zero", "one", "two", "few", "many", "other"];

    #[test]
    fn every_catalogue_has_the_english_keys_and_marks() {
        let en = catalogue("en");
        assert!(en.len() > 50, "{} English messages", en.len());
        for (code, _, _) in LANGUAGES {
            let other = catalogue(code);
            let missing: Vec<&String> = en.keys().filter(|k| !other.contains_key(*k)).collect();
            let extra: Vec<&String> = other.keys().filter(|k| !en.contains_key(*k)).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{code}: missing {missing:?}, not in English {extra:?}"
            );
            for (key, message) in &other {
                match message {
                    serde_json::Value::String(s) => {
                        assert!(
                            !s.trim().is_empty() || key.ends_with(".suffix"),
                            "{code} {key}: empty"
                        );
                        assert!(en[key].is_string(), "{code} {key}: plural forms in English");
                    }
                    serde_json::Value::Object(forms) => {
                        assert!(en[key].is_object(), "{code} {key}: one text in English");
                        assert!(
                            forms.contains_key("other"),
                            "{code} {key}: no \"other\" form"
                        );
                        for (form, text) in forms {
                            assert!(
                                PLURAL_FORMS.contains(&form.as_str()),
                                "{code} {key}: form {form}"
                            );
                            assert!(text.is_string(), "{code} {key}.{form}: not text");
                        }
                    }
                    _ => panic!("{code} {key}: neither text nor plural forms"),
                }
                assert_eq!(
                    marks(message),
                    marks(&en[key]),
                    "{code} {key}: the same {{marks}} as English"
                );
            }
        }
    }

    /// The catalogue keys a page or script names: `data-i18n="k"`,
    /// `data-i18n-attr="attr:k;…"`, and `t("k"` / `words("k"` in scripts
    /// (keys built at run time, like `error.<code>`, are not seen).
    fn keys_used(text: &str) -> Vec<String> {
        let mut keys = Vec::new();
        for (start, end) in [("data-i18n=\"", '"'), ("t(\"", '"'), ("words(\"", '"')] {
            let mut rest = text;
            while let Some(i) = rest.find(start) {
                // `t(` itself, not the end of `get(` or `split(`.
                let whole = !rest[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
                let after = &rest[i + start.len()..];
                let Some(j) = after.find(end) else { break };
                let key = &after[..j];
                if whole && !key.is_empty() && !key.contains(['$', ' ', '{']) {
                    keys.push(key.to_string());
                }
                rest = &after[j..];
            }
        }
        let mut rest = text;
        while let Some(i) = rest.find("data-i18n-attr=\"") {
            let after = &rest[i + "data-i18n-attr=\"".len()..];
            let Some(j) = after.find('"') else { break };
            for pair in after[..j].split(';') {
                if let Some((_, key)) = pair.split_once(':') {
                    keys.push(key.trim().to_string());
                }
            }
            rest = &after[j..];
        }
        keys
    }

    /// Every `.html` and `.js` file under `dir`.
    fn page_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                page_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "js" || e == "html") {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_key_the_pages_name_is_in_the_catalogues() {
        let en = catalogue("en");
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for krate in std::fs::read_dir(&crates).expect("crates folder") {
            let src = krate.expect("entry").path().join("src");
            if src.is_dir() {
                page_files(&src, &mut files);
            }
        }
        let mut used = 0;
        let mut unknown = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).expect("page file");
            for key in keys_used(&text) {
                used += 1;
                if !en.contains_key(&key) {
                    unknown.push(format!("{}: {key}", f.display()));
                }
            }
        }
        assert!(used > 50, "{used} keys named by the pages");
        assert!(unknown.is_empty(), "not in the catalogues: {unknown:#?}");
        assert_eq!(
            keys_used(
                r#"<p data-i18n="a.b" data-i18n-attr="title:c.d;aria-label:e"> t("f", {}) words("g", null)"#
            ),
            ["a.b", "f", "g", "c.d", "e"]
        );
    }

    #[test]
    fn the_language_script_names_the_catalogues_by_their_hashed_paths() {
        let js = i18n_js();
        assert!(js.starts_with("const THRONG_I18N = Object.freeze("));
        for (plain, hashed, _) in catalogues() {
            assert!(plain.starts_with("/assets/i18n/") && plain.ends_with(".json"));
            assert!(js.contains(&format!("\"{hashed}\"")), "{hashed}");
        }
        let embedded = i18n_embedded_js(&["common."]);
        assert!(embedded.contains("\"catalogues\""));
        assert!(
            embedded.contains("Slovenčina") && embedded.contains("\"common.language\":\"Jazyk\"")
        );
        assert!(
            !embedded.contains("\"booking.book.title\":"),
            "only the widget's keys"
        );
        let page = platform_page(r#"<script src="/assets/i18n.js"></script>"#);
        assert_eq!(
            page,
            format!(r#"<script src="{}"></script>"#, i18n_path_hashed())
        );
    }

    #[test]
    fn a_bundle_names_its_files_by_content_and_rewrites_pages() {
        let bundle = Bundle::new()
            .file("/p/app.js", JS, "one();")
            .file("/p/style.css", CSS, "b{}");
        let app = bundle.hashed("/p/app.js").unwrap().to_string();
        assert!(
            app.starts_with("/assets/p/app.") && app.ends_with(".js"),
            "{app}"
        );
        assert_eq!(app.len(), "/assets/p/app.".len() + 10 + ".js".len());
        let again = Bundle::new().file("/p/app.js", JS, "two();");
        assert_ne!(
            again.hashed("/p/app.js").unwrap(),
            app,
            "the name follows the content"
        );
        let html = r#"<link href="/p/style.css"><script src="/assets/throng.js"></script><script src="/p/app.js"></script><a href="/p/app.json">"#;
        let page = bundle.page(html);
        assert!(page.contains(&format!(r#"src="{app}""#)));
        assert!(page.contains(&format!(r#"src="{}""#, client_path_hashed())));
        assert!(
            page.contains(r#"href="/p/app.json""#),
            "only whole quoted paths"
        );
        assert!(!page.contains(r#""/p/style.css""#));
        assert_eq!(
            hashed_path("/assets/throng.js", b"x")
                .matches("/assets/")
                .count(),
            1
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
