//! `/openapi.json` says what the server does: the document's own rules, and
//! corner cases answered as it documents them (status and envelope).

use serde_json::{json, Value};
use throng::platform::auth::Role;

use crate::both_stores;
use crate::helpers::{Reply, StoreKind, TestServer};

both_stores!(
    the_document_describes_every_answer,
    every_operation_is_explained_with_examples,
    corner_cases_answer_as_documented
);

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "options", "head"];

async fn the_document_describes_every_answer(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let doc = s.api.get("/openapi.json").await.json();
    let envelope = json!("#/components/schemas/Error");
    assert_eq!(
        doc["components"]["schemas"]["Error"]["required"],
        json!(["error"])
    );
    for p in ["/health", "/ready", "/metrics", "/openapi.json"] {
        assert!(doc["paths"][p]["get"].is_object(), "{p} is described");
    }
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            operations += 1;
            let at = format!("{method} {path}");
            assert!(
                op["summary"].as_str().is_some_and(|s| !s.is_empty()),
                "{at} has a summary"
            );
            assert!(has_example(op), "{at} has an example");
            let responses = op["responses"].as_object().unwrap();
            for status in ["429", "503"] {
                let r = &responses[status];
                assert_eq!(
                    r["content"]["application/json"]["schema"]["$ref"], envelope,
                    "{at} {status}"
                );
                assert!(
                    r["headers"]["Retry-After"].is_object(),
                    "{at} {status} names Retry-After"
                );
            }
            for (status, r) in responses {
                // A browser navigation outside /api/ (the console's sign-in
                // with the provider) may refuse with a page in words.
                let page = !path.starts_with("/api/") && r["content"]["text/html"].is_object();
                if (status.starts_with('4') || status.starts_with('5')) && !page {
                    assert_eq!(
                        r["content"]["application/json"]["schema"]["$ref"], envelope,
                        "{at} {status}"
                    );
                }
            }
            for param in op["parameters"].as_array().into_iter().flatten() {
                let name = param["name"].as_str().unwrap();
                if param["in"] == "path" {
                    assert_eq!(
                        param["required"], true,
                        "{at}: path parameter {name} is required"
                    );
                    assert!(
                        path.contains(&format!("{{{name}}}")),
                        "{at}: {name} is in the path"
                    );
                }
                let ty = &param["schema"]["type"];
                assert!(
                    !(ty == "null" || ty.as_array().is_some_and(|t| t.contains(&json!("null")))),
                    "{at}: parameter {name} cannot be null"
                );
            }
            if op
                .get("parameters")
                .is_some_and(|p| p.as_array().is_some_and(|p| !p.is_empty()))
            {
                assert!(
                    responses.contains_key("400"),
                    "{at}: a parameter that does not parse is 400"
                );
            }
            if let Some(body) = op.get("requestBody") {
                assert_eq!(body["required"], true, "{at}: the body is required");
                // JSON, or another type where the body is a document of its
                // own (an election's roll, a CSV import: text/csv).
                let content = body["content"].as_object().unwrap();
                let schema = content
                    .get("application/json")
                    .or_else(|| content.values().next())
                    .map(|c| &c["schema"])
                    .unwrap_or(&Value::Null);
                assert!(
                    schema.is_object() && !schema.as_object().unwrap().is_empty(),
                    "{at}: the body has a schema"
                );
                for status in ["400", "408", "413", "415", "422"] {
                    assert!(responses.contains_key(status), "{at} documents {status}");
                }
            }
            if op
                .get("security")
                .is_some_and(|s| s.as_array().is_some_and(|s| !s.is_empty()))
            {
                assert!(responses.contains_key("401"), "{at} documents 401");
            }
        }
    }
    assert!(operations >= 40, "{operations} operations");
    // Bounds come from the handlers' constants.
    let slots = &doc["paths"]["/api/booking/places/{place_id}/slots"]["get"]["parameters"];
    let from = slots
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "from")
        .unwrap();
    assert_eq!(
        (&from["in"], &from["required"], &from["schema"]["format"]),
        (&json!("query"), &json!(true), &json!("date"))
    );
    let places = &doc["paths"]["/api/booking/places"]["get"]["parameters"];
    let size = places
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "size")
        .unwrap();
    assert_eq!(
        size["schema"]["maximum"],
        throng::services::booking::model::PLACES_PAGE_SIZE_MAX
    );
}

