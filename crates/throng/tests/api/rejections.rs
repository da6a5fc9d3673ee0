//! A request the framework cannot read (a query parameter, a body or a path
//! segment that does not parse, a body that is not JSON) is answered in the
//! platform's envelope with throng's own words: the field, parameter or
//! segment named, what it must be, and never the framework's wording.

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{person, registration_body, Reply, StoreKind, TestServer};

both_stores!(
    a_bad_query_names_the_parameter,
    bad_json_names_the_field,
    a_wrong_content_type_says_what_to_send,
    a_bad_path_segment_names_it
);

/// The framework's phrases that never reach a client.
const FRAMEWORK: [&str; 6] = [
    "Failed to deserialize",
    "Failed to parse",
    "Failed to buffer",
    "Expected request with",
    "Content-Type: application/json` header",
    "Cannot parse",
];

#[track_caller]
fn own_words(reply: &Reply, status: u16, code: &str) -> String {
    let message = reply.assert_error(status, code);
    for phrase in FRAMEWORK {
        assert!(!message.contains(phrase), "framework wording: {message}");
    }
    message
}

async fn a_bad_query_names_the_parameter(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 2, 4).await;
    let api = &s.api;
    let r = api
        .get("/api/booking/places/1/slots?from=2030-01-07&days=ten")
        .await;
    assert_eq!(
        own_words(&r, 400, "invalid_query"),
        "the query parameter `days` must be a whole number"
    );
    let r = api.get("/api/booking/places/1/slots?days=3").await;
    assert_eq!(
        own_words(&r, 400, "invalid_query"),
        "the query parameter `from` is required"
    );
    let r = api.get("/api/booking/places?skip=-&size=10").await;
    let m = own_words(&r, 400, "invalid_query");
    assert!(m.contains("`skip`"), "{m}");
    let r = api.get("/api/comments?courseId=x").await;
    let m = own_words(&r, 400, "invalid_query");
    assert!(m.contains("`courseId`"), "{m}");
    let r = api
        .get("/api/voting/elections/1/results?districtId=one")
        .await;
    let m = own_words(&r, 400, "invalid_query");
    assert!(m.contains("`districtId` must be a whole number"), "{m}");
}

async fn bad_json_names_the_field(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 2, 4).await;
    let api = &s.api;
    let reg = "/api/booking/registrations";
    let r = api
        .raw_post(reg, "{\"placeId\": 1,", Some("application/json"))
        .await;
    let m = own_words(&r, 400, "malformed_json");
    assert!(m.starts_with("the body is not valid JSON"), "{m}");
    assert!(m.contains("line 1"), "{m}");
    let r = api.raw_post(reg, "", Some("application/json")).await;
    assert_eq!(
        own_words(&r, 400, "malformed_json"),
        "the body is empty; send a JSON object"
    );
    let whole = registration_body(1, "2030-01-07", 0, person(4));
    let r = api
        .raw_post(reg, format!("{whole} {{}}"), Some("application/json"))
        .await;
    let m = own_words(&r, 400, "malformed_json");
    assert!(m.contains("something follows the value"), "{m}");
    let mut body: Value = registration_body(1, "2030-01-07", 0, person(1));
    body["placeId"] = json!("one");
    let r = api.post_json(reg, &body).await;
    assert_eq!(
        own_words(&r, 422, "invalid_field"),
        "the field `placeId` must be a whole number, not a string"
    );
    let mut body: Value = registration_body(1, "2030-01-07", 0, person(2));
    body["person"]["phone"] = json!(421_900_123_456_u64);
    let r = api.post_json(reg, &body).await;
    let m = own_words(&r, 422, "invalid_field");
    assert!(
        m.starts_with("the field `person.phone` must be a string"),
        "{m}"
    );
    assert!(!m.contains("421900123456"), "the value is not echoed: {m}");
    let mut body: Value = registration_body(1, "2030-01-07", 0, person(3));
    body.as_object_mut().unwrap().remove("placeId");
    let r = api.post_json(reg, &body).await;
    assert_eq!(
        own_words(&r, 422, "invalid_field"),
        "the field `placeId` is required"
    );
    let r = api
        .post_json(
            "/api/invites/sites",
            &json!({"name": "Shop", "colour": "red"}),
        )
        .await;
    // An admin call without a token is refused before its body is read.
    own_words(&r, 401, "missing_token");
}

async fn a_wrong_content_type_says_what_to_send(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 2, 4).await;
    let api = &s.api;
    let body = registration_body(1, "2030-01-07", 0, person(1)).to_string();
    let reg = "/api/booking/registrations";
    let r = api.raw_post(reg, body.clone(), None).await;
    let m = own_words(&r, 415, "unsupported_media_type");
    assert!(m.contains("no Content-Type"), "{m}");
    assert!(m.contains("Content-Type: application/json"), "{m}");
    let r = api
        .raw_post(reg, body.clone(), Some("text/plain; charset=utf-8"))
        .await;
    let m = own_words(&r, 415, "unsupported_media_type");
    assert!(m.contains("sent as text/plain"), "{m}");
    let r = api
        .raw_post(reg, body, Some("application/x-www-form-urlencoded"))
        .await;
    own_words(&r, 415, "unsupported_media_type");
    let r = api
        .raw_post("/api/voting/elections/1/login", "{}", Some("text/xml"))
        .await;
    own_words(&r, 415, "unsupported_media_type");
}

async fn a_bad_path_segment_names_it(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 2, 4).await;
    let api = &s.api;
    let r = api.get("/api/booking/places/seven").await;
    let m = own_words(&r, 400, "invalid_path");
    assert!(m.contains("must be a whole number"), "{m}");
    let r = api
        .get("/api/booking/places/1/days/2030-01-07x/registrations")
        .await;
    // Staff only: the token is asked for before the path is read, or the
    // path is named; either way in the platform's words.
    assert!(matches!(r.status, 400 | 401 | 422), "{}", r.text());
    let r = api.get("/api/voting/elections/99999999999999999999").await;
    let m = own_words(&r, 400, "invalid_path");
    assert!(m.contains("`election_id`") || m.contains("path"), "{m}");
    let r = api.get("/api/courses/abc/rating").await;
    let m = own_words(&r, 400, "invalid_path");
    assert!(m.starts_with("the path's"), "{m}");
    let r = api.get("/api/invites/sites/x/state").await;
    own_words(&r, 400, "invalid_path");
}
