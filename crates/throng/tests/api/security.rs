//! The low findings: file modes, token `nbf`, and the rest of what a local
//! user or a crafted input could do.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::both_stores;
use crate::helpers::{ProcessServer, StoreKind, TestServer};
use throng::platform::auth::Role;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn data_and_secrets_are_private_files() {
    let tmp = tempfile::TempDir::new().unwrap();
    let data = tmp.path().join("fresh").join("data");
    crate::helpers::seed_with_cli(&data, None, 1, 1, 2).await;
    assert_eq!(mode(&data), 0o700, "the data directory");
    for f in ["pii.key", "token.secret", "throng.db"] {
        assert_eq!(mode(&data.join(f)), 0o600, "{f}");
    }
    // The WAL and shared memory while a server has the store open.
    let server = crate::helpers::ProcessServer::start(&data, None, &[]).await;
    assert_eq!(server.api.get("/ready").await.status, 200);
    for f in ["throng.db-wal", "throng.db-shm", "throng.serve.lock"] {
        let p = data.join(f);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{f}");
        }
    }
    drop(server);

    // A key that others may read is refused, naming the fix.
    std::fs::set_permissions(data.join("pii.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = tokio::process::Command::new(crate::helpers::throng_bin())
        .args(["token", "--sub", "1", "--role", "admin", "--data-dir"])
        .arg(&data)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pii.key") && err.contains("chmod 600"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_are_refused_before_their_nbf() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    let now = throng::base::clock::now_ms() / 1000;
    let with_nbf = |nbf: i64| {
        let mut extra = serde_json::Map::new();
        extra.insert("nbf".into(), nbf.into());
        s.state.keys.issue_with("a", Role::ADMIN, 600, extra)
    };
    s.api
        .stats_reply(Some(&with_nbf(now + 120)))
        .await
        .assert_error(401, "token_not_yet_valid");
    // Within the leeway (a few seconds of clock difference): accepted.
    assert_eq!(
        s.api.stats_reply(Some(&with_nbf(now + 2))).await.status,
        200
    );
    assert_eq!(
        s.api.stats_reply(Some(&with_nbf(now - 60))).await.status,
        200
    );
}

both_stores!(demo_runs_only_on_a_store_it_made);

async fn demo_runs_only_on_a_store_it_made(kind: StoreKind) {
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(crate::helpers::PgDb::fresh().await),
    };
    let pg = db.as_ref().map(|d| d.url.as_str());
    // A store the demo made serves --demo again after a restart.
    let demo_dir = tempfile::TempDir::new().unwrap();
    let demo_db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(crate::helpers::PgDb::fresh().await),
    };
    let demo_pg = demo_db.as_ref().map(|d| d.url.as_str());
    for _ in 0..2 {
        let mut s = ProcessServer::start(demo_dir.path(), demo_pg, &["--demo"]).await;
        assert_eq!(s.api.get("/api/comments/demo-token").await.status, 200);
        s.kill().await;
    }
    // A store with data of its own (seeded by `throng seed`) is refused.
    let dir = tempfile::TempDir::new().unwrap();
    crate::helpers::seed_with_cli(dir.path(), pg, 1, 1, 2).await;
    let mut args = vec!["serve".to_string(), "--listen".into(), "127.0.0.1:0".into()];
    args.extend(crate::helpers::store_flags(dir.path(), pg));
    args.extend(["--no-notifier".to_string(), "--demo".into()]);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new(crate::helpers::throng_bin())
            .args(&args)
            .output(),
    )
    .await
    .expect("serve --demo gives up at once")
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--demo") && err.contains("booking_slots"),
        "{err}"
    );
}

/// The demo's token endpoint signs in as the provider of the demo's own
/// courses only, even when the store has other courses.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn demo_tokens_are_for_demo_courses_only() {
    let s = TestServer::start(StoreKind::Sqlite, &["--demo"]).await;
    crate::helpers::execute(
        &s.state.store,
        "INSERT INTO comments_courses (id, provider_id, title) VALUES (9999, 4242, 'real')",
        vec![],
    )
    .await;
    s.api
        .get("/api/comments/demo-token?role=provider&courseId=9999")
        .await
        .assert_error(404, "course_not_found");
    let r = s
        .api
        .get("/api/comments/demo-token?role=provider&courseId=1")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["role"], "provider");
}
