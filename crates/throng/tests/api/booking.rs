//! Booking through HTTP: every endpoint and error code, the race for a slot
//! (in one process and across two sharing PostgreSQL), bad input, overload.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::Barrier;

use crate::helpers::{
    person, registration_body, Api, PgDb, ProcessServer, StoreKind, TestServer, FROM,
};
use crate::{both_stores, postgres_only};
use throng::platform::auth::{Claims, Role};
use throng::platform::secrets::Secrets;
use throng::services::booking::http::{
    CalendarOut, Moved, PlacesPage, Registered, RegistrationOut, SlotsPage,
};

const REGISTRATIONS: &str = "/api/booking/registrations";

both_stores!(
    places_pages_and_rejects_bad_paging,
    slots_of_a_place_and_their_errors,
    register_read_cancel_round_trip,
    register_errors_name_the_field,
    registration_lookups_that_fail_look_the_same,
    admin_stats_need_an_admin_token,
    race_for_ten_slots,
    bad_input_is_4xx_with_envelope_and_writes_nothing,
    small_body_limit_gives_413,
    overload_answers_429_and_accepted_requests_complete,
    mixed_register_and_cancel_stay_consistent,
    confirmations_reach_the_gateway_at_least_once,
    a_dead_gateway_does_not_slow_registrations,
    a_seed_by_another_process_is_served_without_restart,
    reseeding_is_refused_unless_forced,
    registrations_racing_a_live_reseed_take_each_slot_once,
    past_days_and_started_slots_are_refused_and_not_offered,
    move_takes_the_new_slot_and_frees_the_old,
    moves_racing_for_one_slot_have_one_winner,
    registration_calendar_file_is_rfc5545,
    access_codes_are_read_aloud_and_typed_loosely,
);
postgres_only!(
    race_for_ten_slots_across_two_processes,
    mixed_load_across_two_processes_stays_consistent,
    two_nodes_deliver_each_confirmation_once,
);

// ---------------------------------------------------------------- places

async fn places_pages_and_rejects_bad_paging(kind: StoreKind) {
    let s = TestServer::seeded(kind, 25, 1, 4).await;
    let api = &s.api;

    let first = api.get("/api/booking/places").await;
    assert_eq!(first.status, 200, "{}", first.text());
    let typed: PlacesPage = first.body();
    assert_eq!((typed.total, typed.skip, typed.size), (25, 0, 20));
    assert_eq!(typed.places.len(), 20);
    assert_eq!(typed.places[0].id, 1);
    let v = first.json();
    assert_eq!(v["total"], 25);
    assert_eq!(v["skip"], 0);
    assert_eq!(v["size"], 20, "default page size");
    assert_eq!(v["places"].as_array().unwrap().len(), 20);
    let p = &v["places"][0];
    assert_eq!(p["id"], 1);
    assert!(p["name"].as_str().is_some_and(|n| !n.is_empty()), "{p}");
    assert!(p["address"].as_str().is_some_and(|a| !a.is_empty()), "{p}");

    // Paging walks every place once, in id order.
    let mut ids = Vec::new();
    for skip in (0..25).step_by(10) {
        let r = api.places(skip, 10).await;
        assert_eq!(r.status, 200, "{}", r.text());
        ids.extend(
            r.json()["places"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["id"].as_i64().unwrap()),
        );
    }
    assert_eq!(ids, (1..=25).collect::<Vec<i64>>());
    let r = api.places(i64::MAX, 100).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["places"].as_array().unwrap().len(), 0);
    let r = api.places(100, 100).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["places"].as_array().unwrap().len(),
        0,
        "past the end: an empty page"
    );
    assert_eq!(
        api.places(0, 100).await.json()["places"]
            .as_array()
            .unwrap()
            .len(),
        25
    );

    for (query, status, code) in [
        ("size=0", 422, "invalid_field"),
        ("size=101", 422, "invalid_field"),
        ("size=-1", 422, "invalid_field"),
        ("skip=-1", 422, "invalid_field"),
        ("skip=abc", 400, "invalid_query"),
        ("size=1.5", 400, "invalid_query"),
        ("skip=99999999999999999999", 400, "invalid_query"),
        ("sort=name", 400, "invalid_query"),
        ("skip=0&size=10&page=2", 400, "invalid_query"),
    ] {
        let r = api.get(&format!("/api/booking/places?{query}")).await;
        let msg = r.assert_error(status, code);
        if status == 422 {
            let field = query.split('=').next().unwrap();
            assert!(
                msg.contains(field),
                "{query}: the message names {field}: {msg}"
            );
        }
    }
}

// ---------------------------------------------------------------- slots

