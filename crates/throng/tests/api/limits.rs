//! What a public server meets: slow clients, too many connections, spoofed
//! client addresses, invented methods. Raw TCP where a well-behaved client
//! cannot misbehave; loopback only, every loop bounded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::{StoreKind, TestServer};

/// A cheap request that admission control and the rate limit count
/// (`/health` and `/ready` pass them: probes must see a busy node).
const ADMITTED: &str = "/api/booking/places?size=1";

/// Slack for timers on a shared, noisy 2-core machine.
const SLACK: Duration = Duration::from_secs(3);

async fn connect_from(local: &str, addr: SocketAddr) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(format!("{local}:0").parse().unwrap()).unwrap();
    sock.connect(addr).await.expect("connect")
}

async fn send_raw(addr: SocketAddr, bytes: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(bytes.as_bytes()).await.unwrap();
    s
}

/// Reads until the server closes; the bytes and when it closed (or `None`
/// if it was still open after `within`).
async fn read_until_closed(s: &mut TcpStream, within: Duration) -> (Vec<u8>, Option<Instant>) {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return (got, None),
            Ok(Ok(0)) | Ok(Err(_)) => return (got, Some(Instant::now())),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// A POST whose head arrives and whose body never does.
const STALLED_POST: &str = "POST /api/booking/registrations HTTP/1.1\r\nHost: t\r\n\
    Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"placeId\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_clients_are_cut_off_while_health_answers() {
    let flags = [
        "--in-flight-max",
        "3",
        "--header-read-timeout-ms",
        "1000",
        "--body-timeout-ms",
        "1500",
    ];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    let started = Instant::now();
    // Unfinished headers (no blank line), and two stalled bodies.
    let mut header = send_raw(s.addr, "GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: 1").await;
    let mut body_a = send_raw(s.addr, STALLED_POST).await;
    let mut body_b = send_raw(s.addr, STALLED_POST).await;
    let watch = tokio::spawn(async move {
        let (h, a, b) = tokio::join!(
            read_until_closed(&mut header, Duration::from_secs(1) + SLACK),
            read_until_closed(&mut body_a, Duration::from_millis(1500) + SLACK),
            read_until_closed(&mut body_b, Duration::from_millis(1500) + SLACK),
        );
        (h, a, b)
    });
    // /health answers 200 all along (the stalled bodies hold two of three
    // slots; the unfinished head holds none).
    let mut answered = 0;
    while started.elapsed() < Duration::from_millis(2500) {
        let r = s.api.get("/health").await;
        assert_eq!(
            r.status,
            200,
            "/health at {:?}: {}",
            started.elapsed(),
            r.text()
        );
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered >= 5);
    let ((h_bytes, h_closed), (a_bytes, a_closed), (b_bytes, b_closed)) = watch.await.unwrap();
    let h_closed = h_closed.expect("the slow-header client is cut off");
    assert!(h_bytes.is_empty(), "no answer to an unfinished head");
    assert!(h_closed - started >= Duration::from_millis(900));
    for (bytes, closed) in [(a_bytes, a_closed), (b_bytes, b_closed)] {
        let closed = closed.expect("the slow-body client is cut off");
        assert!(closed - started >= Duration::from_millis(1400));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("\"body_timeout\""), "{text}");
    }
}

