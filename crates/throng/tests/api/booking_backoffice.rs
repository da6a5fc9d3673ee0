//! The back office on both stores: the staff role scoped to places, a
//! place's day as JSON and CSV with its audit events, check-in and
//! no-show, support lookups, bookings on a person's behalf, resent
//! confirmations and new access codes, a closed day, and every kind of
//! message delivered once to a test webhook and by email.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{person, registration_body, Reply, StoreKind, TestServer, FROM};
use throng::platform::auth::Role;
use throng::services::booking::model::{stream_of, BookingClock, Day};
use throng::store::NewEvent;

both_stores!(
    staff_act_on_their_places_only,
    the_day_list_as_json_and_csv,
    check_in_and_no_show_are_recorded,
    support_lookups_record_who_and_why,
    booking_on_a_persons_behalf,
    new_access_codes_and_resent_confirmations,
    a_closed_day_cancels_its_registrations_and_refuses_new_ones,
    a_day_closed_while_people_book_keeps_none,
    every_message_kind_is_delivered_once,
    messages_go_out_by_email,
    five_hundred_registrations_are_listed_whole
);

/// A token of `role` for `sub` with claims.
fn token(s: &TestServer, sub: &str, role: &str, claims: Value) -> String {
    let extra = claims.as_object().cloned().unwrap_or_default();
    s.state
        .keys
        .issue_with(sub, Role::new(leak(role)), 600, extra)
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn staff(s: &TestServer, places: Value) -> String {
    token(s, "nurse-7", "staff", json!({ "places": places }))
}

async fn get_as(s: &TestServer, path: &str, bearer: &str) -> Reply {
    s.api
        .send(s.api.http.get(s.api.url(path)).bearer_auth(bearer))
        .await
}

async fn post_as(s: &TestServer, path: &str, bearer: &str, body: Option<Value>) -> Reply {
    let mut req = s.api.http.post(s.api.url(path)).bearer_auth(bearer);
    if let Some(b) = body {
        req = req.json(&b);
    }
    s.api.send(req).await
}

async fn register(s: &TestServer, place: i64, day: &str, slot: i64, n: u64) -> (String, String) {
    let r = s.api.register(place, day, slot, person(n)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let j = r.json();
    (
        j["registrationId"].as_str().unwrap().to_string(),
        j["accessCode"].as_str().unwrap().to_string(),
    )
}

fn hdr(r: &Reply, name: &str) -> Option<String> {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn list_path(place: i64, day: &str) -> String {
    format!("/api/booking/places/{place}/days/{day}/registrations")
}

/// The events of a stream, as an admin reads them.
async fn stream_events(s: &TestServer, stream: &str) -> Vec<Value> {
    let r = get_as(
        s,
        &format!("/api/events/streams/{stream}?limit=1000"),
        &s.token(Role::ADMIN),
    )
    .await;
    if r.status == 404 {
        return Vec::new();
    }
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["events"].as_array().unwrap().clone()
}

async fn staff_act_on_their_places_only(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((3, 1, 5))).await;
    register(&s, 1, FROM, 0, 1).await;
    register(&s, 2, FROM, 0, 2).await;
    let of_1 = staff(&s, json!([1]));

    let r = get_as(&s, &list_path(1, FROM), &of_1).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["registrations"][0]["person"]["name"],
        "Test Person 1"
    );
    assert_eq!(hdr(&r, "cache-control").as_deref(), Some("no-store"));

    let r = get_as(&s, &list_path(2, FROM), &of_1).await;
    let message = r.assert_error(403, "not_your_place");
    assert!(message.contains("not place 2"), "{message}");
    assert!(!r.text().contains("Test Person 2"));

    // A comma-separated claim, as an identity provider may send it; "*"
    // covers every place.
    let of_2_3 = staff(&s, json!("2, 3"));
    assert_eq!(get_as(&s, &list_path(2, FROM), &of_2_3).await.status, 200);
    get_as(&s, &list_path(1, FROM), &of_2_3)
        .await
        .assert_error(403, "not_your_place");
    let everywhere = staff(&s, json!("*"));
    assert_eq!(
        get_as(&s, &list_path(1, FROM), &everywhere).await.status,
        200
    );

    // Admin passes; other roles, claims and no token do not.
    let admin = s.token(Role::ADMIN);
    assert_eq!(get_as(&s, &list_path(2, FROM), &admin).await.status, 200);
    let user = token(&s, "u", "user", json!({}));
    get_as(&s, &list_path(1, FROM), &user)
        .await
        .assert_error(403, "forbidden");
    let no_places = token(&s, "n", "staff", json!({}));
    get_as(&s, &list_path(1, FROM), &no_places)
        .await
        .assert_error(403, "no_places");
    for bad in [json!([]), json!("1,x"), json!(0), json!(true)] {
        get_as(&s, &list_path(1, FROM), &staff(&s, bad.clone()))
            .await
            .assert_error(403, "no_places");
    }
    s.api
        .get(&list_path(1, FROM))
        .await
        .assert_error(401, "missing_token");
    // The other routes check the place the same way.
    post_as(
        &s,
        &format!("/api/booking/places/2/days/{FROM}/close"),
        &of_1,
        None,
    )
    .await
    .assert_error(403, "not_your_place");
    let r = s.api.register(2, FROM, 1, person(9)).await;
    let id = r.json()["registrationId"].as_str().unwrap().to_string();
    for path in ["resend", "access-code"] {
        post_as(
            &s,
            &format!("/api/booking/staff/registrations/{id}/{path}"),
            &of_1,
            None,
        )
        .await
        .assert_error(403, "not_your_place");
    }
}

/// A day's reads, as the audit stream records them.
async fn day_reads(s: &TestServer) -> Vec<Value> {
    stream_events(s, "booking-audit")
        .await
        .into_iter()
        .filter(|e| e["type"] == "DayListRead")
        .collect()
}

async fn the_day_list_as_json_and_csv(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((2, 2, 5))).await;
    let ids = [
        register(&s, 1, FROM, 2, 1).await.0,
        register(&s, 1, FROM, 0, 2).await.0,
        register(&s, 1, FROM, 1, 3).await.0,
    ];
    register(&s, 2, FROM, 0, 4).await;
    let next_day = Day::parse("d", FROM).unwrap().plus(1).to_text();
    register(&s, 1, &next_day, 0, 5).await;
    let bearer = staff(&s, json!([1]));

    let list = get_as(&s, &list_path(1, FROM), &bearer).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let j = list.json();
    assert_eq!(j["count"], 3, "{j}");
    assert_eq!(j["closed"], false);
    assert_eq!(j["truncated"], false);
    let slots: Vec<i64> = j["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["timeSlot"].as_i64().unwrap())
        .collect();
    assert_eq!(slots, [0, 1, 2], "in slot order");
    assert_eq!(j["registrations"][0]["registrationId"], ids[1].as_str());
    assert_eq!(j["registrations"][0]["start"], "08:00");
    assert_eq!(j["registrations"][0]["person"], person(2));
    assert_eq!(j["registrations"][0]["attendance"], Value::Null);

    let r = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url(&list_path(1, FROM)))
                .bearer_auth(&bearer)
                .header("accept", "text/csv"),
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(hdr(&r, "content-type").unwrap().starts_with("text/csv"));
    assert_eq!(hdr(&r, "cache-control").as_deref(), Some("no-store"));
    let csv = r.text();
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "start,time_slot,registration_id,name,national_id,phone,email,attendance"
    );
    assert_eq!(lines.len(), 4, "{csv}");
    // A phone starts with '+': kept from being read as a formula.
    assert_eq!(
        lines[1],
        format!(
            "08:00,0,{},Test Person 2,900101/0002,'+421 900000002,person2@example.org,",
            ids[1]
        )
    );

    // Each read is recorded: who, which place and day, how.
    let reads = day_reads(&s).await;
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert_eq!(reads[0]["data"]["by"]["sub"], "nurse-7");
    assert_eq!(reads[0]["data"]["by"]["role"], "staff");
    assert_eq!(reads[0]["data"]["placeId"], 1);
    assert_eq!(reads[0]["data"]["day"], FROM);
    assert_eq!(reads[0]["data"]["format"], "json");
    assert_eq!(reads[1]["data"]["format"], "csv");
    assert!(reads[0]["created"].is_string());

    // Bad input: a day that is not a date, an unknown place.
    get_as(
        &s,
        "/api/booking/places/1/days/2030-02-30/registrations",
        &bearer,
    )
    .await
    .assert_error(422, "invalid_field");
    let admin = s.token(Role::ADMIN);
    get_as(&s, &list_path(99, FROM), &admin)
        .await
        .assert_error(404, "place_not_found");
    // A refused read is not recorded as a read.
    get_as(&s, &list_path(2, FROM), &bearer)
        .await
        .assert_error(403, "not_your_place");
    assert_eq!(day_reads(&s).await.len(), 2);
}

