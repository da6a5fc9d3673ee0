//! The parts of `/openapi.json` every operation shares, and the schemas a
//! service builds from the same constants its parsers check.
//!
//! A service states each operation once, in its handler's
//! `#[utoipa::path]`, and its routes are built from those
//! (`platform::service`). utoipa's bound attributes take literals only, so
//! a bound that is a constant goes on a type: `schema_type!` declares one
//! from a schema built here (`int_schema`, `text_schema`, `closed_object`,
//! ...) for a parameter (`value_type = X, inline` or `inline(X)`) or a field,
//! or gives a request body's parser its schema
//! (`request_body(content = inline(Parser))`).
//!
//! `finish` runs once over the merged document (`app::openapi_json`). For
//! every operation it adds what the platform answers whatever the service
//! says, each 4xx/5xx with the error envelope (`#/components/schemas/Error`):
//!
//! - 429 `too_many_requests` and 503 (`request_timeout`, `store_unavailable`),
//!   both with `Retry-After`;
//! - 400 when the operation has parameters (`invalid_path`, `invalid_query`,
//!   a bad header): the extractors answer 400 for a value that does not parse;
//! - with a request body: the body `required`, 400 `malformed_json`, 415
//!   `unsupported_media_type`, 422 `invalid_field`, 408 `body_timeout` and
//!   413 `body_too_large`;
//! - with a bearer token (`security`): 401 `missing_token`/`invalid_token`.
//!
//! It also makes parameters say what the server does: path parameters are
//! required; a parameter's schema never admits `null` (a query string or a
//! header has no null; utoipa writes `["integer","null"]` or `{"oneOf":
//! [{"type": "null"}, X]}` for an `Option`).
//! `platform_paths` describes `/health`, `/ready`, `/metrics` and
//! `/openapi.json` themselves.

use serde_json::{json, Value};
use utoipa::openapi::schema::{
    AdditionalProperties, AnyOfBuilder, KnownFormat, Object, ObjectBuilder, Schema, SchemaFormat,
    SchemaType, Type,
};
use utoipa::openapi::RefOr;

/// The error envelope's schema, shared by every error answer.
pub fn error_schema() -> Value {
    json!({
        "type": "object",
        "required": ["error"],
        "additionalProperties": false,
        "properties": {"error": {
            "type": "object",
            "required": ["code", "message"],
            "additionalProperties": false,
            "properties": {
                "code": {"type": "string", "description": "stable, machine-readable"},
                "message": {"type": "string", "description": "for people: what to change"}
            }
        }}
    })
}

/// An error answer with the envelope.
pub fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

fn retry_after() -> Value {
    json!({"Retry-After": {
        "description": "seconds to wait before retrying",
        "schema": {"type": "integer", "minimum": 1}
    }})
}

/// Characters free text never holds: controls (except, in multi-line text,
/// newline and tab), bidirectional embeddings, overrides and isolates, and
/// line/paragraph separators.
fn refused_chars(multiline: bool) -> &'static str {
    if multiline {
        "\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069"
    } else {
        "\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069"
    }
}

/// The parsers' side of [`refused_chars`]: control characters (newline and
/// tab allowed when `multiline`), bidirectional embeddings, overrides and
/// isolates (a title with U+202E shows its end reversed), and the line and
/// paragraph separators.
pub fn refused_char(c: char, multiline: bool) -> bool {
    (c.is_control() && !(multiline && (c == '\n' || c == '\t')))
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// A free-text field checked as `min..=max` characters after trimming, with
/// no refused character (see `refused_chars`); at least one character that
/// is not white space when `min` > 0.
pub fn text_schema(min: usize, max: usize, multiline: bool) -> Object {
    let bad = refused_chars(multiline);
    let pattern = if min > 0 {
        format!("^[^{bad}]*[^\\s{bad}][^{bad}]*$")
    } else {
        format!("^[^{bad}]*$")
    };
    string_schema(min, max, Some(pattern))
}

/// Declares `$name`, a type standing for a schema built from the constants
/// a parser checks (utoipa's `minimum`/`maximum`/`pattern` attributes take
/// literals only), for `#[param(value_type = $name, inline)]`,
/// `#[schema(value_type = $name, inline)]` and, in `#[utoipa::path]`,
/// `("name" = inline($name), ...)` parameters; unlike `schema_with`, these
/// keep the field's description and whether it is required.
///
/// `schema_type!(for $type => ...)` gives a type that exists (a request
/// body's parser) its schema, for `request_body(content = inline($type))`.
#[macro_export]
macro_rules! schema_type {
    (for $ty:ty => $schema:expr) => {
        impl utoipa::PartialSchema for $ty {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::Schema::from($schema).into()
            }
        }

        impl utoipa::ToSchema for $ty {}
    };
    ($(#[$meta:meta])* $vis:vis $name:ident => $schema:expr) => {
        $(#[$meta])*
        $vis struct $name;

        $crate::schema_type!(for $name => $schema);
    };
}

/// An integer bounded `min..=max`.
pub fn int_schema(min: i64, max: i64) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(min))
        .maximum(Some(max))
        .build()
}

