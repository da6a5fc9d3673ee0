//! Closed and open measurement loops over many keep-alive connections (wrk / wrk2 models).
//!
//! - Closed model: `connections` tasks, each sends its next request as soon as the previous
//!   one answered. Measures the maximum throughput.
//! - Open model: requests are due at a constant rate (`seq / rate` after the start) whether
//!   or not earlier ones answered; a free connection takes the next due request. Latency is
//!   measured from the request's *intended* start, so a stalled server shows up in the
//!   percentiles (no coordinated omission); the service time (from the actual send) is kept
//!   beside it as `uncorrected_*`.
//!
//! Each connection task drives its own connection inside the task (no extra task, no pool):
//! by default the measuring HTTP/1.1 client of `wire.rs` (pre-serialised requests, heads parsed
//! with `httparse`), or a hyper connection with [`Engine::Hyper`] (`--engine hyper`).
//! Histograms are HDR with 3 significant digits and a fixed range (1 us .. 1 h), so memory
//! does not grow with the request count; intermediate periods are capped at
//! [`PERIODS_MAX`] by widening the period for long runs.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    pin::pin,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::Method;

use crate::{
    http::{self as client, Prepared},
    report::{now_ms, Report},
    wire,
};

mod recorder;
use recorder::Recorder;

/// Most intermediate periods kept; longer runs get wider periods.
pub const PERIODS_MAX: u64 = 3_600;
/// Open model: how early a request may leave to absorb the timer's 1 ms granularity.
/// Latency is then measured from the actual send, never from before it.
const TIMER_TICK: Duration = Duration::from_millis(1);
/// Pause before reconnecting after a failed connect, so a down server is not hammered.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// One request to send; built per request by a [`RequestFactory`].
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: Method,
    /// Origin-form target, e.g. `/health?x=1`.
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl RequestSpec {
    pub fn get(path_and_query: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path_and_query: path_and_query.into(),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }
}

/// Builds request number `seq` (0, 1, 2, ... across all connections).
pub type RequestFactory = Arc<dyn Fn(u64) -> RequestSpec + Send + Sync>;

/// How requests are paced.
#[derive(Debug, Clone, Copy)]
pub enum Model {
    Closed {
        connections: usize,
    },
    Open {
        rate_per_s: f64,
        connections_max: usize,
    },
}

/// Which HTTP/1.1 client the loops use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Engine {
    /// A minimal client of its own: wrk-like CPU per request (the default).
    #[default]
    Wire,
    /// hyper's HTTP/1.1 client, the one scripts use.
    Hyper,
}

/// Everything a measurement needs besides the requests.
#[derive(Debug, Clone)]
pub struct Plan {
    pub addr: SocketAddr,
    /// Host header value (with `:port` when not 80).
    pub host: String,
    pub model: Model,
    pub duration: Duration,
    /// Per request; a request without a response by then counts as `ETIMEDOUT`.
    pub timeout: Duration,
    /// Print a live line to stderr every period.
    pub progress: bool,
    pub engine: Engine,
    /// HTTPS: the client configuration and the host name sent as SNI and checked against
    /// the certificate.
    pub tls: Option<(crate::tls::Tls, String)>,
}

impl Plan {
    fn tls(&self) -> Option<(&crate::tls::Tls, &str)> {
        self.tls.as_ref().map(|(t, host)| (t, host.as_str()))
    }

    pub fn new(addr: SocketAddr, host: &str, model: Model, duration: Duration) -> Self {
        Self {
            addr,
            host: host.to_string(),
            model,
            duration,
            timeout: Duration::from_secs(10),
            progress: false,
            engine: Engine::default(),
            tls: None,
        }
    }
}

/// The outcome of a measurement. Latencies are microseconds; for the open model they are
/// measured from the intended start (`uncorrected_*`: from the actual send).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Responses received (any status).
    pub requests: u64,
    pub duration_s: f64,
    pub requests_per_s: f64,
    pub latency_us_p50: u64,
    pub latency_us_p90: u64,
    pub latency_us_p99: u64,
    pub latency_us_p999: u64,
    pub latency_us_max: u64,
    pub latency_us_mean: f64,
    pub uncorrected_latency_us_p50: u64,
    pub uncorrected_latency_us_p99: u64,
    pub uncorrected_latency_us_max: u64,
    pub status_counts: BTreeMap<u16, u64>,
    /// Failed requests by error code (`ECONNREFUSED`, `ETIMEDOUT`, ...).
    pub errors: BTreeMap<String, u64>,
    pub bytes_received: u64,
    /// Artillery-shaped report with per-period figures, as `--output` writes it.
    pub report: Report,
}

