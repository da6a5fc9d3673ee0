//! What the events API accepts, parsed once: stream names, categories, event
//! types, expected versions, positions.

use axum::http::{HeaderMap, StatusCode};

use crate::platform::error::ApiError;
use crate::store::streams::Expected;

/// Bytes of a stream name at most.
pub const STREAM_BYTES_MAX: usize = 200;
/// Bytes of an event type at most.
pub const TYPE_BYTES_MAX: usize = 128;

/// The header that carries an append's expected version.
pub const EXPECTED_VERSION: &str = "expected-version";

/// A stream name: 1 to 200 of `A-Z a-z 0-9 - _ . : @`, starting with a
/// letter or digit. Its category is what comes before the first `-`
/// (`registration-42` is in `registration`); a name without `-` is its own
/// category.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamName(String);

fn name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@')
}

impl StreamName {
    pub fn parse(s: &str) -> Result<StreamName, ApiError> {
        let ok = !s.is_empty()
            && s.len() <= STREAM_BYTES_MAX
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes().all(name_char);
        if ok {
            Ok(StreamName(s.to_string()))
        } else {
            Err(ApiError::bad_request(
                "invalid_stream",
                format!(
                    "a stream name is 1 to {STREAM_BYTES_MAX} of A-Z a-z 0-9 - _ . : @, starting \
                     with a letter or digit"
                ),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn category(&self) -> &str {
        category_of(&self.0)
    }
}

/// The category of a stream name (before the first `-`).
pub fn category_of(stream: &str) -> &str {
    stream.split('-').next().unwrap_or(stream)
}

/// A category as a path segment: a stream name without `-`.
pub fn parse_category(s: &str) -> Result<String, ApiError> {
    let ok = !s.is_empty()
        && s.len() < STREAM_BYTES_MAX
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| name_char(b) && b != b'-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(ApiError::bad_request(
            "invalid_category",
            "a category is a stream name's part before its first '-': 1 or more of A-Z a-z 0-9 \
             _ . : @, starting with a letter or digit",
        ))
    }
}

/// An event type: 1 to 128 of `A-Z a-z 0-9 - _ . :`, starting with a
/// letter (types starting with `$` are the store's own).
pub fn parse_type(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= TYPE_BYTES_MAX
        && s.as_bytes()[0].is_ascii_alphabetic()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "an event type is 1 to {TYPE_BYTES_MAX} of A-Z a-z 0-9 - _ . :, starting with a letter"
        ))
    }
}

/// `Expected-Version`: `any` (the default), `no_stream`, `exists` or a
/// version (0 or more).
pub fn expected_version(headers: &HeaderMap) -> Result<Expected, ApiError> {
    let Some(v) = headers.get(EXPECTED_VERSION) else {
        return Ok(Expected::Any);
    };
    let bad = || {
        ApiError::bad_request(
            "invalid_expected_version",
            "Expected-Version is any, no_stream, exists or a version (0 to 9223372036854775807)",
        )
    };
    let v = v.to_str().map_err(|_| bad())?.trim();
    match v {
        "any" => Ok(Expected::Any),
        "no_stream" => Ok(Expected::NoStream),
        "exists" => Ok(Expected::Exists),
        n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            n.parse::<i64>().map(Expected::Version).map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

pub fn expected_text(e: Expected) -> String {
    match e {
        Expected::Any => "any".into(),
        Expected::NoStream => "no_stream".into(),
        Expected::Exists => "exists".into(),
        Expected::Version(v) => v.to_string(),
    }
}

/// A content type's essence, lower case (`application/json; charset=x` ->
/// `application/json`).
pub fn essence(headers: &HeaderMap, name: axum::http::HeaderName) -> Option<String> {
    let v = headers.get(name)?.to_str().ok()?;
    Some(
        v.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
    )
}

/// MessagePack's media types, the registered one first.
pub fn is_msgpack(essence: &str) -> bool {
    matches!(
        essence,
        "application/vnd.msgpack" | "application/msgpack" | "application/x-msgpack"
    )
}

pub fn is_json(essence: &str) -> bool {
    essence == "application/json"
        || essence
            .rsplit_once('+')
            .is_some_and(|(kind, suffix)| kind.starts_with("application/") && suffix == "json")
}

/// Whether the client asked for MessagePack (`Accept` names one of its
/// types before or without JSON).
pub fn wants_msgpack(headers: &HeaderMap) -> bool {
    let Some(accept) = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    for part in accept.split(',') {
        let e = part
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if is_msgpack(&e) {
            return true;
        }
        if is_json(&e) {
            return false;
        }
    }
    false
}

pub fn unsupported_media_type() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "send the events as JSON (application/json) or MessagePack (application/vnd.msgpack)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_names_and_categories() {
        for ok in [
            "a",
            "registration-42",
            "order-1-2",
            "A.b:c@d_e",
            &"x".repeat(200),
        ] {
            assert!(StreamName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a b",
            "a/b",
            "é",
            "$all",
            &"x".repeat(201),
            "a%2Fb",
        ] {
            assert!(StreamName::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(StreamName::parse("order-1-2").unwrap().category(), "order");
        assert_eq!(StreamName::parse("single").unwrap().category(), "single");
        assert!(parse_category("order").is_ok());
        assert!(parse_category("order-1").is_err());
    }

    #[test]
    fn expected_versions_parse() {
        let parse = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(EXPECTED_VERSION, v.parse().unwrap());
            expected_version(&h)
        };
        assert_eq!(parse("any").unwrap(), Expected::Any);
        assert_eq!(parse("no_stream").unwrap(), Expected::NoStream);
        assert_eq!(parse("exists").unwrap(), Expected::Exists);
        assert_eq!(parse("17").unwrap(), Expected::Version(17));
        for bad in ["-1", "1.5", "", "x", "99999999999999999999", "+3"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(expected_version(&HeaderMap::new()).unwrap(), Expected::Any);
    }

    #[test]
    fn types() {
        assert!(parse_type("MonthlyFeeCharged").is_ok());
        assert!(parse_type("loans.FeeCharged:v2").is_ok());
        assert!(parse_type("$streamDeleted").is_err());
        assert!(parse_type("1abc").is_err());
        assert!(parse_type("").is_err());
    }
}
