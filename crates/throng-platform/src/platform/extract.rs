//! Extractors that turn every rejection into the JSON envelope: malformed JSON
//! (400), wrong types or missing fields (422, naming the field), a body over
//! the limit (413), a wrong content type (415), bad query or path (400).
//!
//! The messages are throng's own, written for the person sending the request:
//! they name the field, query parameter or path segment and say what it must
//! be (`` `days` must be a whole number ``), never the framework's wording, and
//! never echo the value sent (it may be personal data).

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::error::ApiError;

pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;
    /// Accepts exactly what `axum::Json` accepts. A valid body is parsed
    /// once by serde_json alone; only a body that fails is parsed again
    /// through axum's extractor, whose `serde_path_to_error` names the
    /// failing field (tracking the path on every body cost ~2% of a
    /// try-register's CPU).
    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !json_content_type(req.headers()) {
            return Err(unsupported_media_type(req.headers()));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                body_too_large()
            } else {
                ApiError::bad_request(
                    "bad_body",
                    "the request body could not be read to its end; send the request again",
                )
            }
        })?;
        if let Ok(v) = serde_json::from_slice::<T>(&bytes) {
            return Ok(ApiJson(v));
        }
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let v = serde_path_to_error::deserialize::<_, T>(&mut de).map_err(|e| json_error(&e))?;
        match de.end() {
            Ok(()) => Ok(ApiJson(v)),
            Err(e) => Err(ApiError::bad_request(
                "malformed_json",
                format!(
                    "the body is not valid JSON: something follows the value \
                     (line {}, column {}); send one JSON value",
                    e.line(),
                    e.column()
                ),
            )),
        }
    }
}

/// 415, saying what the request sent and what to send instead.
fn unsupported_media_type(headers: &axum::http::HeaderMap) -> ApiError {
    let sent = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_string());
    let message = match sent {
        Some(t) if !t.is_empty() && t.len() <= 100 => format!(
            "the body was sent as {t}; send it as JSON with the header Content-Type: application/json"
        ),
        _ => "the request has no Content-Type; send the body as JSON with the header \
              Content-Type: application/json"
            .to_string(),
    };
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        message,
    )
}

/// `application/json` or `application/*+json`, as `axum::Json` requires.
fn json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || subtype
                .rsplit_once('+')
                .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json")))
}

fn body_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        "the request body is over the limit (see --body-limit-bytes)",
    )
}

/// A body that is not JSON (400 `malformed_json`), or JSON that is not what
/// the operation takes (422 `invalid_field`, naming the field).
fn json_error(e: &serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = e.inner();
    let at = format!(" (line {}, column {})", inner.line(), inner.column());
    let detail = without_position(&inner.to_string());
    match inner.classify() {
        serde_json::error::Category::Syntax => ApiError::bad_request(
            "malformed_json",
            format!("the body is not valid JSON: {detail}{at}"),
        ),
        serde_json::error::Category::Eof => ApiError::bad_request(
            "malformed_json",
            if inner.line() <= 1 && inner.column() == 0 {
                "the body is empty; send a JSON object".to_string()
            } else {
                format!("the body is not valid JSON: it ends too soon{at}")
            },
        ),
        serde_json::error::Category::Io => ApiError::bad_request(
            "bad_body",
            "the request body could not be read to its end; send the request again",
        ),
        serde_json::error::Category::Data => {
            ApiError::invalid_field(field_message(&path_name(e.path()), &detail, "field"))
        }
    }
}

/// serde_json's message without its ` at line L column C`.
fn without_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// `person.phone`, `items[2].qty`; empty for the value itself.
fn path_name(path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." {
        String::new()
    } else {
        p
    }
}