/// Closed model: `connections` connections, each as fast as the server answers.
pub async fn closed_loop(
    addr: SocketAddr,
    host: &str,
    connections: usize,
    duration: Duration,
    factory: RequestFactory,
) -> anyhow::Result<Summary> {
    let plan = Plan::new(addr, host, Model::Closed { connections }, duration);
    run(plan, from_factory(factory, host)).await
}

/// Open model: `rate_per_s` requests per second over `connections_max` connections (all
/// opened at the start, as wrk2 does); a due request waits for a free connection, and that
/// wait counts in its latency.
pub async fn open_loop(
    addr: SocketAddr,
    host: &str,
    rate_per_s: f64,
    connections_max: usize,
    duration: Duration,
    factory: RequestFactory,
) -> anyhow::Result<Summary> {
    let model = Model::Open {
        rate_per_s,
        connections_max,
    };
    let plan = Plan::new(addr, host, model, duration);
    run(plan, from_factory(factory, host)).await
}

/// Builds request `seq` ready to send, or says why it cannot be built.
pub type Source = Arc<dyn Fn(u64) -> Result<Arc<Prepared>, String> + Send + Sync>;

/// Adapts a [`RequestFactory`] (parsing each spec).
pub fn from_factory(factory: RequestFactory, host: &str) -> Source {
    let host = host.to_string();
    Arc::new(move |seq| {
        let spec = factory(seq);
        Prepared::new(
            spec.method,
            &spec.path_and_query,
            &host,
            &spec.headers,
            spec.body,
        )
        .map(Arc::new)
    })
}

/// The same request every time (cheap clones), for `throng load url`.
pub fn fixed(prepared: Prepared) -> Source {
    let prepared = Arc::new(prepared);
    Arc::new(move |_| Ok(prepared.clone()))
}

/// Runs a plan to completion and summarises it.
pub async fn run(plan: Plan, source: Source) -> anyhow::Result<Summary> {
    let tasks = validate(&plan)?;
    let period = period_for(plan.duration);
    let shared = Arc::new(Shared::new(&plan, source));
    let mut handles = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        handles.push(tokio::spawn(connection_task(shared.clone())));
    }
    let ticker = tokio::spawn(tick_periods(shared.clone(), period, plan.progress));
    // Safety net: requests are bounded by the timeout, so this only fires on a bug.
    let hard_stop = plan.duration + plan.timeout + Duration::from_secs(5);
    let all = futures::future::join_all(handles.iter_mut());
    if tokio::time::timeout(hard_stop, all).await.is_err() {
        handles.iter().for_each(|h| h.abort());
    }
    ticker.abort();
    let duration_s = shared.start.elapsed().as_secs_f64();
    let mut rec = shared.lock();
    rec.rotate(now_ms(), plan.progress, duration_s);
    Ok(rec.summary(duration_s))
}

fn validate(plan: &Plan) -> anyhow::Result<usize> {
    anyhow::ensure!(
        !plan.duration.is_zero(),
        "duration must be greater than zero"
    );
    match plan.model {
        Model::Closed { connections } => {
            anyhow::ensure!(connections > 0, "connections must be at least 1");
            Ok(connections)
        }
        Model::Open {
            rate_per_s,
            connections_max,
        } => {
            anyhow::ensure!(
                rate_per_s.is_finite() && rate_per_s > 0.0,
                "rate must be a positive number of requests per second, got {rate_per_s}"
            );
            anyhow::ensure!(connections_max > 0, "connections must be at least 1");
            Ok(connections_max)
        }
    }
}

fn period_for(duration: Duration) -> Duration {
    let secs = duration.as_secs().div_ceil(PERIODS_MAX).max(1);
    Duration::from_secs(secs)
}

/// A request slot: its sequence number and, in the open model, when it is due.
struct Ticket {
    seq: u64,
    intended: Option<Instant>,
}

struct Shared {
    plan: Plan,
    source: Source,
    start: Instant,
    deadline: Instant,
    next_seq: AtomicU64,
    /// Open model: number of requests due within the duration.
    tickets_total: u64,
    recorder: Mutex<Recorder>,
    warned: Mutex<bool>,
}

