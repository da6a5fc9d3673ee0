//! The events API through a real server on both stores: every expected
//! version, one winner among 100 racing appends, idempotent re-appends,
//! reads forward/backward/by category/by type, tombstones, MessagePack and
//! LZ4 bodies, access, and bad input that writes nothing.

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{person, Api, Reply, StoreKind, TestServer};
use throng::platform::auth::Role;
use throng::services::events::codec;
use throng::services::events::http::{Appended, Direction, LogPage, StreamRead};
use throng::services::events::subscribe::{Consumer, Lease};

both_stores!(
    expected_versions,
    one_of_100_racing_appends_wins,
    idempotent_reappend,
    reads_forward_backward_by_category_and_type,
    tombstones_keep_the_global_order,
    messagepack_and_lz4_bodies,
    access_needs_an_admin_token_and_services_own_their_streams,
    services_events_are_streams,
    bad_input_writes_nothing,
);

fn event(ty: &str, data: Value) -> Value {
    json!({ "eventId": uuid::Uuid::new_v4().to_string(), "type": ty, "data": data })
}

fn append_request(
    api: &Api,
    token: &str,
    stream: &str,
    expected: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut req = api
        .http
        .post(api.url(&format!("/api/events/streams/{stream}")))
        .bearer_auth(token);
    if let Some(e) = expected {
        req = req.header("expected-version", e);
    }
    req
}

async fn append(
    api: &Api,
    token: &str,
    stream: &str,
    expected: Option<&str>,
    body: &Value,
) -> Reply {
    api.send(append_request(api, token, stream, expected).json(body))
        .await
}

async fn get(api: &Api, token: &str, path: &str) -> Reply {
    api.send(api.http.get(api.url(path)).bearer_auth(token))
        .await
}

/// Every event of the global order, page by page.
async fn all_events(api: &Api, token: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut from = 1;
    loop {
        let r = get(
            api,
            token,
            &format!("/api/events/all?from={from}&limit=1000"),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let events = v["events"].as_array().unwrap().clone();
        let next = v["next"].as_i64().unwrap();
        let head = v["head"].as_i64().unwrap();
        out.extend(events);
        if next > head {
            return out;
        }
        from = next;
    }
}

fn positions(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .map(|e| e["position"].as_i64().unwrap())
        .collect()
}

async fn head(s: &TestServer) -> i64 {
    s.state.store.head_position().await.unwrap()
}

async fn expected_versions(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let one = || json!([event("Opened", json!({"n": 1}))]);

    let r = append(api, t, "account-1", Some("exists"), &one()).await;
    let msg = r.assert_error(409, "wrong_expected_version");
    assert!(msg.contains("does not exist"), "{msg}");
    let r = append(api, t, "account-1", Some("0"), &one()).await;
    r.assert_error(409, "wrong_expected_version");

    let r = append(api, t, "account-1", Some("no_stream"), &one()).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["version"], 0);
    assert_eq!(r.json()["stream"], "account-1");
    let r = append(api, t, "account-1", Some("no_stream"), &one()).await;
    let msg = r.assert_error(409, "wrong_expected_version");
    assert!(msg.contains("current version is 0"), "{msg}");

    let two = json!([
        event("Deposited", json!({"n": 2})),
        event("Deposited", json!({"n": 3}))
    ]);
    let r = append(api, t, "account-1", Some("0"), &two).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v: Appended = r.body();
    assert_eq!((v.stream.as_str(), v.version), ("account-1", 2));
    assert_eq!(v.last_position, v.first_position + 1);
    let r = append(api, t, "account-1", Some("1"), &one()).await;
    let msg = r.assert_error(409, "wrong_expected_version");
    assert!(msg.contains("current version is 2"), "{msg}");
    let r = append(api, t, "account-1", Some("3"), &one()).await;
    r.assert_error(409, "wrong_expected_version");

    let r = append(api, t, "account-1", Some("exists"), &one()).await;
    assert_eq!(r.json()["version"], 3, "{}", r.text());
    let r = append(api, t, "account-1", Some("any"), &one()).await;
    assert_eq!(r.json()["version"], 4, "{}", r.text());
    let r = append(api, t, "account-1", None, &one()).await;
    assert_eq!(r.json()["version"], 5, "{}", r.text());
    let r = append(api, t, "account-2", None, &one()).await;
    assert_eq!(r.json()["version"], 0, "{}", r.text());

    let r = get(api, t, "/api/events/streams/account-1").await;
    let v = r.json();
    assert_eq!(v["version"], 5);
    let versions: Vec<i64> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, [0, 1, 2, 3, 4, 5]);
}

async fn one_of_100_racing_appends_wins(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, s.token(Role::ADMIN));
    let r = append(
        api,
        &t,
        "race-1",
        Some("no_stream"),
        &json!([event("Opened", json!({}))]),
    )
    .await;
    assert_eq!(r.status, 201);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let (api, t) = (api.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!([event("Raced", json!({"i": i}))]);
            append(&api, &t, "race-1", Some("0"), &body).await
        }));
    }
    let mut won = 0;
    for task in tasks {
        let r = task.await.unwrap();
        match r.status {
            201 => {
                won += 1;
                assert_eq!(r.json()["version"], 1);
            }
            _ => {
                let msg = r.assert_error(409, "wrong_expected_version");
                assert!(msg.contains("current version is 1"), "{msg}");
            }
        }
    }
    assert_eq!(won, 1, "exactly one append wins");
    let v = get(api, &t, "/api/events/streams/race-1").await.json();
    assert_eq!(v["events"].as_array().unwrap().len(), 2);
    assert_eq!(head(&s).await, 2, "nothing else was written");
}