async fn slots_of_a_place_and_their_errors(kind: StoreKind) {
    let s = TestServer::seeded(kind, 3, 14, 5).await;
    let api = &s.api;

    let r = api.slots(2, FROM, 3).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typed: SlotsPage = r.body();
    assert_eq!((typed.place_id, typed.from.as_str()), (2, FROM));
    assert_eq!(typed.days.len(), 3);
    assert_eq!(typed.days[0].slots.len(), 5);
    assert_eq!(
        (
            typed.days[0].slots[4].time_slot,
            typed.days[0].slots[4].start.as_str()
        ),
        (4, "09:20")
    );
    let v = r.json();
    assert_eq!(v["placeId"], 2);
    assert_eq!(v["from"], FROM);
    let days = v["days"].as_array().unwrap();
    assert_eq!(days.len(), 3);
    assert_eq!(days[0]["day"], "2030-01-01");
    assert_eq!(days[2]["day"], "2030-01-03");
    let slots = days[0]["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 5);
    assert_eq!(
        slots[0],
        json!({"timeSlot": 0, "start": "08:00", "free": true, "seats": 1, "seatsLeft": 1})
    );
    assert_eq!(
        slots[4],
        json!({"timeSlot": 4, "start": "09:20", "free": true, "seats": 1, "seatsLeft": 1})
    );

    // days defaults to 1; 14 is the most; days outside the seeded range are empty.
    assert_eq!(
        api.get(&format!("/api/booking/places/1/slots?from={FROM}"))
            .await
            .json()["days"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let r = api.slots(1, FROM, 14).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["days"].as_array().unwrap().len(), 14);
    let r = api.slots(1, "2029-12-31", 1).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["days"][0]["slots"].as_array().unwrap().len(), 0);

    for days in ["0", "15", "1000"] {
        let r = api
            .get(&format!(
                "/api/booking/places/1/slots?from={FROM}&days={days}"
            ))
            .await;
        assert!(r.assert_error(422, "invalid_field").contains("days"));
    }
    let r = api
        .get("/api/booking/places/1/slots?from=9999-12-30&days=2")
        .await;
    assert_eq!(
        r.json()["days"][1]["day"],
        "9999-12-31",
        "the last day there is"
    );
    let r = api
        .get("/api/booking/places/1/slots?from=9999-12-30&days=3")
        .await;
    assert!(
        r.assert_error(422, "invalid_field").contains("days"),
        "no day after 9999-12-31"
    );
    for days in ["-1", "x", "99999999999"] {
        let r = api
            .get(&format!(
                "/api/booking/places/1/slots?from={FROM}&days={days}"
            ))
            .await;
        r.assert_error(400, "invalid_query");
    }
    for from in [
        "2026-02-30",
        "2026-13-01",
        "2026-1-1",
        "tomorrow",
        "2030-01-01T00:00",
    ] {
        let r = api.slots(1, from, 1).await;
        let msg = r.assert_error(422, "invalid_field");
        assert!(
            msg.contains("from"),
            "{from}: the message names `from`: {msg}"
        );
    }
    api.get("/api/booking/places/1/slots")
        .await
        .assert_error(400, "invalid_query");
    api.get(&format!("/api/booking/places/1/slots?from={FROM}&x=1"))
        .await
        .assert_error(400, "invalid_query");

    for place in ["4", "-1", "0", "2147483648", "9223372036854775807"] {
        api.slots(place, FROM, 1)
            .await
            .assert_error(404, "place_not_found");
    }
    for place in ["99999999999999999999", "abc", "1.5", "%20"] {
        api.slots(place, FROM, 1)
            .await
            .assert_error(400, "invalid_path");
    }
}

// ---------------------------------------------------------------- registrations

async fn register_read_cancel_round_trip(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 2, 3).await;
    let api = &s.api;

    let r = api.register(2, "2030-01-02", 1, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let typed: Registered = r.body();
    assert_eq!(
        (typed.place_id, typed.day.as_str(), typed.time_slot),
        (2, "2030-01-02", 1)
    );
    let v = r.json();
    let id = v["registrationId"].as_str().unwrap().to_string();
    let code = v["accessCode"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{v}");
    // Twelve letters in three groups of four (60 bits; the id is needed too).
    assert_eq!(code.len(), 14, "{v}");
    assert_eq!(v["placeId"], 2);
    assert_eq!(v["day"], "2030-01-02");
    assert_eq!(v["timeSlot"], 1);
    assert_eq!(v.as_object().unwrap().len(), 5, "{v}");

    assert!(api.taken_slots(2, FROM, 2).await == vec![("2030-01-02".to_string(), 1)]);
    api.register(2, "2030-01-02", 1, person(2))
        .await
        .assert_error(409, "slot_full");

    let r = api.get_registration(&id, Some(&code)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typed: RegistrationOut = r.body();
    assert_eq!(
        (typed.registration_id.as_str(), typed.start.as_deref()),
        (id.as_str(), Some("08:20"))
    );
    assert_eq!(typed.person, person(1));
    let g = r.json();
    assert_eq!(g["registrationId"], id.as_str());
    assert_eq!(g["placeId"], 2);
    assert_eq!(g["day"], "2030-01-02");
    assert_eq!(g["timeSlot"], 1);
    assert_eq!(g["start"], "08:20");
    assert!(g["placeName"].as_str().is_some(), "{g}");
    assert!(
        g["createdAt"].as_str().is_some_and(|t| t.starts_with("20")),
        "{g}"
    );
    assert_eq!(g["person"], person(1));
    assert!(
        g.get("accessCode").is_none(),
        "the code is never shown again: {g}"
    );

    // Whitespace around fields is trimmed, and the trimmed value is stored;
    // whole numbers written with a fraction are integers.
    let mut padded = person(3);
    padded["name"] = json!("  Padded Name  ");
    let mut body = registration_body(1, FROM, 0, padded);
    body["placeId"] = json!(1.0);
    body["timeSlot"] = json!(0.0);
    let r = api
        .send(api.http.post(api.url(REGISTRATIONS)).json(&body))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (id2, code2) = ids(&r);
    assert_eq!(
        api.get_registration(&id2, Some(&code2)).await.json()["person"]["name"],
        "Padded Name"
    );

    // Cancel: a wrong code changes nothing, the right one frees the slot.
    api.cancel(&id, Some("wrong"))
        .await
        .assert_error(404, "registration_not_found");
    api.cancel(&id, None)
        .await
        .assert_error(404, "registration_not_found");
    assert_eq!(api.get_registration(&id, Some(&code)).await.status, 200);
    let r = api.cancel(&id, Some(&code)).await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty());
    api.get_registration(&id, Some(&code))
        .await
        .assert_error(404, "registration_not_found");
    api.cancel(&id, Some(&code))
        .await
        .assert_error(404, "registration_not_found");
    assert!(api.taken_slots(2, FROM, 2).await.is_empty());
    assert_eq!(s.registrations().await, 1);

    // The freed slot can be booked again, by someone else.
    let r = api.register(2, "2030-01-02", 1, person(4)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (id3, code3) = ids(&r);
    assert_ne!(id3, id);
    assert_eq!(
        api.get_registration(&id3, Some(&code3)).await.json()["person"],
        person(4)
    );
    assert_eq!(s.registrations().await, 2);

    // Every change is in the event log, without personal data.
    let events = crate::helpers::log_events(&s.state.store, 0, 100).await;
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "SlotsOpened",
            "RegistrationConfirmed",
            "RegistrationConfirmed",
            "RegistrationCancelled",
            "RegistrationConfirmed"
        ]
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.position, i as i64 + 1, "gapless positions");
    }
}

fn ids(r: &crate::helpers::Reply) -> (String, String) {
    let v = r.json();
    (
        v["registrationId"].as_str().unwrap().to_string(),
        v["accessCode"].as_str().unwrap().to_string(),
    )
}

async fn register_errors_name_the_field(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 2, 3).await;
    let api = &s.api;

    api.register(3, FROM, 0, person(1))
        .await
        .assert_error(404, "place_not_found");
    api.register(1 << 40, FROM, 0, person(1))
        .await
        .assert_error(404, "place_not_found");
    api.register(1, FROM, 3, person(1))
        .await
        .assert_error(404, "slot_not_found");
    api.register(1, "2030-01-03", 0, person(1))
        .await
        .assert_error(404, "slot_not_found");
    api.register(1, "2029-12-31", 0, person(1))
        .await
        .assert_error(404, "slot_not_found");

    let bad_top: [(&str, Value, &str); 9] = [
        ("placeId", json!(0), "placeId"),
        ("placeId", json!(-1), "placeId"),
        ("day", json!("2026-02-30"), "day"),
        ("day", json!("01.01.2030"), "day"),
        ("day", json!(""), "day"),
        ("timeSlot", json!(-1), "timeSlot"),
        ("timeSlot", json!(1440), "timeSlot"),
        ("timeSlot", json!(i64::MAX), "timeSlot"),
        ("timeSlot", json!(i64::MIN), "timeSlot"),
    ];
    for (field, value, named) in bad_top {
        let mut body = registration_body(1, FROM, 0, person(1));
        body[field] = value.clone();
        let msg = api
            .post_json(REGISTRATIONS, &body)
            .await
            .assert_error(422, "invalid_field");
        assert!(
            msg.contains(named),
            "{field}={value}: the message names {named}: {msg}"
        );
    }

    let bad_person: [(&str, Value); 16] = [
        ("name", json!("")),
        ("name", json!("   ")),
        ("name", json!("x".repeat(201))),
        ("name", json!("line\nbreak")),
        ("nationalId", json!("")),
        ("nationalId", json!("1' OR '1'='1")),
        ("nationalId", json!("1".repeat(33))),
        ("phone", json!("12345")),
        ("phone", json!("1234567890123456")),
        ("phone", json!("+421-900")),
        ("phone", json!("90012345+")),
        ("email", json!("no-at-sign")),
        ("email", json!("a@b")),
        ("email", json!("@example.org")),
        ("email", json!("a b@example.org")),
        ("email", json!(format!("{}@example.org", "x".repeat(250)))),
    ];
    for (field, value) in bad_person {
        let mut p = person(1);
        p[field] = value.clone();
        let msg = api
            .register(1, FROM, 0, p)
            .await
            .assert_error(422, "invalid_field");
        assert!(
            msg.contains(&format!("person.{field}")),
            "{field}={value}: {msg}"
        );
        if let Some(text) = value
            .as_str()
            .filter(|t| t.trim().len() > 3 && !msg.contains("name@example.org"))
        {
            assert!(
                !msg.contains(text.trim()),
                "the message never echoes personal data: {msg}"
            );
        }
    }

    // Missing and unknown fields, at the top and in person.
    for missing in ["placeId", "day", "timeSlot", "person"] {
        let mut body = registration_body(1, FROM, 0, person(1));
        body.as_object_mut().unwrap().remove(missing);
        let msg = api
            .post_json(REGISTRATIONS, &body)
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.contains(missing), "{msg}");
    }
    for missing in ["name", "nationalId", "phone", "email"] {
        let mut p = person(1);
        p.as_object_mut().unwrap().remove(missing);
        let msg = api
            .register(1, FROM, 0, p)
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.contains(missing), "{msg}");
    }
    let mut body = registration_body(1, FROM, 0, person(1));
    body["admin"] = json!(true);
    assert!(api
        .post_json(REGISTRATIONS, &body)
        .await
        .assert_error(422, "invalid_field")
        .contains("admin"));
    let mut p = person(1);
    p["birthDate"] = json!("1990-01-01");
    let msg = api
        .register(1, FROM, 0, p)
        .await
        .assert_error(422, "invalid_field");
    assert!(msg.contains("birthDate"), "{msg}");

    assert_eq!(s.registrations().await, 0, "nothing was written");
    assert!(api.taken_slots(1, FROM, 2).await.is_empty());
}

