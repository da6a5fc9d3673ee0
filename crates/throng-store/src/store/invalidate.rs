//! Cross-node cache invalidation on PostgreSQL: a write names what it
//! changed (`PgTx::invalidate`), the key is sent with `pg_notify` in the
//! write's own transaction (so it is delivered exactly when the write
//! commits, and never for a write that rolled back), and every node
//! listens on one connection of its own and tells its caches.
//!
//! How fresh a node is, as a bound: every [`HEARTBEAT_MS`] the listener
//! notifies a heartbeat of its own. PostgreSQL delivers a listener's
//! notifications in commit order, so when the heartbeat comes back every
//! key of every write committed before it was sent has come back too: the
//! node's caches are fresh as of the heartbeat's sending. [`Invalidations::
//! fresh_within`] tells a cache whether that is recent enough; a cache that
//! is not (the listener lost its connection, the database is away, the
//! node is too busy to read its notifications) must read from the database.
//! After the listener reconnects it sends [`Invalidation::Everything`]
//! (keys may have been missed meanwhile).
//!
//! Portability: LISTEN/NOTIFY is PostgreSQL's. CockroachDB and YugabyteDB
//! have no NOTIFY; there a cache falls back to what it does while the
//! listener is away (ask the database for a version per read), or uses
//! the engine's change feed (CockroachDB changefeeds, YugabyteDB CDC) as
//! the channel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

/// The notification channel every node listens on.
pub const CHANNEL: &str = "throng_invalidate";
/// How often the listener checks it is fresh.
pub const HEARTBEAT_MS: u64 = 200;
/// Keys waiting for a slow subscriber at most; past it the subscriber
/// hears `Everything` (see `recv`).
const BACKLOG_MAX: usize = 4096;
/// Longest wait before reconnecting a lost listener.
const RECONNECT_MS_MAX: u64 = 2000;

/// What a cache hears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalidation {
    /// A write changed what this key names (`service:what`).
    Key(Arc<str>),
    /// Keys may have been missed: drop everything.
    Everything,
}

pub struct Invalidations {
    sender: broadcast::Sender<Invalidation>,
    /// The latest heartbeat sent whose echo came back (node-local time).
    fresh_as_of: Mutex<Option<Instant>>,
    node: u64,
    heartbeats_sent: AtomicU64,
}

impl Invalidations {
    /// Starts listening (a task of its own, reconnecting as needed).
    pub fn start(config: tokio_postgres::Config) -> Arc<Invalidations> {
        let this = Arc::new(Invalidations {
            sender: broadcast::channel(BACKLOG_MAX).0,
            fresh_as_of: Mutex::new(None),
            node: rand::random(),
            heartbeats_sent: AtomicU64::new(0),
        });
        tokio::spawn(listen_forever(this.clone(), config));
        this
    }

    pub fn subscribe(&self) -> Subscription {
        Subscription(self.sender.subscribe())
    }

    /// Whether every write committed more than `bound` ago has been heard.
    pub fn fresh_within(&self, bound: Duration) -> bool {
        self.fresh_as_of
            .lock()
            .unwrap()
            .is_some_and(|t| t.elapsed() <= bound)
    }

    fn heartbeat_payload(&self, n: u64) -> String {
        format!("$hb:{:016x}:{n}", self.node)
    }
}

/// A cache's end of the channel.
pub struct Subscription(broadcast::Receiver<Invalidation>);

impl Subscription {
    /// The next invalidation; `None` when the store is gone. A subscriber
    /// that fell more than the backlog behind hears `Everything`.
    pub async fn recv(&mut self) -> Option<Invalidation> {
        match self.0.recv().await {
            Ok(i) => Some(i),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Invalidation::Everything),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

async fn listen_forever(inv: Arc<Invalidations>, config: tokio_postgres::Config) {
    let mut backoff_ms = 100;
    loop {
        let began = Instant::now();
        match listen_once(&inv, &config).await {
            Ok(()) => return,
            Err(e) => {
                *inv.fresh_as_of.lock().unwrap() = None;
                tracing::warn!(error = %e, "cache invalidation listener lost its connection; caches read from the database until it is back");
            }
        }
        if began.elapsed() > Duration::from_secs(10) {
            backoff_ms = 100;
        }
        tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
        backoff_ms = (backoff_ms * 2).min(RECONNECT_MS_MAX);
        if Arc::strong_count(&inv) == 1 {
            return;
        }
    }
}

/// One connection's life: LISTEN, tell subscribers to drop everything (keys
/// may have been missed before), then relay keys and heartbeats.
/// `Ok` only when the store is gone (the listener stops).
async fn listen_once(
    inv: &Arc<Invalidations>,
    config: &tokio_postgres::Config,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let (client, mut conn) = config.connect(tokio_postgres::NoTls).await?;
    let (tx, mut notes) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx)).boxed();
        while let Some(m) = messages.next().await {
            match m {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    if tx.send(Ok(n.payload().to_string())).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    let result = async {
        client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
        let _ = inv.sender.send(Invalidation::Everything);
        // Sent heartbeats not yet echoed: (number, when sent).
        let mut pending: std::collections::VecDeque<(u64, Instant)> = Default::default();
        let mut tick = tokio::time::interval(Duration::from_millis(HEARTBEAT_MS));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if Arc::strong_count(inv) == 1 {
                        return Ok(());
                    }
                    let n = inv.heartbeats_sent.fetch_add(1, Ordering::Relaxed);
                    let sent = Instant::now();
                    client
                        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &inv.heartbeat_payload(n)])
                        .await?;
                    pending.push_back((n, sent));
                    if pending.len() > 64 {
                        pending.pop_front();
                    }
                }
                note = notes.recv() => {
                    let Some(note) = note else {
                        anyhow::bail!("the listener's connection closed");
                    };
                    let payload = note?;
                    if let Some(rest) = payload.strip_prefix("$hb:") {
                        let ours = format!("{:016x}:", inv.node);
                        if let Some(n) = rest.strip_prefix(&ours).and_then(|n| n.parse::<u64>().ok()) {
                            while let Some(&(m, sent)) = pending.front() {
                                if m > n {
                                    break;
                                }
                                pending.pop_front();
                                if m == n {
                                    *inv.fresh_as_of.lock().unwrap() = Some(sent);
                                }
                            }
                        }
                        continue;
                    }
                    let _ = inv.sender.send(Invalidation::Key(payload.into()));
                }
            }
        }
    }
    .await;
    driver.abort();
    result
}