async fn check_in_and_no_show_are_recorded(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((2, 1, 5))).await;
    let (a, _) = register(&s, 1, FROM, 0, 1).await;
    let (b, _) = register(&s, 1, FROM, 1, 2).await;
    let (other, _) = register(&s, 2, FROM, 0, 3).await;
    let bearer = staff(&s, json!([1]));
    let mark = |id: &str, status: &str| {
        let (s, bearer, path) = (
            &s,
            bearer.clone(),
            format!("/api/booking/staff/registrations/{id}/attendance"),
        );
        let body = json!({ "status": status });
        async move { post_as(s, &path, &bearer, Some(body)).await }
    };
    let r = mark(&a, "checked_in").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["by"], "nurse-7");
    assert_eq!(mark(&b, "checked_in").await.status, 200);
    // The last word counts: a mistake is marked again.
    assert_eq!(mark(&b, "no_show").await.status, 200);
    let j = get_as(&s, &list_path(1, FROM), &bearer).await.json();
    assert_eq!(j["registrations"][0]["attendance"], "checked_in");
    assert_eq!(j["registrations"][0]["attendanceBy"], "nurse-7");
    assert!(j["registrations"][0]["attendanceAt"].is_string());
    assert_eq!(j["registrations"][1]["attendance"], "no_show");

    let events = stream_events(&s, &stream_of(&b)).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "RegistrationConfirmed",
            "RegistrationCheckedIn",
            "RegistrationNoShow"
        ]
    );
    assert_eq!(events[2]["data"]["by"]["sub"], "nurse-7");

    // Another place's registration, an unknown one, a bad status.
    mark(&other, "checked_in")
        .await
        .assert_error(403, "not_your_place");
    mark("01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "checked_in")
        .await
        .assert_error(404, "registration_not_found");
    mark("not-an-id", "checked_in")
        .await
        .assert_error(404, "registration_not_found");
    let r = mark(&a, "late").await;
    assert_eq!(r.status, 422, "{}", r.text());
    // A cancelled registration is not marked.
    let (c, code) = register(&s, 1, FROM, 2, 4).await;
    assert_eq!(s.api.cancel(&c, Some(&code)).await.status, 204);
    mark(&c, "checked_in")
        .await
        .assert_error(404, "registration_not_found");
}