async fn registration_lookups_that_fail_look_the_same(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 2).await;
    let api = &s.api;
    let r = api.register(1, FROM, 0, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (id, code) = ids(&r);
    let unknown = uuid::Uuid::new_v4().to_string();
    let upper = id.to_uppercase();

    let mut answers = Vec::new();
    for (rid, c) in [
        (id.as_str(), Some("wrong-code")),
        (id.as_str(), Some("")),
        (id.as_str(), None),
        (unknown.as_str(), Some(code.as_str())),
        ("not-a-uuid", Some(code.as_str())),
        ("1", Some(code.as_str())),
        (upper.as_str(), Some(code.as_str())),
    ] {
        let r = api.get_registration(rid, c).await;
        r.assert_error(404, "registration_not_found");
        answers.push(r.text());
        api.cancel(rid, c)
            .await
            .assert_error(404, "registration_not_found");
    }
    answers.dedup();
    assert_eq!(
        answers.len(),
        1,
        "every failed lookup answers byte for byte the same"
    );
    // A very long id and code are no different.
    let long = "a".repeat(10_000);
    api.get_registration(&long, Some(&long))
        .await
        .assert_error(404, "registration_not_found");
    // Nothing above cancelled anything.
    assert_eq!(api.get_registration(&id, Some(&code)).await.status, 200);
    assert_eq!(
        api.get_registration(&id, Some(&format!("  {code} ")))
            .await
            .status,
        200
    );
}

// ---------------------------------------------------------------- admin

async fn admin_stats_need_an_admin_token(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 1, 3).await;
    let api = &s.api;
    assert_eq!(api.register(1, FROM, 0, person(1)).await.status, 201);

    api.stats_reply(None)
        .await
        .assert_error(401, "missing_token");
    let r = api
        .send(
            api.http
                .get(api.url("/api/booking/admin/stats"))
                .header("authorization", "Basic YTpi"),
        )
        .await;
    r.assert_error(401, "invalid_token");
    api.stats_reply(Some("not.a.token"))
        .await
        .assert_error(401, "invalid_token");

    // Signed with another secret, or with none at all.
    let forged =
        throng::platform::auth::TokenKeys::new(&[9u8; 32]).issue("mallory", Role::ADMIN, 600);
    api.stats_reply(Some(&forged))
        .await
        .assert_error(401, "invalid_token");
    let unsigned = {
        use base64::Engine;
        let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let now = throng::platform::clock::now_ms() / 1000;
        format!(
            "{}.{}.",
            b64(json!({"alg": "none", "typ": "JWT"})),
            b64(json!({"sub": "mallory", "role": "admin", "iat": now, "exp": now + 600}))
        )
    };
    api.stats_reply(Some(&unsigned))
        .await
        .assert_error(401, "invalid_token");

    // Expired (past the leeway), signed with the server's own secret.
    let secret = Secrets::load_or_create(&s.data_dir).unwrap().token_secret;
    let now = (throng::platform::clock::now_ms() / 1000) as u64;
    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &Claims {
            sub: "old-admin".into(),
            role: Role::ADMIN.to_string(),
            iat: now - 7200,
            exp: now - 3600,
        },
        &jsonwebtoken::EncodingKey::from_secret(&secret),
    )
    .unwrap();
    api.stats_reply(Some(&expired))
        .await
        .assert_error(401, "token_expired");

    for role in [
        throng::services::comments::USER,
        throng::services::comments::PROVIDER,
    ] {
        api.stats_reply(Some(&s.token(role)))
            .await
            .assert_error(403, "forbidden");
    }

    let r = api.stats_reply(Some(&s.token(Role::ADMIN))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["places"], 2);
    assert_eq!(v["slots"], 6);
    assert_eq!(v["registrations"], 1);
    assert_eq!(
        v["lastEventPosition"], 2,
        "SlotsOpened, RegistrationConfirmed: {v}"
    );
    assert_eq!(
        v["notifierPosition"], 0,
        "the notifier is off in this test: {v}"
    );
}

// ---------------------------------------------------------------- the race

/// Fires `clients` registrations at once (behind a barrier), each for one of
/// `slots` slots of place 1 on FROM, split over `apis` round-robin.
/// Returns (answers 201, answers 409, other answers).
async fn race(
    apis: &[Api],
    clients: usize,
    slots: i64,
) -> (Vec<(i64, String, String)>, usize, Vec<String>) {
    let barrier = Arc::new(Barrier::new(clients));
    let mut tasks = Vec::with_capacity(clients);
    for i in 0..clients {
        let api = apis[i % apis.len()].clone();
        let barrier = barrier.clone();
        let slot = (i as i64) % slots;
        tasks.push(tokio::spawn(async move {
            let req = api.register_request(1, FROM, slot, person(i as u64));
            barrier.wait().await;
            (slot, api.send(req).await)
        }));
    }
    let (mut won, mut lost, mut other) = (Vec::new(), 0, Vec::new());
    for t in tasks {
        let (slot, r) = t.await.expect("client task");
        match r.status {
            201 => {
                let (id, code) = ids(&r);
                won.push((slot, id, code));
            }
            409 => {
                r.assert_error(409, "slot_full");
                lost += 1;
            }
            _ => other.push(format!("{} {}", r.status, r.text())),
        }
    }
    (won, lost, other)
}

fn assert_one_winner_per_slot(won: &[(i64, String, String)], slots: i64) {
    let distinct: HashSet<i64> = won.iter().map(|w| w.0).collect();
    assert_eq!(distinct.len() as i64, slots, "each slot won once: {won:?}");
    assert_eq!(won.len() as i64, slots, "exactly one 201 per slot: {won:?}");
}

async fn race_for_ten_slots(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 1, 10).await;
    let (won, lost, other) = race(std::slice::from_ref(&s.api), 200, 10).await;
    assert!(other.is_empty(), "only 201 and 409: {other:?}");
    assert_one_winner_per_slot(&won, 10);
    assert_eq!(lost, 190);
    assert_eq!(s.registrations().await, 10);
    assert_eq!(s.api.taken_slots(1, FROM, 1).await.len(), 10);
    // Each winner holds the slot it asked for.
    for (slot, id, code) in &won {
        let r = s.api.get_registration(id, Some(code)).await;
        assert_eq!(r.json()["timeSlot"], *slot);
    }
    let events = crate::helpers::log_events(&s.state.store, 0, 1000).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event_type == "RegistrationConfirmed")
            .count(),
        10
    );
}

async fn race_for_ten_slots_across_two_processes(_kind: StoreKind) {
    let db = PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    crate::helpers::seed_with_cli(dir.path(), Some(&db.url), 2, 1, 10).await;
    // Both nodes start at once on one database and one data dir (shared secrets).
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
    );
    let (won, lost, other) = race(&[a.api.clone(), b.api.clone()], 200, 10).await;
    assert!(other.is_empty(), "only 201 and 409: {other:?}");
    assert_one_winner_per_slot(&won, 10);
    assert_eq!(lost, 190);
    let token = a.admin_token();
    assert_eq!(a.api.stats(&token).await["registrations"], 10);
    assert_eq!(b.api.stats(&token).await["registrations"], 10);
    // A registration made on one node is readable on the other.
    for (_, id, code) in &won {
        assert_eq!(a.api.get_registration(id, Some(code)).await.status, 200);
        assert_eq!(b.api.get_registration(id, Some(code)).await.status, 200);
    }
}

// ---------------------------------------------------------------- bad input