/// The finding as reported: with two slots, two stalled bodies turned every
/// request (then /health too) into 429 for as long as they were held. Now for the body
/// deadline at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_bodies_hold_slots_no_longer_than_the_body_deadline() {
    let flags = ["--in-flight-max", "2", "--body-timeout-ms", "1000"];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    let _a = send_raw(s.addr, STALLED_POST).await;
    let _b = send_raw(s.addr, STALLED_POST).await;
    let started = Instant::now();
    let mut saw_429 = false;
    loop {
        let r = s.api.get(ADMITTED).await;
        if r.status == 200 {
            if saw_429 {
                break;
            }
            // The stalled requests' heads may not have been read yet (a
            // loaded machine): look again until they hold the slots.
            assert!(
                started.elapsed() < Duration::from_secs(1) + SLACK,
                "the stalled bodies did hold both slots"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        r.assert_error(429, "too_many_requests");
        saw_429 = true;
        assert!(
            started.elapsed() < Duration::from_secs(1) + SLACK,
            "slots still held after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(saw_429, "the stalled bodies did hold both slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_connections_are_closed() {
    let flags = [
        "--idle-timeout-ms",
        "800",
        "--header-read-timeout-ms",
        "5000",
    ];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    let started = Instant::now();
    // Never sends a byte.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    // One request, then keep-alive silence.
    let mut kept = send_raw(s.addr, "GET /health HTTP/1.1\r\nHost: t\r\n\r\n").await;
    let (silent_r, kept_r) = tokio::join!(
        read_until_closed(&mut silent, Duration::from_millis(800) + SLACK),
        read_until_closed(&mut kept, Duration::from_millis(800) + SLACK),
    );
    let closed = silent_r.1.expect("a silent connection is closed");
    assert!(closed - started >= Duration::from_millis(700));
    let (bytes, closed) = kept_r;
    assert!(String::from_utf8_lossy(&bytes).starts_with("HTTP/1.1 200"));
    assert!(
        closed.expect("an idle keep-alive connection is closed") - started
            >= Duration::from_millis(700)
    );
}

/// Whether the server closes a fresh connection without answering.
async fn refused(addr: SocketAddr, local: &str) -> bool {
    let mut c = connect_from(local, addr).await;
    if c.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .is_err()
    {
        return true;
    }
    let (bytes, _) = read_until_closed(&mut c, Duration::from_millis(300)).await;
    bytes.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connection_caps_refuse_extra_connections() {
    let flags = [
        "--connections-max",
        "4",
        "--connections-per-client-max",
        "2",
    ];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    // Two from 127.0.0.1: its cap.
    let mut held = vec![
        connect_from("127.0.0.1", s.addr).await,
        connect_from("127.0.0.1", s.addr).await,
    ];
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(refused(s.addr, "127.0.0.1").await, "over the client's cap");
    // Another client still gets in, up to the server's cap.
    held.push(connect_from("127.0.0.2", s.addr).await);
    held.push(connect_from("127.0.0.3", s.addr).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(refused(s.addr, "127.0.0.4").await, "over the server's cap");
    let metrics_before = held.len();
    // Freeing one lets a new connection in (bounded retries: the server
    // notices the close asynchronously).
    drop(held.remove(0));
    let mut ok = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if !refused(s.addr, "127.0.0.1").await {
            ok = true;
            break;
        }
    }
    assert!(ok, "a freed slot is reused (held {metrics_before})");
    drop(held);
    // From an address of its own: 127.0.0.1's last probes may still count.
    let other = reqwest::Client::builder()
        .local_address("127.0.0.9".parse::<std::net::IpAddr>().unwrap())
        .no_proxy()
        .timeout(crate::helpers::REQUEST_TIMEOUT)
        .build()
        .unwrap();
    let mut text = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok(r) = s.api.try_send(other.get(s.api.url("/metrics"))).await {
            text = r.text();
            break;
        }
    }
    assert!(text.contains(r#"throng_http_connections_refused_total{cap="client"}"#));
    assert!(text.contains(r#"throng_http_connections_refused_total{cap="server"}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_limits_are_refused_at_start() {
    let dir = tempfile::TempDir::new().unwrap();
    for (flags, needle) in [
        (vec!["--trust-forwarded-for"], "--trusted-proxies"),
        (
            vec!["--body-timeout-ms", "5000", "--request-timeout-ms", "1000"],
            "--request-timeout-ms",
        ),
        (vec!["--connections-max", "0"], "--connections-max"),
    ] {
        let mut args = vec!["serve".to_string(), "--listen".into(), "127.0.0.1:0".into()];
        args.extend(crate::helpers::store_flags(dir.path(), None));
        args.extend(flags.iter().map(|f| f.to_string()));
        let out = tokio::process::Command::new(crate::helpers::throng_bin())
            .args(&args)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{flags:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invented_methods_add_no_metric_series() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    let api = &s.api;
    for i in 0..1000 {
        let method = reqwest::Method::from_bytes(format!("INVENTED{i}").as_bytes()).unwrap();
        let path = if i % 2 == 0 {
            "/health"
        } else {
            "/no/such/route"
        };
        let r = api.send(api.http.request(method, api.url(path))).await;
        assert!(r.status == 405 || r.status == 404, "{}", r.status);
    }
    let text = api.get("/metrics").await.text();
    assert!(!text.contains("INVENTED"), "no invented method is a label");
    let other: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("throng_http_requests_total{") && l.contains(r#"method="other""#))
        .collect();
    assert!(
        (1..=4).contains(&other.len()),
        "1,000 methods fold into a few series: {other:?}"
    );
    assert!(
        !text.contains(r#"route="/no/such/route""#),
        "unmatched paths fold into one route label"
    );
}

/// Behind a trusted proxy, a client that writes its own X-Forwarded-For
/// stays under its own limit: the proxy's appended address is the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spoofed_forwarded_for_does_not_escape_the_rate_limit() {
    let flags = [
        "--rate-limit-per-s",
        "1",
        "--rate-limit-burst",
        "3",
        "--trusted-proxies",
        "127.0.0.1/32,10.9.0.0/16",
    ];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    let api = &s.api;
    // What HAProxy sends for client 203.0.113.7 whose request carried
    // `X-Forwarded-For: <spoof>`: the spoof, then the real address.
    let via_proxy = |spoof: String| {
        api.http
            .get(api.url(ADMITTED))
            .header("x-forwarded-for", format!("{spoof}, 203.0.113.7"))
            .header("x-forwarded-for", "10.9.0.1")
    };
    let mut statuses = Vec::new();
    for i in 0..8 {
        let r = api.send(via_proxy(format!("198.51.100.{i}"))).await;
        if r.status == 429 {
            r.assert_error(429, "too_many_requests");
            assert!(r.headers.get("retry-after").is_some());
        }
        statuses.push(r.status);
    }
    assert_eq!(statuses[..3], [200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    // Another real client behind the proxy has its own budget, and so
    // does another IPv6 /64 (but not another address in the same /64).
    let other = api
        .http
        .get(api.url(ADMITTED))
        .header("x-forwarded-for", "203.0.113.8");
    assert_eq!(api.send(other).await.status, 200);
    let v6 = |a: &str| {
        api.http
            .get(api.url(ADMITTED))
            .header("x-forwarded-for", a.to_string())
    };
    for i in 0..3 {
        assert_eq!(
            api.send(v6(&format!("2001:db8:1:2::{i}"))).await.status,
            200
        );
    }
    api.send(v6("2001:db8:1:2::ff"))
        .await
        .assert_error(429, "too_many_requests");
    assert_eq!(api.send(v6("2001:db8:1:3::1")).await.status, 200);
}

/// Without trusted proxies the header is ignored: the peer is the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forwarded_for_is_ignored_without_trusted_proxies() {
    let flags = ["--rate-limit-per-s", "1", "--rate-limit-burst", "2"];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    let api = &s.api;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let req = api
            .http
            .get(api.url(ADMITTED))
            .header("x-forwarded-for", format!("10.0.0.{i}"));
        statuses.push(api.send(req).await.status);
    }
    assert_eq!(statuses, [200, 200, 429, 429]);
}

/// The platform's answers are in the document, with the envelope's schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openapi_names_the_platform_answers() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    let doc = s.api.get("/openapi.json").await.json();
    let reg = &doc["paths"]["/api/booking/registrations"]["post"]["responses"];
    for status in ["408", "413", "429", "503"] {
        assert_eq!(
            reg[status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Error",
            "{status}: {}",
            reg[status]
        );
    }
    let places = &doc["paths"]["/api/booking/places"]["get"]["responses"];
    assert!(places["408"].is_null(), "no body, no body timeout");
    assert!(places["503"].is_object());
    let err = &doc["components"]["schemas"]["Error"];
    assert_eq!(err["required"][0], "error");
    assert_eq!(err["properties"]["error"]["required"][1], "message");
}

/// With --metrics-listen, /metrics is served there and nowhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_can_have_an_address_of_their_own() {
    let s = TestServer::start(StoreKind::Sqlite, &["--metrics-listen", "127.0.0.1:0"]).await;
    s.api
        .get("/metrics")
        .await
        .assert_error(404, "route_not_found");
    let metrics = crate::helpers::Api::new(s.metrics_addr.expect("a metrics address"));
    assert_eq!(s.api.get("/health").await.status, 200);
    let r = metrics.get("/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("throng_http_requests_total"));
    metrics
        .get("/health")
        .await
        .assert_error(404, "route_not_found");
}

/// A request stuck behind a lock in the database is answered 503
/// `request_timeout` at --request-timeout-ms, and its slot is freed.
async fn a_stuck_request_is_answered_at_the_request_deadline(kind: StoreKind) {
    let flags = [
        "--request-timeout-ms",
        "1500",
        "--body-timeout-ms",
        "1000",
        "--in-flight-max",
        "1",
    ];
    let s = TestServer::start_seeded(kind, &flags, Some((1, 1, 3))).await;
    let (mut client, _conn) = connect_pg(&s).await;
    let tx = lock_place_1(&mut client).await;
    let started = Instant::now();
    let r = s
        .api
        .register(1, crate::helpers::FROM, 0, crate::helpers::person(1))
        .await;
    let took = started.elapsed();
    r.assert_error(503, "request_timeout");
    assert!(r.headers.get("retry-after").is_some());
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(1500) + SLACK,
        "answered after {took:?}"
    );
    // The one slot is free again.
    assert_eq!(s.api.get("/health").await.status, 200);
    tx.rollback().await.unwrap();
}

crate::postgres_only!(a_stuck_request_is_answered_at_the_request_deadline);

/// A connection of the test's own to the server's PostgreSQL database.
async fn connect_pg(s: &TestServer) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let pg = s.pg.as_ref().expect("PostgreSQL");
    let (client, conn) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    (client, conn)
}

/// Holds place 1's slot rows locked until the transaction ends, so a
/// registration there waits on the database.
async fn lock_place_1(client: &mut tokio_postgres::Client) -> tokio_postgres::Transaction<'_> {
    let tx = client.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM booking_slots WHERE place_id = 1 FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    tx
}

/// Stopping lets a request in flight finish (here one waiting on a database
/// lock) and accepts no new connection meanwhile.
async fn stopping_lets_requests_in_flight_finish(kind: StoreKind) {
    let mut s = TestServer::start_seeded(kind, &[], Some((1, 1, 3))).await;
    let (mut client, _conn) = connect_pg(&s).await;
    let tx = lock_place_1(&mut client).await;
    let api = s.api.clone();
    let in_flight = tokio::spawn(async move {
        api.register(1, crate::helpers::FROM, 0, crate::helpers::person(1))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let addr = s.addr;
    let stopping = tokio::spawn(async move {
        s.stop().await;
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !stopping.is_finished(),
        "stop waits for the request in flight"
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no new connection once stopping"
    );
    tx.rollback().await.unwrap();
    let r = in_flight.await.unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("stopped once the request finished")
        .unwrap();
}

crate::postgres_only!(stopping_lets_requests_in_flight_finish);

/// A chunked body (no Content-Length) is bounded as it is read: 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chunked_body_over_the_limit_is_refused() {
    let s = TestServer::start(StoreKind::Sqlite, &["--body-limit-bytes", "1024"]).await;
    let chunk = "x".repeat(1000);
    let mut req = String::from(
        "POST /api/booking/registrations HTTP/1.1\r\nHost: t\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    for _ in 0..3 {
        req.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    req.push_str("0\r\n\r\n");
    let mut c = send_raw(s.addr, &req).await;
    let (bytes, _) = read_until_closed(&mut c, Duration::from_secs(2)).await;
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"body_too_large\""), "{text}");
}
