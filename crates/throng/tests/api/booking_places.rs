//! Places as an authority defines them, through HTTP on both stores: the
//! CSV import (and importing again with other hours, registrations kept),
//! refused files, seats per slot under a race, cancel and move giving a seat
//! back, the admin's place, hours and day endpoints, search and the
//! earliest free slots.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::Barrier;

use crate::both_stores;
use crate::helpers::{person, store_flags, throng_bin, Api, PgDb, Reply, StoreKind, TestServer};
use throng::platform::auth::Role;
use throng::services::booking::http::{FilterValue, PlaceFilters, PlacesPage};
use throng::services::booking::places::http::{EarliestList, PlaceChanged, PlaceDetail};
use throng::services::booking::places::ChangeSummary;

both_stores!(
    the_example_file_imports_and_its_places_are_found,
    importing_again_keeps_registrations_on_removed_slots_and_reports_them,
    a_bad_line_is_refused_by_number_and_nothing_is_imported,
    exactly_the_seats_of_a_slot_are_taken_by_a_crowd,
    cancel_and_move_give_the_seat_back,
    an_admin_defines_a_place_its_hours_and_its_days,
    places_are_searched_by_text_region_and_service_a_page_at_a_time,
    no_places_no_filters,
    the_earliest_free_slots_are_listed_soonest_first,
    the_command_line_imports_a_file_all_or_none,
);

const HEADER: &str =
    "code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed";

fn example_csv() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/booking/places.csv");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Today in UTC, and the day after, as YYYY-MM-DD.
fn today_and_tomorrow() -> (String, String) {
    let now = time::OffsetDateTime::now_utc().date();
    let fmt = |d: time::Date| format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day());
    (fmt(now), fmt(now.next_day().unwrap()))
}

async fn import(api: &Api, token: &str, csv: impl Into<Vec<u8>>) -> Reply {
    api.send(
        api.http
            .post(api.url("/api/booking/places/import"))
            .bearer_auth(token)
            .header("content-type", "text/csv")
            .body(csv.into()),
    )
    .await
}

async fn imported(api: &Api, token: &str, csv: impl Into<Vec<u8>>) -> ChangeSummary {
    let r = import(api, token, csv).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.body()
}