/// Bodies that must each get a 4xx envelope and write nothing.
fn bad_bodies() -> Vec<(&'static str, Vec<u8>, Option<&'static str>, u16)> {
    let valid = registration_body(1, FROM, 0, person(1));
    let with = |field: &str, raw: &str| -> Vec<u8> {
        let mut v = valid.clone();
        v[field] = json!("__RAW__");
        v.to_string().replace("\"__RAW__\"", raw).into_bytes()
    };
    let json_ct = Some("application/json");
    let mut invalid_utf8 =
        br#"{"placeId":1,"day":"2030-01-01","timeSlot":0,"person":{"name":"A"#.to_vec();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3, 0x28]);
    invalid_utf8.extend_from_slice(
        br#"","nationalId":"900101/0001","phone":"+421900000001","email":"a@example.org"}}"#,
    );
    let mut sql_name = valid.clone();
    sql_name["person"]["name"] = json!("1; DROP TABLE booking_slots; --");
    sql_name["timeSlot"] = json!(1440); // invalid elsewhere, so nothing may be written
    let mut sql_id = valid.clone();
    sql_id["person"]["nationalId"] = json!("1; DROP TABLE booking_slots; --");
    let mut sql_day = valid.clone();
    sql_day["day"] = json!("2030-01-01'; DROP TABLE booking_slots; --");
    let mut nul = valid.clone();
    nul["person"]["name"] = json!("A\u{0}B");
    vec![
        ("malformed JSON", b"{\"placeId\": 1,".to_vec(), json_ct, 400),
        (
            "not JSON at all",
            b"placeId=1&day=2030-01-01".to_vec(),
            json_ct,
            400,
        ),
        (
            "trailing garbage",
            [valid.to_string().as_bytes(), b"}"].concat(),
            json_ct,
            400,
        ),
        ("empty body", Vec::new(), json_ct, 400),
        ("JSON null", b"null".to_vec(), json_ct, 422),
        ("JSON array", b"[]".to_vec(), json_ct, 422),
        ("placeId as string", with("placeId", "\"1\""), json_ct, 422),
        ("placeId -1", with("placeId", "-1"), json_ct, 422),
        ("placeId 1e30", with("placeId", "1e30"), json_ct, 422),
        (
            "placeId 2^63",
            with("placeId", "9223372036854775808"),
            json_ct,
            422,
        ),
        (
            "placeId -2^63-1",
            with("placeId", "-9223372036854775809"),
            json_ct,
            422,
        ),
        ("placeId 1.5", with("placeId", "1.5"), json_ct, 422),
        ("placeId null", with("placeId", "null"), json_ct, 422),
        ("timeSlot 1.5", with("timeSlot", "1.5"), json_ct, 422),
        (
            "timeSlot 2^63",
            with("timeSlot", "9223372036854775808"),
            json_ct,
            422,
        ),
        ("timeSlot true", with("timeSlot", "true"), json_ct, 422),
        ("day as number", with("day", "20300101"), json_ct, 422),
        (
            "day impossible",
            with("day", "\"2030-02-30\""),
            json_ct,
            422,
        ),
        (
            "day year 0 (passed)",
            with("day", "\"0000-01-01\""),
            json_ct,
            422,
        ),
        (
            "day far future",
            with("day", "\"9999-12-31\""),
            json_ct,
            404,
        ),
        ("person as string", with("person", "\"x\""), json_ct, 422),
        (
            "person phone as number",
            with(
                "person",
                r#"{"name":"A","nationalId":"1","phone":421900123456,"email":"a@example.org"}"#,
            ),
            json_ct,
            422,
        ),
        (
            "SQL in name",
            sql_name.to_string().into_bytes(),
            json_ct,
            422,
        ),
        (
            "SQL in nationalId",
            sql_id.to_string().into_bytes(),
            json_ct,
            422,
        ),
        ("SQL in day", sql_day.to_string().into_bytes(), json_ct, 422),
        ("NUL in name", nul.to_string().into_bytes(), json_ct, 422),
        ("invalid UTF-8", invalid_utf8, json_ct, 400),
        (
            "missing Content-Type",
            valid.to_string().into_bytes(),
            None,
            415,
        ),
        (
            "text/plain",
            valid.to_string().into_bytes(),
            Some("text/plain"),
            415,
        ),
        (
            "form content type",
            valid.to_string().into_bytes(),
            Some("application/x-www-form-urlencoded"),
            415,
        ),
        ("body over 64 KiB", over_limit_body(64 * 1024), json_ct, 413),
        ("body of 1 MiB", over_limit_body(1024 * 1024), json_ct, 413),
        (
            "deeply nested",
            format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            json_ct,
            422,
        ),
    ]
}

/// A valid registration padded past `limit` bytes with spaces.
fn over_limit_body(limit: usize) -> Vec<u8> {
    let mut body = registration_body(1, FROM, 0, person(1))
        .to_string()
        .into_bytes();
    body.resize(limit + 1, b' ');
    body
}

async fn bad_input_is_4xx_with_envelope_and_writes_nothing(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 3).await;
    let api = &s.api;
    let before = s.stats().await;
    for (what, body, ct, status) in bad_bodies() {
        let r = api.raw_post(REGISTRATIONS, body, ct).await;
        assert_eq!(r.status, status, "{what}: {}", r.text());
        let code = r
            .error_code()
            .unwrap_or_else(|| panic!("{what}: no envelope: {}", r.text()));
        r.assert_envelope(&code);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            !msg.contains("421900123456"),
            "{what}: personal data echoed: {msg}"
        );
    }
    // SQL-looking strings are data: a valid registration may carry them in
    // the name, and they come back as they were sent.
    let mut p = person(7);
    p["name"] = json!("Robert'); DROP TABLE booking_slots; --");
    let r = api.register(1, FROM, 2, p.clone()).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (id, code) = ids(&r);
    assert_eq!(
        api.get_registration(&id, Some(&code)).await.json()["person"],
        p
    );

    let after = s.stats().await;
    assert_eq!(
        after["registrations"],
        before["registrations"].as_i64().unwrap() + 1,
        "only the valid one"
    );
    assert_eq!(after["slots"], before["slots"], "booking_slots is intact");
    assert_eq!(
        after["lastEventPosition"],
        before["lastEventPosition"].as_i64().unwrap() + 1
    );
    assert_eq!(
        api.taken_slots(1, FROM, 1).await,
        vec![(FROM.to_string(), 2)]
    );

    // Unknown routes and wrong methods: the same envelope.
    for path in [
        "/nope",
        "/api/booking",
        "/api/booking/place",
        "/api/booking/registrations/x/y",
    ] {
        api.get(path).await.assert_error(404, "route_not_found");
    }
    api.raw_post("/nope", "{}", Some("application/json"))
        .await
        .assert_error(404, "route_not_found");
    api.get(REGISTRATIONS)
        .await
        .assert_error(405, "method_not_allowed");
    api.send(api.http.delete(api.url("/api/booking/places")))
        .await
        .assert_error(405, "method_not_allowed");
    let r = api
        .send(api.http.put(api.url(&format!("{REGISTRATIONS}/{id}"))))
        .await;
    r.assert_error(405, "method_not_allowed");
    let r = api
        .send(api.http.delete(api.url("/api/booking/places/1/slots")))
        .await;
    r.assert_error(405, "method_not_allowed");
    assert_eq!(
        s.registrations().await,
        after["registrations"].as_i64().unwrap()
    );
}

async fn small_body_limit_gives_413(kind: StoreKind) {
    let s = TestServer::start_seeded(kind, &["--body-limit-bytes", "200"], Some((1, 1, 3))).await;
    let body = registration_body(1, FROM, 0, person(1)).to_string();
    assert!(body.len() <= 200, "the valid body fits: {}", body.len());
    let r = s
        .api
        .raw_post(REGISTRATIONS, body.clone(), Some("application/json"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s
        .api
        .raw_post(
            REGISTRATIONS,
            over_limit_body(200),
            Some("application/json"),
        )
        .await;
    r.assert_error(413, "body_too_large");
    assert_eq!(s.registrations().await, 1);
}

// ---------------------------------------------------------------- overload

async fn overload_answers_429_and_accepted_requests_complete(kind: StoreKind) {
    let s = TestServer::start_seeded(
        kind,
        &["--in-flight-max", "4", "--retry-after-s", "2"],
        Some((1, 1, 50)),
    )
    .await;
    const CLIENTS: usize = 400;
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let (api, barrier) = (s.api.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let req = api.register_request(1, FROM, (i % 50) as i64, person(i as u64));
            barrier.wait().await;
            api.send(req).await
        }));
    }
    let (mut created, mut taken, mut rejected) = (0, 0, 0);
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => created += 1,
            409 => {
                r.assert_error(409, "slot_full");
                taken += 1;
            }
            429 => {
                r.assert_error(429, "too_many_requests");
                // --retry-after-s, or more once a second refused more
                // than it admitted (at most 30; admission.rs).
                let wait: u64 = r
                    .headers
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .expect("a numeric Retry-After");
                assert!((2..=30).contains(&wait), "Retry-After {wait}");
                rejected += 1;
            }
            other => panic!(
                "only 201, 409 and 429 under overload; got {other}: {}",
                r.text()
            ),
        }
    }
    assert!(
        rejected > 0,
        "some requests are turned away (201 {created}, 409 {taken})"
    );
    assert!(
        created > 0,
        "some requests get through (409 {taken}, 429 {rejected})"
    );
    assert_eq!(created + taken + rejected, CLIENTS);
    // Accepted writes are all there, and the server is fine afterwards.
    assert_eq!(s.registrations().await, created as i64);
    assert_eq!(s.api.taken_slots(1, FROM, 1).await.len(), created);
    assert_eq!(s.api.get("/health").await.status, 200);
}

