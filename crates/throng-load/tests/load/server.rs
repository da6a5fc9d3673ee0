//! An in-test axum server on 127.0.0.1:0 that answers the scripts' URLs and records what it
//! was sent (bounded), so tests can check what the load generator really did.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::IntoResponse,
    routing::{any, get, post},
    Json, Router,
};
use serde_json::{json, Value};

const SEEN_MAX: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

#[derive(Default)]
pub struct Log {
    pub seen: Mutex<Vec<Seen>>,
    /// `/stall`: the first request after `stall_after` stalls the whole server for 1 s.
    pub stall: Mutex<StallState>,
    /// `/delay/{ms}`: when each request arrived and was answered (bounded like `seen`).
    pub spans: Mutex<Vec<Span>>,
    /// `/peer`: the client address of each request (its port names its connection).
    pub peers: Mutex<Vec<SocketAddr>>,
    /// HTTPS servers: each handshake's SNI host name and negotiated ALPN protocol.
    pub hellos: Mutex<Vec<(Option<String>, Option<String>)>>,
    /// `/login`: logins so far.
    pub logins: std::sync::atomic::AtomicU64,
    /// `/crowded/...`: requests answered so far.
    pub crowded: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Clone)]
pub struct Span {
    pub uri: String,
    pub start: Instant,
    pub end: Instant,
}

#[derive(Default)]
pub struct StallState {
    pub started: Option<Instant>,
    pub until: Option<Instant>,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub log: Arc<Log>,
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The HTTPS server's URL, by the name its certificate holds.
    pub fn https_url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.log.seen.lock().unwrap().clone()
    }

    pub fn spans(&self) -> Vec<Span> {
        self.log.spans.lock().unwrap().clone()
    }

    /// The `Cookie` header of each request whose path starts with `prefix`, in order.
    pub fn cookies(&self, prefix: &str) -> Vec<(String, String)> {
        self.seen()
            .into_iter()
            .filter(|s| s.uri.starts_with(prefix))
            .map(|s| {
                let cookie = s
                    .headers
                    .get("cookie")
                    .map_or(String::new(), |v| v.to_str().unwrap().to_string());
                (s.uri, cookie)
            })
            .collect()
    }

    pub fn seen_paths(&self, prefix: &str) -> Vec<String> {
        self.seen()
            .into_iter()
            .map(|s| s.uri)
            .filter(|u| u.starts_with(prefix))
            .collect()
    }
}

fn remember(log: &Log, method: &str, uri: &Uri, headers: &HeaderMap, body: Bytes) {
    let mut seen = log.seen.lock().unwrap();
    if seen.len() < SEEN_MAX {
        seen.push(Seen {
            method: method.into(),
            uri: uri.to_string(),
            headers: headers.clone(),
            body,
            at: Instant::now(),
        });
    }
}

async fn comments(State(log): State<Arc<Log>>, uri: Uri, headers: HeaderMap) -> impl IntoResponse {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    Json(json!([{"displayName": "ann", "courseId": 1, "thread": []}]))
}

async fn create_item(
    State(log): State<Arc<Log>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    remember(&log, "POST", &uri, &headers, body.clone());
    let echo: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut h = HeaderMap::new();
    h.insert("x-token", "abc".parse().unwrap());
    (
        StatusCode::CREATED,
        h,
        Json(json!({"id": 42, "meta": {"tag": "foo"}, "echo": echo})),
    )
}

async fn get_item(
    State(log): State<Arc<Log>>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> impl IntoResponse {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    Json(json!({"id": id, "tags": ["a", "b"]}))
}

async fn status(
    State(log): State<Arc<Log>>,
    Path(code): Path<u16>,
    uri: Uri,
    headers: HeaderMap,
) -> impl IntoResponse {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
        "status",
    )
}

/// `/crowded/{refusals}/{retry_after}`: the server's first `refusals` requests are
/// answered 429 with `Retry-After: {retry_after}` (or, for `none`, 503 without it), the
/// rest 200.
async fn crowded(
    State(log): State<Arc<Log>>,
    Path((refusals, retry_after)): Path<(u64, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    let n = log
        .crowded
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if n >= refusals {
        return "ok".into_response();
    }
    if retry_after == "none" {
        return (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response();
    }
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::RETRY_AFTER, retry_after)],
        "busy",
    )
        .into_response()
}

async fn peer(
    State(log): State<Arc<Log>>,
    axum::extract::ConnectInfo(addr): axum::extract::ConnectInfo<SocketAddr>,
) -> &'static str {
    log.peers.lock().unwrap().push(addr);
    "ok"
}

async fn slow(State(log): State<Arc<Log>>, uri: Uri, headers: HeaderMap) -> impl IntoResponse {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    tokio::time::sleep(Duration::from_secs(5)).await;
    "slow"
}

/// Answers after `ms` milliseconds (at most 1 s), recording the request's span.
async fn delay(State(log): State<Arc<Log>>, Path(ms): Path<u64>, uri: Uri) -> impl IntoResponse {
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(ms.min(1000))).await;
    let mut spans = log.spans.lock().unwrap();
    if spans.len() < SEEN_MAX {
        spans.push(Span {
            uri: uri.to_string(),
            start,
            end: Instant::now(),
        });
    }
    "ok"
}