/// A string of `min..=max` characters matching `pattern` (when given).
pub fn string_schema(min: usize, max: usize, pattern: Option<String>) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(min))
        .max_length(Some(max))
        .pattern(pattern)
        .build()
}

/// An integer bounded `min..=max`, without a format (a count or an index
/// well inside 32 bits).
pub fn small_int_schema(min: i64, max: i64) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(min))
        .maximum(Some(max))
        .build()
}

/// A string matching `pattern`, of no stated length (the pattern bounds it).
pub fn pattern_schema(pattern: String) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .build()
}

/// A string in `format` (`Date`: YYYY-MM-DD; `DateTime`: RFC 3339).
pub fn format_schema(format: KnownFormat) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(format)))
        .build()
}

/// One of `values` (strings, or `null` where the field may be null).
pub fn enum_schema<V: Into<serde_json::Value>>(values: impl IntoIterator<Item = V>) -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .enum_values(Some(values))
        .build()
}

/// `schema`, or `null` (a field a client may send as null, meaning absent).
pub fn nullable(schema: impl Into<RefOr<Schema>>) -> AnyOfBuilder {
    AnyOfBuilder::new()
        .item(schema)
        .item(ObjectBuilder::new().schema_type(Type::Null))
}

/// An object with `properties` and no other field, `required` among them.
pub fn closed_object(
    properties: impl IntoIterator<Item = (&'static str, RefOr<Schema>)>,
    required: &[&str],
) -> ObjectBuilder {
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (name, schema) in properties {
        object = object.property(name, schema);
    }
    for name in required {
        object = object.required(*name);
    }
    object
}

/// `/health`, `/ready`, `/metrics` (when served on the main address) and
/// `/openapi.json`.
pub fn platform_paths(doc: &mut Value, with_metrics: bool) {
    let status = |s: &str| {
        json!({"type": "object", "required": ["status"], "additionalProperties": false,
               "properties": {"status": {"type": "string", "enum": [s]}}})
    };
    let json_ok = |d: &str, schema: Value, example: Value| {
        json!({"description": d,
               "content": {"application/json": {"schema": schema, "example": example}}})
    };
    let paths = doc["paths"].as_object_mut().expect("paths");
    paths.insert(
        "/health".into(),
        json!({"get": {"tags": ["platform"], "operationId": "health",
            "summary": "The process answers (no dependency is checked)",
            "description": "Public. Answers 200 as long as the process serves requests; a liveness probe. It does not touch the store: use /ready for that.",
            "responses": {"200": json_ok("alive", status("ok"), json!({"status": "ok"}))}}}),
    );
    paths.insert(
        "/ready".into(),
        json!({"get": {"tags": ["platform"], "operationId": "ready",
            "summary": "The store answers; 503 store_unavailable otherwise",
            "description": "Public. Answers 200 when the store answers a query, 503 with Retry-After otherwise; a readiness probe for a load balancer.",
            "responses": {"200": json_ok("ready", status("ready"), json!({"status": "ready"})),
                          "503": error_response("store_unavailable")}}}),
    );
    if with_metrics {
        paths.insert(
            "/metrics".into(),
            json!({"get": {"tags": ["platform"], "operationId": "metrics",
                "summary": "Prometheus text exposition (moved off this address by --metrics-listen)",
                "description": "Public on this address unless --metrics-listen moves it. Request counts and latencies by route, method and status, and the services' own gauges, in Prometheus' text format.",
                "responses": {"200": {"description": "metrics",
                    "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"},
                        "example": "# HELP throng_http_requests_total HTTP requests by route, method and status\n# TYPE throng_http_requests_total counter\nthrong_http_requests_total{method=\"GET\",route=\"/api/booking/places\",status=\"200\"} 12\n"}}}}}}),
        );
    }
    paths.insert(
        "/openapi.json".into(),
        json!({"get": {"tags": ["platform"], "operationId": "openapi",
            "summary": "This document",
            "description": "Public. The OpenAPI 3.1 description of every operation this server answers; /docs/ shows it as a searchable reference.",
            "responses": {"200": json_ok("the OpenAPI document", json!({"type": "object"}),
                json!({"openapi": "3.1.0", "info": {"title": "throng"}, "paths": {}}))}}}),
    );
}

