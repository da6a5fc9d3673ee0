//! Notifications through a webhook (`--comments-notify-webhook URL`): a
//! worker follows the comments' events in the log and POSTs one JSON
//! notification per event that someone should hear of, at least once, with
//! an `Idempotency-Key` (the event's position) so the receiver can drop a
//! repeat:
//!
//! - a listed new review (`CommentPosted`, or a held one approved,
//!   `CommentApproved`): the course's provider;
//! - a provider's reply (`ReplyPosted`): the review's author;
//! - a report (`CommentReported`): the moderators.
//!
//! The worker runs under the platform's lease (`platform/lease.rs`), as
//! booking's confirmation worker does, so one node delivers at a time and
//! another takes over when it dies; its position is saved after each round.
//! Notifications carry ids only: the host maps them to people and
//! addresses. An answer of 408, 429 or 5xx, or no answer, is retried with
//! capped backoff up to `--comments-notify-attempts-max` times; then, or at
//! once on any other 4xx or a redirect (never followed: the receiver's
//! refusal), the notification is parked: kept in
//! `comments_notifications_parked`, counted, and listed at
//! `GET /api/comments/host/notifications/parked`, so one that keeps failing
//! never holds back the ones after it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::model::{
    EVENT_COMMENT_APPROVED, EVENT_COMMENT_POSTED, EVENT_COMMENT_REPORTED, EVENT_REPLY_POSTED,
};
use super::store::{CommentsStore, ParkedCommentNotification};
use crate::base::metrics;
use crate::platform::lease::{self, Lease};
use crate::store::{Store, StoredEvent};

/// The worker's log consumer (its lease and position).
pub const CONSUMER: &str = "comments-notifier";
/// The streams it follows: `comments-...`.
const CATEGORY: &str = "comments";
const FOLLOWED: &[&str] = &[
    EVENT_COMMENT_POSTED,
    EVENT_COMMENT_APPROVED,
    EVENT_REPLY_POSTED,
    EVENT_COMMENT_REPORTED,
];
/// Events scanned per round.
const EVENTS_PER_ROUND_MAX: i64 = 512;
/// Wait for new events at most this long before looking again.
const IDLE_POLL_MS: u64 = 500;
/// After a round that did not fill up, gather this long before the next.
const ROUND_GATHER_MS: u64 = 20;
const RETRY_BACKOFF_MS_FIRST: u64 = 100;
const RETRY_BACKOFF_MS_MAX: u64 = 30_000;
const WEBHOOK_TIMEOUT_MS: u64 = 5_000;
/// How long a node's claim on the worker lasts without renewal.
const LEASE_MS: i64 = 15_000;
const IDEMPOTENCY_KEY_PREFIX: &str = "throng-comments-";

/// Notifications parked, on `/metrics`.
static PARKED_TOTAL: std::sync::LazyLock<prometheus::IntCounter> = std::sync::LazyLock::new(|| {
    let c = prometheus::IntCounter::new(
        "throng_comments_notifications_parked_total",
        "Comments notifications parked after their attempts or the webhook's refusal",
    )
    .expect("a valid metric name");
    metrics::register(&c);
    c
});

/// Where notifications go, and how often one is tried before it is parked.
#[derive(Clone)]
pub struct Webhook {
    url: String,
    client: reqwest::Client,
    attempts_max: u32,
}

impl Webhook {
    pub fn new(url: &str, attempts_max: u32) -> anyhow::Result<Webhook> {
        if !url.starts_with("http://") && !url.starts_with("https://") {
            anyhow::bail!("--comments-notify-webhook must be an http:// or https:// URL");
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(WEBHOOK_TIMEOUT_MS))
            .redirect(reqwest::redirect::Policy::none())
            .https_only(url.starts_with("https://"))
            .build()?;
        std::sync::LazyLock::force(&PARKED_TOTAL);
        Ok(Webhook {
            url: url.to_string(),
            client,
            attempts_max: attempts_max.max(1),
        })
    }
}