/// serde's `detail` about `field` (empty: the whole body or query) in words
/// a person can act on, without the value sent. `what` is `field` or
/// `query parameter`.
fn field_message(field: &str, detail: &str, what: &str) -> String {
    let detail = hide_values(detail);
    let name = |f: &str| format!("the {what} `{f}`");
    let subject = if field.is_empty() {
        if what == "field" {
            "the body".to_string()
        } else {
            "the query string".to_string()
        }
    } else {
        name(field)
    };
    let joined = |f: &str| {
        if field.is_empty() {
            f.to_string()
        } else {
            format!("{field}.{f}")
        }
    };
    if let Some(missing) = between(&detail, "missing field `", "`") {
        let target = if what == "field" {
            joined(missing)
        } else {
            missing.to_string()
        };
        return format!("{} is required", name(&target));
    }
    if let Some(unknown) = between(&detail, "unknown field `", "`") {
        // The path already ends with the unknown key.
        let target = if field.is_empty() {
            unknown.to_string()
        } else {
            field.to_string()
        };
        let known = detail
            .split_once(", expected one of ")
            .map(|(_, k)| format!("; the accepted ones are {k}"))
            .or_else(|| {
                detail
                    .split_once(", expected ")
                    .map(|(_, k)| format!("; the accepted one is {k}"))
            })
            .unwrap_or_else(|| format!("; no {what} is accepted here"));
        return format!("{} is not accepted{known}", name(&target));
    }
    if detail.starts_with("unknown variant ") {
        return match detail.split_once(", expected one of ") {
            Some((_, k)) => format!("{subject} must be one of {k}"),
            None => match detail.split_once(", expected ") {
                Some((_, k)) => format!("{subject} must be {k}"),
                None => format!("{subject} has a value that is not accepted"),
            },
        };
    }
    if let Some(rest) = detail.strip_prefix("invalid type: ") {
        if let Some((got, want)) = rest.split_once(", expected ") {
            return format!("{subject} must be {}, not {}", kind(want), kind(got));
        }
    }
    if let Some(rest) = detail.strip_prefix("invalid value: ") {
        if let Some((_, want)) = rest.split_once(", expected ") {
            return format!(
                "{subject} must be {}",
                range(want).unwrap_or_else(|| kind(want))
            );
        }
    }
    if let Some(want) = number_parse(&detail) {
        return format!("{subject} must be {want}");
    }
    if field.is_empty() {
        detail
    } else {
        format!("{subject}: {detail}")
    }
}

/// The text between `start` and the next `end` in `s`.
fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

/// A type as serde names it (`i64`, `struct PlaceInput`, `a sequence`,
/// `integer`), as a person would.
fn kind(serde: &str) -> String {
    let t = serde.trim();
    let t = t
        .strip_prefix("a ")
        .or_else(|| t.strip_prefix("an "))
        .unwrap_or(t);
    let known = match t {
        "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize"
        | "integer" => "a whole number",
        "f32" | "f64" | "floating point" => "a number",
        "string" | "str" | "char" | "a string" => "a string",
        "boolean" | "bool" => "true or false",
        "sequence" | "seq" => "an array",
        "map" => "an object",
        "null" | "unit" | "unit value" => "null",
        "option" => "a value",
        _ if t.starts_with("struct ") || t.starts_with("map") => "an object",
        _ if t.starts_with("tuple") => "an array",
        _ if t.starts_with("unit variant") || t.starts_with("variant") => "a value",
        _ => return serde.trim().to_string(),
    };
    known.to_string()
}

/// The bounds of an integer type serde names, for a value out of its range.
fn range(serde: &str) -> Option<String> {
    let (lo, hi): (i128, i128) = match serde.trim() {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
        _ => return None,
    };
    Some(format!("a whole number from {lo} to {hi}"))
}

/// The standard library's number parse errors, which a query string
/// parameter answers (`days=ten`).
fn number_parse(detail: &str) -> Option<&'static str> {
    Some(match detail {
        "invalid digit found in string" | "cannot parse integer from empty string" => {
            "a whole number"
        }
        "number too large to fit in target type" => "a smaller whole number",
        "number too small to fit in target type" => "a larger whole number",
        "invalid float literal" | "cannot parse float from empty string" => "a number",
        "provided string was not `true` or `false`" => "true or false",
        _ => return None,
    })
}