async fn idempotent_reappend(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    append(api, t, "other-1", None, &json!([event("X", json!({}))])).await;
    let body = json!([event("A", json!({"a": 1})), event("B", json!({"b": 2}))]);
    let first = append(api, t, "order-1", Some("no_stream"), &body).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let again = append(api, t, "order-1", Some("no_stream"), &body).await;
    assert_eq!(again.status, 201, "{}", again.text());
    assert_eq!(again.json(), first.json(), "the same answer");
    let again = append(api, t, "order-1", None, &body).await;
    assert_eq!(again.json(), first.json());
    assert_eq!(head(&s).await, 3, "nothing written twice");

    // Some of the ids, or the ids under another stream: a conflict.
    let part = json!([body[0].clone(), event("C", json!({}))]);
    append(api, t, "order-1", None, &part)
        .await
        .assert_error(409, "event_ids_in_use");
    append(api, t, "order-2", None, &body)
        .await
        .assert_error(409, "event_ids_in_use");
    let swapped = json!([body[1].clone(), body[0].clone()]);
    append(api, t, "order-1", None, &swapped)
        .await
        .assert_error(409, "event_ids_in_use");
    assert_eq!(head(&s).await, 3);

    // Concurrent re-appends of one new body: one append, one answer.
    let body = json!([event("D", json!({"d": 1}))]);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (api, t, body) = (api.clone(), t.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            append(&api, &t, "order-3", None, &body).await.json()
        }));
    }
    let answers: Vec<Value> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    assert_eq!(head(&s).await, 4);
}

async fn reads_forward_backward_by_category_and_type(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    for i in 0..5 {
        let body = json!([event(
            "cart.ItemAdded",
            json!({"i": i, "sku": format!("S-{i}")})
        )]);
        append(api, t, "cart-1", None, &body).await;
        append(
            api,
            t,
            "cart-2",
            None,
            &json!([event("cart.Viewed", json!({"i": i}))]),
        )
        .await;
        append(
            api,
            t,
            "user-9",
            None,
            &json!([event("Login", json!({"i": i}))]),
        )
        .await;
    }
    append(
        api,
        t,
        "cart",
        None,
        &json!([event("cart.Created", json!({}))]),
    )
    .await;

    let v: StreamRead = get(api, t, "/api/events/streams/cart-1?limit=2")
        .await
        .body();
    assert_eq!(v.direction, Direction::Forward);
    let e = &v.events;
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].data, json!({"i": 0, "sku": "S-0"}));
    assert_eq!(e[0].event_type, "cart.ItemAdded");
    assert_eq!(e[0].stream, "cart-1");
    assert!(e[0].event_id.is_some() && !e[0].created.is_empty());
    assert_eq!(e[0].metadata, None);
    assert_eq!(v.next, Some(2));
    let v: StreamRead = get(api, t, "/api/events/streams/cart-1?from=4")
        .await
        .body();
    assert_eq!(v.events.len(), 1);
    assert_eq!(v.next, None);

    let v: StreamRead = get(
        api,
        t,
        "/api/events/streams/cart-1?direction=backward&limit=3",
    )
    .await
    .body();
    assert_eq!(v.direction, Direction::Backward);
    let versions: Vec<i64> = v.events.iter().map(|e| e.version).collect();
    assert_eq!(versions, [4, 3, 2]);
    assert_eq!(v.next, Some(1));
    let v = get(
        api,
        t,
        "/api/events/streams/cart-1?direction=backward&from=1",
    )
    .await
    .json();
    assert_eq!(v["events"].as_array().unwrap().len(), 2);

    get(api, t, "/api/events/streams/cart-3")
        .await
        .assert_error(404, "stream_not_found");

    let all = all_events(api, t).await;
    assert_eq!(positions(&all), (1..=16).collect::<Vec<_>>());

    let v: LogPage = get(api, t, "/api/events/categories/cart?limit=1000")
        .await
        .body();
    assert!(v.next > v.head);
    let streams: Vec<&str> = v.events.iter().map(|e| e.stream.as_str()).collect();
    assert_eq!(streams.len(), 11);
    assert!(streams
        .iter()
        .all(|s| *s == "cart" || s.starts_with("cart-")));

    let v = get(api, t, "/api/events/all?type=cart.Viewed").await.json();
    let e = v["events"].as_array().unwrap();
    assert_eq!(e.len(), 5);
    assert!(e.iter().all(|e| e["type"] == "cart.Viewed"));
    let v = get(api, t, "/api/events/all?typePrefix=cart.").await.json();
    assert_eq!(v["events"].as_array().unwrap().len(), 11);
    // A prefix holding LIKE's wildcard `_` (a type's character) means itself:
    // as a wildcard, `car_` would match every `cart.` event.
    let v = get(api, t, "/api/events/all?typePrefix=car_").await.json();
    assert_eq!(v["events"].as_array().unwrap().len(), 0);
    // `%` is no type's character: refused, as a type would be.
    let r = get(api, t, "/api/events/all?typePrefix=cart%25").await;
    assert_eq!(r.status, 400, "{}", r.text());
    r.assert_envelope("invalid_query");

    // Paging a filtered read: limit then next, no event twice or skipped.
    let mut seen = Vec::new();
    let mut from = 1;
    loop {
        let v = get(
            api,
            t,
            &format!("/api/events/all?typePrefix=cart.&limit=3&from={from}"),
        )
        .await
        .json();
        seen.extend(positions(v["events"].as_array().unwrap()));
        from = v["next"].as_i64().unwrap();
        if from > v["head"].as_i64().unwrap() {
            break;
        }
    }
    let want: Vec<i64> = all
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("cart."))
        .map(|e| e["position"].as_i64().unwrap())
        .collect();
    assert_eq!(seen, want);

    // A scan budget smaller than the gap between matches: empty pages that
    // still move on.
    let small = TestServer::start(kind, &["--events-scan-max", "2"]).await;
    let (api2, t2) = (&small.api, &small.token(Role::ADMIN));
    for i in 0..5 {
        let ty = if i == 4 { "Rare" } else { "Common" };
        append(api2, t2, "s-1", None, &json!([event(ty, json!({}))])).await;
    }
    let v = get(api2, t2, "/api/events/all?type=Rare").await.json();
    assert_eq!(
        (v["events"].as_array().unwrap().len(), v["next"].as_i64()),
        (0, Some(3))
    );
    let v = get(api2, t2, "/api/events/all?type=Rare&from=3")
        .await
        .json();
    assert_eq!(
        (v["events"].as_array().unwrap().len(), v["next"].as_i64()),
        (0, Some(5))
    );
    let v = get(api2, t2, "/api/events/all?type=Rare&from=5")
        .await
        .json();
    assert_eq!(positions(v["events"].as_array().unwrap()), [5]);
    assert_eq!(v["next"], 6);
}