/// A developer reading the reference finds, for every operation, a summary,
/// a description, an example of the request body (when it takes one) and an
/// example of each successful answer that has a body. Fails naming every
/// operation that lacks one of them.
async fn every_operation_is_explained_with_examples(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let doc = s.api.get("/openapi.json").await.json();
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let at = format!("{} {path}", method.to_uppercase());
            let text = |key: &str| op[key].as_str().is_some_and(|s| !s.trim().is_empty());
            if !text("summary") {
                missing.push(format!("{at}: summary"));
            }
            if !text("description") {
                missing.push(format!("{at}: description"));
            }
            if let Some(body) = op.get("requestBody") {
                if !content_has_example(&doc, &body["content"]) {
                    missing.push(format!("{at}: example request body"));
                }
            }
            for (status, r) in op["responses"].as_object().unwrap() {
                if status.starts_with('2')
                    && r.get("content").is_some()
                    && !content_has_example(&doc, &r["content"])
                {
                    missing.push(format!("{at}: example answer {status}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "operations lacking what the reference shows:\n{}",
        missing.join("\n")
    );
}

/// Whether a media type of `content` has an example: its own
/// (`example`, `examples`) or its schema's (followed through `$ref`).
fn content_has_example(doc: &Value, content: &Value) -> bool {
    let Some(types) = content.as_object() else {
        return false;
    };
    !types.is_empty()
        && types.values().any(|media| {
            if media.get("example").is_some()
                || media["examples"].as_object().is_some_and(|e| !e.is_empty())
            {
                return true;
            }
            let mut schema = &media["schema"];
            if let Some(r) = schema["$ref"].as_str() {
                let name = r.rsplit('/').next().unwrap_or_default();
                schema = &doc["components"]["schemas"][name];
            }
            schema.get("example").is_some()
                || schema["examples"].as_array().is_some_and(|e| !e.is_empty())
        })
}

/// Whether `v` (an operation) shows an example anywhere: a parameter's,
/// the body's or an answer's.
fn has_example(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key("example") || o.values().any(has_example),
        Value::Array(a) => a.iter().any(has_example),
        _ => false,
    }
}

/// The whole document, as reviewed: a change to any operation, schema or
/// bound fails here until the snapshot is reviewed and updated
/// (`INSTA_UPDATE=always`, then read the diff).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_document_is_as_reviewed() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    let doc = s.api.get("/openapi.json").await.json();
    insta::assert_json_snapshot!("openapi", doc);
}

/// The router serves what the document states: every operation answers
/// from its handler (anything but the router's own 404 `route_not_found` or
/// 405 `method_not_allowed`), and so do the preflights and write-up paths
/// the document leaves out. Ids name nothing, so no stream opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_documented_operation_is_routed() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    let doc = s.api.get("/openapi.json").await.json();
    let concrete = |path: &str| {
        path.replace("{registration_id}", "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192")
            .replace("{tracker}", "Qm3r2y1sJ0cV8fJxW4o9kZ2nB7tH1aP6dE5gL3uM0iQ")
            .replace("{stream}", "order-17")
            .replace("{category}", "order")
            .replace("{name}", "invoicing")
            .replace("{place_id}", "999999")
            .replace("{day}", "2030-01-07")
            .replace("{course_id}", "999999")
            .replace("{comment_id}", "999999")
            .replace("{site_id}", "999999")
            .replace("{visitor_id}", "999999")
            .replace("{election_id}", "999999")
            .replace("{district_id}", "999999")
            .replace("{user_id}", "999999")
            .replace("{provider_id}", "999999")
            .replace("{kind}", "enrolments")
    };
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if METHODS.contains(&method.as_str()) {
                assert!(
                    !concrete(path).contains('{'),
                    "{path}: give its parameter a value"
                );
                routes.push((method.to_uppercase(), concrete(path)));
            }
        }
    }
    assert!(routes.len() >= 40, "{routes:?}");
    for path in [
        "/api/comments",
        "/api/comments/method/jsonfromdapper",
        "/api/comments/method/jsonfromlinq",
        "/api/comments/999999",
        "/api/comments/999999/reply",
        "/api/courses/999999/comments",
        "/api/courses/999999/rating",
        "/api/comments/demo-token",
        "/api/invites/sites/999999/state",
        "/api/invites/sites/999999/visitor",
    ] {
        routes.push(("OPTIONS".into(), path.into()));
    }
    for path in [
        "/api/comments/method/jsonfromdapper",
        "/api/comments/method/jsonfromlinq",
    ] {
        routes.push(("GET".into(), path.into()));
    }
    for (method, path) in routes {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = s
            .api
            .send(s.api.http.request(method.clone(), s.api.url(&path)))
            .await;
        let at = format!("{method} {path}");
        assert_ne!(r.status, 405, "{at} is routed");
        if r.status == 404 {
            // An unrouted path answers the JSON envelope; a routed page
            // may answer 404 as a page (the provider's sign-in when off).
            assert_ne!(
                r.error_code().as_deref(),
                Some("route_not_found"),
                "{at} is routed"
            );
        }
    }
}

