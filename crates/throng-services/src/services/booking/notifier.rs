//! Confirmation SMS from a queue: a worker follows `RegistrationConfirmed`
//! events in the log and hands each to the notifier, at least once, keeping
//! its position durably in `consumer_positions`. It runs beside the request
//! path and never blocks it: a slow or dead notifier only makes it lag.
//!
//! The event carries no personal data; the worker opens the sealed contact
//! data only to hand the phone number to the SMS gateway (the webhook, http
//! or https; redirects are never followed). A confirmation that keeps
//! failing, or that the gateway rejects, is parked
//! (`booking_notifications_parked`) instead of stalling the ones after it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;

use super::model::{SlotEvent, EVENT_CONFIRMED, STREAM_CATEGORY};
use super::store::{self, Booking};
use crate::base::metrics;
use crate::platform::crypto::PiiCipher;
use crate::platform::lease::{self, Lease};
use crate::store::{Store, StoredEvent};

/// The confirmation worker's counters on `/metrics`.
pub struct NotifierMetrics {
    pub delivered: prometheus::IntCounter,
    pub failures: prometheus::IntCounter,
    pub parked: prometheus::IntCounter,
}

/// Registered with the server's metrics on first use (`Booking::start`
/// uses them first, so they show from 0).
pub static NOTIFIER_METRICS: std::sync::LazyLock<NotifierMetrics> = std::sync::LazyLock::new(
    || {
        let counter = |name: &str, help: &str| {
            let c = prometheus::IntCounter::new(name, help).expect("a valid metric name");
            metrics::register(&c);
            c
        };
        NotifierMetrics {
            delivered: counter(
                "throng_notifier_delivered_total",
                "Notifications handed to the notifier",
            ),
            failures: counter(
                "throng_notifier_failures_total",
                "Failed notification attempts (each is retried)",
            ),
            parked: counter(
                "throng_notifier_parked_total",
                "Confirmations parked after their attempts or a gateway's refusal (see the admin endpoint)",
            ),
        }
    },
);

pub const CONSUMER: &str = "booking-notifier";
/// Events read from the log per round.
const EVENTS_PER_ROUND_MAX: i64 = 1024;
/// After a round that did not fill up, wait this long before reading again.
/// Each round costs a log read and a durable position save (a write on the
/// request path's writer); without the pause a crowd of registrations made
/// one round per group commit, ~8% of a try-register's throughput. A
/// confirmation goes out at most this much later.
const ROUND_GATHER_MS: u64 = 20;
/// Deliveries in flight at once.
const DELIVERIES_IN_FLIGHT_MAX: usize = 16;
/// Wait for new events at most this long before looking again.
const IDLE_POLL_MS: u64 = 500;
const RETRY_BACKOFF_MS_FIRST: u64 = 100;
const RETRY_BACKOFF_MS_MAX: u64 = 30_000;
const WEBHOOK_TIMEOUT_MS: u64 = 5_000;
/// How long a node's claim on the worker lasts without renewal. A round that
/// runs longer (a gateway down for minutes) lets another node take over, which
/// then may repeat deliveries: at least once, never lost.
const LEASE_MS: i64 = 15_000;
/// The idempotency key of a delivery is this and the event's position.
const IDEMPOTENCY_KEY_PREFIX: &str = "throng-event-";

#[derive(Clone)]
pub enum Notifier {
    /// Writes one line per confirmation to the log (no personal data).
    Log,
    /// POSTs JSON to an SMS gateway, with an `Idempotency-Key` header.
    Webhook {
        url: String,
        client: reqwest::Client,
    },
}

impl Notifier {
    pub fn from_url(url: Option<&str>) -> anyhow::Result<Notifier> {
        let Some(url) = url else {
            return Ok(Notifier::Log);
        };
        if !url.starts_with("http://") && !url.starts_with("https://") {
            anyhow::bail!("--notify-webhook must be an http:// or https:// URL");
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(WEBHOOK_TIMEOUT_MS))
            // A gateway's redirect would make us send the phone number to
            // wherever it points: never followed (the answer parks the event).
            .redirect(reqwest::redirect::Policy::none())
            .https_only(url.starts_with("https://"))
            .build()?;
        Ok(Notifier::Webhook {
            url: url.to_string(),
            client,
        })
    }
}

enum Delivery {
    Done,
    /// Will not succeed by retrying (the gateway rejected it): parked.
    Rejected(String),
    Retry(String),
}

/// How hard the worker tries one confirmation (`--notify-attempts-max`).
#[derive(Clone, Copy, Debug)]
pub struct Attempts {
    pub max: u32,
}

pub fn spawn(
    store: Store,
    storage: Booking,
    pii: Arc<PiiCipher>,
    notifier: Notifier,
    wake: Arc<Notify>,
    attempts: Attempts,
) -> tokio::task::JoinHandle<()> {
    // Nodes sharing one PostgreSQL each run this worker; a lease on the
    // consumer row lets one deliver while the others stand by, and a node
    // that dies hands over when its lease lapses.
    let worker = lease::Worker {
        consumer: CONSUMER,
        name: "confirmation worker",
        lease_ms: LEASE_MS,
        standby: Duration::from_millis(LEASE_MS as u64 / 3),
    };
    let to = Arc::new(Deliveries {
        storage,
        pii,
        notifier,
        attempts,
    });
    let log = store.clone();
    lease::spawn(
        store,
        worker,
        move |lease, position| {
            let (log, to, wake) = (log.clone(), to.clone(), wake.clone());
            async move { follow(&log, &to, &wake, lease, position).await }
        },
        || async {},
    )
}

/// What delivering (or parking) a confirmation uses.
struct Deliveries {
    storage: Booking,
    pii: Arc<PiiCipher>,
    notifier: Notifier,
    attempts: Attempts,
}