async fn support_lookups_record_who_and_why(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((2, 1, 5))).await;
    let (a, _) = register(&s, 1, FROM, 0, 1).await;
    let (b, _) = register(&s, 2, FROM, 0, 2).await;
    let desk = staff(&s, json!("*"));
    let lookup = |body: Value, bearer: String| {
        let s = &s;
        async move { post_as(s, "/api/booking/staff/lookup", &bearer, Some(body)).await }
    };
    // By national id, written another way ('/' dropped): the blind index.
    let r = lookup(
        json!({"nationalId": "9001010001", "reason": "caller lost the SMS"}),
        desk.clone(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert_eq!(j["count"], 1);
    assert_eq!(j["registrations"][0]["registrationId"], a.as_str());
    assert_eq!(j["registrations"][0]["person"], person(1));
    assert_eq!(hdr(&r, "cache-control").as_deref(), Some("no-store"));
    // By registration id.
    let r = lookup(
        json!({"registrationId": b, "reason": "caller asks for the time"}),
        desk.clone(),
    )
    .await;
    assert_eq!(r.json()["registrations"][0]["placeId"], 2);
    // Staff of place 1 do not see place 2's registration.
    let r = lookup(
        json!({"registrationId": b, "reason": "caller asks for the time"}),
        staff(&s, json!([1])),
    )
    .await;
    assert_eq!(r.json()["count"], 0, "{}", r.text());
    // A day narrows it (the registration is on FROM).
    let r = lookup(
        json!({"registrationId": a, "day": "2031-01-01", "reason": "caller names a day"}),
        desk.clone(),
    )
    .await;
    assert_eq!(r.json()["count"], 0, "{}", r.text());
    // Nobody found is an empty answer.
    let r = lookup(
        json!({"nationalId": "111111/1111", "reason": "caller has no SMS"}),
        desk.clone(),
    )
    .await;
    assert_eq!(r.json()["count"], 0);

    let audit: Vec<Value> = stream_events(&s, "booking-audit")
        .await
        .into_iter()
        .filter(|e| e["type"] == "SupportLookup")
        .collect();
    assert_eq!(audit.len(), 5, "{audit:?}");
    assert_eq!(audit[0]["data"]["by"]["sub"], "nurse-7");
    assert_eq!(audit[0]["data"]["reason"], "caller lost the SMS");
    assert_eq!(audit[0]["data"]["lookedUpBy"], "nationalId");
    assert_eq!(audit[0]["data"]["registrationIds"], json!([a]));
    assert_eq!(audit[1]["data"]["lookedUpBy"], "registrationId");
    assert_eq!(audit[3]["data"]["registrationIds"], json!([]));
    // No national id in the log.
    assert!(!audit[0].to_string().contains("900101"));

    // A reason is required; one id, well formed; a token.
    for (body, code) in [
        (json!({"nationalId": "9001010001"}), 422),
        (json!({"nationalId": "9001010001", "reason": "x"}), 422),
        (
            json!({"nationalId": "9001010001", "reason": "a".repeat(501)}),
            422,
        ),
        (
            json!({"nationalId": "9001010001", "reason": "evil \u{202e} reversed"}),
            422,
        ),
        (json!({"reason": "no id given at all"}), 422),
        (
            json!({"registrationId": a, "day": "soon", "reason": "a day that is no date"}),
            422,
        ),
        (
            json!({"nationalId": "9001010001", "registrationId": null, "reason": "a null id"}),
            422,
        ),
        (
            json!({"nationalId": "9001010001", "registrationId": a, "reason": "both ids given"}),
            422,
        ),
        (
            json!({"nationalId": "1' OR '1'='1", "reason": "an injection attempt"}),
            422,
        ),
        (
            json!({"registrationId": "nope", "reason": "a malformed id here"}),
            422,
        ),
    ] {
        let r = lookup(body.clone(), desk.clone()).await;
        assert_eq!(r.status, code, "{body}: {}", r.text());
    }
    assert_eq!(
        stream_events(&s, "booking-audit").await.len(),
        5,
        "refused lookups are not recorded as lookups"
    );
    let user = token(&s, "u", "user", json!({}));
    lookup(
        json!({"nationalId": "9001010001", "reason": "not staff"}),
        user,
    )
    .await
    .assert_error(403, "forbidden");
}

async fn booking_on_a_persons_behalf(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((2, 1, 5))).await;
    let desk = staff(&s, json!([1]));
    let book = |place: i64, slot: i64, who: Value| {
        let (s, desk) = (&s, desk.clone());
        let body = registration_body(place, FROM, slot, who);
        async move { post_as(s, "/api/booking/staff/registrations", &desk, Some(body)).await }
    };
    let r = book(1, 0, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(hdr(&r, "cache-control").as_deref(), Some("no-store"));
    let j = r.json();
    let id = j["registrationId"].as_str().unwrap();
    // The code opens it as the person's own would.
    let code = j["accessCode"].as_str().unwrap();
    let got = s.api.get_registration(id, Some(code)).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["person"], person(1));
    let events = stream_events(&s, &stream_of(id)).await;
    let on_behalf = events
        .iter()
        .find(|e| e["type"] == "RegistrationBookedOnBehalf")
        .expect("recorded with who booked");
    assert_eq!(on_behalf["data"]["by"]["sub"], "nurse-7");
    assert_eq!(on_behalf["data"]["timeSlot"], 0);

    // The public booking's rules.
    book(1, 0, person(2)).await.assert_error(409, "slot_full");
    book(1, 1, person(1))
        .await
        .assert_error(409, "already_registered");
    let mut bad = person(3);
    bad["phone"] = json!("12");
    let message = book(1, 1, bad).await.assert_error(422, "invalid_field");
    assert!(message.contains("person.phone"), "{message}");
    book(1, 99, person(3))
        .await
        .assert_error(404, "slot_not_found");
    book(2, 0, person(3))
        .await
        .assert_error(403, "not_your_place");
    let r = post_as(
        &s,
        "/api/booking/staff/registrations",
        &desk,
        Some(registration_body(1, "2001-01-01", 1, person(3))),
    )
    .await;
    r.assert_error(422, "day_passed");
    // Nothing is left of the refused ones.
    assert_eq!(s.registrations().await, 1);
}