/// Starts the leased worker.
pub fn spawn(
    store: Store,
    storage: CommentsStore,
    webhook: Webhook,
    wake: Arc<Notify>,
) -> tokio::task::JoinHandle<()> {
    let worker = lease::Worker {
        consumer: CONSUMER,
        name: "comments notifier",
        lease_ms: LEASE_MS,
        standby: Duration::from_millis(LEASE_MS as u64 / 3),
    };
    let log = store.clone();
    let to = Arc::new((storage, webhook));
    lease::spawn(
        store,
        worker,
        move |lease, position| {
            let (log, to, wake) = (log.clone(), to.clone(), wake.clone());
            async move { follow(&log, &to.0, &to.1, &wake, lease, position).await }
        },
        || async {},
    )
}

async fn follow(
    log: &Store,
    storage: &CommentsStore,
    webhook: &Webhook,
    wake: &Notify,
    lease: Lease,
    mut position: i64,
) {
    loop {
        let scan = match log
            .events_of_types_after(position, EVENTS_PER_ROUND_MAX, CATEGORY, FOLLOWED)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "comments notifier cannot read the event log; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if scan.scanned == 0 {
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)) => {}
            }
            if !lease.keep().await {
                return;
            }
            continue;
        }
        for event in &scan.events {
            deliver_or_park(storage, webhook, event).await;
            if lease.since_renewed() > Duration::from_millis(LEASE_MS as u64 / 3)
                && !lease.keep().await
            {
                return;
            }
        }
        let mut backoff = RETRY_BACKOFF_MS_FIRST;
        let held = loop {
            match lease.save(scan.scanned_to).await {
                Ok(held) => break held,
                Err(e) => {
                    tracing::warn!(error = %e, "comments notifier cannot save its position; retrying");
                    tokio::time::sleep(Duration::from_millis(backoff)).await;
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MS_MAX);
                }
            }
        };
        if !held {
            return;
        }
        position = scan.scanned_to;
        if scan.scanned < EVENTS_PER_ROUND_MAX {
            tokio::time::sleep(Duration::from_millis(ROUND_GATHER_MS)).await;
        }
    }
}

/// What an event tells whom; `None` when nobody is told (a held review).
async fn notification_of(
    storage: &CommentsStore,
    event: &StoredEvent,
) -> Result<Option<serde_json::Value>, String> {
    let p: serde_json::Value = serde_json::from_slice(&event.payload)
        .map_err(|e| format!("unreadable event payload: {e}"))?;
    let course_id = p["courseId"].as_i64().unwrap_or(0);
    let key = format!("{IDEMPOTENCY_KEY_PREFIX}{}", event.position);
    let provider_of = |course: Option<super::store::Course>| {
        course.map(|c| serde_json::json!({"role": "provider", "id": c.provider_id}))
    };
    let (kind, to) = match event.event_type.as_str() {
        EVENT_COMMENT_POSTED if p["status"].as_str().unwrap_or("visible") != "visible" => {
            return Ok(None)
        }
        EVENT_COMMENT_POSTED | EVENT_COMMENT_APPROVED => {
            let course = storage.course(course_id).await.map_err(|e| e.to_string())?;
            let Some(to) = provider_of(course) else {
                return Ok(None);
            };
            ("new_review", to)
        }
        EVENT_REPLY_POSTED => (
            "reply",
            serde_json::json!({"role": "user", "id": p["reviewerId"]}),
        ),
        EVENT_COMMENT_REPORTED => ("report", serde_json::json!({"role": "moderators"})),
        _ => return Ok(None),
    };
    Ok(Some(serde_json::json!({
        "idempotencyKey": key,
        "type": kind,
        "to": to,
        "courseId": course_id,
        "commentId": p["commentId"],
        "replyId": p.get("replyId"),
        "reportsOpen": p.get("reportsOpen"),
        "event": event.event_type,
        "position": event.position,
    })))
}