/// serde echoes the offending value (`person.phone: invalid type: integer
/// `421900123456`, expected a string`), which may be personal data; keep its
/// kind and the field's name only.
fn hide_values(detail: &str) -> String {
    let mut out = String::with_capacity(detail.len());
    let mut rest = detail;
    while let Some(at) = ["invalid type: ", "invalid value: "]
        .iter()
        .filter_map(|m| rest.find(m).map(|i| i + m.len()))
        .min()
    {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let (Some(value), Some(expected)) = (rest.find(['`', '"']), rest.rfind(", expected")) {
            if value < expected {
                out.push_str(rest[..value].trim_end());
                rest = &rest[expected..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Integer fields of request bodies, for `#[serde(deserialize_with)]`:
/// a JSON number with no fractional part is an integer (`2.0` is `2`, as
/// JSON Schema's `integer` says); a fraction or a value out of the type's
/// range is refused as serde refuses it.
pub mod whole {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{Deserializer, Error, Unexpected, Visitor};

    /// An integer type a whole number converts to.
    pub trait Int: TryFrom<i64> + TryFrom<u64> {
        const NAME: &'static str;
    }

    macro_rules! int {
        ($($t:ty),*) => {$(impl Int for $t { const NAME: &'static str = stringify!($t); })*};
    }
    int!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

    struct WholeVisitor<T>(PhantomData<T>);

    impl<T: Int> Visitor<'_> for WholeVisitor<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(T::NAME)
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<T, E> {
            // Past 2^53 a double no longer holds every integer: the number
            // sent may not be the one read (an integer literal that large
            // is read as an integer, not here).
            const EXACT: f64 = 9_007_199_254_740_992.0;
            if v.fract() != 0.0 || !v.is_finite() {
                return Err(E::invalid_type(Unexpected::Float(v), &self));
            }
            if (-EXACT..=EXACT).contains(&v) {
                self.visit_i64(v as i64)
            } else {
                Err(E::invalid_value(Unexpected::Float(v), &self))
            }
        }
    }

    /// A required integer field.
    pub fn int<'de, D: Deserializer<'de>, T: Int>(d: D) -> Result<T, D::Error> {
        d.deserialize_any(WholeVisitor(PhantomData))
    }

    /// An integer as an element (of an array, say): `Whole<i64>`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Whole<T>(pub T);

    impl<'de, T: Int> serde::Deserialize<'de> for Whole<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            int(d).map(Whole)
        }
    }

    struct MaybeWhole<T>(PhantomData<T>);

    impl<'de, T: Int> Visitor<'de> for MaybeWhole<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{} or null", T::NAME)
        }

        fn visit_none<E: Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_unit<E: Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
            int(d).map(Some)
        }
    }

    /// An optional integer field that is not null when present; with
    /// `#[serde(default)]`.
    pub fn present<'de, D: Deserializer<'de>, T: Int>(d: D) -> Result<Option<T>, D::Error> {
        int(d).map(Some)
    }

    /// An optional (or null) integer field; with `#[serde(default)]`.
    pub fn opt<'de, D: Deserializer<'de>, T: Int>(d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_option(MaybeWhole(PhantomData))
    }
}

/// An optional field that is not null when present, for
/// `#[serde(default, deserialize_with = "non_null")]`: a null is refused as
/// the field's type refuses it.
pub fn non_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query().unwrap_or_default()).map(ApiQuery)
    }
}

/// A query string as `ApiQuery` reads it: 400 `invalid_query` naming the
/// parameter and what it must be.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e: serde_path_to_error::Error<_>| {
        let detail = e.inner().to_string();
        ApiError::bad_request(
            "invalid_query",
            field_message(&path_name(e.path()), &detail, "query parameter"),
        )
    })
}

pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let rejection: PathRejection =
            match axum::extract::Path::<T>::from_request_parts(parts, state).await {
                Ok(p) => return Ok(ApiPath(p.0)),
                Err(r) => r,
            };
        // A whole number written with a fraction (`42.0`), which JSON
        // Schema's integers allow and bodies accept (`whole::int`).
        if let Ok(raw) = axum::extract::RawPathParams::from_request_parts(parts, state).await {
            let params: Vec<(String, String)> = raw
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if params.iter().any(|(_, v)| whole_float(v).is_some()) {
                let value = |v: &str| match whole_float(v).or_else(|| v.parse::<i64>().ok()) {
                    Some(n) => serde_json::Value::from(n),
                    None => serde_json::Value::String(v.to_string()),
                };
                let positional = match params.as_slice() {
                    [(_, v)] => value(v),
                    many => many.iter().map(|(_, v)| value(v)).collect(),
                };
                let named = params
                    .iter()
                    .map(|(k, v)| (k.clone(), value(v)))
                    .collect::<serde_json::Map<_, _>>();
                for candidate in [positional, serde_json::Value::Object(named)] {
                    if let Ok(t) = serde_json::from_value::<T>(candidate) {
                        return Ok(ApiPath(t));
                    }
                }
            }
        }
        Err(ApiError::bad_request(
            "invalid_path",
            path_message(&rejection),
        ))
    }
}