/// Delivers while this node holds the lease; returns when it lost it.
async fn follow(store: &Store, to: &Deliveries, wake: &Notify, lease: Lease, mut position: i64) {
    loop {
        let scan = match store
            .events_of_type_after(
                position,
                EVENTS_PER_ROUND_MAX,
                STREAM_CATEGORY,
                EVENT_CONFIRMED,
            )
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "notifier cannot read the event log; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let (count, last) = (scan.scanned, scan.scanned_to);
        if count == 0 {
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)) => {}
            }
            if !lease.keep().await {
                return;
            }
            continue;
        }
        futures::stream::iter(scan.events)
            .for_each_concurrent(DELIVERIES_IN_FLIGHT_MAX, |e| deliver_or_park(to, e))
            .await;
        let held = retry_forever("save notifier position", || lease.save(last)).await;
        if !held {
            return;
        }
        position = last;
        if count < EVENTS_PER_ROUND_MAX {
            tokio::time::sleep(Duration::from_millis(ROUND_GATHER_MS)).await;
        }
    }
}

async fn retry_forever<T, E: std::fmt::Display, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut backoff_ms = RETRY_BACKOFF_MS_FIRST;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!(error = %e, "{what} failed; retrying in {backoff_ms} ms");
                tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                backoff_ms = (backoff_ms * 2).min(RETRY_BACKOFF_MS_MAX);
            }
        }
    }
}

/// Delivers one confirmation, retrying with capped backoff up to
/// `attempts.max` times; then, or at once when the gateway rejects it, parks
/// it durably (kept, counted, listed by the admin endpoint), so one poison
/// event never stalls the confirmations after it.
async fn deliver_or_park(to: &Deliveries, event: StoredEvent) {
    let mut backoff_ms = RETRY_BACKOFF_MS_FIRST;
    let mut tried = 0u32;
    let reason = loop {
        tried += 1;
        match deliver(to, &event).await {
            Delivery::Done => {
                NOTIFIER_METRICS.delivered.inc();
                return;
            }
            Delivery::Rejected(why) => {
                NOTIFIER_METRICS.failures.inc();
                break why;
            }
            Delivery::Retry(why) if tried >= to.attempts.max => {
                NOTIFIER_METRICS.failures.inc();
                break format!("{why} ({tried} attempts)");
            }
            Delivery::Retry(why) => {
                NOTIFIER_METRICS.failures.inc();
                tracing::warn!(position = event.position, %why, "notification failed; retrying in {backoff_ms} ms");
                tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                backoff_ms = (backoff_ms * 2).min(RETRY_BACKOFF_MS_MAX);
            }
        }
    };
    let registration_id = serde_json::from_slice::<SlotEvent<'_>>(&event.payload)
        .map(|p| p.registration_id.into_owned())
        .unwrap_or_default();
    tracing::error!(position = event.position, %registration_id, %reason, "confirmation parked; see GET /api/booking/admin/notifications/parked");
    let parked = store::ParkedNotification {
        position: event.position,
        registration_id,
        reason,
        attempts: i64::from(tried),
        parked_at_ms: crate::base::clock::now_ms(),
    };
    retry_forever("park a confirmation", || {
        to.storage.park_notification(parked.clone())
    })
    .await;
    NOTIFIER_METRICS.parked.inc();
}

async fn deliver(to: &Deliveries, event: &StoredEvent) -> Delivery {
    let payload: SlotEvent<'_> = match serde_json::from_slice(&event.payload) {
        Ok(v) => v,
        Err(e) => {
            return Delivery::Rejected(format!("unreadable event payload: {e}"));
        }
    };
    let id: &str = &payload.registration_id;
    match &to.notifier {
        Notifier::Log => {
            tracing::info!(
                registration_id = id,
                position = event.position,
                idempotency_key = %format_args!("{IDEMPOTENCY_KEY_PREFIX}{}", event.position),
                "confirmation ready (log notifier; no SMS gateway configured)"
            );
            Delivery::Done
        }
        Notifier::Webhook { url, client } => {
            let idempotency_key = format!("{IDEMPOTENCY_KEY_PREFIX}{}", event.position);
            let reg = match to.storage.registration(id).await {
                Ok(Some(r)) => r,
                // Cancelled before we got to it: nothing to confirm.
                Ok(None) => return Delivery::Done,
                Err(e) => return Delivery::Retry(e.to_string()),
            };
            let Some(person) = to
                .pii
                .open(&reg.id, &reg.person_sealed)
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            else {
                return Delivery::Rejected("the sealed contact data does not open".into());
            };
            let body = serde_json::json!({
                "idempotencyKey": idempotency_key,
                "type": "RegistrationConfirmed",
                "registrationId": reg.id,
                "placeId": reg.place_id,
                "day": reg.day.to_text(),
                "timeSlot": reg.time_slot,
                "phone": person["phone"],
            });
            match client
                .post(url)
                .header("Idempotency-Key", &idempotency_key)
                .json(&body)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => Delivery::Done,
                Ok(r)
                    if r.status().as_u16() == 408
                        || r.status().as_u16() == 429
                        || r.status().is_server_error() =>
                {
                    Delivery::Retry(format!("gateway answered {}", r.status()))
                }
                Ok(r) if r.status().is_redirection() => Delivery::Rejected(format!(
                    "the gateway redirected ({}); redirects are not followed: configure the \
                     final URL in --notify-webhook",
                    r.status()
                )),
                Ok(r) => Delivery::Rejected(format!("the gateway rejected it ({})", r.status())),
                Err(e) => Delivery::Retry(format!("gateway unreachable: {}", e.without_url())),
            }
        }
    }
}
