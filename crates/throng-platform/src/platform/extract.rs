//! Extractors that turn every rejection into the JSON envelope: malformed JSON
//! (400), wrong types or missing fields (422, naming the field), a body over
//! the limit (413), a wrong content type (415), bad query or path (400).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
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
            return Err(json_rejection(JsonRejection::MissingJsonContentType(
                Default::default(),
            )));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                body_too_large()
            } else {
                ApiError::bad_request("bad_body", r.body_text())
            }
        })?;
        if let Ok(v) = serde_json::from_slice::<T>(&bytes) {
            return Ok(ApiJson(v));
        }
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
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

fn json_rejection(r: JsonRejection) -> ApiError {
    let detail = r.body_text();
    match r {
        JsonRejection::JsonDataError(_) => ApiError::invalid_field(hide_values(&detail)),
        JsonRejection::JsonSyntaxError(_) => ApiError::bad_request("malformed_json", detail),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with Content-Type: application/json",
        ),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => body_too_large(),
        other => ApiError::bad_request("bad_body", other.body_text()),
    }
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
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|r: QueryRejection| ApiError::bad_request("invalid_query", r.body_text()))
    }
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
        Err(ApiError::bad_request("invalid_path", rejection.body_text()))
    }
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