async fn new_access_codes_and_resent_confirmations(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((2, 1, 5))).await;
    let (id, old) = register(&s, 1, FROM, 0, 1).await;
    let desk = staff(&s, json!([1]));
    let r = post_as(
        &s,
        &format!("/api/booking/staff/registrations/{id}/access-code"),
        &desk,
        None,
    )
    .await;
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(r.json()["message"], "new_access_code");
    assert!(!r.text().contains(&old));
    // The old code stops working at once.
    s.api
        .get_registration(&id, Some(&old))
        .await
        .assert_error(404, "registration_not_found");
    let r = post_as(
        &s,
        &format!("/api/booking/staff/registrations/{id}/resend"),
        &desk,
        None,
    )
    .await;
    assert_eq!(r.status, 202, "{}", r.text());
    let types: Vec<String> = stream_events(&s, &stream_of(&id))
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        types,
        [
            "RegistrationConfirmed",
            "AccessCodeReissued",
            "ConfirmationResent"
        ]
    );
    let missing = "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192";
    for path in ["resend", "access-code"] {
        post_as(
            &s,
            &format!("/api/booking/staff/registrations/{missing}/{path}"),
            &desk,
            None,
        )
        .await
        .assert_error(404, "registration_not_found");
    }
}

async fn a_closed_day_cancels_its_registrations_and_refuses_new_ones(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((2, 2, 5))).await;
    let (a, code_a) = register(&s, 1, FROM, 0, 1).await;
    let (b, _) = register(&s, 1, FROM, 3, 2).await;
    let (elsewhere, _) = register(&s, 2, FROM, 0, 3).await;
    let desk = staff(&s, json!([1]));
    let close = format!("/api/booking/places/1/days/{FROM}/close");
    let r = post_as(&s, &close, &desk, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"placeId": 1, "day": FROM, "cancelled": 2, "alreadyClosed": false})
    );
    // The registrations are gone, the people told (events), the slots
    // no longer offered or bookable; another place's day is untouched.
    s.api
        .get_registration(&a, Some(&code_a))
        .await
        .assert_error(404, "registration_not_found");
    for id in [&a, &b] {
        let events = stream_events(&s, &stream_of(id)).await;
        assert_eq!(
            events.last().unwrap()["type"],
            "RegistrationCancelledByPlace"
        );
    }
    let list = get_as(&s, &list_path(1, FROM), &desk).await.json();
    assert_eq!(list["closed"], true);
    assert_eq!(list["count"], 0);
    let slots = s
        .api
        .get(&format!("/api/booking/places/1/slots?from={FROM}"))
        .await
        .json();
    assert!(
        slots["days"][0]["slots"]
            .as_array()
            .unwrap()
            .iter()
            .all(|slot| slot["free"] == false),
        "{slots}"
    );
    for slot in [0, 1, 4] {
        let r = s
            .api
            .register(1, FROM, slot, person(10 + slot as u64))
            .await;
        assert!(
            r.status == 409 || r.status == 404,
            "slot {slot} of a closed day: {} {}",
            r.status,
            r.text()
        );
    }
    let r = post_as(
        &s,
        "/api/booking/staff/registrations",
        &desk,
        Some(registration_body(1, FROM, 1, person(20))),
    )
    .await;
    assert!(r.status == 409 || r.status == 404, "{}", r.text());
    assert_eq!(
        get_as(&s, &list_path(2, FROM), &s.token(Role::ADMIN))
            .await
            .json()["count"],
        1
    );
    let _ = elsewhere;
    // The people are free to book another day.
    let next_day = Day::parse("d", FROM).unwrap().plus(1).to_text();
    register(&s, 1, &next_day, 0, 1).await;
    // Closing again changes nothing.
    let r = post_as(&s, &close, &desk, None).await;
    assert_eq!(r.json()["alreadyClosed"], true);
    assert_eq!(r.json()["cancelled"], 2);
    let closed = stream_events(&s, "booking-place-1").await;
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0]["type"], "PlaceDayClosed");
    assert_eq!(closed[0]["data"]["by"]["sub"], "nurse-7");
    // A day that has passed, a bad day, another place.
    post_as(
        &s,
        "/api/booking/places/1/days/2001-01-01/close",
        &desk,
        None,
    )
    .await
    .assert_error(422, "day_passed");
    post_as(&s, "/api/booking/places/1/days/tomorrow/close", &desk, None)
        .await
        .assert_error(422, "invalid_field");
    post_as(
        &s,
        &format!("/api/booking/places/2/days/{FROM}/close"),
        &desk,
        None,
    )
    .await
    .assert_error(403, "not_your_place");
}