impl Shared {
    fn new(plan: &Plan, source: Source) -> Self {
        let start = Instant::now();
        let tickets_total = match plan.model {
            Model::Open { rate_per_s, .. } => {
                (rate_per_s * plan.duration.as_secs_f64()).round() as u64
            }
            Model::Closed { .. } => u64::MAX,
        };
        Self {
            plan: plan.clone(),
            source,
            start,
            deadline: start + plan.duration,
            next_seq: AtomicU64::new(0),
            tickets_total,
            recorder: Mutex::new(Recorder::new()),
            warned: Mutex::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorder> {
        self.recorder.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn next_ticket(&self) -> Option<Ticket> {
        match self.plan.model {
            Model::Closed { .. } => {
                if Instant::now() >= self.deadline {
                    return None;
                }
                let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
                Some(Ticket {
                    seq,
                    intended: None,
                })
            }
            Model::Open { rate_per_s, .. } => {
                let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
                if seq >= self.tickets_total {
                    return None;
                }
                let offset = Duration::from_secs_f64(seq as f64 / rate_per_s);
                Some(Ticket {
                    seq,
                    intended: Some(self.start + offset),
                })
            }
        }
    }

    fn finished(&self) -> bool {
        match self.plan.model {
            Model::Closed { .. } => Instant::now() >= self.deadline,
            Model::Open { .. } => self.next_seq.load(Ordering::Relaxed) >= self.tickets_total,
        }
    }

    fn warn_once(&self, message: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if !*warned {
            *warned = true;
            eprintln!("warning: cannot build request: {message}");
        }
    }
}

enum End {
    Done,
    Reconnect,
}

async fn connection_task(shared: Arc<Shared>) {
    let mut pending: Option<Ticket> = None;
    // When the in-flight request was sent (micros since start), or NOT_IN_FLIGHT.
    let in_flight = AtomicU64::new(NOT_IN_FLIGHT);
    loop {
        if pending.is_none() && shared.finished() {
            return;
        }
        let end = match shared.plan.engine {
            Engine::Wire => wire_connection(&shared, &mut pending, &in_flight).await,
            Engine::Hyper => hyper_connection(&shared, &mut pending, &in_flight).await,
        };
        in_flight.store(NOT_IN_FLIGHT, Ordering::Relaxed);
        if let End::Done = end {
            return;
        }
    }
}

/// One connection's life on the minimal client; returns when it must be replaced or all is sent.
async fn wire_connection(
    shared: &Shared,
    pending: &mut Option<Ticket>,
    in_flight: &AtomicU64,
) -> End {
    let timeout = shared.plan.timeout;
    let connected = tokio::time::timeout(
        timeout,
        wire::Conn::connect(shared.plan.addr, shared.plan.tls()),
    )
    .await;
    let mut conn = match connected.unwrap_or_else(|_| Err(client::HttpError::timeout(timeout))) {
        Ok(c) => c,
        Err(e) => {
            on_connect_error(shared, pending, e.code).await;
            return End::Reconnect;
        }
    };
    let mut link = Link::Wire(&mut conn);
    tokio::select! {
        biased;
        end = serve(shared, &mut link, pending, in_flight) => end,
        _ = watchdog(shared, in_flight) => {
            shared.lock().record_error("ETIMEDOUT");
            End::Reconnect
        }
    }
}

/// One connection's life on hyper; its driver is polled in this task, not spawned.
async fn hyper_connection(
    shared: &Shared,
    pending: &mut Option<Ticket>,
    in_flight: &AtomicU64,
) -> End {
    let timeout = shared.plan.timeout;
    let connected = tokio::time::timeout(
        timeout,
        client::connect(shared.plan.addr, shared.plan.tls()),
    )
    .await;
    let (mut sender, driver) =
        match connected.unwrap_or_else(|_| Err(client::HttpError::timeout(timeout))) {
            Ok(pair) => pair,
            Err(e) => {
                on_connect_error(shared, pending, e.code).await;
                return End::Reconnect;
            }
        };
    let mut driver = pin!(driver);
    let mut link = Link::Hyper(&mut sender);
    let mut work = pin!(serve(shared, &mut link, pending, in_flight));
    tokio::select! {
        biased;
        end = &mut work => end,
        _ = &mut driver => work.await,
        _ = watchdog(shared, in_flight) => {
            shared.lock().record_error("ETIMEDOUT");
            End::Reconnect
        }
    }
}

/// The connection a task sends on.
enum Link<'a> {
    Wire(&'a mut wire::Conn),
    Hyper(&'a mut client::Sender),
}

impl Link<'_> {
    /// False when the server closed the connection between requests (not a failed request).
    async fn ready(&mut self) -> bool {
        match self {
            Link::Wire(c) => c.is_reusable(),
            Link::Hyper(s) => s.ready().await.is_ok(),
        }
    }

    async fn exchange(&mut self, p: &Prepared) -> Result<(u16, u64), client::HttpError> {
        match self {
            Link::Wire(c) => c.exchange(&p.wire, p.method == Method::HEAD).await,
            Link::Hyper(s) => client::send_discard(s, p.to_request()).await,
        }
    }
}

const NOT_IN_FLIGHT: u64 = u64::MAX;

/// Resolves when the in-flight request has waited longer than the timeout. A per-request
/// `tokio::time::timeout` costs a timer-wheel insert and removal per request (a quarter of
/// the client's CPU in profiles); this timer fires about once per timeout per connection.
async fn watchdog(shared: &Shared, in_flight: &AtomicU64) {
    let timeout = shared.plan.timeout;
    let mut deadline = Instant::now() + timeout;
    loop {
        tokio::time::sleep_until(deadline.into()).await;
        deadline = match in_flight.load(Ordering::Relaxed) {
            NOT_IN_FLIGHT => Instant::now() + timeout,
            sent_us => {
                let sent = shared.start + Duration::from_micros(sent_us);
                if sent.elapsed() >= timeout {
                    return;
                }
                sent + timeout
            }
        };
    }
}

/// A connect failure fails the request it was meant for (open model: the due ticket).
async fn on_connect_error(shared: &Shared, pending: &mut Option<Ticket>, code: &'static str) {
    let ticket = pending.take().or_else(|| shared.next_ticket());
    if let Some(t) = ticket {
        if let Some(at) = t.intended {
            tokio::time::sleep_until(at.into()).await;
        }
        shared.lock().record_error(code);
    }
    tokio::time::sleep(RECONNECT_PAUSE).await;
}

async fn serve(
    shared: &Shared,
    link: &mut Link<'_>,
    pending: &mut Option<Ticket>,
    in_flight: &AtomicU64,
) -> End {
    loop {
        if !link.ready().await {
            return End::Reconnect;
        }
        let Some(ticket) = pending.take().or_else(|| shared.next_ticket()) else {
            return End::Done;
        };
        if let Some(at) = ticket.intended {
            // Only touch the timer when the request is not yet due: timers cost CPU.
            if let Some(early) = at.checked_sub(TIMER_TICK).filter(|e| *e > Instant::now()) {
                tokio::time::sleep_until(early.into()).await;
            }
        }
        let req = match (shared.source)(ticket.seq) {
            Ok(p) => p,
            Err(msg) => {
                shared.warn_once(&msg);
                shared.lock().record_error("EINVALIDREQUEST");
                continue;
            }
        };
        if let Err(end) = send_one(shared, link, &req, ticket.intended, in_flight).await {
            return end;
        }
    }
}

async fn send_one(
    shared: &Shared,
    link: &mut Link<'_>,
    req: &Prepared,
    intended: Option<Instant>,
    in_flight: &AtomicU64,
) -> Result<(), End> {
    let sent = Instant::now();
    in_flight.store(
        sent.duration_since(shared.start).as_micros() as u64,
        Ordering::Relaxed,
    );
    let outcome = link.exchange(req).await;
    in_flight.store(NOT_IN_FLIGHT, Ordering::Relaxed);
    let done = Instant::now();
    let mut rec = shared.lock();
    match outcome {
        Ok((status, bytes)) => {
            // Closed model: intended == sent, so the service time would be a duplicate.
            let corrected = intended.map(|at| done - at.min(sent));
            rec.record_ok(
                corrected.unwrap_or(done - sent),
                corrected.map(|_| done - sent),
                status,
                bytes,
            );
            Ok(())
        }
        Err(e) => {
            rec.record_error(e.code);
            Err(End::Reconnect)
        }
    }
}

async fn tick_periods(shared: Arc<Shared>, period: Duration, progress: bool) {
    let mut next = tokio::time::Instant::from_std(shared.start) + period;
    loop {
        tokio::time::sleep_until(next).await;
        next += period;
        let elapsed_s = shared.start.elapsed().as_secs_f64();
        shared.lock().rotate(now_ms(), progress, elapsed_s);
    }
}