async fn tombstones_keep_the_global_order(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let body = json!([event("A", json!({})), event("B", json!({}))]);
    append(api, t, "doc-1", None, &body).await;
    append(api, t, "doc-2", None, &json!([event("A", json!({}))])).await;
    let del = |stream: &str, expected: Option<&str>| {
        let mut req = api
            .http
            .delete(api.url(&format!("/api/events/streams/{stream}")))
            .bearer_auth(t);
        if let Some(e) = expected {
            req = req.header("expected-version", e);
        }
        api.send(req)
    };
    del("doc-1", Some("0"))
        .await
        .assert_error(409, "wrong_expected_version");
    del("doc-9", None)
        .await
        .assert_error(404, "stream_not_found");
    let r = del("doc-1", Some("1")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["version"], 2);
    assert_eq!(r.json()["position"], 4);
    del("doc-1", None).await.assert_error(410, "stream_deleted");
    get(api, t, "/api/events/streams/doc-1")
        .await
        .assert_error(410, "stream_deleted");
    append(api, t, "doc-1", None, &json!([event("C", json!({}))]))
        .await
        .assert_error(410, "stream_deleted");
    append(api, t, "doc-2", None, &json!([event("C", json!({}))])).await;
    let all = all_events(api, t).await;
    assert_eq!(positions(&all), [1, 2, 3, 4, 5], "no hole");
    assert_eq!(all[3]["type"], "$streamDeleted");
    assert_eq!(all[3]["stream"], "doc-1");
}