/// Registrations racing a day's closing: whichever commits first, no
/// registration is left on the closed day.
async fn a_day_closed_while_people_book_keeps_none(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &[], Some((1, 1, 40))).await;
    let desk = staff(&s, json!([1]));
    let mut racing = Vec::new();
    for n in 0..40u64 {
        let api = s.api.clone();
        racing.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(n % 10)).await;
            api.register(1, FROM, n as i64, person(n + 1)).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(4)).await;
    let closed = post_as(
        &s,
        &format!("/api/booking/places/1/days/{FROM}/close"),
        &desk,
        None,
    )
    .await;
    assert_eq!(closed.status, 200, "{}", closed.text());
    let mut booked = Vec::new();
    for task in racing {
        let r = task.await.unwrap();
        match r.status {
            201 => booked.push(r.json()),
            404 | 409 => {}
            other => panic!("a registration racing a closing: {other} {}", r.text()),
        }
    }
    for b in &booked {
        let r = s
            .api
            .get_registration(
                b["registrationId"].as_str().unwrap(),
                b["accessCode"].as_str(),
            )
            .await;
        assert_eq!(r.status, 404, "a registration survived its day's closing");
    }
    assert_eq!(closed.json()["cancelled"], booked.len());
    assert_eq!(s.registrations().await, 0);
}