/// The slots of a place on a day: (timeSlot, start, seats, seatsLeft, free).
async fn day_slots(api: &Api, place: i64, day: &str) -> Vec<(i64, String, i64, i64, bool)> {
    let r = api.slots(place, day, 1).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["days"][0]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["timeSlot"].as_i64().unwrap(),
                s["start"].as_str().unwrap().to_string(),
                s["seats"].as_i64().unwrap(),
                s["seatsLeft"].as_i64().unwrap(),
                s["free"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// One place open every day in UTC (so today and tomorrow are known here).
fn one_place_csv(code: &str, slot_minutes: u32, seats: u32, hours: &str, ahead: u32) -> String {
    format!(
        "{HEADER},services,book_ahead_days\n\
         {code},Test site {code},Main street 1,Testville,999 01,TR,UTC,{slot_minutes},{seats},\"{hours}\",,test-pcr,{ahead}\n"
    )
}

// ---------------------------------------------------------------- import

async fn the_example_file_imports_and_its_places_are_found(kind: StoreKind) {
    let s = TestServer::start(kind, &["--body-limit-bytes", "1048576"]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));

    // Only an admin imports, and only CSV.
    let r = import(api, &s.token(Role::new("user")), example_csv()).await;
    r.assert_error(403, "forbidden");
    let r = api
        .send(
            api.http
                .post(api.url("/api/booking/places/import"))
                .bearer_auth(&admin)
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
    r.assert_error(415, "unsupported_media_type");

    let summary = imported(api, &admin, example_csv()).await;
    assert_eq!((summary.created, summary.updated), (6, 0));
    assert!(summary.slots_added > 1000, "{summary:?}");
    assert_eq!(summary.slots_removed, 0);
    let page: PlacesPage = api.get("/api/booking/places?size=100").await.body();
    assert_eq!(page.total, 6);
    let ruz = page
        .places
        .iter()
        .find(|p| p.code.as_deref() == Some("BA-RUZ"))
        .expect("BA-RUZ");
    assert_eq!(ruz.seats, 3);
    assert_eq!(ruz.time_zone.as_deref(), Some("Europe/Bratislava"));
    assert_eq!(ruz.services, ["vaccine-flu", "vaccine-covid", "test-pcr"]);
    assert_eq!(ruz.hours, "Mo-Fr 07:30-12:00,13:00-16:00; Sa 08:00-12:00");
    // Its slots carry its seats; every slot made lies within its hours.
    let detail: PlaceDetail = api
        .get(&format!("/api/booking/places/{}", ruz.id))
        .await
        .body();
    assert_eq!(detail.place.code.as_deref(), Some("BA-RUZ"));
    let r = api
        .get(&format!(
            "/api/booking/places/{}/slots?from={}&days=14",
            ruz.id,
            today_and_tomorrow().1
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut seen = 0;
    for d in r.json()["days"].as_array().unwrap() {
        for slot in d["slots"].as_array().unwrap() {
            seen += 1;
            assert_eq!(slot["seats"], 3, "{slot}");
            let start = slot["start"].as_str().unwrap();
            assert!(
                ("07:30".."12:00").contains(&start) || ("13:00".."16:00").contains(&start),
                "{start} is outside the hours"
            );
        }
    }
    assert!(seen > 100, "{seen} slots in 14 days");

    // Importing the same file again changes nothing but says it updated.
    let again = imported(api, &admin, example_csv()).await;
    assert_eq!((again.created, again.updated), (0, 6));
    assert_eq!((again.slots_added, again.slots_removed), (0, 0));
    let page: PlacesPage = api.get("/api/booking/places?size=100").await.body();
    assert_eq!(page.total, 6, "found by code, not added again");
}

async fn importing_again_keeps_registrations_on_removed_slots_and_reports_them(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    let (_, tomorrow) = today_and_tomorrow();
    let first = imported(
        api,
        &admin,
        one_place_csv("T-1", 30, 1, "Mo-Su 08:00-10:00", 5),
    )
    .await;
    assert_eq!(first.created, 1);
    assert_eq!(first.slots_added, 5 * 4, "4 slots a day for 5 days");
    let place = first.place_ids[0];
    let slots = day_slots(api, place, &tomorrow).await;
    let starts: Vec<&str> = slots.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(starts, ["08:00", "08:30", "09:00", "09:30"]);

    // Two people hold 09:30 and 08:00 tomorrow.
    let late = api.register(place, &tomorrow, slots[3].0, person(1)).await;
    assert_eq!(late.status, 201, "{}", late.text());
    let late = late.json();
    let early = api.register(place, &tomorrow, slots[0].0, person(2)).await;
    assert_eq!(early.status, 201, "{}", early.text());

    // The place now closes at 09:00: 09:00 and 09:30 go from every day, and
    // the registration at 09:30 stays, reported.
    let second = imported(
        api,
        &admin,
        one_place_csv("T-1", 30, 1, "Mo-Su 08:00-09:00", 5),
    )
    .await;
    assert_eq!((second.created, second.updated), (0, 1));
    assert_eq!(second.slots_added, 0);
    assert_eq!(second.slots_removed, 5 * 2);
    assert_eq!(second.registrations_on_removed_slots, 1);
    let id = late["registrationId"].as_str().unwrap();
    assert_eq!(second.affected_registrations, [id.to_string()]);
    let kept = api.get_registration(id, late["accessCode"].as_str()).await;
    assert_eq!(kept.status, 200, "the registration stands: {}", kept.text());
    assert_eq!(kept.json()["start"], "09:30");
    let starts: Vec<String> = day_slots(api, place, &tomorrow)
        .await
        .into_iter()
        .map(|s| s.1)
        .collect();
    assert_eq!(
        starts,
        ["08:00", "08:30"],
        "withdrawn slots are not offered"
    );
    // Nobody books the withdrawn slot.
    let r = api.register(place, &tomorrow, slots[3].0, person(3)).await;
    assert_eq!(r.status, 404, "{}", r.text());
    // The person is to be told: the registration's stream has the event.
    let r = api
        .send(
            api.http
                .get(api.url(&format!("/api/events/streams/booking-registration-{id}")))
                .bearer_auth(&admin),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let types: Vec<String> = r.json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types, ["RegistrationConfirmed", "SlotWithdrawn"]);
    assert_eq!(s.registrations().await, 2, "no registration was deleted");

    // Cancelling the withdrawn registration works and frees nothing bookable.
    let r = api.cancel(id, late["accessCode"].as_str()).await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(day_slots(api, place, &tomorrow).await.len(), 2);

    // Opening again until 10:00 brings the slots back, 09:30 free again.
    let third = imported(
        api,
        &admin,
        one_place_csv("T-1", 30, 1, "Mo-Su 08:00-10:00", 5),
    )
    .await;
    assert_eq!(third.registrations_on_removed_slots, 0);
    let back = day_slots(api, place, &tomorrow).await;
    assert_eq!(back.len(), 4);
    assert!(back[3].4, "09:30 is free: {back:?}");
    assert!(!back[0].4, "08:00 is still held: {back:?}");
}

async fn a_bad_line_is_refused_by_number_and_nothing_is_imported(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    let bad_zone = format!(
        "{HEADER}\n\
         A-1,Site A,Street 1,Town,111 11,R1,UTC,15,1,Mo-Fr 08:00-09:00,\n\
         A-2,Site B,Street 2,Town,111 12,R1,Europe/Atlantis,15,1,Mo-Fr 08:00-09:00,\n"
    );
    let msg = import(api, &admin, bad_zone)
        .await
        .assert_error(422, "invalid_csv");
    assert!(
        msg.contains("line 3") && msg.contains("time_zone") && msg.contains("Europe/Atlantis"),
        "{msg}"
    );
    let off_grid = format!(
        "{HEADER}\n\
         A-1,Site A,Street 1,Town,111 11,R1,UTC,15,1,Mo-Fr 08:00-09:00,\n\
         A-2,Site B,Street 2,Town,111 12,R1,UTC,20,1,Mo-Fr 08:10-09:00,\n"
    );
    let msg = import(api, &admin, off_grid)
        .await
        .assert_error(422, "invalid_csv");
    assert!(msg.contains("line 3") && msg.contains("hours"), "{msg}");
    let bad_header = "code,name\nA-1,Site A\n";
    let msg = import(api, &admin, bad_header)
        .await
        .assert_error(422, "invalid_csv");
    assert!(msg.contains("line 1"), "{msg}");
    let page: PlacesPage = api.get("/api/booking/places").await.body();
    assert_eq!(page.total, 0, "nothing was imported");
    assert_eq!(s.stats().await["slots"], 0);

    // A change refused after reading: a place's slot length is fixed once
    // it has slots; the whole file is refused, its other line too.
    imported(
        api,
        &admin,
        one_place_csv("T-1", 30, 1, "Mo-Su 08:00-10:00", 2),
    )
    .await;
    let changed = format!(
        "{HEADER},services,book_ahead_days\n\
         N-1,New site,Street 9,Town,111 19,TR,UTC,15,1,Mo-Su 08:00-10:00,,,2\n\
         T-1,Test site T-1,Main street 1,Testville,999 01,TR,UTC,15,1,Mo-Su 08:00-10:00,,,2\n"
    );
    let msg = import(api, &admin, changed)
        .await
        .assert_error(422, "invalid_field");
    assert!(
        msg.contains("line 3") && msg.contains("slot_minutes"),
        "{msg}"
    );
    let page: PlacesPage = api.get("/api/booking/places").await.body();
    assert_eq!(page.total, 1, "N-1 was not imported either");
}

// ---------------------------------------------------------------- seats

async fn exactly_the_seats_of_a_slot_are_taken_by_a_crowd(kind: StoreKind) {
    let s = TestServer::start(kind, &["--booking-one-registration", "off"]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    let (_, tomorrow) = today_and_tomorrow();
    let summary = imported(
        api,
        &admin,
        one_place_csv("S-3", 30, 3, "Mo-Su 08:00-10:00", 3),
    )
    .await;
    let place = summary.place_ids[0];
    let slot = day_slots(api, place, &tomorrow).await[1].0;

    const CROWD: u64 = 50;
    let barrier = Arc::new(Barrier::new(CROWD as usize));
    let mut tasks = Vec::new();
    for n in 0..CROWD {
        let (api, barrier, day) = (api.clone(), barrier.clone(), tomorrow.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            api.register(place, &day, slot, person(100 + n)).await
        }));
    }
    let (mut won, mut full) = (0, 0);
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => won += 1,
            _ => {
                r.assert_error(409, "slot_full");
                full += 1;
            }
        }
    }
    assert_eq!((won, full), (3, CROWD - 3));
    let after = day_slots(api, place, &tomorrow).await;
    let taken = after.iter().find(|s| s.0 == slot).unwrap();
    assert_eq!((taken.2, taken.3, taken.4), (3, 0, false), "{taken:?}");
    assert_eq!(s.registrations().await, 3);
    // The other slots of the day kept every seat.
    assert!(after.iter().filter(|s| s.0 != slot).all(|s| s.3 == 3));
}

async fn cancel_and_move_give_the_seat_back(kind: StoreKind) {
    let s = TestServer::start(kind, &["--booking-one-registration", "off"]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    let (_, tomorrow) = today_and_tomorrow();
    let summary = imported(
        api,
        &admin,
        one_place_csv("S-2", 30, 2, "Mo-Su 08:00-10:00", 3),
    )
    .await;
    let place = summary.place_ids[0];
    let slots = day_slots(api, place, &tomorrow).await;
    let (a, b) = (slots[0].0, slots[1].0);
    let mut held = Vec::new();
    for n in 0..2 {
        let r = api.register(place, &tomorrow, a, person(n)).await;
        assert_eq!(r.status, 201, "{}", r.text());
        held.push(r.json());
    }
    api.register(place, &tomorrow, a, person(9))
        .await
        .assert_error(409, "slot_full");
    let left = |slots: &[(i64, String, i64, i64, bool)], t: i64| {
        slots.iter().find(|s| s.0 == t).map(|s| s.3).unwrap()
    };

    // A cancel gives a seat back.
    let (id, code) = (
        held[0]["registrationId"].as_str().unwrap(),
        held[0]["accessCode"].as_str().unwrap(),
    );
    assert_eq!(api.cancel(id, Some(code)).await.status, 204);
    assert_eq!(left(&day_slots(api, place, &tomorrow).await, a), 1);
    let again = api.register(place, &tomorrow, a, person(10)).await;
    assert_eq!(again.status, 201, "{}", again.text());
    let again = again.json();

    // A move takes a seat of the new slot and gives the old one back.
    let r = api
        .send(
            api.http
                .post(api.url(&format!(
                    "/api/booking/registrations/{}/move",
                    again["registrationId"].as_str().unwrap()
                )))
                .header("x-access-code", again["accessCode"].as_str().unwrap())
                .json(&json!({"placeId": place, "day": tomorrow, "timeSlot": b})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let now = day_slots(api, place, &tomorrow).await;
    assert_eq!((left(&now, a), left(&now, b)), (1, 1));
    // Fill b, then a move into it is refused and keeps its seat.
    let r = api.register(place, &tomorrow, b, person(11)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mover = &held[1];
    let r = api
        .send(
            api.http
                .post(api.url(&format!(
                    "/api/booking/registrations/{}/move",
                    mover["registrationId"].as_str().unwrap()
                )))
                .header("x-access-code", mover["accessCode"].as_str().unwrap())
                .json(&json!({"placeId": place, "day": tomorrow, "timeSlot": b})),
        )
        .await;
    r.assert_error(409, "slot_full");
    let now = day_slots(api, place, &tomorrow).await;
    assert_eq!((left(&now, a), left(&now, b)), (1, 0));
    assert_eq!(s.registrations().await, 3);
}

// ---------------------------------------------------------------- admin

fn place_body(code: &str) -> Value {
    json!({"code": code, "name": "Poliklinika Test", "address": "Hlavná 1", "city": "Trnava",
           "postcode": "917 01", "region": "TT", "timeZone": "UTC", "services": ["vaccine-flu"],
           "slotMinutes": 20, "seats": 2, "hours": "Mo-Su 08:00-09:00", "bookAheadDays": 4,
           "noticeMinutes": 0, "latitude": 48.37, "longitude": 17.58})
}

async fn an_admin_defines_a_place_its_hours_and_its_days(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    let (_, tomorrow) = today_and_tomorrow();
    let post = |token: Option<String>, body: Value| {
        let mut req = api.http.post(api.url("/api/booking/places")).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        api.send(req)
    };
    post(None, place_body("TT-1"))
        .await
        .assert_error(401, "missing_token");
    post(Some(s.token(Role::new("user"))), place_body("TT-1"))
        .await
        .assert_error(403, "forbidden");
    for (field, value, named) in [
        ("timeZone", json!("Mars/Olympus"), "timeZone"),
        ("seats", json!(0), "seats"),
        ("hours", json!("Mo 08:00-08:30"), "hours"),
        ("code", json!("no spaces"), "code"),
        ("services", json!(["Not A Code"]), "services"),
        ("latitude", json!(91.0), "latitude"),
    ] {
        let mut body = place_body("TT-1");
        body[field] = value;
        let msg = post(Some(admin.clone()), body)
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.starts_with(named), "{field}: {msg}");
    }

    let r = post(Some(admin.clone()), place_body("TT-1")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let created: PlaceChanged = r.body();
    let id = created.place.id;
    assert_eq!(created.summary.slots_added, 4 * 3);
    assert_eq!(created.place.latitude, Some(48.37));
    let slots = day_slots(api, id, &tomorrow).await;
    assert_eq!(slots.len(), 3);
    let r = api.register(id, &tomorrow, slots[2].0, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let reg = r.json()["registrationId"].as_str().unwrap().to_string();

    // New hours: 08:20-09:20. 08:00 goes (nobody there), 08:40 stays with its
    // registration, 09:00 comes.
    let put = |path: String, body: Value| {
        api.send(api.http.put(api.url(&path)).bearer_auth(&admin).json(&body))
    };
    let r = put(
        format!("/api/booking/places/{id}/hours"),
        json!({"hours": "Mo-Su 08:20-09:20"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let summary: ChangeSummary = r.body();
    assert_eq!((summary.slots_added, summary.slots_removed), (4, 4));
    assert_eq!(summary.registrations_on_removed_slots, 0);
    let starts: Vec<String> = day_slots(api, id, &tomorrow)
        .await
        .into_iter()
        .map(|s| s.1)
        .collect();
    assert_eq!(starts, ["08:20", "08:40", "09:00"]);
    let r = put(
        format!("/api/booking/places/{id}/hours"),
        json!({"hours": "Mo-Su 08:25-09:20"}),
    )
    .await;
    let msg = r.assert_error(422, "invalid_field");
    assert!(msg.starts_with("hours:"), "{msg}");

    // Closing tomorrow withdraws its slots and reports the registration.
    let r = put(
        format!("/api/booking/places/{id}/days/{tomorrow}"),
        json!({"hours": ""}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let summary: ChangeSummary = r.body();
    assert_eq!(summary.slots_removed, 3);
    assert_eq!(summary.affected_registrations, std::slice::from_ref(&reg));
    assert!(day_slots(api, id, &tomorrow).await.is_empty());
    let detail: PlaceDetail = api.get(&format!("/api/booking/places/{id}")).await.body();
    assert_eq!(detail.days.len(), 1);
    assert_eq!(
        (detail.days[0].day.as_str(), detail.days[0].hours.as_str()),
        (tomorrow.as_str(), "")
    );
    // Open again with the week's hours.
    let r = api
        .send(
            api.http
                .delete(api.url(&format!("/api/booking/places/{id}/days/{tomorrow}")))
                .bearer_auth(&admin),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let slots = day_slots(api, id, &tomorrow).await;
    assert_eq!(slots.len(), 3);
    assert_eq!(slots[1].3, 1, "08:40 holds its registration: {slots:?}");

    // The whole definition, changed: 3 seats.
    let mut body = place_body("TT-1");
    body["seats"] = json!(3);
    body["hours"] = json!("Mo-Su 08:20-09:20");
    let r = put(format!("/api/booking/places/{id}"), body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let changed: PlaceChanged = r.body();
    assert_eq!(changed.place.seats, 3);
    assert_eq!(changed.summary.updated, 1);
    let slots = day_slots(api, id, &tomorrow).await;
    assert_eq!(
        slots.iter().map(|s| s.3).collect::<Vec<_>>(),
        [3, 2, 3],
        "{slots:?}"
    );
    // Another place's code cannot be taken.
    let r = post(Some(admin.clone()), place_body("TT-2")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = put(format!("/api/booking/places/{id}"), place_body("TT-2")).await;
    r.assert_error(409, "code_taken");
    let r = put(
        "/api/booking/places/999999/hours".into(),
        json!({"hours": ""}),
    )
    .await;
    r.assert_error(404, "place_not_found");
}

// ---------------------------------------------------------------- search

async fn places_are_searched_by_text_region_and_service_a_page_at_a_time(kind: StoreKind) {
    let s = TestServer::start(kind, &["--body-limit-bytes", "1048576"]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    imported(api, &admin, example_csv()).await;
    let codes = |page: &PlacesPage| -> Vec<String> {
        page.places
            .iter()
            .map(|p| p.code.clone().unwrap())
            .collect()
    };
    let find = |query: &'static str| async move {
        let r = api.get(&format!("/api/booking/places?{query}")).await;
        assert_eq!(r.status, 200, "{query}: {}", r.text());
        r.body::<PlacesPage>()
    };
    // Any case, any part of the name, the city or the postcode.
    assert_eq!(codes(&find("q=KOŠICE").await), ["KE-UNL"]);
    assert_eq!(codes(&find("q=poliklinika").await), ["BA-RUZ", "NR-POL"]);
    assert_eq!(codes(&find("q=851%2002").await), ["BA-PET"]);
    assert_eq!(codes(&find("q=bratislava").await), ["BA-RUZ", "BA-PET"]);
    assert_eq!(codes(&find("q=100%25").await), Vec::<String>::new());
    assert_eq!(codes(&find("region=BA").await), ["BA-RUZ", "BA-PET"]);
    assert_eq!(
        codes(&find("service=test-pcr").await),
        ["BA-RUZ", "KE-UNL", "BN-NEM"]
    );
    assert_eq!(codes(&find("service=test-pcr&region=KE").await), ["KE-UNL"]);
    assert_eq!(find("service=test").await.total, 0, "whole codes only");

    // A page at a time by cursor.
    let first = find("size=4").await;
    assert_eq!((first.places.len(), first.total), (4, 6));
    let cursor = first.next_cursor.expect("a next page");
    let r = api
        .get(&format!("/api/booking/places?size=4&cursor={cursor}"))
        .await;
    let second: PlacesPage = r.body();
    assert_eq!(second.places.len(), 2);
    assert_eq!(second.next_cursor, None);
    let mut all = codes(&first);
    all.extend(codes(&second));
    assert_eq!(all.len(), 6);

    for bad in ["service=Not%20A%20Code", "cursor=-1", "size=0"] {
        api.get(&format!("/api/booking/places?{bad}"))
            .await
            .assert_error(422, "invalid_field");
    }
    let long = "x".repeat(101);
    api.get(&format!("/api/booking/places?q={long}"))
        .await
        .assert_error(422, "invalid_field");

    // What a search can be narrowed by: every region and service, in
    // order, with its count of places (a service counted once a place).
    let r = api.get("/api/booking/places/filters").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let filters: PlaceFilters = r.body();
    let pairs = |v: &[FilterValue]| -> Vec<(String, i64)> {
        v.iter().map(|f| (f.value.clone(), f.places)).collect()
    };
    let owned = |v: &[(&str, i64)]| -> Vec<(String, i64)> {
        v.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    };
    assert_eq!(
        pairs(&filters.regions),
        owned(&[("BA", 2), ("KE", 1), ("NR", 1), ("TN", 1), ("ZA", 1)])
    );
    assert_eq!(
        pairs(&filters.services),
        owned(&[
            ("test-antigen", 2),
            ("test-pcr", 3),
            ("vaccine-covid", 3),
            ("vaccine-flu", 3)
        ])
    );
    // Each value finds that many places.
    for f in &filters.services {
        let r = api
            .get(&format!("/api/booking/places?service={}", f.value))
            .await;
        assert_eq!(r.body::<PlacesPage>().total, f.places, "{}", f.value);
    }
}

/// Without places, nothing to narrow by.
async fn no_places_no_filters(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let r = s.api.get("/api/booking/places/filters").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let filters: PlaceFilters = r.body();
    assert!(filters.regions.is_empty() && filters.services.is_empty());
}

async fn the_earliest_free_slots_are_listed_soonest_first(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, admin) = (&s.api, s.token(Role::ADMIN));
    let (_, tomorrow) = today_and_tomorrow();
    // Two sites open all day every day in UTC, one opening at 06:00, one
    // at 10:00, and one in region XX.
    let csv = format!(
        "{HEADER},services,book_ahead_days\n\
         E-1,Early site,Street 1,Town,111 01,EA,UTC,60,1,Mo-Su 06:00-08:00,,vaccine-flu,3\n\
         E-2,Late site,Street 2,Town,111 02,EA,UTC,60,2,Mo-Su 10:00-12:00,,vaccine-flu test-pcr,3\n\
         E-3,Far site,Street 3,Town,111 03,XX,UTC,60,1,Mo-Su 06:00-08:00,,test-pcr,3\n"
    );
    let ids = imported(api, &admin, csv).await.place_ids;
    // Tomorrow's 06:00 at E-1 is taken: E-1's earliest is then 07:00.
    for slot in day_slots(api, ids[0], &tomorrow).await {
        if slot.1 == "06:00" {
            let r = api.register(ids[0], &tomorrow, slot.0, person(1)).await;
            assert_eq!(r.status, 201, "{}", r.text());
        }
    }
    let r = api
        .get("/api/booking/slots/earliest?region=EA&service=vaccine-flu&limit=5")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let list: EarliestList = r.body();
    assert_eq!(list.slots.len(), 2, "{list:?}");
    for pair in list.slots.windows(2) {
        assert!(
            (pair[0].day.as_str(), pair[0].start.as_str())
                <= (pair[1].day.as_str(), pair[1].start.as_str()),
            "{list:?}"
        );
    }
    assert!(list.slots.iter().all(|e| e.place.region == "EA"));
    let e1 = list.slots.iter().find(|e| e.place.id == ids[0]).unwrap();
    let e2 = list.slots.iter().find(|e| e.place.id == ids[1]).unwrap();
    assert!(e1.seats_left >= 1 && e2.seats_left == 2);
    if e1.day == tomorrow {
        assert_eq!(e1.start, "07:00", "tomorrow's 06:00 is taken");
    }
    let r = api.get("/api/booking/slots/earliest?limit=1").await;
    let one: EarliestList = r.body();
    assert_eq!(one.slots.len(), 1);
    for bad in ["limit=0", "limit=51", "days=0", "service=A%20B"] {
        api.get(&format!("/api/booking/slots/earliest?{bad}"))
            .await
            .assert_error(422, "invalid_field");
    }
}

// ---------------------------------------------------------------- the command line

/// `throng booking import-places FILE ARGS`: its exit status, stdout and
/// stderr.
async fn cli_import(args: &[String]) -> (bool, String, String) {
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(throng_bin())
            .args(args)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .expect("the import finishes in time")
    .expect("the import runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn the_command_line_imports_a_file_all_or_none(kind: StoreKind) {
    let dir = tempfile::tempdir().unwrap();
    let pg = match kind {
        StoreKind::Postgres => Some(PgDb::fresh().await),
        StoreKind::Sqlite => None,
    };
    let flags = store_flags(dir.path(), pg.as_ref().map(|p| p.url.as_str()));
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        format!(
            "{HEADER}\nA-1,Site A,Street 1,Town,111 11,R1,UTC,15,1,Mo-Fr 08:00-09:00,\nA-2,Site B,Street 2,Town,111 12,R1,UTC,15,1,Mo-Fr 08:00-09:00,2030-02-30\n"
        ),
    )
    .unwrap();
    let mut args: Vec<String> = vec!["booking".into(), "import-places".into()];
    args.push(bad.display().to_string());
    args.extend(flags.clone());
    let (ok, _, err) = cli_import(&args).await;
    assert!(!ok, "a bad file fails");
    assert!(err.contains("line 3, column closed"), "{err}");

    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/booking/places.csv");
    let mut args: Vec<String> = vec!["booking".into(), "import-places".into()];
    args.push(example.display().to_string());
    args.extend(flags.clone());
    let (ok, out, err) = cli_import(&args).await;
    assert!(ok, "{out}\n{err}");
    let summary: ChangeSummary = serde_json::from_str(&out).unwrap();
    assert_eq!(summary.created, 6, "the bad file imported nothing");
    assert!(summary.slots_added > 1000);

    // The horizon made by the import leaves nothing to extend.
    let mut args: Vec<String> = vec!["booking".into(), "extend".into()];
    args.extend(flags);
    let (ok, out, err) = cli_import(&args).await;
    assert!(ok, "{out}\n{err}");
    let extended: ChangeSummary = serde_json::from_str(&out).unwrap();
    assert_eq!(extended.slots_added, 0, "the horizon is made already");
}