async fn messagepack_and_lz4_bodies(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let fee = throng::services::events::generator::fee_charged(1, 2);
    let data = serde_json::to_value(&fee).unwrap();
    let plain = codec::from_json(&data);
    let compressed = codec::compress(plain.clone());
    assert!(compressed.len() < plain.len());
    // [{eventId, type, data: <ext 99>, metadata: {..}}], built by hand.
    let mut body = Vec::new();
    rmp::encode::write_array_len(&mut body, 2).unwrap();
    for (i, data_bytes) in [&compressed, &plain].into_iter().enumerate() {
        rmp::encode::write_map_len(&mut body, 4).unwrap();
        rmp::encode::write_str(&mut body, "eventId").unwrap();
        rmp::encode::write_str(&mut body, &uuid::Uuid::new_v4().to_string()).unwrap();
        rmp::encode::write_str(&mut body, "type").unwrap();
        rmp::encode::write_str(&mut body, "MonthlyFeeCharged").unwrap();
        rmp::encode::write_str(&mut body, "data").unwrap();
        body.extend_from_slice(data_bytes);
        rmp::encode::write_str(&mut body, "metadata").unwrap();
        body.extend_from_slice(&codec::from_json(&json!({"n": i})));
    }
    let r = api
        .send(
            append_request(api, t, "loan-1", Some("no_stream"))
                .header("content-type", "application/vnd.msgpack")
                .body(body),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = get(api, t, "/api/events/streams/loan-1").await.json();
    let e = v["events"].as_array().unwrap();
    assert_eq!(e[0]["data"], data);
    assert_eq!(e[1]["data"], data);
    assert_eq!(e[1]["metadata"], json!({"n": 1}));
    // Stored as MessagePack+LZ4, whichever way it came.
    let stored = s
        .state
        .store
        .read_stream("loan-1", 0, true, 10)
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    for e in &stored {
        assert_eq!(e.format, throng::store::eventlog::FORMAT_MSGPACK);
        assert_eq!(e.payload, compressed);
    }
    // JSON in, the same bytes stored.
    append(
        api,
        t,
        "loan-2",
        None,
        &json!([event("MonthlyFeeCharged", data.clone())]),
    )
    .await;
    let stored = s
        .state
        .store
        .read_stream("loan-2", 0, true, 10)
        .await
        .unwrap();
    assert_eq!(stored[0].payload, compressed);
}

async fn access_needs_an_admin_token_and_services_own_their_streams(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let api = &s.api;
    let body = json!([event("A", json!({}))]);
    let r = api
        .send(
            api.http
                .post(api.url("/api/events/streams/x-1"))
                .json(&body),
        )
        .await;
    r.assert_error(401, "missing_token");
    let r = api.get("/api/events/all").await;
    r.assert_error(401, "missing_token");
    let r = append(api, "not-a-token", "x-1", None, &body).await;
    r.assert_error(401, "invalid_token");
    for role in [
        throng::services::comments::USER,
        throng::services::comments::PROVIDER,
        throng::services::voting::VOTER,
    ] {
        let t = s.token(role);
        append(api, &t, "x-1", None, &body)
            .await
            .assert_error(403, "forbidden");
        get(api, &t, "/api/events/all")
            .await
            .assert_error(403, "forbidden");
        get(api, &t, "/api/events/categories/x")
            .await
            .assert_error(403, "forbidden");
    }
    let t = &s.token(Role::ADMIN);
    for stream in [
        "booking-registration-1",
        "ballots-1",
        "comments-course-1",
        "booking",
        // A category is a service's whatever its case.
        "Ballots-1",
        "BALLOTS-1",
        "Booking-registration-1",
        "COMMENTS-course-1",
    ] {
        append(api, t, stream, None, &body)
            .await
            .assert_error(403, "stream_owned_by_service");
        let r = api
            .send(
                api.http
                    .delete(api.url(&format!("/api/events/streams/{stream}")))
                    .bearer_auth(t),
            )
            .await;
        r.assert_error(403, "stream_owned_by_service");
    }
    assert_eq!(head(&s).await, 0, "nothing written");
}

async fn services_events_are_streams(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 2, 3).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let r = api.register(2, "2030-01-02", 1, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["registrationId"].as_str().unwrap().to_string();
    let code = r.json()["accessCode"].as_str().unwrap().to_string();
    assert_eq!(api.cancel(&id, Some(&code)).await.status, 204);

    let stream = format!("booking-registration-{id}");
    let v = get(api, t, &format!("/api/events/streams/{stream}"))
        .await
        .json();
    let e = v["events"].as_array().unwrap();
    assert_eq!(e.len(), 2, "{v}");
    assert_eq!(e[0]["type"], "RegistrationConfirmed");
    assert_eq!(e[1]["type"], "RegistrationCancelled");
    assert_eq!(
        (e[0]["version"].as_i64(), e[1]["version"].as_i64()),
        (Some(0), Some(1))
    );
    assert_eq!(e[0]["data"]["registrationId"], id.as_str(), "{}", e[0]);
    assert_eq!(e[0]["eventId"], Value::Null);

    let v = get(api, t, "/api/events/all?type=RegistrationConfirmed")
        .await
        .json();
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
    let v = get(api, t, "/api/events/categories/booking").await.json();
    // The seed's SlotsOpened (booking-slots) and the registration's two.
    assert_eq!(v["events"].as_array().unwrap().len(), 3, "{v}");
}

async fn bad_input_writes_nothing(kind: StoreKind) {
    let s = TestServer::start(kind, &["--events-event-bytes-max", "4096"]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let good = json!([event("A", json!({"a": 1}))]);
    let raw = |stream: &str, ct: Option<&str>, bytes: Vec<u8>| {
        let mut req = append_request(api, t, stream, None).body(bytes);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        api.send(req)
    };
    // Content types.
    raw("a-1", None, serde_json::to_vec(&good).unwrap())
        .await
        .assert_error(415, "unsupported_media_type");
    raw(
        "a-1",
        Some("text/plain"),
        serde_json::to_vec(&good).unwrap(),
    )
    .await
    .assert_error(415, "unsupported_media_type");
    // Malformed bodies.
    raw("a-1", Some("application/json"), b"[{".to_vec())
        .await
        .assert_error(400, "malformed_json");
    // A syntax error inside data is still malformed JSON (data is
    // transcoded while the body is parsed), a well-formed non-object is not.
    let id = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f";
    raw(
        "a-1",
        Some("application/json"),
        format!(r#"[{{"eventId":"{id}","type":"T","data":{{"a":[1,}}}}]"#).into_bytes(),
    )
    .await
    .assert_error(400, "malformed_json");
    raw(
        "a-1",
        Some("application/json"),
        format!(r#"[{{"eventId":"{id}","type":"T","data":[1,2]}}]"#).into_bytes(),
    )
    .await
    .assert_error(422, "invalid_field");
    raw(
        "a-1",
        Some("application/json"),
        format!(r#"[{{"eventId":"{id}","type":"T","data":{{}},"metadata":"x"}}]"#).into_bytes(),
    )
    .await
    .assert_error(422, "invalid_field");
    raw(
        "a-1",
        Some("application/vnd.msgpack"),
        vec![0x91, 0x84, 0xa1],
    )
    .await
    .assert_error(400, "malformed_msgpack");
    raw("a-1", Some("application/vnd.msgpack"), vec![0xc1])
        .await
        .assert_error(400, "malformed_msgpack");
    raw(
        "a-1",
        Some("application/msgpack"),
        serde_json::to_vec(&good).unwrap(),
    )
    .await
    .assert_error(400, "malformed_msgpack");
    // Shapes.
    for bad in [
        json!({"eventId": "x"}),
        json!([]),
        json!([{"eventId": "not-a-uuid", "type": "A", "data": {}}]),
        json!([{"eventId": uuid::Uuid::new_v4().to_string(), "type": "$own", "data": {}}]),
        json!([{"eventId": uuid::Uuid::new_v4().to_string(), "type": "A", "data": [1]}]),
        json!([{"eventId": uuid::Uuid::new_v4().to_string(), "type": "A", "data": {}, "extra": 1}]),
        json!([{"eventId": uuid::Uuid::new_v4().to_string(), "type": "A"}]),
    ] {
        let r = append(api, t, "a-1", None, &bad).await;
        assert_eq!(r.status, 422, "{bad}: {}", r.text());
    }
    let id = uuid::Uuid::new_v4().to_string();
    let twice =
        json!([{"eventId": id, "type": "A", "data": {}}, {"eventId": id, "type": "B", "data": {}}]);
    append(api, t, "a-1", None, &twice)
        .await
        .assert_error(422, "duplicate_event_id");
    let many: Vec<Value> = (0..101).map(|_| event("A", json!({}))).collect();
    append(api, t, "a-1", None, &json!(many))
        .await
        .assert_error(422, "too_many_events");
    // Sizes: an event over the limit; an LZ4 block claiming 2 GiB.
    let big = json!([event("A", json!({"x": "y".repeat(5000)}))]);
    append(api, t, "a-1", None, &big)
        .await
        .assert_error(413, "event_too_large");
    let mut bomb_data = Vec::new();
    rmp::encode::write_ext_meta(&mut bomb_data, 8, codec::EXT_LZ4_BLOCK).unwrap();
    bomb_data.push(0xd2);
    bomb_data.extend_from_slice(&i32::MAX.to_be_bytes());
    bomb_data.extend_from_slice(&[0x1f, 0x00, 0x01]);
    let mut body = Vec::new();
    rmp::encode::write_array_len(&mut body, 1).unwrap();
    rmp::encode::write_map_len(&mut body, 3).unwrap();
    for (k, v) in [
        ("eventId", uuid::Uuid::new_v4().to_string()),
        ("type", "A".into()),
    ] {
        rmp::encode::write_str(&mut body, k).unwrap();
        rmp::encode::write_str(&mut body, &v).unwrap();
    }
    rmp::encode::write_str(&mut body, "data").unwrap();
    body.extend_from_slice(&bomb_data);
    raw("a-1", Some("application/vnd.msgpack"), body)
        .await
        .assert_error(413, "payload_bomb");
    // Names, versions, positions.
    for stream in ["-a", "a%20b", "%24all", &"x".repeat(201)] {
        append(api, t, stream, None, &good)
            .await
            .assert_error(400, "invalid_stream");
    }
    for e in ["-1", "first", "1.0", ""] {
        append(api, t, "a-1", Some(e), &good)
            .await
            .assert_error(400, "invalid_expected_version");
    }
    for q in [
        "/api/events/all?from=abc",
        "/api/events/all?from=-1",
        "/api/events/all?limit=0",
        "/api/events/all?limit=1001",
        "/api/events/all?unknown=1",
        "/api/events/all?type=",
        "/api/events/categories/cart?from=x",
        "/api/events/streams/a-1?from=1e3",
        "/api/events/streams/a-1?direction=sideways",
    ] {
        let r = get(api, t, q).await;
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        r.assert_envelope("invalid_query");
    }
    get(api, t, "/api/events/categories/a-b")
        .await
        .assert_error(400, "invalid_category");
    assert_eq!(head(&s).await, 0, "nothing written");
    let r = append(api, t, "a-1", None, &good).await;
    assert_eq!(r.status, 201, "{}", r.text());
}

// ------------------------------------------------------------ subscriptions

both_stores!(
    sse_resumes_with_last_event_id,
    long_poll_answers_when_an_event_commits,
    consumers_hold_a_lease_and_a_checkpoint,
    forged_ballot_events_count_for_nothing,
);

/// Server-sent events as (id, event, data), read from a response.
struct SseReader {
    res: reqwest::Response,
    buf: String,
}

impl SseReader {
    async fn open(api: &Api, token: &str, path: &str, last_id: Option<i64>) -> SseReader {
        let mut req = api.http.get(api.url(path)).bearer_auth(token);
        if let Some(id) = last_id {
            req = req.header("last-event-id", id.to_string());
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        SseReader {
            res,
            buf: String::new(),
        }
    }

    async fn next(&mut self) -> (i64, String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut ty, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse::<i64>().unwrap());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        ty = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return (id, ty, serde_json::from_str(&data).unwrap());
                }
                continue; // a keep-alive comment
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), self.res.chunk())
                .await
                .expect("an event within 10 s")
                .unwrap()
                .expect("the stream stays open");
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

async fn sse_resumes_with_last_event_id(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    for i in 0..5 {
        append(
            api,
            t,
            &format!("feed-{}", i % 2),
            None,
            &json!([event("Tick", json!({"i": i}))]),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut sse = SseReader::open(api, t, "/api/events/subscribe?from=1", None).await;
    for _ in 0..3 {
        let (id, ty, data) = sse.next().await;
        assert_eq!(ty, "Tick");
        assert_eq!(data["position"], id);
        seen.push(id);
    }
    drop(sse);
    for i in 5..8 {
        append(
            api,
            t,
            "feed-0",
            None,
            &json!([event("Tick", json!({"i": i}))]),
        )
        .await;
    }
    let mut sse = SseReader::open(api, t, "/api/events/subscribe?from=1", Some(seen[2])).await;
    for _ in 0..5 {
        seen.push(sse.next().await.0);
    }
    assert_eq!(
        seen,
        (1..=8).collect::<Vec<_>>(),
        "every event once, in order"
    );
    // Live: an append after the catch-up arrives.
    append(api, t, "feed-1", None, &json!([event("Late", json!({}))])).await;
    let (id, ty, data) = sse.next().await;
    assert_eq!((id, ty.as_str()), (9, "Late"));
    assert_eq!(data["stream"], "feed-1");
    // A filtered subscription.
    let mut sse = SseReader::open(api, t, "/api/events/subscribe?type=Late", None).await;
    assert_eq!(sse.next().await.0, 9);
    get(api, t, "/api/events/subscribe?from=x")
        .await
        .assert_error(400, "invalid_query");
    let r = api
        .send(
            api.http
                .get(api.url("/api/events/subscribe"))
                .bearer_auth(t)
                .header("last-event-id", "abc"),
        )
        .await;
    r.assert_error(400, "invalid_last_event_id");
    // Past the documented maximum (the next position would not exist).
    let r = api
        .send(
            api.http
                .get(api.url("/api/events/subscribe"))
                .bearer_auth(t)
                .header("last-event-id", i64::MAX.to_string()),
        )
        .await;
    r.assert_error(400, "invalid_last_event_id");
    assert!(
        r.text().contains("0 to 9223372036854775806"),
        "{}",
        r.text()
    );
    let doc = api.get("/openapi.json").await.json();
    let param = doc["paths"]["/api/events/subscribe"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Last-Event-ID")
        .unwrap()
        .clone();
    assert_eq!(param["schema"]["maximum"], i64::MAX - 1, "{param}");
    api.get("/api/events/subscribe")
        .await
        .assert_error(401, "missing_token");
}

async fn long_poll_answers_when_an_event_commits(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let v = get(api, t, "/api/events/poll?waitMs=0").await.json();
    assert_eq!(v["events"], json!([]));
    let waiting = {
        let (api, t) = (api.clone(), t.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let r = get(&api, &t, "/api/events/poll?from=1&waitMs=10000").await;
            (r.json(), started.elapsed())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    append(api, t, "p-1", None, &json!([event("Woke", json!({}))])).await;
    let (v, took) = waiting.await.unwrap();
    assert_eq!(v["events"][0]["type"], "Woke", "{v}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    get(api, t, "/api/events/poll?waitMs=30001")
        .await
        .assert_error(400, "invalid_query");
}

async fn consumers_hold_a_lease_and_a_checkpoint(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    let lease = |owner: &str, lease_ms: i64, token: Option<&str>, position: Option<i64>| {
        let mut body = json!({"owner": owner, "leaseMs": lease_ms});
        if let Some(p) = position {
            body["position"] = json!(p);
        }
        if let Some(token) = token {
            body["leaseToken"] = json!(token);
        }
        api.send(
            api.http
                .post(api.url("/api/events/consumers/projector/lease"))
                .bearer_auth(t)
                .json(&body),
        )
    };
    let release = |token: &str| {
        api.send(
            api.http
                .delete(api.url("/api/events/consumers/projector/lease"))
                .bearer_auth(t)
                .header("lease-token", token),
        )
    };
    let r = lease("node-a", 60000, None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let held: Lease = r.body();
    assert_eq!(
        (held.position, held.owner.as_str(), held.lease_ms),
        (0, "node-a", 60000)
    );
    let token = held.lease_token;
    assert_eq!(token.len(), 32, "{token}");
    // Held: neither another owner nor one naming the holder takes it.
    lease("node-b", 60000, None, None)
        .await
        .assert_error(409, "lease_held");
    lease("node-a", 60000, None, None)
        .await
        .assert_error(409, "lease_held");
    lease("node-a", 60000, None, Some(50))
        .await
        .assert_error(409, "lease_held");
    // A token that never held it renews nothing and saves nothing.
    let forged = "0".repeat(32);
    lease("node-a", 60000, Some(&forged), Some(50))
        .await
        .assert_error(409, "lease_not_held");
    release(&forged).await.assert_error(409, "lease_not_held");
    lease("node-a", 60000, Some("not-a-token"), None)
        .await
        .assert_error(422, "invalid_field");
    // The token renews and saves the checkpoint (whole numbers written
    // with a fraction are integers).
    let body =
        json!({"owner": "node-a", "leaseMs": 60000.0, "leaseToken": token, "position": 42.0});
    let r = api
        .send(
            api.http
                .post(api.url("/api/events/consumers/projector/lease"))
                .bearer_auth(t)
                .json(&body),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let renewed: Lease = r.body();
    assert_eq!((renewed.position, &renewed.lease_token), (42, &token));
    let v: Consumer = get(api, t, "/api/events/consumers/projector").await.body();
    assert_eq!((v.consumer.as_str(), v.position), ("projector", 42));
    lease("node-a", 60000, Some(&token), Some(-1))
        .await
        .assert_error(422, "invalid_field");
    // Released with its token: the next claim is granted at once, and the
    // old token holds nothing.
    let r = release(&token).await;
    assert_eq!(r.status, 204, "{}", r.text());
    release(&token).await.assert_error(409, "lease_not_held");
    let r = lease("node-b", 1000, None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["position"], 42);
    let b_token = r.json()["leaseToken"].as_str().unwrap().to_string();
    assert_ne!(b_token, token);
    lease("node-a", 60000, Some(&token), None)
        .await
        .assert_error(409, "lease_not_held");
    // Expiry frees it: after node-b's 1 s lapse, a new claim takes it and
    // node-b's token no longer renews.
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    let r = lease("node-c", 60000, None, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    lease("node-b", 60000, Some(&b_token), None)
        .await
        .assert_error(409, "lease_not_held");
    // Booking's confirmation worker is a consumer too: readable, not leased here.
    let v = get(api, t, "/api/events/consumers/booking-notifier")
        .await
        .json();
    assert_eq!(v["position"], 0);
    let r = api
        .send(
            api.http
                .post(api.url("/api/events/consumers/booking-notifier/lease"))
                .bearer_auth(t)
                .json(&json!({"owner": "x", "leaseMs": 60000})),
        )
        .await;
    r.assert_error(403, "consumer_owned_by_service");
    let r = api
        .send(
            api.http
                .delete(api.url("/api/events/consumers/booking-notifier/lease"))
                .bearer_auth(t)
                .header("lease-token", "0".repeat(32)),
        )
        .await;
    r.assert_error(403, "consumer_owned_by_service");
    get(api, t, "/api/events/consumers/bad%20name")
        .await
        .assert_error(400, "invalid_consumer");
    let r = api
        .send(
            api.http
                .post(api.url("/api/events/consumers/projector/lease"))
                .bearer_auth(t)
                .json(&json!({"owner": "x", "leaseMs": 5})),
        )
        .await;
    r.assert_error(422, "invalid_field");
}

// --------------------------------------------------- durability and nodes

both_stores!(acknowledged_appends_survive_sigkill);
crate::postgres_only!(two_nodes_append_while_readers_follow_all);

async fn acknowledged_appends_survive_sigkill(kind: StoreKind) {
    use crate::helpers::{PgDb, ProcessServer};
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    let mut server = ProcessServer::start(dir.path(), pg_url, &[]).await;
    let token = server.admin_token();
    let acked: std::sync::Arc<std::sync::Mutex<Vec<(String, i64)>>> = Default::default();
    let started = std::time::Instant::now();
    let mut clients = Vec::new();
    for c in 0..32 {
        let (api, token, acked) = (server.api.clone(), token.clone(), acked.clone());
        clients.push(tokio::spawn(async move {
            let mut n = 0;
            while started.elapsed() < std::time::Duration::from_secs(3) {
                let ev = event("Load", json!({"c": c, "n": n}));
                let id = ev["eventId"].as_str().unwrap().to_string();
                let req =
                    append_request(&api, &token, &format!("load-{c}"), None).json(&json!([ev]));
                match api.try_send(req).await {
                    Ok(r) if r.status == 201 => {
                        acked
                            .lock()
                            .unwrap()
                            .push((id, r.json()["firstPosition"].as_i64().unwrap()));
                    }
                    Ok(r) => panic!("unexpected answer {}: {}", r.status, r.text()),
                    Err(_) => return, // the server is gone
                }
                n += 1;
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    server.kill().await;
    for c in clients {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 50,
        "only {} appends before the kill",
        acked.len()
    );
    let server = ProcessServer::start(dir.path(), pg_url, &[]).await;
    let all = all_events(&server.api, &server.admin_token()).await;
    let ps = positions(&all);
    match kind {
        StoreKind::Sqlite => {
            assert_eq!(ps, (1..=ps.len() as i64).collect::<Vec<_>>(), "gap-free")
        }
        // Positions come from a sequence there: appends in flight when the
        // node was killed rolled back and left their numbers unused (README,
        // "what event positions promise"). Still in order, never repeated.
        StoreKind::Postgres => assert!(
            ps.windows(2).all(|w| w[0] < w[1]),
            "positions increase: {ps:?}"
        ),
    }
    let by_position: std::collections::HashMap<i64, &str> = all
        .iter()
        .map(|e| {
            (
                e["position"].as_i64().unwrap(),
                e["eventId"].as_str().unwrap(),
            )
        })
        .collect();
    for (id, position) in &acked {
        assert_eq!(
            by_position.get(position),
            Some(&id.as_str()),
            "acknowledged {id} at {position}"
        );
    }
}

async fn two_nodes_append_while_readers_follow_all(_kind: StoreKind) {
    use crate::helpers::{PgDb, ProcessServer};
    let db = PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
    );
    let token = a.admin_token();
    let started = std::time::Instant::now();
    let run_for = std::time::Duration::from_secs(3);
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let mut writers = Vec::new();
    for w in 0..16 {
        let api = if w % 2 == 0 {
            a.api.clone()
        } else {
            b.api.clone()
        };
        let (token, acked) = (token.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0;
            while started.elapsed() < run_for {
                // Batches of 1 to 3 on shared streams.
                let body: Vec<Value> = (0..1 + n % 3)
                    .map(|_| event("Tick", json!({"w": w})))
                    .collect();
                let r = append(
                    &api,
                    &token,
                    &format!("shared-{}", n % 4),
                    None,
                    &json!(body),
                )
                .await;
                assert_eq!(r.status, 201, "{}", r.text());
                acked.fetch_add(body.len() as i64, std::sync::atomic::Ordering::Relaxed);
                n += 1;
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..4 {
        let api = if r % 2 == 0 {
            a.api.clone()
        } else {
            b.api.clone()
        };
        let token = token.clone();
        readers.push(tokio::spawn(async move {
            let mut seen: Vec<i64> = Vec::new();
            let mut from = 1;
            let mut quiet = 0;
            loop {
                let v = get(
                    &api,
                    &token,
                    &format!("/api/events/all?from={from}&limit=50"),
                )
                .await
                .json();
                let got = positions(v["events"].as_array().unwrap());
                if got.is_empty() && started.elapsed() > run_for {
                    quiet += 1;
                    if quiet > 5 {
                        return seen;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                seen.extend(got);
                from = v["next"].as_i64().unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let total = acked.load(std::sync::atomic::Ordering::Relaxed);
    // Every acknowledged event, in the order the store keeps: positions
    // increase; on PostgreSQL a rolled-back batch may leave a hole.
    let mut all: Vec<i64> = Vec::new();
    let mut from = 1;
    loop {
        let v = get(
            &a.api,
            &token,
            &format!("/api/events/all?from={from}&limit=1000"),
        )
        .await
        .json();
        let got = positions(v["events"].as_array().unwrap());
        if got.is_empty() && v["next"].as_i64().unwrap() > v["head"].as_i64().unwrap() {
            break;
        }
        all.extend(got);
        from = v["next"].as_i64().unwrap();
    }
    assert_eq!(all.len() as i64, total, "every acknowledged event, once");
    assert!(all.windows(2).all(|w| w[0] < w[1]), "positions increase");
    for r in readers {
        let seen = r.await.unwrap();
        let first_difference = seen.iter().zip(&all).position(|(s, a)| s != a);
        assert!(
            seen == all,
            "a reader skipped or repeated an event: it saw {} of {}, first difference at index {:?} (saw {:?}, expected {:?})",
            seen.len(),
            all.len(),
            first_difference,
            first_difference.map(|i| &seen[i.saturating_sub(2)..(i + 3).min(seen.len())]),
            first_difference.map(|i| &all[i.saturating_sub(2)..(i + 3).min(all.len())]),
        );
    }
    // Stream versions stayed consecutive across the nodes.
    for s in 0..4 {
        let v = get(
            &a.api,
            &token,
            &format!("/api/events/streams/shared-{s}?limit=1000"),
        )
        .await
        .json();
        let versions: Vec<i64> = v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["version"].as_i64().unwrap())
            .collect();
        assert_eq!(versions, (0..versions.len() as i64).collect::<Vec<_>>());
    }
    // One expected version raced on both nodes: one winner.
    let mut race = Vec::new();
    for i in 0..40 {
        let api = if i % 2 == 0 {
            a.api.clone()
        } else {
            b.api.clone()
        };
        let token = token.clone();
        race.push(tokio::spawn(async move {
            append(
                &api,
                &token,
                "duel-1",
                Some("no_stream"),
                &json!([event("Won", json!({}))]),
            )
            .await
            .status
        }));
    }
    let statuses: Vec<u16> = futures::future::join_all(race)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 409),
        "{statuses:?}"
    );
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A subscriber that reads nothing while ~23 MB of events (as JSON) are
/// appended: the server holds one page for it, not the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_subscriber_does_not_grow_the_server() {
    use crate::helpers::ProcessServer;
    let dir = tempfile::TempDir::new().unwrap();
    let server = ProcessServer::start(dir.path(), None, &[]).await;
    let token = server.admin_token();
    let pid = server.pid().unwrap();
    let data =
        serde_json::to_value(throng::services::events::generator::fee_charged(3, 1)).unwrap();
    // Warm up the append path before the baseline.
    for i in 0..20 {
        let body: Vec<Value> = (0..5).map(|_| event("Fee", data.clone())).collect();
        append(
            &server.api,
            &token,
            &format!("warm-{i}"),
            None,
            &json!(body),
        )
        .await;
    }
    let slow = server
        .api
        .http
        .get(server.api.url("/api/events/subscribe?from=1"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status(), 200);
    let before = rss_kib(pid);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (api, token, data) = (server.api.clone(), token.clone(), data.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                let body: Vec<Value> = (0..5).map(|_| event("Fee", data.clone())).collect();
                let req = append_request(&api, &token, &format!("big-{w}-{i}"), None).json(&body);
                match api.try_send(req).await {
                    Ok(r) => assert_eq!(r.status, 201, "{}", r.text()),
                    Err(e) => return Err(format!("{e:?}")),
                }
            }
            Ok(())
        }));
    }
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            panic!("an append failed: {e}\nserver log:\n{}", server.log_text());
        }
    }
    let after = rss_kib(pid);
    let grown_mib = after.saturating_sub(before) / 1024;
    println!("server RSS {before} -> {after} KiB");
    assert!(
        grown_mib < 16,
        "the server grew {grown_mib} MiB ({before} -> {after} KiB) with a subscriber 2,100 events \
         (~23 MB as JSON) behind"
    );
    // The slow subscriber still gets its events, in order.
    let mut sse = SseReader {
        res: slow,
        buf: String::new(),
    };
    for want in 1..=3 {
        assert_eq!(sse.next().await.0, want);
    }
}

/// Events that look like ballots count for nothing: the turnout is the
/// board's (sealed ballots cast through the vote route), and a service's
/// streams are closed to an admin's appends.
async fn forged_ballot_events_count_for_nothing(kind: StoreKind) {
    use throng::services::voting::seed::{candidate_id, district_of, seed, SeedVotingArgs};
    use throng::store::eventlog::NewEvent;
    let flags = [
        "--voting-identity",
        "headers",
        "--voting-mix-ballots-min",
        "1",
        "--voting-mix-interval-ms",
        "20",
        "--voting-board-period-ms",
        "50",
    ];
    let s = TestServer::start(kind, &flags).await;
    let args = SeedVotingArgs {
        voters: 20,
        districts: 2,
        parties: 2,
        candidates_per_party: 2,
        candidates_per_vote_max: 2,
        election: 1,
        name: Some("Test election".into()),
        opens_at: None,
        closes_at: None,
        force: false,
        voters_csv: None,
        trustees_out: None,
    };
    seed(&s.state.store, &args, false).await.unwrap();
    let (api, t) = (&s.api, &s.token(Role::ADMIN));
    for _ in 0..200 {
        if api.get("/api/voting/elections/1").await.status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let d = district_of(1, 1, 2);
    let forged = json!({
        "electionId": 1, "districtId": d, "partyId": 1,
        "candidateIds": [candidate_id(&args, d, 1, 1)],
    });
    // Forged ballots: JSON in a stream of another category, and through
    // the API (MessagePack) in an admin's stream.
    for stream in ["forged-1", "ballots", "ballotsx-1", "ballots-1x"] {
        s.state
            .store
            .append_event(NewEvent::json(stream, "voting.BallotCast", &forged))
            .await
            .unwrap();
    }
    let r = append(
        api,
        t,
        "x-1",
        None,
        &json!([event("voting.BallotCast", forged.clone())]),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    append(
        api,
        t,
        "Ballots-1",
        None,
        &json!([event("voting.BallotCast", forged)]),
    )
    .await
    .assert_error(403, "stream_owned_by_service");
    // One real vote after them.
    let sealed = crate::sealing::sealed_body(
        api,
        1,
        d,
        &json!({"partyId": 1, "candidateIds": [candidate_id(&args, d, 1, 1)]}),
    )
    .await;
    let r = api
        .send(
            api.http
                .post(api.url("/api/voting/elections/1/votes"))
                .header("voter-id", "1")
                .header("election-district-id", d.to_string())
                .json(&sealed),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let mut results = json!(null);
    for _ in 0..400 {
        results = api.get("/api/voting/elections/1/results").await.json();
        if results["ballots"].as_i64().unwrap_or(0) >= 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Past every event: a forged ballot would have been counted by now.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let results = api.get("/api/voting/elections/1/results").await.json();
    assert_eq!(results["ballots"], 1, "{results}");
}