/// Stalls every request for the one second after the first request seen 2 s into the test,
/// like the wrk2 README's suspended server.
async fn stall(State(log): State<Arc<Log>>) -> impl IntoResponse {
    let wait = {
        let mut s = log.stall.lock().unwrap();
        let now = Instant::now();
        let started = *s.started.get_or_insert(now);
        if s.until.is_none() && now.duration_since(started) >= Duration::from_secs(2) {
            s.until = Some(now + Duration::from_secs(1));
        }
        s.until.filter(|u| *u > now)
    };
    if let Some(until) = wait {
        tokio::time::sleep_until(until.into()).await;
    }
    "ok"
}

/// `/login`: a session cookie numbered per login (also in the body), a cookie for
/// `/app` only, and one already expired.
async fn login(State(log): State<Arc<Log>>, uri: Uri, headers: HeaderMap) -> impl IntoResponse {
    remember(&log, "POST", &uri, &headers, Bytes::new());
    let n = log.logins.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    (
        axum::response::AppendHeaders([
            (
                axum::http::header::SET_COOKIE,
                format!("sid=s{n}; Path=/; HttpOnly"),
            ),
            (
                axum::http::header::SET_COOKIE,
                "theme=dark; Path=/app".to_string(),
            ),
            (
                axum::http::header::SET_COOKIE,
                "stale=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT".to_string(),
            ),
        ]),
        Json(json!({"sid": format!("s{n}")})),
    )
}

/// `/logout`: deletes the session cookie.
async fn logout(State(log): State<Arc<Log>>, uri: Uri, headers: HeaderMap) -> impl IntoResponse {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    [(axum::http::header::SET_COOKIE, "sid=; Path=/; Max-Age=0")]
}

/// `/cookie/bad`: a Set-Cookie without `=`; `/cookie/foreign`: one for another domain.
async fn bad_cookie(
    State(log): State<Arc<Log>>,
    Path(kind): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> impl IntoResponse {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    let value = if kind == "bad" {
        "novalue"
    } else {
        "x=1; Domain=elsewhere.example"
    };
    [(axum::http::header::SET_COOKIE, value)]
}

async fn other(
    State(log): State<Arc<Log>>,
    method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    remember(&log, method.as_str(), &uri, &headers, body);
    "ok"
}

/// `/redirect/{n}`: 302 to `/redirect/{n-1}` with a cookie `hop{n}=1`, until `/redirect/0`
/// answers `landed`.
async fn redirect(
    State(log): State<Arc<Log>>,
    Path(n): Path<u32>,
    uri: Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    remember(&log, "GET", &uri, &headers, Bytes::new());
    if n == 0 {
        return "landed".into_response();
    }
    (
        StatusCode::FOUND,
        [
            (axum::http::header::LOCATION, format!("/redirect/{}", n - 1)),
            (axum::http::header::SET_COOKIE, format!("hop{n}=1")),
        ],
    )
        .into_response()
}

/// `POST /see-other`: 303 to `/landing`.
async fn see_other(
    State(log): State<Arc<Log>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    remember(&log, "POST", &uri, &headers, body);
    (
        StatusCode::SEE_OTHER,
        [(axum::http::header::LOCATION, "/landing")],
    )
}

fn app(log: &Arc<Log>) -> Router {
    Router::new()
        .route("/api/comments/method/jsonfromlinq", get(comments))
        .route("/items", post(create_item))
        .route("/items/{id}", get(get_item))
        .route("/status/{code}", get(status))
        .route("/slow", get(slow))
        .route("/peer", get(peer))
        .route("/crowded/{refusals}/{retry_after}", get(crowded))
        .route("/stall", get(stall))
        .route("/delay/{ms}", get(delay))
        .route("/health", get(|| async { "ok" }))
        .route("/login", post(login))
        .route("/logout", get(logout))
        .route("/cookie/{kind}", get(bad_cookie))
        .route("/redirect/{n}", get(redirect))
        .route("/see-other", post(see_other))
        .fallback(any(other))
        .with_state(log.clone())
}

pub async fn start() -> TestServer {
    let log = Arc::new(Log::default());
    let app = app(&log);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    TestServer { addr, log }
}

/// The same server over HTTPS with a self-signed certificate for `localhost` only,
/// made for this test; returns the server (its URL is `https://localhost:PORT`) and the
/// certificate's PEM.
pub async fn start_tls() -> (TestServer, String) {
    use tokio_rustls::rustls;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let pem = cert.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let log = Arc::new(Log::default());
    let app = app(&log);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hellos = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, peer)) = listener.accept().await else {
                return;
            };
            let (acceptor, app, log) = (acceptor.clone(), app.clone(), hellos.clone());
            tokio::spawn(async move {
                // A client refusing the certificate aborts the handshake: nothing to serve.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let (_, conn) = tls.get_ref();
                log.hellos.lock().unwrap().push((
                    conn.server_name().map(str::to_string),
                    conn.alpn_protocol()
                        .map(|p| String::from_utf8_lossy(p).into_owned()),
                ));
                let service = hyper::service::service_fn(
                    move |mut req: hyper::Request<hyper::body::Incoming>| {
                        req.extensions_mut()
                            .insert(axum::extract::ConnectInfo(peer));
                        tower::ServiceExt::oneshot(app.clone(), req)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (TestServer { addr, log }, pem)
}
