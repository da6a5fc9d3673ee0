//! The confirmation worker against gateways that misbehave: a redirect is
//! never followed, and an event that keeps failing is parked instead of
//! stalling the ones after it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use serde_json::Value;

use crate::both_stores;
use crate::helpers::{person, StoreKind, TestServer, FROM};
use throng::platform::auth::Role;

both_stores!(
    a_redirecting_gateway_receives_nothing_more,
    a_failing_event_does_not_block_the_next,
    confirmations_in_other_streams_are_not_sent
);

type Calls = Arc<Mutex<Vec<Value>>>;

/// A gateway on 127.0.0.1 whose answer `answer(body)` picks; records bodies.
async fn gateway(
    answer: impl Fn(&Value) -> (StatusCode, HeaderMap) + Clone + Send + Sync + 'static,
) -> (String, Calls) {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/sms",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let (seen, answer) = (seen.clone(), answer.clone());
            async move {
                let reply = answer(&body);
                seen.lock().unwrap().push(body);
                reply
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/sms", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

/// The parked list once it holds one confirmation (15 s at most).
async fn wait_for_one_parked(s: &TestServer) -> Value {
    let mut list = Value::Null;
    for _ in 0..150 {
        list = parked(s).await;
        if list["count"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(list["count"], 1, "{list}");
    list
}

async fn parked(s: &TestServer) -> Value {
    let r = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url("/api/booking/admin/notifications/parked"))
                .bearer_auth(s.token(Role::ADMIN)),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Waits (bounded) until `done` holds; false if it never did.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..150 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done()
}

async fn a_redirecting_gateway_receives_nothing_more(kind: StoreKind) {
    // Where the redirect points: another origin that must never see a phone.
    let (elsewhere, elsewhere_calls) = gateway(|_| (StatusCode::OK, HeaderMap::new())).await;
    let (url, calls) = gateway(move |_| {
        let mut h = HeaderMap::new();
        h.insert(header::LOCATION, elsewhere.parse().unwrap());
        (StatusCode::TEMPORARY_REDIRECT, h)
    })
    .await;
    let flags = ["--with-notifier", "--notify-webhook", &url];
    let s = TestServer::start_seeded(kind, &flags, Some((1, 1, 5))).await;
    let r = s.api.register(1, FROM, 0, person(1)).await;
    assert_eq!(r.status, 201);
    let id = r.json()["registrationId"].as_str().unwrap().to_string();
    let list = wait_for_one_parked(&s).await;
    let p = &list["parked"][0];
    assert_eq!(p["registrationId"], id.as_str());
    assert!(p["reason"].as_str().unwrap().contains("redirect"), "{p}");
    assert_eq!(p["attempts"], 1, "a redirect is not retried: {p}");
    // Give a follower of redirects time to show itself.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        elsewhere_calls.lock().unwrap().len(),
        0,
        "nothing sent elsewhere"
    );
    assert_eq!(calls.lock().unwrap().len(), 1, "one attempt, no retries");
    let stats = s.stats().await;
    assert_eq!(
        stats["notifierPosition"], stats["lastEventPosition"],
        "{stats}"
    );
    let metrics = s.api.get("/metrics").await.text();
    assert!(metrics.contains("throng_notifier_parked_total"));
    // The list is for admins.
    s.api
        .get("/api/booking/admin/notifications/parked")
        .await
        .assert_error(401, "missing_token");
}

async fn a_failing_event_does_not_block_the_next(kind: StoreKind) {
    let poison = person(1)["phone"].clone();
    let (url, calls) = gateway(move |body| {
        let status = if body["phone"] == poison {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        };
        (status, HeaderMap::new())
    })
    .await;
    let flags = [
        "--with-notifier",
        "--notify-webhook",
        &url,
        "--notify-attempts-max",
        "3",
    ];
    let s = TestServer::start_seeded(kind, &flags, Some((1, 1, 5))).await;
    let r = s.api.register(1, FROM, 0, person(1)).await;
    assert_eq!(r.status, 201);
    let poisoned = r.json()["registrationId"].as_str().unwrap().to_string();
    // The next registration comes after the poison one was tried.
    assert!(eventually(|| !calls.lock().unwrap().is_empty()).await);
    let r = s.api.register(1, FROM, 1, person(2)).await;
    assert_eq!(r.status, 201);
    let next = r.json()["registrationId"].as_str().unwrap().to_string();
    let delivered = eventually(|| {
        calls
            .lock()
            .unwrap()
            .iter()
            .any(|b| b["registrationId"] == next.as_str())
    })
    .await;
    assert!(delivered, "the next confirmation went out");
    let list = parked(&s).await;
    assert_eq!(list["count"], 1, "{list}");
    assert_eq!(list["parked"][0]["registrationId"], poisoned.as_str());
    assert_eq!(list["parked"][0]["attempts"], 3);
    let tries = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b["registrationId"] == poisoned.as_str())
        .count();
    assert_eq!(tries, 3, "tried --notify-attempts-max times, then parked");
    let mut stats = s.stats().await;
    for _ in 0..50 {
        if stats["notifierPosition"] == stats["lastEventPosition"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        stats = s.stats().await;
    }
    assert_eq!(
        stats["notifierPosition"], stats["lastEventPosition"],
        "{stats}"
    );
}

/// https gateways are spoken to over TLS (rustls): an https URL is accepted,
/// and a plain-HTTP listener behind it fails the handshake and is parked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn https_gateways_are_spoken_to_over_tls() {
    let (url, calls) = gateway(|_| (StatusCode::OK, HeaderMap::new())).await;
    let https = url.replace("http://", "https://");
    let flags = [
        "--with-notifier",
        "--notify-webhook",
        &https,
        "--notify-attempts-max",
        "1",
    ];
    let s = TestServer::start_seeded(StoreKind::Sqlite, &flags, Some((1, 1, 5))).await;
    assert_eq!(s.api.register(1, FROM, 0, person(1)).await.status, 201);
    wait_for_one_parked(&s).await;
    assert_eq!(calls.lock().unwrap().len(), 0, "no request in the clear");
}

/// The worker reads booking's own streams only: a `RegistrationConfirmed`
/// naming a real registration in any other stream sends nothing.
async fn confirmations_in_other_streams_are_not_sent(kind: StoreKind) {
    use throng::store::eventlog::NewEvent;
    let (url, calls) = gateway(|_| (StatusCode::OK, HeaderMap::new())).await;
    let flags = ["--with-notifier", "--notify-webhook", &url];
    let s = TestServer::start_seeded(kind, &flags, Some((1, 1, 5))).await;
    let r = s.api.register(1, FROM, 0, person(1)).await;
    assert_eq!(r.status, 201);
    let first = r.json()["registrationId"].as_str().unwrap().to_string();
    assert!(eventually(|| calls.lock().unwrap().len() == 1).await);
    let forged = serde_json::json!({
        "registrationId": first, "placeId": 1, "day": FROM, "timeSlot": 0,
    });
    for stream in ["forged-1", "bookings-registration-1", "bookingx"] {
        s.state
            .store
            .append_event(NewEvent::json(stream, "RegistrationConfirmed", &forged))
            .await
            .unwrap();
    }
    // Through the API a look-alike of booking's streams is refused.
    let r = s
        .api
        .send(
            s.api
                .http
                .post(s.api.url("/api/events/streams/Booking-registration-1"))
                .bearer_auth(s.token(Role::ADMIN))
                .json(&serde_json::json!([{
                    "eventId": uuid::Uuid::new_v4().to_string(),
                    "type": "RegistrationConfirmed",
                    "data": forged,
                }])),
        )
        .await;
    r.assert_error(403, "stream_owned_by_service");
    // A real one after them: once it is sent, the worker has passed them.
    let r = s.api.register(1, FROM, 1, person(2)).await;
    assert_eq!(r.status, 201);
    let next = r.json()["registrationId"].as_str().unwrap().to_string();
    assert!(
        eventually(|| calls
            .lock()
            .unwrap()
            .iter()
            .any(|b| b["registrationId"] == next.as_str()))
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent: Vec<Value> = calls.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "one message per registration: {sent:?}");
    assert_eq!(
        sent.iter()
            .filter(|b| b["registrationId"] == first.as_str())
            .count(),
        1
    );
    assert_eq!(parked(&s).await["count"], 0);
}