// ---------------------------------------------------------------- mixed load

/// Clients book random slots of a small set and cancel some of their own
/// bookings, over `apis` round-robin; afterwards the books balance: each
/// live registration holds one taken slot, each cancelled one is gone, and
/// the log has one event per change.
async fn mixed_load_balances(apis: &[Api], admin_token: &str, places: i64, slots: i64) {
    const CLIENTS: usize = 48;
    const STEPS: usize = 25;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let api = apis[c % apis.len()].clone();
        tasks.push(tokio::spawn(async move {
            let (mut live, mut cancelled, mut other) = (Vec::new(), Vec::new(), Vec::new());
            for step in 0..STEPS {
                let cancel = !live.is_empty() && rand::random::<u8>().is_multiple_of(3);
                if cancel {
                    let i = rand::random::<usize>() % live.len();
                    let (id, code): (String, String) = live.swap_remove(i);
                    let r = api.cancel(&id, Some(&code)).await;
                    if r.status == 204 {
                        cancelled.push((id, code));
                    } else {
                        other.push(format!("cancel {} {}", r.status, r.text()));
                    }
                } else {
                    let place = 1 + rand::random::<i64>().rem_euclid(places);
                    let slot = rand::random::<i64>().rem_euclid(slots);
                    let r = api
                        .register(place, FROM, slot, person((c * STEPS + step) as u64))
                        .await;
                    match r.status {
                        201 => live.push(ids(&r)),
                        409 => {}
                        _ => other.push(format!("register {} {}", r.status, r.text())),
                    }
                }
            }
            (live, cancelled, other)
        }));
    }
    let (mut live, mut cancelled) = (Vec::new(), Vec::new());
    for t in tasks {
        let (l, c, other) = t.await.unwrap();
        assert!(other.is_empty(), "only 201, 409 and 204: {other:?}");
        live.extend(l);
        cancelled.extend(c);
    }
    assert!(
        !cancelled.is_empty() && !live.is_empty(),
        "the load mixed both"
    );
    let api = &apis[0];
    let mut held = HashSet::new();
    for (id, code) in &live {
        let r = api.get_registration(id, Some(code)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert!(
            held.insert((
                v["placeId"].as_i64().unwrap(),
                v["timeSlot"].as_i64().unwrap()
            )),
            "slot held twice: {v}"
        );
    }
    for (id, code) in &cancelled {
        api.get_registration(id, Some(code))
            .await
            .assert_error(404, "registration_not_found");
    }
    let mut taken = 0;
    for place in 1..=places {
        for (_, slot) in api.taken_slots(place, FROM, 1).await {
            assert!(
                held.contains(&(place, slot)),
                "slot {place}/{slot} taken by no live registration"
            );
            taken += 1;
        }
    }
    assert_eq!(taken, live.len(), "taken slots == live registrations");
    let stats = api.stats(admin_token).await;
    assert_eq!(stats["registrations"], live.len(), "{stats}");
    let changes = live.len() + 2 * cancelled.len();
    assert_eq!(
        stats["lastEventPosition"],
        1 + changes,
        "one event per change: {stats}"
    );
}

async fn mixed_register_and_cancel_stay_consistent(kind: StoreKind) {
    let s = TestServer::seeded(kind, 3, 1, 12).await;
    mixed_load_balances(std::slice::from_ref(&s.api), &s.token(Role::ADMIN), 3, 12).await;
}

async fn mixed_load_across_two_processes_stays_consistent(_kind: StoreKind) {
    let db = PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    crate::helpers::seed_with_cli(dir.path(), Some(&db.url), 3, 1, 12).await;
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
    );
    mixed_load_balances(&[a.api.clone(), b.api.clone()], &a.admin_token(), 3, 12).await;
    let log = format!("{}{}", a.log_text(), b.log_text());
    assert!(!log.contains("ERROR"), "no errors logged:\n{log}");
}

// ---------------------------------------------------------------- confirmations