/// Adds the shared answers and parameter rules to every operation of `doc`
/// (see the module's comment) and the envelope's schema to its components.
pub fn finish(doc: &mut Value) {
    doc["components"]["schemas"]["Error"] = error_schema();
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for item in paths.values_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !matches!(
                method.as_str(),
                "get" | "put" | "post" | "delete" | "patch" | "options" | "head"
            ) {
                continue;
            }
            let mut has_params = false;
            let params = op.get_mut("parameters").and_then(|p| p.as_array_mut());
            for p in params.into_iter().flatten() {
                has_params = true;
                if p["in"] == "path" {
                    p["required"] = json!(true);
                }
                strip_null(&mut p["schema"]);
            }
            let has_body = op.get("requestBody").is_some();
            if has_body {
                op["requestBody"]["required"] = json!(true);
            }
            let secured = op
                .get("security")
                .and_then(|s| s.as_array())
                .is_some_and(|s| !s.is_empty());
            let takes_body = has_body || matches!(method.as_str(), "post" | "put" | "patch");
            let Some(responses) = op.get_mut("responses").and_then(|r| r.as_object_mut()) else {
                continue;
            };
            let mut add = |status: &str, description: &str| {
                responses
                    .entry(status.to_string())
                    .or_insert_with(|| error_response(description));
            };
            add(
                "429",
                "too_many_requests: over capacity or over the client's rate; see Retry-After",
            );
            add(
                "503",
                "request_timeout (over --request-timeout-ms) or store_unavailable; see Retry-After",
            );
            if has_params {
                add(
                    "400",
                    "invalid_path, invalid_query or a header that does not parse",
                );
            }
            if secured {
                add(
                    "401",
                    "missing_token or invalid_token: send Authorization: Bearer <token>",
                );
            }
            if has_body {
                add(
                    "400",
                    "malformed_json: the body is not JSON (or a parameter does not parse)",
                );
                add(
                    "415",
                    "unsupported_media_type: send Content-Type: application/json",
                );
                add(
                    "422",
                    "invalid_field: the body parsed but a field is missing, of the wrong type or out of range; the message names it",
                );
            }
            if takes_body {
                add(
                    "408",
                    "body_timeout: the body did not arrive within --body-timeout-ms",
                );
                add("413", "body_too_large: over --body-limit-bytes");
            }
            for (status, response) in responses.iter_mut() {
                if status.starts_with('4') || status.starts_with('5') {
                    // Every error answer is the envelope, whatever the service wrote.
                    if response.get("content").is_none() {
                        response["content"] = error_response("")["content"].clone();
                    }
                    if status == "429" || status == "503" {
                        response["headers"] = retry_after();
                    }
                }
            }
        }
    }
}

/// `["integer", "null"]` -> `"integer"`, `{"oneOf": [null, X]}` -> `X`: a
/// parameter cannot be null.
fn strip_null(schema: &mut Value) {
    if let Some(types) = schema.get_mut("type").and_then(|t| t.as_array_mut()) {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types[0].clone();
            schema["type"] = only;
        }
    }
    if let Some(any) = schema.get_mut("oneOf").and_then(|t| t.as_array_mut()) {
        any.retain(|s| s.get("type") != Some(&json!("null")));
        // `{"oneOf": [X]}`, an `Option<X>` less its null, is X.
        if any.len() == 1 && schema.as_object().is_some_and(|o| o.len() == 1) {
            *schema = schema["oneOf"][0].take();
        }
    }
}
