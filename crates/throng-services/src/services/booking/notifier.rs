//! Messages from a queue: a worker follows booking's message events in the
//! log (`messages::MESSAGE_EVENTS`: confirmations, moves, cancellations, a
//! closed day, reminders, new access codes, withdrawn slots) and hands each
//! to the SMS gateway's webhook and to the email channel, at least once,
//! keeping its position durably in `consumer_positions`. It runs beside the
//! request path and never blocks it: a slow or dead gateway only makes it
//! lag. The same worker appends the reminders that fall due
//! (`--booking-reminder-before`), so they go out through the same log.
//!
//! Events carry no personal data; the worker opens the sealed contact data
//! only to hand the phone number to the SMS gateway (http or https,
//! redirects never followed) and the address to the SMTP relay. A message
//! that keeps failing, or that a gateway rejects, is parked
//! (`booking_notifications_parked`) instead of stalling the ones after it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;

use super::email::{Email, EmailError};
use super::messages::{self, Appointment, Kind, MESSAGE_EVENTS};
use super::model::{BookingClock, Day, STREAM_CATEGORY};
use super::store::messages::{self as kept, ReminderWindow};
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
                "Messages delivered (to every configured channel)",
            ),
            failures: counter(
                "throng_notifier_failures_total",
                "Failed message attempts (each is retried)",
            ),
            parked: counter(
                "throng_notifier_parked_total",
                "Messages parked after their attempts or a gateway's refusal (see the admin endpoint)",
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
/// message goes out at most this much later.
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
/// How often due reminders are looked for (a reminder goes out at most this
/// much later than `--booking-reminder-before` says).
const REMINDER_SCAN_MS: u64 = 5_000;
/// Reminders appended per look at most (the rest at the next).
const REMINDERS_PER_SCAN_MAX: i64 = 500;
/// How long a cancelled registration's contact data and an unsent access
/// code are kept when their message never went out (parked, or no worker).
pub const CANCELLED_CONTACT_KEEP_MS: i64 = 30 * 86_400_000;
/// How often that purge runs.
const PURGE_EVERY_MS: u64 = 3_600_000;

/// Where messages go: the SMS gateway's webhook, email, both, or (neither
/// configured) a line in the log without personal data.
#[derive(Clone)]
pub struct Notifier {
    webhook: Option<Webhook>,
    email: Option<Email>,
}

/// The SMS gateway: JSON POSTed with an `Idempotency-Key` header.
#[derive(Clone)]
struct Webhook {
    url: String,
    client: reqwest::Client,
}

impl Notifier {
    pub fn new(webhook_url: Option<&str>, email: Option<Email>) -> anyhow::Result<Notifier> {
        let webhook = match webhook_url {
            None => None,
            Some(url) => {
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
                Some(Webhook {
                    url: url.to_string(),
                    client,
                })
            }
        };
        Ok(Notifier { webhook, email })
    }
}

/// What the worker needs besides the log.
pub struct Settings {
    pub attempts: Attempts,
    /// `--booking-reminder-before`; no reminders when `None`.
    pub reminder_before_ms: Option<i64>,
    pub clock: BookingClock,
    /// The absolute base of the links messages carry.
    pub public_base: String,
}

enum Delivery {
    Done,
    /// Will not succeed by retrying (the gateway rejected it): parked.
    Rejected(String),
    Retry(String),
}

/// How hard the worker tries one message (`--notify-attempts-max`).
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
    settings: Settings,
) -> tokio::task::JoinHandle<()> {
    // Nodes sharing one PostgreSQL each run this worker; a lease on the
    // consumer row lets one deliver while the others stand by, and a node
    // that dies hands over when its lease lapses.
    let worker = lease::Worker {
        consumer: CONSUMER,
        name: "messages worker",
        lease_ms: LEASE_MS,
        standby: Duration::from_millis(LEASE_MS as u64 / 3),
    };
    let to = Arc::new(Deliveries {
        store: store.clone(),
        storage,
        pii,
        notifier,
        settings,
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

/// What delivering (or parking) a message uses.
struct Deliveries {
    store: Store,
    storage: Booking,
    pii: Arc<PiiCipher>,
    notifier: Notifier,
    settings: Settings,
}

/// The chores that run beside delivering: due reminders appended to the
/// log, and kept contact data purged.
struct Chores {
    reminders_at: tokio::time::Instant,
    purge_at: tokio::time::Instant,
}

impl Chores {
    fn new() -> Chores {
        let now = tokio::time::Instant::now();
        Chores {
            reminders_at: now,
            purge_at: now,
        }
    }

    async fn run(&mut self, to: &Deliveries) {
        let now = tokio::time::Instant::now();
        if let Some(before_ms) = to.settings.reminder_before_ms {
            if now >= self.reminders_at {
                self.reminders_at = now + Duration::from_millis(REMINDER_SCAN_MS);
                let window = ReminderWindow {
                    now_ms: crate::base::clock::now_ms(),
                    before_ms,
                    offset_s: i64::from(to.settings.clock.offset.whole_seconds()),
                    limit: REMINDERS_PER_SCAN_MAX,
                };
                match kept::schedule_reminders(&to.store, window).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(reminders = n, "reminders due"),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot look for due reminders; trying again later")
                    }
                }
            }
        }
        if now >= self.purge_at {
            self.purge_at = now + Duration::from_millis(PURGE_EVERY_MS);
            let before = crate::base::clock::now_ms() - CANCELLED_CONTACT_KEEP_MS;
            if let Err(e) = kept::purge(&to.store, before).await {
                tracing::warn!(error = %e, "cannot purge kept contact data; trying again later");
            }
        }
    }
}

/// Delivers while this node holds the lease; returns when it lost it.
async fn follow(store: &Store, to: &Deliveries, wake: &Notify, lease: Lease, mut position: i64) {
    let mut chores = Chores::new();
    loop {
        chores.run(to).await;
        let scan = match store
            .events_of_types_after(
                position,
                EVENTS_PER_ROUND_MAX,
                STREAM_CATEGORY,
                MESSAGE_EVENTS,
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

/// The registration id of a message event (every one carries it).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AboutRegistration {
    registration_id: String,
    /// When the access code a reissue event hands over was issued.
    #[serde(default)]
    code_issued_at_ms: Option<i64>,
}

/// Which channels took a message already: a retry resends only to the
/// others.
#[derive(Default)]
struct Sent {
    webhook: bool,
    email: bool,
}

/// Delivers one message, retrying with capped backoff up to `attempts.max`
/// times; then, or at once when a gateway rejects it, parks it durably
/// (kept, counted, listed by the admin endpoint), so one poison event never
/// stalls the messages after it.
async fn deliver_or_park(to: &Deliveries, event: StoredEvent) {
    let mut backoff_ms = RETRY_BACKOFF_MS_FIRST;
    let mut tried = 0u32;
    let mut sent = Sent::default();
    let reason = loop {
        tried += 1;
        match deliver(to, &event, &mut sent).await {
            Delivery::Done => {
                NOTIFIER_METRICS.delivered.inc();
                return;
            }
            Delivery::Rejected(why) => {
                NOTIFIER_METRICS.failures.inc();
                break why;
            }
            Delivery::Retry(why) if tried >= to.settings.attempts.max => {
                NOTIFIER_METRICS.failures.inc();
                break format!("{why} ({tried} attempts)");
            }
            Delivery::Retry(why) => {
                NOTIFIER_METRICS.failures.inc();
                tracing::warn!(position = event.position, %why, "message failed; retrying in {backoff_ms} ms");
                tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                backoff_ms = (backoff_ms * 2).min(RETRY_BACKOFF_MS_MAX);
            }
        }
    };
    let registration_id = serde_json::from_slice::<AboutRegistration>(&event.payload)
        .map(|p| p.registration_id)
        .unwrap_or_default();
    tracing::error!(position = event.position, %registration_id, %reason, "message parked; see GET /api/booking/admin/notifications/parked");
    let parked = store::ParkedNotification {
        position: event.position,
        registration_id,
        reason: format!("{}: {reason}", event.event_type),
        attempts: i64::from(tried),
        parked_at_ms: crate::base::clock::now_ms(),
    };
    retry_forever("park a message", || {
        to.storage.park_notification(parked.clone())
    })
    .await;
    NOTIFIER_METRICS.parked.inc();
}

/// A message's recipient and appointment, read for one event.
struct Recipient {
    place_id: i64,
    day: Day,
    time_slot: i32,
    person: serde_json::Value,
    /// The access code the message hands over, with when it was issued.
    code: Option<(String, i64)>,
}

/// The registration (or, once cancelled, its kept copy) an event is about;
/// `None` when there is nothing to send (cancelled before its
/// confirmation went out; a cancellation whose copy was purged).
async fn recipient(to: &Deliveries, kind: Kind, id: &str) -> Result<Option<Recipient>, Delivery> {
    let retry = |e: crate::store::StoreError| Delivery::Retry(e.to_string());
    let open = |sealed: &[u8]| {
        to.pii
            .open(id, sealed)
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .ok_or_else(|| Delivery::Rejected("the sealed contact data does not open".into()))
    };
    let current = if kind.after_cancel() {
        None
    } else {
        to.storage.registration(id).await.map_err(retry)?
    };
    if let Some(reg) = current {
        let code = match kept::pending_code(&to.store, id).await.map_err(retry)? {
            Some((sealed, at)) => to
                .pii
                .open(id, &sealed)
                .and_then(|b| String::from_utf8(b).ok())
                .map(|code| (code, at)),
            None => None,
        };
        return Ok(Some(Recipient {
            place_id: reg.place_id,
            day: reg.day,
            time_slot: reg.time_slot,
            person: open(&reg.person_sealed)?,
            code,
        }));
    }
    // Gone: a cancellation (or a withdrawn slot whose registration the
    // change cancelled) is sent to the kept copy; the others need none.
    if !(kind.after_cancel() || kind == Kind::SlotWithdrawn) {
        return Ok(None);
    }
    match kept::cancelled(&to.store, id).await.map_err(retry)? {
        None => Ok(None),
        Some(c) => Ok(Some(Recipient {
            place_id: c.place_id,
            day: c.day,
            time_slot: c.time_slot,
            person: open(&c.person_sealed)?,
            code: None,
        })),
    }
}

async fn deliver(to: &Deliveries, event: &StoredEvent, sent: &mut Sent) -> Delivery {
    let Some(kind) = Kind::of_event(&event.event_type) else {
        return Delivery::Done;
    };
    let about: AboutRegistration = match serde_json::from_slice(&event.payload) {
        Ok(v) => v,
        Err(e) => return Delivery::Rejected(format!("unreadable event payload: {e}")),
    };
    let id = about.registration_id.as_str();
    let idempotency_key = format!("{IDEMPOTENCY_KEY_PREFIX}{}", event.position);
    if to.notifier.webhook.is_none() && to.notifier.email.is_none() {
        tracing::info!(
            registration_id = id,
            position = event.position,
            kind = kind.name(),
            idempotency_key = %idempotency_key,
            "message ready (log notifier; no SMS gateway or SMTP relay configured)"
        );
        return Delivery::Done;
    }
    let r = match recipient(to, kind, id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Delivery::Done,
        Err(d) => return d,
    };
    let place = match to.storage.place(r.place_id).await {
        Ok(p) => p,
        Err(e) => return Delivery::Retry(e.to_string()),
    };
    let appointment = Appointment {
        place: place.as_ref(),
        place_id: r.place_id,
        day: r.day,
        time_slot: r.time_slot,
    };
    let base = &to.settings.public_base;
    // A code goes with a new code's message and with a confirmation of a
    // booking made on the person's behalf (issued with the registration).
    let code = r
        .code
        .as_ref()
        .filter(|_| matches!(kind, Kind::NewAccessCode | Kind::Confirmation));
    let link = if kind.after_cancel() {
        messages::booking_url(base)
    } else {
        messages::manage_url(base, id, code.map(|(c, _)| c.as_str()))
    };
    let text = messages::text(kind, &appointment, &link);
    if let Some(w) = &to.notifier.webhook {
        if !sent.webhook {
            let body = serde_json::json!({
                "idempotencyKey": idempotency_key,
                "type": event.event_type,
                "kind": kind.name(),
                "registrationId": id,
                "placeId": r.place_id,
                "day": r.day.to_text(),
                "timeSlot": r.time_slot,
                "start": appointment.start(),
                "manageUrl": link,
                "text": text,
                "phone": r.person["phone"],
            });
            match post(w, &idempotency_key, &body).await {
                Delivery::Done => sent.webhook = true,
                other => return other,
            }
        }
    }
    if let Some(email) = &to.notifier.email {
        if !sent.email {
            let address = r.person["email"].as_str().unwrap_or_default();
            match email
                .send(address, kind.subject(), text.clone(), &idempotency_key)
                .await
            {
                Ok(()) => sent.email = true,
                Err(EmailError::Rejected(why)) => return Delivery::Rejected(why),
                Err(EmailError::Retry(why)) => return Delivery::Retry(why),
            }
        }
    }
    // Sent: what was kept only for this message goes.
    let cleanup = async {
        if kind.after_cancel() {
            kept::forget_cancelled(&to.store, id).await?;
        }
        if let Some((_, at)) = code {
            let issued = about.code_issued_at_ms.unwrap_or(*at);
            kept::forget_code(&to.store, id, issued).await?;
        }
        Ok::<(), crate::store::StoreError>(())
    };
    if let Err(e) = cleanup.await {
        // Purged later (`CANCELLED_CONTACT_KEEP_MS`); the message went out.
        tracing::warn!(error = %e, registration_id = id, "cannot delete what a sent message kept");
    }
    Delivery::Done
}

async fn post(w: &Webhook, idempotency_key: &str, body: &serde_json::Value) -> Delivery {
    match w
        .client
        .post(&w.url)
        .header("Idempotency-Key", idempotency_key)
        .json(body)
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