/// `reply` has `status` and the envelope with `code`, and the document lists
/// `status` for `method path`.
#[track_caller]
fn documented(doc: &Value, method: &str, path: &str, reply: &Reply, status: u16, code: &str) {
    reply.assert_error(status, code);
    assert!(
        doc["paths"][path][method]["responses"][status.to_string()].is_object(),
        "{method} {path} answered {status} but does not document it"
    );
}

async fn corner_cases_answer_as_documented(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let api = &s.api;
    let doc = api.get("/openapi.json").await.json();
    let reg = "/api/booking/registrations";
    let r = api.raw_post(reg, "null", Some("application/json")).await;
    documented(&doc, "post", reg, &r, 422, "invalid_field");
    let r = api
        .raw_post(reg, "\"a string\"", Some("application/json"))
        .await;
    documented(&doc, "post", reg, &r, 422, "invalid_field");
    let r = api.raw_post(reg, "{", Some("application/json")).await;
    documented(&doc, "post", reg, &r, 400, "malformed_json");
    let r = api.raw_post(reg, "{}", None).await;
    documented(&doc, "post", reg, &r, 415, "unsupported_media_type");

    let slots = "/api/booking/places/{place_id}/slots";
    let r = api.get("/api/booking/places/1/slots").await;
    documented(&doc, "get", slots, &r, 400, "invalid_query");
    let r = api
        .get("/api/booking/places/9223372036854775808/slots?from=2030-01-01")
        .await;
    documented(&doc, "get", slots, &r, 400, "invalid_path");
    let r = api
        .get("/api/booking/places/1/slots?from=2030-01-01&days=15")
        .await;
    documented(&doc, "get", slots, &r, 422, "invalid_field");
    let places = "/api/booking/places";
    for q in ["size=101", "size=0", "skip=-1"] {
        let r = api.get(&format!("{places}?{q}")).await;
        documented(&doc, "get", places, &r, 422, "invalid_field");
    }

    let admin = s.token(Role::ADMIN);
    let get = |path: String| {
        let req = api.http.get(api.url(&path)).bearer_auth(&admin);
        api.send(req)
    };
    let all = "/api/events/all";
    for q in [
        "limit=0",
        "limit=1001",
        "type=1starts-with-a-digit",
        "typePrefix=a%20b",
    ] {
        let r = get(format!("{all}?{q}")).await;
        documented(&doc, "get", all, &r, 400, "invalid_query");
    }
    let r = get(format!("{all}?typePrefix=Slots")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = api.send(api.http.get(api.url(all))).await;
    documented(&doc, "get", all, &r, 401, "missing_token");
    let stream = "/api/events/streams/{stream}";
    let r = api
        .send(
            api.http
                .post(api.url("/api/events/streams/orders-1"))
                .bearer_auth(&admin)
                .header("content-type", "application/json")
                .body("null"),
        )
        .await;
    documented(&doc, "post", stream, &r, 422, "invalid_field");

    let sites = "/api/invites/sites";
    let site =
        |origin: &str| json!({"surveyUrl": "https://survey.example/s", "allowedOrigins": [origin]});
    let post = |body: Value| {
        api.send(
            api.http
                .post(api.url(sites))
                .bearer_auth(&admin)
                .json(&body),
        )
    };
    for bad in [
        "https://[::1",
        "https://a]b",
        "https://[::1]x",
        "https://[mj-53]",
    ] {
        let r = post(site(bad)).await;
        documented(&doc, "post", sites, &r, 422, "invalid_field");
    }
    let r = post(site("https://[::1]:8443")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = post(json!({"surveyUrl": "https://survey.example/s"})).await;
    documented(&doc, "post", sites, &r, 422, "invalid_field");
}