/// A path that does not parse, in throng's words: which segment, and what it
/// must be.
fn path_message(r: &PathRejection) -> String {
    use axum::extract::path::ErrorKind;
    let PathRejection::FailedToDeserializePathParams(e) = r else {
        return "the address does not name anything here; check it against /openapi.json".into();
    };
    match e.kind() {
        ErrorKind::ParseErrorAtKey {
            key, expected_type, ..
        } => format!(
            "the path's `{key}` must be {}",
            kind_or_message(expected_type)
        ),
        ErrorKind::DeserializeError { key, message, .. } => {
            format!("the path's `{key}` must be {}", kind_or_message(message))
        }
        ErrorKind::ParseErrorAtIndex {
            index,
            expected_type,
            ..
        } => format!(
            "the path's segment {} must be {}",
            index + 1,
            kind_or_message(expected_type)
        ),
        ErrorKind::ParseError { expected_type, .. } => {
            format!("the path's id must be {}", kind_or_message(expected_type))
        }
        ErrorKind::InvalidUtf8InPathParam { key } => {
            format!("the path's `{key}` is not valid UTF-8 once percent-decoded")
        }
        _ => "the address does not name anything here; check it against /openapi.json".into(),
    }
}

/// `i64` as "a whole number"; a deserializer's own message as it is.
fn kind_or_message(s: &str) -> String {
    if let Some(want) = number_parse(s) {
        return want.to_string();
    }
    let k = kind(s);
    if k != s.trim() {
        return k;
    }
    format!("valid: {s}")
}