/// What one attempt at a notification came to.
enum Attempt {
    Delivered,
    /// Nobody is told of this event (or it cannot be read: logged).
    Nothing,
    /// The store could not answer: tried again, not counted.
    StoreFailed(String),
    /// The webhook failed in a way that may pass: counted, tried again.
    Failed(String),
    /// The webhook refused it: parked at once.
    Refused(String),
}

/// One attempt: the notification built from the store and POSTed.
async fn attempt(storage: &CommentsStore, webhook: &Webhook, event: &StoredEvent) -> Attempt {
    let body = match notification_of(storage, event).await {
        Ok(Some(b)) => b,
        Ok(None) => return Attempt::Nothing,
        Err(why) if why.starts_with("unreadable") => {
            tracing::error!(position = event.position, %why, "comments notification passed over");
            return Attempt::Nothing;
        }
        Err(why) => return Attempt::StoreFailed(why),
    };
    let key = body["idempotencyKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let sent = webhook
        .client
        .post(&webhook.url)
        .header("Idempotency-Key", &key)
        .json(&body)
        .send()
        .await;
    let status = match sent {
        Ok(r) => r.status(),
        Err(e) => return Attempt::Failed(format!("unreachable: {}", e.without_url())),
    };
    let code = status.as_u16();
    if status.is_success() {
        Attempt::Delivered
    } else if code == 408 || code == 429 || status.is_server_error() {
        Attempt::Failed(format!("answered {code}"))
    } else {
        Attempt::Refused(format!(
            "refused: answered {code} (redirects are not followed)"
        ))
    }
}

/// Delivers one event's notification, retrying what may pass with capped
/// backoff up to the webhook's `attempts_max`; then, or at once when the
/// webhook refuses it, parks it durably.
async fn deliver_or_park(storage: &CommentsStore, webhook: &Webhook, event: &StoredEvent) {
    let mut backoff = RETRY_BACKOFF_MS_FIRST;
    let mut tried = 0u32;
    let reason = loop {
        match attempt(storage, webhook, event).await {
            Attempt::Delivered | Attempt::Nothing => return,
            Attempt::Refused(why) => {
                tried += 1;
                break why;
            }
            Attempt::Failed(why) => {
                tried += 1;
                if tried >= webhook.attempts_max {
                    break format!("{why} ({tried} attempts)");
                }
                tracing::warn!(position = event.position, %why, "comments webhook failed; retrying in {backoff} ms");
            }
            Attempt::StoreFailed(why) => {
                tracing::warn!(position = event.position, %why, "comments notification waits; retrying in {backoff} ms");
            }
        }
        tokio::time::sleep(Duration::from_millis(backoff)).await;
        backoff = (backoff * 2).min(RETRY_BACKOFF_MS_MAX);
    };
    tracing::error!(position = event.position, %reason, "comments notification parked; see GET /api/comments/host/notifications/parked");
    let comment_id = serde_json::from_slice::<serde_json::Value>(&event.payload)
        .ok()
        .and_then(|p| p["commentId"].as_i64())
        .unwrap_or(0);
    let parked = ParkedCommentNotification {
        position: event.position,
        event: event.event_type.clone(),
        comment_id,
        reason,
        attempts: i64::from(tried),
        parked_at_ms: crate::base::clock::now_ms(),
    };
    let mut backoff = RETRY_BACKOFF_MS_FIRST;
    while let Err(e) = storage.park_notification(parked.clone()).await {
        tracing::warn!(error = %e, "cannot park a comments notification; retrying in {backoff} ms");
        tokio::time::sleep(Duration::from_millis(backoff)).await;
        backoff = (backoff * 2).min(RETRY_BACKOFF_MS_MAX);
    }
    PARKED_TOTAL.inc();
}
