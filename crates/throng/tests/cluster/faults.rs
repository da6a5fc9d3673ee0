//! Faults under write load through the balancer: a node stopped (SIGTERM,
//! drained), a node killed (SIGKILL) and restarted, PostgreSQL restarted.

use std::time::Duration;

use crate::helpers::{seed_with_cli, PgDb};
use crate::lb::{
    pg_admin_url_or_fail, registration_ids, restart_node, start_nodes, wait_for, BookingLoad,
    Haproxy, Outcome, OwnPostgres, DRAIN_MS,
};

const PLACES: i64 = 40;
const DAYS: u64 = 10;
const SLOTS: u64 = 25;
const TOTAL: u64 = PLACES as u64 * DAYS * SLOTS;
const WRITERS: usize = 8;
const PAUSE: Duration = Duration::from_millis(5);

fn describe(o: &[Outcome]) -> String {
    o.iter()
        .take(5)
        .map(|o| format!("{} {:?} at {:?}", o.status, o.code, o.at))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every 201 the clients got is a row in the database.
async fn acknowledged_are_stored(outcomes: &[Outcome], pg_url: &str) -> usize {
    let stored = registration_ids(pg_url).await;
    let acked: Vec<&String> = outcomes.iter().filter_map(|o| o.id.as_ref()).collect();
    let missing: Vec<&&String> = acked.iter().filter(|id| !stored.contains(**id)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    acked.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(throng_cluster_tests),
    ignore = "needs haproxy and THRONG_TEST_PG_URL when the tests were built (apt-get install haproxy; scripts/test finds a local PostgreSQL)"
)]
async fn nodes_stopped_and_killed_under_write_load() {
    let _serial = crate::lb::one_at_a_time().await;
    let admin = pg_admin_url_or_fail();
    let db = PgDb::create(&admin).await;
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), Some(&db.url), PLACES, DAYS as i32, SLOTS as i32).await;
    let mut nodes = start_nodes(3, dir.path(), &db.url, &[]).await;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let lb = Haproxy::start(&addrs, None).await;
    let load = BookingLoad::start(&lb.api, WRITERS, DAYS, SLOTS, TOTAL, PAUSE);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // 1. SIGTERM node 3: it drains; no client sees an error.
    let term_at = load.started.elapsed();
    nodes[2].terminate();
    let exit = nodes[2]
        .wait_exit(Duration::from_millis(DRAIN_MS + 15_000))
        .await
        .expect("the stopped node exits");
    assert!(exit.success(), "{exit:?}");
    let exited_at = load.started.elapsed();
    lb.wait_status("n3", "DOWN", Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let drained_until = load.started.elapsed();

    // Back on its port; HAProxy puts it back.
    nodes[2] = restart_node(addrs[2], dir.path(), &db.url, &[]).await;
    lb.wait_status("n3", "UP", Duration::from_secs(20)).await;

    // 2. SIGKILL node 2: requests it held fail; HAProxy routes around it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kill_at = load.started.elapsed();
    nodes[1].kill().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let n2_before = lb.sessions("n2").await;
    nodes[1] = restart_node(addrs[1], dir.path(), &db.url, &[]).await;
    let restarted_at = load.started.elapsed();
    lb.wait_status("n2", "UP", Duration::from_secs(20)).await;
    let rejoined_after = load.started.elapsed() - restarted_at;
    wait_for(
        "traffic on the restarted node",
        Duration::from_secs(10),
        || async { lb.sessions("n2").await > n2_before + 10 },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outcomes = load.finish().await;

    // The drain: not one error from SIGTERM to well after the exit.
    let drain_window: Vec<Outcome> = outcomes
        .iter()
        .filter(|o| o.at >= term_at && o.at < drained_until && o.status != 201)
        .cloned()
        .collect();
    assert!(
        drain_window.is_empty(),
        "errors while a node drained: {}",
        describe(&drain_window)
    );
    let during_drain = outcomes
        .iter()
        .filter(|o| o.at >= term_at && o.at < drained_until)
        .count();
    // The kill: errors only for requests the killed node held, within a
    // bounded time; every request after that succeeds.
    let errors: Vec<Outcome> = outcomes
        .iter()
        .filter(|o| o.status != 201)
        .cloned()
        .collect();
    let bound = Duration::from_secs(3);
    // A request fails with the kill if it was in flight then (sent before,
    // answered after) or sent within `bound` after it.
    let late: Vec<Outcome> = errors
        .iter()
        .filter(|o| o.at + o.latency < kill_at || o.at > kill_at + bound)
        .cloned()
        .collect();
    assert!(
        late.is_empty(),
        "errors outside {bound:?} after the kill at {kill_at:?} (SIGTERM at {term_at:?}, exit \
         at {exited_at:?}): {}",
        describe(&late)
    );
    for e in &errors {
        assert!(
            e.status == 0 || e.status == 502,
            "a killed node's request fails as a transport error or 502: {}",
            describe(std::slice::from_ref(e))
        );
    }
    let last_error_after = errors.iter().map(|o| o.at + o.latency - kill_at).max();
    let acked = acknowledged_are_stored(&outcomes, &db.url).await;
    println!(
        "FIGURE sigterm: {} requests during the drain ({} ms from SIGTERM to exit, drain {DRAIN_MS} ms), drain errors: 0",
        during_drain,
        (exited_at - term_at).as_millis()
    );
    println!(
        "FIGURE sigkill: {} requests, {} failed (held by the killed node), last failure {} ms after the kill; \
         {acked} acknowledged writes, all stored; restarted node UP in HAProxy {} ms after its start",
        outcomes.len(),
        errors.len(),
        last_error_after.map(|d| d.as_millis()).unwrap_or(0),
        rejoined_after.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(throng_own_pg_tests),
    ignore = "needs haproxy and PostgreSQL's server binaries (apt-get install haproxy postgresql); .ci/run installs them"
)]
async fn postgres_restarted_under_load() {
    let _serial = crate::lb::one_at_a_time().await;
    let pg = OwnPostgres::create().await;
    let (client, conn) = tokio_postgres::connect(&pg.url("postgres"), tokio_postgres::NoTls)
        .await
        .expect("connect to the test's own PostgreSQL");
    tokio::spawn(conn);
    client
        .batch_execute("CREATE DATABASE throng")
        .await
        .unwrap();
    drop(client);
    let url = pg.url("throng");
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), Some(&url), PLACES, DAYS as i32, SLOTS as i32).await;
    const REQUEST_TIMEOUT_MS: u64 = 5_000;
    let flags = ["--request-timeout-ms", "5000", "--body-timeout-ms", "2000"];
    let nodes = start_nodes(3, dir.path(), &url, &flags).await;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let lb = Haproxy::start(&addrs, None).await;
    let load = BookingLoad::start(&lb.api, WRITERS, DAYS, SLOTS, TOTAL, PAUSE);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let down_at = load.started.elapsed();
    pg.stop_immediate().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    pg.start().await;
    let up_at = load.started.elapsed();
    // Every node ready again, by itself.
    for (i, n) in nodes.iter().enumerate() {
        wait_for(
            &format!("node {i} ready"),
            Duration::from_secs(30),
            || async { n.api.get("/ready").await.status == 200 },
        )
        .await;
    }
    let nodes_ready = load.started.elapsed() - up_at;
    lb.wait_up(3, Duration::from_secs(20)).await;
    wait_for(
        "a write through the balancer",
        Duration::from_secs(30),
        || async {
            load.outcomes
                .lock()
                .unwrap()
                .iter()
                .any(|o| o.at > up_at && o.status == 201)
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let outcomes = load.finish().await;

    let first_write_after = outcomes
        .iter()
        .filter(|o| o.at >= up_at && o.status == 201)
        .map(|o| o.at + o.latency - up_at)
        .min()
        .unwrap();
    let mut failed = 0;
    for o in &outcomes {
        assert!(
            o.latency <= Duration::from_millis(REQUEST_TIMEOUT_MS + 1_000),
            "an answer took {:?}: {}",
            o.latency,
            describe(std::slice::from_ref(o))
        );
        if o.status == 201 {
            continue;
        }
        failed += 1;
        assert_eq!(
            o.status,
            503,
            "only 201 or 503: {}",
            describe(std::slice::from_ref(o))
        );
        assert!(o.code.is_some(), "a 503 carries the envelope");
        assert!(
            o.at + o.latency >= down_at && o.at <= up_at + Duration::from_secs(15),
            "a 503 outside the outage: {}",
            describe(std::slice::from_ref(o))
        );
    }
    let acked = acknowledged_are_stored(&outcomes, &url).await;
    let codes: std::collections::BTreeSet<String> =
        outcomes.iter().filter_map(|o| o.code.clone()).collect();
    println!(
        "FIGURE postgres restart: down {:.1} s; {} requests, {failed} x 503 with the envelope ({codes:?}), \
         none slower than {} ms; {acked} acknowledged writes, all stored; recovery: every node ready {:.2} s \
         and the first write through HAProxy {:.2} s after PostgreSQL was back",
        (up_at - down_at).as_secs_f64(),
        outcomes.len(),
        outcomes.iter().map(|o| o.latency).max().unwrap().as_millis(),
        nodes_ready.as_secs_f64(),
        first_write_after.as_secs_f64()
    );
    assert!(
        first_write_after < Duration::from_secs(15),
        "recovered within seconds"
    );
}
