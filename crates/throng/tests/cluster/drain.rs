//! The graceful stop of one node: on SIGTERM `/ready` fails at once while
//! requests are still served; after `--drain-ms` the node stops accepting,
//! finishes the requests in flight, and exits.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{person, registration_body, seed_with_cli, ProcessServer, FROM};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_then_finishes_requests_in_flight() {
    let _serial = crate::lb::one_at_a_time().await;
    const DRAIN: u64 = 1_500;
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), None, 1, 1, 5).await;
    let mut server =
        ProcessServer::start(dir.path(), None, &["--drain-ms", &DRAIN.to_string()]).await;
    assert_eq!(server.api.get("/ready").await.status, 200);

    // A registration in flight: its head sent, half of its body held back.
    let body = registration_body(1, FROM, 2, person(1)).to_string();
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    let mut conn = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /api/booking/registrations HTTP/1.1\r\nHost: node\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    server.terminate();
    let t0 = Instant::now();
    // /ready fails at once, with the envelope; everything else is served.
    let ready = loop {
        let r = server.api.get("/ready").await;
        if r.status != 200 || t0.elapsed() > Duration::from_millis(500) {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ready_after = t0.elapsed();
    ready.assert_error(503, "draining");
    assert!(
        ready_after < Duration::from_millis(500),
        "/ready failed {ready_after:?} after SIGTERM"
    );
    assert_eq!(
        server.api.get("/health").await.status,
        200,
        "served while draining"
    );
    let slots = server.api.slots(1, FROM, 1).await;
    assert_eq!(slots.status, 200, "served while draining: {}", slots.text());

    // After the drain new connections are refused.
    let refused_after = loop {
        let c = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(server.addr),
        )
        .await;
        if !matches!(c, Ok(Ok(_))) {
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_millis(DRAIN + 5_000),
            "still accepting {:?} after SIGTERM",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        refused_after >= Duration::from_millis(DRAIN - 100),
        "stopped accepting after {refused_after:?}, before the drain of {DRAIN} ms"
    );

    // The request in flight completes.
    conn.write_all(rest).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut answer))
        .await
        .expect("the request in flight is answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 201"),
        "the request in flight got: {answer}"
    );

    let status = server
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the node exits after its requests in flight");
    assert!(status.success(), "exit status {status:?}");
    println!(
        "FIGURE drain: /ready 503 after {} ms, stopped accepting after {} ms (drain {DRAIN} ms), \
         request in flight answered 201, exited",
        ready_after.as_millis(),
        refused_after.as_millis()
    );
    // The registration is durable: a fresh node on the same store sees it.
    let again = ProcessServer::start(dir.path(), None, &[]).await;
    assert_eq!(
        again.api.taken_slots(1, FROM, 1).await,
        vec![(FROM.to_string(), 2)]
    );
}