type Calls = Arc<Mutex<Vec<Value>>>;

/// A gateway on 127.0.0.1 that accepts everything and records bodies.
async fn gateway() -> (String, Calls) {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/sms",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(body);
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sms", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

/// Waits (at most 20 s) until `done` holds.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done()
}

fn sent(calls: &Calls, event_type: &str, id: &str) -> usize {
    calls
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == event_type && b["registrationId"] == id)
        .count()
}

async fn every_message_kind_is_delivered_once(kind: StoreKind) {
    let (url, calls) = gateway().await;
    let today = BookingClock::UTC.now().today;
    let (soon, later) = (today.plus(1).to_text(), today.plus(4).to_text());
    let flags = [
        "--with-notifier",
        "--notify-webhook",
        &url,
        "--booking-reminder-before",
        "2d",
        "--public-url",
        "https://booking.example",
    ];
    let s = TestServer::start_seeded_from(kind, &flags, &today.to_text(), Some((2, 5, 20))).await;
    let desk = staff(&s, json!([1, 2]));
    let wait = |event_type: &'static str, id: String| {
        let calls = calls.clone();
        async move {
            assert!(
                eventually(|| sent(&calls, event_type, &id) >= 1).await,
                "{event_type} of {id} was not delivered: {:?}",
                calls.lock().unwrap()
            );
        }
    };

    // A: confirmed, moved, a new code, a confirmation resent.
    let (a, code_a) = register(&s, 1, &later, 0, 1).await;
    wait("RegistrationConfirmed", a.clone()).await;
    let r = s
        .api
        .send(
            s.api
                .http
                .post(s.api.url(&format!("/api/booking/registrations/{a}/move")))
                .header("x-access-code", &code_a)
                .json(&json!({"placeId": 1, "day": later, "timeSlot": 5})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    wait("RegistrationMoved", a.clone()).await;
    post_as(
        &s,
        &format!("/api/booking/staff/registrations/{a}/access-code"),
        &desk,
        None,
    )
    .await;
    wait("AccessCodeReissued", a.clone()).await;
    post_as(
        &s,
        &format!("/api/booking/staff/registrations/{a}/resend"),
        &desk,
        None,
    )
    .await;
    wait("ConfirmationResent", a.clone()).await;
    // B: confirmed, then cancelled by the person.
    let (b, code_b) = register(&s, 1, &later, 1, 2).await;
    wait("RegistrationConfirmed", b.clone()).await;
    assert_eq!(s.api.cancel(&b, Some(&code_b)).await.status, 204);
    wait("RegistrationCancelled", b.clone()).await;
    // C: confirmed, then its place closes the day.
    let (c, _) = register(&s, 2, &later, 0, 3).await;
    wait("RegistrationConfirmed", c.clone()).await;
    let r = post_as(
        &s,
        &format!("/api/booking/places/2/days/{later}/close"),
        &desk,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    wait("RegistrationCancelledByPlace", c.clone()).await;
    // D: tomorrow, inside the reminder's two days.
    let (d, _) = register(&s, 1, &soon, 19, 4).await;
    wait("RegistrationConfirmed", d.clone()).await;
    wait("ReminderDue", d.clone()).await;
    // E: its slot withdrawn by changed opening hours.
    let (e, _) = register(&s, 1, &later, 2, 5).await;
    wait("RegistrationConfirmed", e.clone()).await;
    s.state
        .store
        .append_event(NewEvent::json(
            stream_of(&e),
            "SlotWithdrawn",
            &json!({"registrationId": e, "placeId": 1, "day": later, "timeSlot": 2}),
        ))
        .await
        .unwrap();
    wait("SlotWithdrawn", e.clone()).await;
    // F: booked by a call centre: its confirmation hands the code over.
    let r = post_as(
        &s,
        "/api/booking/staff/registrations",
        &desk,
        Some(registration_body(1, &later, 3, person(6))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let f = r.json()["registrationId"].as_str().unwrap().to_string();
    wait("RegistrationConfirmed", f.clone()).await;

    // Nothing more comes (a reminder scan, a round of the worker).
    tokio::time::sleep(Duration::from_millis(6000)).await;
    let expected = [
        ("RegistrationConfirmed", &a, "confirmation"),
        ("RegistrationMoved", &a, "move"),
        ("AccessCodeReissued", &a, "new_access_code"),
        ("ConfirmationResent", &a, "confirmation"),
        ("RegistrationConfirmed", &b, "confirmation"),
        ("RegistrationCancelled", &b, "cancellation"),
        ("RegistrationConfirmed", &c, "confirmation"),
        ("RegistrationCancelledByPlace", &c, "day_cancelled"),
        ("RegistrationConfirmed", &d, "confirmation"),
        ("ReminderDue", &d, "reminder"),
        ("RegistrationConfirmed", &e, "confirmation"),
        ("SlotWithdrawn", &e, "slot_withdrawn"),
        ("RegistrationConfirmed", &f, "confirmation"),
    ];
    let all = calls.lock().unwrap().clone();
    assert_eq!(all.len(), expected.len(), "{all:#?}");
    let by_key: HashMap<(String, String), &Value> = all
        .iter()
        .map(|b| {
            (
                (
                    b["type"].as_str().unwrap().to_string(),
                    b["registrationId"].as_str().unwrap().to_string(),
                ),
                b,
            )
        })
        .collect();
    for (event_type, id, kind_name) in expected {
        assert_eq!(sent(&calls, event_type, id), 1, "{event_type} of {id}");
        let body = by_key[&(event_type.to_string(), id.to_string())];
        assert_eq!(body["kind"], kind_name, "{body}");
        let link = body["manageUrl"].as_str().unwrap();
        assert!(
            link.starts_with("https://booking.example/booking/"),
            "{body}"
        );
        assert!(body["text"].as_str().unwrap().contains(link), "{body}");
        assert!(body["phone"].is_string(), "{body}");
        assert!(body["idempotencyKey"]
            .as_str()
            .unwrap()
            .starts_with("throng-event-"));
    }
    // The cancellations reached the people whose registrations are gone.
    let cancelled = by_key[&("RegistrationCancelled".to_string(), b.clone())];
    assert_eq!(cancelled["phone"], person(2)["phone"]);
    assert_eq!(cancelled["manageUrl"], "https://booking.example/booking/");
    let day_closed = by_key[&("RegistrationCancelledByPlace".to_string(), c.clone())];
    assert_eq!(day_closed["phone"], person(3)["phone"]);
    // The moved registration's messages name its new time.
    assert_eq!(
        by_key[&("RegistrationMoved".to_string(), a.clone())]["timeSlot"],
        5
    );
    // The new code's link opens the registration; the old code does not.
    let code_of = |body: &Value| {
        body["manageUrl"]
            .as_str()
            .unwrap()
            .split("&code=")
            .nth(1)
            .map(str::to_string)
    };
    let new_code = code_of(by_key[&("AccessCodeReissued".to_string(), a.clone())])
        .expect("the new code in the link's fragment");
    assert_eq!(
        s.api.get_registration(&a, Some(&new_code)).await.status,
        200
    );
    assert_ne!(new_code, code_a);
    let f_code = code_of(by_key[&("RegistrationConfirmed".to_string(), f.clone())])
        .expect("a booking on behalf hands its code over");
    assert_eq!(s.api.get_registration(&f, Some(&f_code)).await.status, 200);
    // A person's own booking got no code in a message (they were shown it).
    assert_eq!(
        code_of(by_key[&("RegistrationConfirmed".to_string(), d.clone())]),
        None
    );
    assert!(by_key[&("ReminderDue".to_string(), d.clone())]["text"]
        .as_str()
        .unwrap()
        .starts_with("Reminder:"));
    // Nothing parked; the worker is at the log's end.
    let stats = s.stats().await;
    assert_eq!(
        stats["notifierPosition"], stats["lastEventPosition"],
        "{stats}"
    );
}

/// A loopback SMTP server: answers each command and records each message's
/// recipients and data; bounded by the test's waits.
/// Each message's recipients and data, as the test's SMTP server got them.
type Mails = Arc<Mutex<Vec<(Vec<String>, String)>>>;

async fn smtp_server() -> (String, Mails) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mails: Mails = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("smtp://{}", listener.local_addr().unwrap());
    let seen = mails.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                write.write_all(b"220 test ESMTP\r\n").await.ok();
                let (mut to, mut data, mut in_data) = (Vec::new(), String::new(), false);
                while let Ok(Some(line)) = lines.next_line().await {
                    if in_data {
                        if line == "." {
                            in_data = false;
                            seen.lock()
                                .unwrap()
                                .push((std::mem::take(&mut to), std::mem::take(&mut data)));
                            write.write_all(b"250 queued\r\n").await.ok();
                        } else {
                            data.push_str(&line);
                            data.push('\n');
                        }
                        continue;
                    }
                    let upper = line.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                        b"250-test\r\n250 8BITMIME\r\n"
                    } else if upper.starts_with("RCPT TO:") {
                        to.push(line[8..].trim().trim_matches(['<', '>']).to_string());
                        b"250 ok\r\n"
                    } else if upper.starts_with("DATA") {
                        in_data = true;
                        b"354 go on\r\n"
                    } else if upper.starts_with("QUIT") {
                        write.write_all(b"221 bye\r\n").await.ok();
                        return;
                    } else {
                        b"250 ok\r\n"
                    };
                    write.write_all(reply).await.ok();
                }
            });
        }
    });
    (url, mails)
}