/// A fake SMS gateway on 127.0.0.1: answers 503 to the first `fail_first`
/// calls, then 200; records every call's Idempotency-Key and body.
async fn fake_gateway(fail_first: usize) -> (String, Arc<std::sync::Mutex<Vec<(String, Value)>>>) {
    use axum::http::{HeaderMap, StatusCode};
    let calls: Arc<std::sync::Mutex<Vec<(String, Value)>>> = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/sms",
        axum::routing::post(
            move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
                let seen = seen.clone();
                async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let mut calls = seen.lock().unwrap();
                    calls.push((key, body));
                    if calls.len() <= fail_first {
                        StatusCode::SERVICE_UNAVAILABLE
                    } else {
                        StatusCode::OK
                    }
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sms", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

async fn confirmations_reach_the_gateway_at_least_once(kind: StoreKind) {
    let (url, calls) = fake_gateway(3).await;
    let s = TestServer::start_seeded(
        kind,
        &["--with-notifier", "--notify-webhook", &url],
        Some((1, 1, 10)),
    )
    .await;
    let mut registered = Vec::new();
    for i in 0..5u64 {
        let r = s.api.register(1, FROM, i as i64, person(100 + i)).await;
        assert_eq!(r.status, 201, "{}", r.text());
        registered.push((ids(&r).0, person(100 + i)["phone"].clone()));
    }
    // The worker retries past the gateway's failures; bounded wait.
    let mut stats = s.stats().await;
    for _ in 0..100 {
        if stats["notifierPosition"] == stats["lastEventPosition"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        stats = s.stats().await;
    }
    assert_eq!(
        stats["notifierPosition"], stats["lastEventPosition"],
        "the notifier caught up: {stats}"
    );
    let calls = calls.lock().unwrap().clone();
    assert!(
        calls.len() >= 5 + 3,
        "3 failures retried: {} calls",
        calls.len()
    );
    for (id, phone) in &registered {
        let delivered: Vec<&(String, Value)> = calls
            .iter()
            .filter(|(_, b)| b["registrationId"] == id.as_str())
            .collect();
        assert!(!delivered.is_empty(), "registration {id} was confirmed");
        for (key, body) in delivered {
            assert_eq!(&body["phone"], phone, "{body}");
            assert_eq!(
                body["idempotencyKey"],
                key.as_str(),
                "the header and the body carry one key"
            );
            assert!(key.starts_with("throng-event-"), "{key}");
            assert!(
                body.get("nationalId").is_none() && body.get("name").is_none(),
                "only the phone: {body}"
            );
        }
    }
}

async fn a_dead_gateway_does_not_slow_registrations(kind: StoreKind) {
    // Nothing listens there: every delivery fails and is retried.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/sms", l.local_addr().unwrap())
    };
    let s = TestServer::start_seeded(
        kind,
        &["--with-notifier", "--notify-webhook", &dead],
        Some((1, 1, 30)),
    )
    .await;
    let started = std::time::Instant::now();
    for i in 0..30 {
        assert_eq!(
            s.api.register(1, FROM, i, person(i as u64)).await.status,
            201
        );
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "registrations took {:?}",
        started.elapsed()
    );
    let stats = s.stats().await;
    assert_eq!(stats["registrations"], 30);
    assert!(
        stats["notifierPosition"].as_i64().unwrap() < stats["lastEventPosition"].as_i64().unwrap(),
        "{stats}"
    );
}

async fn two_nodes_deliver_each_confirmation_once(_kind: StoreKind) {
    // Both nodes run the confirmation worker against one gateway; the lease on
    // the consumer row lets exactly one of them deliver. The registrations
    // run all at once on both nodes, so their transactions commit out of
    // the order of their events' positions, which the worker must not skip.
    let db = PgDb::fresh().await;
    let (url, calls) = fake_gateway(0).await;
    let dir = tempfile::TempDir::new().unwrap();
    const SLOTS: i64 = 60;
    const PLACES: i64 = 4;
    crate::helpers::seed_with_cli(dir.path(), Some(&db.url), PLACES, 1, SLOTS as i32).await;
    let args = ["--with-notifier", "--notify-webhook", url.as_str()];
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &args),
        ProcessServer::start(dir.path(), Some(&db.url), &args),
    );
    let replies = futures::future::join_all((0..PLACES * SLOTS).map(|i| {
        let api = if i % 2 == 0 { &a.api } else { &b.api };
        api.register(1 + i / SLOTS, FROM, i % SLOTS, person(500 + i as u64))
    }))
    .await;
    let mut ids = Vec::new();
    for r in replies {
        assert_eq!(r.status, 201, "{}", r.text());
        ids.push(r.json()["registrationId"].as_str().unwrap().to_string());
    }
    for _ in 0..150 {
        if calls.lock().unwrap().len() >= ids.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Give a second deliverer, if there were one, time to show itself.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let calls = calls.lock().unwrap().clone();
    for id in &ids {
        let n = calls
            .iter()
            .filter(|(_, body)| body["registrationId"] == id.as_str())
            .count();
        assert_eq!(
            n, 1,
            "registration {id} confirmed exactly once across two nodes"
        );
    }
    assert_eq!(calls.len(), ids.len());
}

async fn a_seed_by_another_process_is_served_without_restart(kind: StoreKind) {
    // The SQLite server keeps an in-memory availability index; a seed made by
    // `throng seed` while it runs must reach it without a restart.
    let s = TestServer::start(kind, &[]).await;
    s.api
        .slots(1, FROM, 1)
        .await
        .assert_error(404, "place_not_found");
    let pg_url = s.pg.as_ref().map(|p| p.url.clone());
    crate::helpers::seed_with_cli(&s.data_dir, pg_url.as_deref(), 2, 1, 5).await;
    let mut status = 0;
    for _ in 0..50 {
        status = s.api.slots(1, FROM, 1).await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "the new places are served within 5 s");
    let r = s.api.register(2, FROM, 4, person(7)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(s.api.register(2, FROM, 4, person(8)).await.status, 409);
}

/// Runs `throng seed <store flags> booking <args>`; (success, stdout + stderr).
async fn seed_cli(
    data_dir: &std::path::Path,
    pg_url: Option<&str>,
    args: &[&str],
) -> (bool, String) {
    let mut all: Vec<String> = vec!["seed".into()];
    all.extend(crate::helpers::store_flags(data_dir, pg_url));
    all.push("booking".into());
    all.extend(args.iter().map(|a| a.to_string()));
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(crate::helpers::throng_bin())
            .args(&all)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .expect("seed finishes in time")
    .expect("seed runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn reseeding_is_refused_unless_forced(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 1, 5).await;
    let pg_url = s.pg.as_ref().map(|p| p.url.clone());
    let small = [
        "--places",
        "3",
        "--days",
        "1",
        "--slots-per-day",
        "4",
        "--from",
        FROM,
    ];
    assert_eq!(s.api.register(1, FROM, 0, person(1)).await.status, 201);

    let (ok, text) = seed_cli(&s.data_dir, pg_url.as_deref(), &small).await;
    assert!(!ok, "a second seed without --force is refused");
    assert!(
        text.contains("already has 2 places") && text.contains("--force"),
        "{text}"
    );
    assert_eq!(s.registrations().await, 1, "a refused seed changes nothing");

    for bad in [
        ["--slots-per-day", "0"],
        ["--places=-1", ""],
        ["--from", "2030-02-30"],
    ] {
        let args: Vec<&str> = bad.iter().copied().filter(|a| !a.is_empty()).collect();
        let (ok, text) = seed_cli(&s.data_dir, pg_url.as_deref(), &args).await;
        let flag = bad[0].split('=').next().unwrap();
        assert!(
            !ok && text.contains(flag),
            "{bad:?} is refused naming the flag: {text}"
        );
    }

    let forced: Vec<&str> = small.iter().copied().chain(["--force"]).collect();
    let (ok, text) = seed_cli(&s.data_dir, pg_url.as_deref(), &forced).await;
    assert!(ok, "{text}");
    assert_eq!(
        s.registrations().await,
        0,
        "--force replaces the booking data, registrations included"
    );
    // The running server serves the new data (SQLite reloads its index;
    // the old index serves until the new one is loaded, so wait for the old
    // registration's slot to read free too, not only for the new place).
    let mut places = 0;
    for _ in 0..50 {
        places = s.api.places(0, 10).await.json()["total"]
            .as_i64()
            .unwrap_or(0);
        let slots = s.api.slots(3, FROM, 1).await;
        let old_slot = s.api.slots(1, FROM, 1).await;
        if places == 3
            && slots.status == 200
            && slots.json()["days"][0]["slots"][0]["free"] == true
            && old_slot.json()["days"][0]["slots"][0]["free"] == true
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(places, 3);
    assert_eq!(
        s.api.register(1, FROM, 0, person(2)).await.status,
        201,
        "the old registration is gone"
    );
}

/// Registrations keep coming while another process reseeds the store
/// (`--force`, same shape) and the server loads its new availability index
/// (SQLite: 200,000 slots take a while to load). A slot booked after the
/// seed finished must stay booked: booking it again with another person
/// answers 409. (Before the index was loaded and swapped inside one writer
/// command, a registration committed during the load was missing from the
/// new index, and its slot could be booked twice.)
async fn registrations_racing_a_live_reseed_take_each_slot_once(kind: StoreKind) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    const PLACES: i64 = 5_000;
    const SLOTS: i64 = 40;
    const CLIENTS: u64 = 8;
    const PER_CLIENT_MAX: u64 = 3_000;
    let s = TestServer::seeded(kind, PLACES, 1, SLOTS as i32).await;
    let pg_url = s.pg.as_ref().map(|p| p.url.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let seeded = Arc::new(AtomicBool::new(false));
    // Slots booked by requests sent after the reseed finished.
    let booked_after: Arc<Mutex<Vec<(i64, i64)>>> = Arc::default();
    let sent = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (api, stop, seeded, booked_after, sent) = (
                s.api.clone(),
                stop.clone(),
                seeded.clone(),
                booked_after.clone(),
                sent.clone(),
            );
            tokio::spawn(async move {
                for n in 0..PER_CLIENT_MAX {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let k = c * PER_CLIENT_MAX + n;
                    let (place, slot) = (1 + (k * 7919) as i64 % PLACES, (k * 31) as i64 % SLOTS);
                    let after = seeded.load(Ordering::Acquire);
                    let r = api.register(place, FROM, slot, person(1 + k)).await;
                    sent.fetch_add(1, Ordering::Relaxed);
                    // 404: a place the seed has not loaded yet; 503: a
                    // request that waited past its deadline for the
                    // tables the seed holds (PostgreSQL).
                    assert!(
                        [201, 404, 409, 429, 503].contains(&r.status),
                        "register: {} {}",
                        r.status,
                        r.text()
                    );
                    if r.status == 201 && after {
                        booked_after.lock().unwrap().push((place, slot));
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let shape = [
        "--places",
        "5000",
        "--days",
        "1",
        "--slots-per-day",
        "40",
        "--from",
        FROM,
        "--force",
    ];
    let (ok, text) = seed_cli(&s.data_dir, pg_url.as_deref(), &shape).await;
    assert!(ok, "{text}");
    seeded.store(true, Ordering::Release);
    // The watcher looks every second; give it time to load and swap while
    // the registrations go on, then stop them.
    tokio::time::sleep(std::time::Duration::from_millis(3_500)).await;
    stop.store(true, Ordering::Release);
    for c in clients {
        c.await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let booked = booked_after.lock().unwrap().clone();
    eprintln!(
        "FIGURE reseed race: {} registrations sent, {} slots booked after the seed",
        sent.load(Ordering::Relaxed),
        booked.len()
    );
    assert!(
        !booked.is_empty(),
        "registrations went on after the reseed ({} sent)",
        sent.load(Ordering::Relaxed)
    );
    let mut twice = Vec::new();
    for (i, (place, slot)) in booked.iter().enumerate() {
        let r = s
            .api
            .register(*place, FROM, *slot, person(1_000_000 + i as u64))
            .await;
        if r.status == 201 {
            twice.push((*place, *slot));
        } else {
            assert_eq!(r.status, 409, "{}", r.text());
        }
    }
    assert!(
        twice.is_empty(),
        "{} of {} slots booked after the reseed were booked again: {:?}",
        twice.len(),
        booked.len(),
        &twice[..twice.len().min(10)]
    );
}

// ---------------------------------------------------------------- time, moves, calendar files

/// A `--booking-utc-offset` at which it is now between 12:00 and 13:00, so
/// today has slots that have started (08:00) and slots that have not
/// (19:40) whatever the hour the test runs at.
fn noon_offset() -> String {
    let hour = time::OffsetDateTime::now_utc().hour() as i32;
    format!("{:+03}:00", 12 - hour)
}

fn hdr(r: &crate::helpers::Reply, name: &str) -> Option<String> {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn move_request(
    api: &Api,
    id: &str,
    code: Option<&str>,
    place: i64,
    day: &str,
    slot: i64,
) -> reqwest::RequestBuilder {
    let mut req = api
        .http
        .post(api.url(&format!("{REGISTRATIONS}/{id}/move")))
        .json(&json!({"placeId": place, "day": day, "timeSlot": slot}));
    if let Some(code) = code {
        req = req.header("x-access-code", code);
    }
    req
}

async fn move_to(
    api: &Api,
    id: &str,
    code: Option<&str>,
    place: i64,
    day: &str,
    slot: i64,
) -> crate::helpers::Reply {
    api.send(move_request(api, id, code, place, day, slot))
        .await
}

async fn past_days_and_started_slots_are_refused_and_not_offered(kind: StoreKind) {
    use throng::services::booking::model::BookingClock;
    let offset = noon_offset();
    let today = BookingClock::parse(&offset).unwrap().now().today;
    let (yesterday, tomorrow) = (today.plus(-1).to_text(), today.plus(1).to_text());
    let today = today.to_text();
    // 36 slots of 20 minutes from 08:00: slot 0 at 08:00 has started, slot
    // 35 at 19:40 has not.
    let s = TestServer::start_seeded_from(
        kind,
        &["--booking-utc-offset", &offset],
        &yesterday,
        Some((2, 3, 36)),
    )
    .await;
    let api = &s.api;

    let msg = api
        .register(1, &yesterday, 35, person(1))
        .await
        .assert_error(422, "day_passed");
    assert!(msg.starts_with("day:") && msg.contains(&today), "{msg}");
    let msg = api
        .register(1, &today, 0, person(1))
        .await
        .assert_error(422, "slot_passed");
    assert!(
        msg.starts_with("timeSlot:") && msg.contains("08:00"),
        "{msg}"
    );
    let r = api.register(1, &today, 35, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (id, code) = ids(&r);
    assert_eq!(s.registrations().await, 1, "the refused ones wrote nothing");

    // The slot answers offer no slot that has started.
    let v = api.slots(1, &yesterday, 3).await.json();
    let free = |d: usize, slot: usize| v["days"][d]["slots"][slot]["free"].as_bool().unwrap();
    assert!((0..36).all(|slot| !free(0, slot)), "yesterday: {v}");
    assert!(!free(1, 0) && !free(1, 35) && free(1, 34), "today: {v}");
    assert!((0..36).all(|slot| free(2, slot)), "tomorrow: {v}");

    // The month view counts the same.
    let r = api
        .get(&format!(
            "/api/booking/places/1/calendar?month={}",
            &today[..7]
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typed: CalendarOut = r.body();
    assert_eq!((typed.place_id, typed.today.as_str()), (1, today.as_str()));
    let c = r.json();
    assert_eq!(c["today"], today.as_str());
    assert_eq!(c["month"], &today[..7]);
    let count = |day: &str| {
        c["days"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["day"] == day)
            .map(|d| d["free"].as_i64().unwrap())
    };
    let started = 36
        - v["days"][1]["slots"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["free"] == true)
            .count() as i64;
    assert_eq!(count(&today), Some(36 - started), "{c}");
    assert!(started >= 13, "08:00 to 12:00 have started: {started}");
    if let Some(n) = count(&yesterday) {
        assert_eq!(n, 0, "{c}");
    }
    if let Some(n) = count(&tomorrow) {
        assert_eq!(n, 36, "{c}");
    }
    for bad in ["2026-13", "2026-1", "x", "2026-01-01"] {
        let r = api
            .get(&format!("/api/booking/places/1/calendar?month={bad}"))
            .await;
        assert!(
            r.assert_error(422, "invalid_field").contains("month"),
            "{bad}"
        );
    }
    api.get(&format!(
        "/api/booking/places/9/calendar?month={}",
        &today[..7]
    ))
    .await
    .assert_error(404, "place_not_found");

    // A move is refused the same way, and the registration keeps its slot.
    move_to(api, &id, Some(&code), 1, &yesterday, 35)
        .await
        .assert_error(422, "day_passed");
    move_to(api, &id, Some(&code), 2, &today, 0)
        .await
        .assert_error(422, "slot_passed");
    let g = api.get_registration(&id, Some(&code)).await.json();
    assert_eq!(
        (g["day"].as_str(), g["timeSlot"].as_i64()),
        (Some(today.as_str()), Some(35))
    );
    let r = move_to(api, &id, Some(&code), 2, &tomorrow, 0).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

async fn move_takes_the_new_slot_and_frees_the_old(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 2, 3).await;
    let api = &s.api;
    let (a, a_code) = ids(&api.register(1, FROM, 0, person(1)).await);
    let (b, b_code) = ids(&api.register(1, FROM, 1, person(2)).await);

    let r = move_to(api, &a, Some(&a_code), 1, FROM, 2).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"registrationId": a, "placeId": 1, "day": FROM, "timeSlot": 2, "start": "08:40", "moved": true})
    );
    assert_eq!(hdr(&r, "cache-control").as_deref(), Some("no-store"));
    assert_eq!(
        api.get_registration(&a, Some(&a_code)).await.json()["timeSlot"],
        2
    );
    let taken: HashSet<_> = api
        .taken_slots(1, FROM, 1)
        .await
        .into_iter()
        .map(|t| t.1)
        .collect();
    assert_eq!(taken, HashSet::from([1, 2]));
    // The old slot is free for anyone at once.
    assert_eq!(api.register(1, FROM, 0, person(3)).await.status, 201);

    // A taken slot: 409, and both registrations keep theirs.
    let msg = move_to(api, &a, Some(&a_code), 1, FROM, 1)
        .await
        .assert_error(409, "slot_full");
    assert!(msg.contains("keeps"), "{msg}");
    assert_eq!(
        api.get_registration(&a, Some(&a_code)).await.json()["timeSlot"],
        2
    );
    assert_eq!(
        api.get_registration(&b, Some(&b_code)).await.json()["timeSlot"],
        1
    );

    // A wrong or missing code moves nothing and looks like no registration.
    for code in [Some("wrong-code-wrong-code"), Some(b_code.as_str()), None] {
        move_to(api, &a, code, 2, FROM, 0)
            .await
            .assert_error(404, "registration_not_found");
    }
    move_to(api, "not-a-uuid", Some(&a_code), 2, FROM, 0)
        .await
        .assert_error(404, "registration_not_found");
    move_to(api, &a, Some(&a_code), 1, FROM, 3)
        .await
        .assert_error(404, "slot_not_found");
    move_to(api, &a, Some(&a_code), 7, FROM, 0)
        .await
        .assert_error(404, "place_not_found");
    for (body, field) in [
        (
            json!({"placeId": 1, "day": FROM, "timeSlot": -1}),
            "timeSlot",
        ),
        (json!({"placeId": 0, "day": FROM, "timeSlot": 0}), "placeId"),
        (
            json!({"placeId": 1, "day": "2030-02-30", "timeSlot": 0}),
            "day",
        ),
    ] {
        let r = api
            .send(
                api.http
                    .post(api.url(&format!("{REGISTRATIONS}/{a}/move")))
                    .header("x-access-code", &a_code)
                    .json(&body),
            )
            .await;
        assert!(
            r.assert_error(422, "invalid_field").contains(field),
            "{body}"
        );
    }
    assert_eq!(
        api.get_registration(&a, Some(&a_code)).await.json()["timeSlot"],
        2
    );

    // Its own slot: nothing changes.
    let r = move_to(api, &a, Some(&a_code), 1, FROM, 2).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typed: Moved = r.body();
    assert_eq!(
        (typed.moved, typed.time_slot, typed.place_id),
        (false, 2, 1)
    );

    // Another place and day; then a cancel frees the slot it moved to.
    let r = move_to(api, &a, Some(&a_code), 2, "2030-01-02", 0).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        api.taken_slots(2, FROM, 2).await,
        vec![("2030-01-02".to_string(), 0)]
    );
    assert!(!api
        .taken_slots(1, FROM, 1)
        .await
        .contains(&(FROM.to_string(), 2)));
    assert_eq!(api.cancel(&a, Some(&a_code)).await.status, 204);
    assert!(api.taken_slots(2, FROM, 2).await.is_empty());

    // Each move is one event, with the slots and no personal data.
    let events = crate::helpers::log_events(&s.state.store, 0, 100).await;
    let moved: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == "RegistrationMoved")
        .collect();
    assert_eq!(moved.len(), 2, "{events:?}");
    let payload: Value = serde_json::from_slice(&moved[0].payload).unwrap();
    assert_eq!(
        payload,
        json!({"registrationId": a, "placeId": 1, "day": FROM, "timeSlot": 2,
               "fromPlaceId": 1, "fromDay": FROM, "fromTimeSlot": 0})
    );
}

async fn moves_racing_for_one_slot_have_one_winner(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 30).await;
    let api = &s.api;
    const MOVERS: i64 = 20;
    const TARGET: i64 = 25;
    let mut held = Vec::new();
    for i in 0..MOVERS {
        let r = api.register(1, FROM, i, person(i as u64)).await;
        assert_eq!(r.status, 201, "{}", r.text());
        held.push((i, ids(&r)));
    }
    let barrier = Arc::new(Barrier::new(MOVERS as usize));
    let mut tasks = Vec::new();
    for (slot, (id, code)) in held.clone() {
        let (api, barrier) = (api.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let req = move_request(&api, &id, Some(&code), 1, FROM, TARGET);
            barrier.wait().await;
            (slot, api.send(req).await)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        let (slot, r) = t.await.unwrap();
        match r.status {
            200 => winners.push(slot),
            _ => {
                r.assert_error(409, "slot_full");
            }
        }
    }
    assert_eq!(winners.len(), 1, "one winner: {winners:?}");
    let winner = winners[0];
    for (slot, (id, code)) in &held {
        let want = if *slot == winner { TARGET } else { *slot };
        assert_eq!(
            api.get_registration(id, Some(code)).await.json()["timeSlot"],
            want
        );
    }
    let taken: HashSet<i64> = api
        .taken_slots(1, FROM, 1)
        .await
        .into_iter()
        .map(|t| t.1)
        .collect();
    let mut want: HashSet<i64> = (0..MOVERS).filter(|s| *s != winner).collect();
    want.insert(TARGET);
    assert_eq!(taken, want);
    let events = crate::helpers::log_events(&s.state.store, 0, 1000).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event_type == "RegistrationMoved")
            .count(),
        1
    );
}

async fn registration_calendar_file_is_rfc5545(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 3).await;
    let api = &s.api;
    let (id, code) = ids(&api.register(1, FROM, 1, person(1)).await);
    let url = format!("{REGISTRATIONS}/{id}/calendar.ics");
    let r = api
        .send(api.http.get(api.url(&url)).header("x-access-code", &code))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        hdr(&r, "content-type").as_deref(),
        Some("text/calendar; charset=utf-8")
    );
    assert!(hdr(&r, "content-disposition")
        .is_some_and(|d| d.starts_with("attachment") && d.contains(".ics")));
    assert_eq!(hdr(&r, "cache-control").as_deref(), Some("no-store"));
    let body = r.text();
    assert!(
        body.ends_with("\r\n") && !body.replace("\r\n", "").contains('\n'),
        "CRLF lines"
    );
    let lines: Vec<&str> = body.trim_end().split("\r\n").collect();
    assert!(
        lines.iter().all(|l| l.len() <= 75),
        "folded at 75 octets: {lines:?}"
    );
    let unfolded = body.replace("\r\n ", "");
    let lines: Vec<&str> = unfolded.trim_end().split("\r\n").collect();
    assert_eq!(lines.first(), Some(&"BEGIN:VCALENDAR"));
    assert_eq!(lines.last(), Some(&"END:VCALENDAR"));
    for want in [
        "VERSION:2.0",
        "BEGIN:VEVENT",
        "END:VEVENT",
        &format!("UID:{id}@booking.throng"),
        "DTSTART:20300101T082000Z",
        "DTEND:20300101T084000Z",
    ] {
        assert!(lines.contains(&want), "{want} in {lines:?}");
    }
    assert!(lines.iter().any(|l| l.starts_with("PRODID:")));
    assert!(
        lines
            .iter()
            .any(|l| l.len() == 24 && l.starts_with("DTSTAMP:") && l.ends_with('Z')),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("SUMMARY:")));
    // The registration page's absolute link, at the address the request
    // reached (no --public-url), without the access code.
    let link = format!("{}/booking/manage#id={id}", api.base);
    assert!(lines.contains(&format!("URL:{link}").as_str()), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("DESCRIPTION:") && l.contains(&link)),
        "{lines:?}"
    );
    assert!(!body.contains(&code), "the code stays out of calendars");
    assert!(
        !body.contains(person(1)["name"].as_str().unwrap()),
        "no personal data"
    );
    for code in [Some("wrong-code-wrong-code"), None] {
        let mut req = api.http.get(api.url(&url));
        if let Some(c) = code {
            req = req.header("x-access-code", c);
        }
        api.send(req)
            .await
            .assert_error(404, "registration_not_found");
    }
}

/// An access code is 12 letters in three groups, none of 0, O, 1, I or l;
/// it opens the registration typed in any case, with or without the dashes
/// or with spaces, and a code minted before (URL-safe base64, stored as the
/// hash of the code as given) still does, case and all.
async fn access_codes_are_read_aloud_and_typed_loosely(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 4).await;
    let api = &s.api;
    let (id, code) = ids(&api.register(1, FROM, 0, person(1)).await);
    let groups: Vec<&str> = code.split('-').collect();
    assert_eq!(groups.len(), 3, "{code}");
    assert!(
        groups.iter().all(|g| g.len() == 4
            && g.bytes()
                .all(|b| b"23456789ABCDEFGHJKLMNPQRSTUVWXYZ".contains(&b))),
        "{code}"
    );
    let read = |c: String| {
        let id = id.clone();
        async move {
            api.send(
                api.http
                    .get(api.url(&format!("{REGISTRATIONS}/{id}")))
                    .header("x-access-code", c),
            )
            .await
            .status
        }
    };
    let letters = code.replace('-', "");
    for typed in [
        code.clone(),
        code.to_lowercase(),
        letters.clone(),
        format!("{} {} {}", &letters[..4], &letters[4..8], &letters[8..]),
    ] {
        assert_eq!(read(typed.clone()).await, 200, "{typed:?}");
    }
    let mut wrong = letters.into_bytes();
    wrong[0] = if wrong[0] == b'2' { b'3' } else { b'2' };
    assert_eq!(read(String::from_utf8(wrong).unwrap()).await, 404);

    // A registration whose code was minted before: its hash is of the code
    // as given.
    let (old_id, _) = ids(&api.register(1, FROM, 1, person(2)).await);
    let old_code = "q3XbT9vKp2LmW8sR-_aZ0b";
    let hash = {
        use sha2::Digest;
        sha2::Sha256::digest(old_code.as_bytes()).to_vec()
    };
    set_access_hash(&s, &old_id, hash).await;
    let read_old = |c: &str| {
        api.send(
            api.http
                .get(api.url(&format!("{REGISTRATIONS}/{old_id}")))
                .header("x-access-code", c.to_string()),
        )
    };
    assert_eq!(read_old(old_code).await.status, 200);
    assert_eq!(read_old(&old_code.to_lowercase()).await.status, 404);
}

/// Sets a registration's stored access hash (as a registration from before
/// the readable codes holds it).
async fn set_access_hash(s: &TestServer, id: &str, hash: Vec<u8>) {
    let statement = Arc::new(throng::store::Sql::owned(
        "UPDATE booking_registrations SET access_hash = ?1 WHERE id = ?2".to_string(),
    ));
    let id = id.to_string();
    let changed = s
        .state
        .store
        .write(move |tx| {
            let (statement, hash, id) = (statement.clone(), hash.clone(), id.clone());
            Box::pin(async move { tx.execute(&statement, &[&hash, &id]).await })
        })
        .await
        .expect("set the access hash");
    assert_eq!(changed, 1);
}
