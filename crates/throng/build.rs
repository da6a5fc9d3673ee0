//! Decides at build time which tests that need a service outside the
//! workspace run, and which libtest reports as ignored with the reason:
//!
//! - `cfg(throng_pg_tests)`: the PostgreSQL variants of the API tests, when
//!   `THRONG_TEST_PG_URL` is set;
//! - `cfg(throng_cluster_tests)`: the cluster tests that put HAProxy in front
//!   of nodes sharing that PostgreSQL, when the URL is set and `haproxy` is
//!   installed;
//! - `cfg(throng_own_pg_tests)`: the cluster test that runs a PostgreSQL of
//!   its own, when `haproxy` and PostgreSQL's server binaries are installed;
//! - `cfg(throng_redis_tests)`: the tests of the bench's Redis design, when
//!   a Redis answers `PING` on 127.0.0.1:6379 (checked when this script
//!   runs: a Redis started later counts once it runs again, e.g. after
//!   `touch crates/throng/build.rs`).
//!
//! Under CI (`CI` set) all of them always run, so a missing dependency fails
//! the run instead of hiding the tests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

fn haproxy_installed() -> bool {
    ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"]
        .iter()
        .any(|dir| Path::new(dir).join("haproxy").exists())
}

fn postgres_server_installed() -> bool {
    std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("bin/initdb").exists())
}

/// Whether a Redis on 127.0.0.1:6379 answers `PING` within a second.
fn redis_answers() -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], 6379));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut answer = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=THRONG_TEST_PG_URL");
    println!("cargo:rerun-if-env-changed=CI");
    for cfg in [
        "throng_pg_tests",
        "throng_cluster_tests",
        "throng_own_pg_tests",
        "throng_redis_tests",
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
    }
    let ci = std::env::var_os("CI").is_some();
    let pg_url = !std::env::var("THRONG_TEST_PG_URL")
        .unwrap_or_default()
        .trim()
        .is_empty();
    let haproxy = haproxy_installed();
    if pg_url || ci {
        println!("cargo:rustc-cfg=throng_pg_tests");
    }
    if (pg_url && haproxy) || ci {
        println!("cargo:rustc-cfg=throng_cluster_tests");
    }
    if (haproxy && postgres_server_installed()) || ci {
        println!("cargo:rustc-cfg=throng_own_pg_tests");
    }
    if ci || redis_answers() {
        println!("cargo:rustc-cfg=throng_redis_tests");
    }
}