async fn messages_go_out_by_email(kind: StoreKind) {
    let (url, mails) = smtp_server().await;
    let flags = [
        "--with-notifier",
        "--notify-smtp-url",
        &url,
        "--notify-smtp-from",
        "Booking <booking@example.org>",
        "--public-url",
        "https://booking.example",
    ];
    let s = TestServer::start_seeded(kind, &flags, Some((1, 1, 5))).await;
    let (id, code) = register(&s, 1, FROM, 0, 1).await;
    let started = Instant::now();
    while mails.lock().unwrap().is_empty() && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(s.api.cancel(&id, Some(&code)).await.status, 204);
    while mails.lock().unwrap().len() < 2 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mails = mails.lock().unwrap().clone();
    assert_eq!(mails.len(), 2, "{mails:#?}");
    let (to, data) = &mails[0];
    assert_eq!(to, &["person1@example.org"]);
    assert!(
        data.contains("Subject: Your appointment is booked"),
        "{data}"
    );
    assert!(
        data.contains("From: Booking <booking@example.org>"),
        "{data}"
    );
    let unfolded = data.replace("=\n", "");
    assert!(
        unfolded.contains(&format!("https://booking.example/booking/manage#id=3D{id}"))
            || unfolded.contains(&format!("https://booking.example/booking/manage#id={id}")),
        "{data}"
    );
    assert!(data.contains("Message-ID: <throng-event-"), "{data}");
    assert!(
        mails[1]
            .1
            .contains("Subject: Your appointment is cancelled"),
        "{}",
        mails[1].1
    );
}

/// A place's day of 500 people is listed whole, as JSON and as CSV (how
/// fast: `throng bench booking`'s day-list rows).
async fn five_hundred_registrations_are_listed_whole(kind: StoreKind) {
    let s = TestServer::start_seeded(
        kind,
        &["--booking-one-registration", "off"],
        Some((1, 1, 500)),
    )
    .await;
    let mut tasks = Vec::new();
    for chunk in 0..10u64 {
        let api = s.api.clone();
        tasks.push(tokio::spawn(async move {
            for n in chunk * 50..(chunk + 1) * 50 {
                let r = api.register(1, FROM, n as i64, person(n + 1)).await;
                assert_eq!(r.status, 201, "{}", r.text());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let desk = staff(&s, json!([1]));
    let r = get_as(&s, &list_path(1, FROM), &desk).await;
    assert_eq!(r.json()["count"], 500);
    let csv = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url(&list_path(1, FROM)))
                .bearer_auth(&desk)
                .header("accept", "text/csv"),
        )
        .await;
    assert_eq!(csv.text().lines().count(), 501);
}