/// `42` of `42.0` (`42.`, `42.00`): a whole number with a zero fraction.
fn whole_float(v: &str) -> Option<i64> {
    let (int, fraction) = v.split_once('.')?;
    if !fraction.bytes().all(|b| b == b'0') {
        return None;
    }
    int.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_content_types_as_axum_accepts_them() {
        let ok = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(axum::http::header::CONTENT_TYPE, v.parse().unwrap());
            super::json_content_type(&h)
        };
        for v in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/problem+json",
            "application/vnd.api+json;v=1",
        ] {
            assert!(ok(v), "{v}");
        }
        for v in [
            "text/json",
            "application/jsonx",
            "application/xml",
            "json",
            "",
        ] {
            assert!(!ok(v), "{v}");
        }
        assert!(!super::json_content_type(&axum::http::HeaderMap::new()));
    }

    #[test]
    fn whole_numbers_are_integers() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            #[serde(deserialize_with = "super::whole::int")]
            a: i64,
            #[serde(default, deserialize_with = "super::whole::opt")]
            b: Option<u8>,
        }
        let t = |s: &str| serde_json::from_str::<T>(s).map_err(|e| e.to_string());
        assert_eq!(t(r#"{"a": 2.0}"#), Ok(T { a: 2, b: None }));
        assert_eq!(t(r#"{"a": -2, "b": 3.0}"#), Ok(T { a: -2, b: Some(3) }));
        assert_eq!(t(r#"{"a": 1e3, "b": null}"#), Ok(T { a: 1000, b: None }));
        assert_eq!(
            t(r#"{"a": 9007199254740992.0}"#),
            Ok(T {
                a: 1 << 53,
                b: None
            })
        );
        assert_eq!(
            t(r#"{"a": -9223372036854775808}"#),
            Ok(T {
                a: i64::MIN,
                b: None
            })
        );
        for bad in [
            r#"{"a": 2.5}"#,
            r#"{"a": "2"}"#,
            r#"{"a": 9223372036854775808}"#,
            r#"{"a": 1e19}"#,
            r#"{"a": 1e16}"#,
            r#"{"a": -9223372036854775809}"#,
            r#"{"a": 1, "b": 256}"#,
            r#"{"a": 1, "b": -1.0}"#,
            r#"{"a": 1, "b": 0.5}"#,
        ] {
            assert!(t(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_name_the_field_and_what_it_must_be() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        #[allow(dead_code)]
        struct Person {
            phone: String,
        }
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        #[allow(dead_code)]
        struct Body {
            place_id: i64,
            person: Person,
            #[serde(default)]
            days: Option<u8>,
        }
        let body = |b: &str| {
            let mut de = serde_json::Deserializer::from_str(b);
            let e = serde_path_to_error::deserialize::<_, Body>(&mut de).unwrap_err();
            let e = super::json_error(&e);
            (e.code, e.message)
        };
        let field = |m: &str| ("invalid_field", m.to_string());
        assert_eq!(
            body(r#"{"placeId": "7", "person": {"phone": "1"}}"#),
            field("the field `placeId` must be a whole number, not a string")
        );
        assert_eq!(
            body(r#"{"placeId": 7, "person": {"phone": 421900123456}}"#),
            field("the field `person.phone` must be a string, not a whole number")
        );
        assert_eq!(
            body(r#"{"placeId": 7, "person": {}}"#),
            field("the field `person.phone` is required")
        );
        assert_eq!(
            body(r#"{"person": {"phone": "1"}}"#),
            field("the field `placeId` is required")
        );
        assert_eq!(
            body(r#"{"placeId": 7, "person": {"phone": "1"}, "days": 300}"#),
            field("the field `days` must be a whole number from 0 to 255")
        );
        assert_eq!(
            body(r#"{"placeId": 7, "admin": true}"#),
            field("the field `admin` is not accepted; the accepted ones are `placeId`, `person`, `days`")
        );
        assert_eq!(body("null"), field("the body must be an object, not null"));
        let (code, m) = body(r#"{"placeId": 7,"#);
        assert_eq!(code, "malformed_json");
        assert!(
            m.starts_with("the body is not valid JSON: it ends too soon"),
            "{m}"
        );
        let (code, m) = body("");
        assert_eq!(
            (code, m.as_str()),
            ("malformed_json", "the body is empty; send a JSON object")
        );
        let (code, m) = body("{placeId: 7}");
        assert_eq!(code, "malformed_json");
        assert_eq!(
            m,
            "the body is not valid JSON: key must be a string (line 1, column 2)"
        );

        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Query {
            days: Option<u32>,
            from: String,
            #[serde(default)]
            order: Option<Order>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[serde(rename_all = "lowercase")]
        enum Order {
            Asc,
            Desc,
        }
        let query = |q: &str| {
            let e = super::parse_query::<Query>(q).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (400, "invalid_query"));
            e.message
        };
        assert_eq!(
            query("from=x&days=ten"),
            "the query parameter `days` must be a whole number"
        );
        assert_eq!(query("days=1"), "the query parameter `from` is required");
        assert_eq!(
            query("from=x&order=up"),
            "the query parameter `order` must be `asc` or `desc`"
        );
        for q in ["from=x&days=99999999999", "from=x&days=-1"] {
            assert!(!query(q).contains("Failed"), "{q}");
        }
    }

    #[test]
    fn data_errors_do_not_echo_values() {
        let d = "Failed to deserialize the JSON body into the target type: person.phone: invalid type: \
                 integer `421900123456`, expected a string at line 1 column 78";
        assert_eq!(
            super::hide_values(d),
            "Failed to deserialize the JSON body into the target type: person.phone: invalid type: \
             integer, expected a string at line 1 column 78"
        );
        let d = "placeId: invalid type: string \"905123/1234\", expected i64 at line 1 column 20";
        assert_eq!(
            super::hide_values(d),
            "placeId: invalid type: string, expected i64 at line 1 column 20"
        );
        let d = "unknown field `admin`, expected one of `placeId`, `day`";
        assert_eq!(super::hide_values(d), d);
    }
}
