//! The low findings: file modes, token `nbf`, and the rest of what a local
//! user or a crafted input could do.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::helpers::{StoreKind, TestServer};
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
    let s = TestServer::start(StoreKind::Sqlite, &[]).await.unwrap();
    let now = throng::base::clock::now_ms() / 1000;
    let with_nbf = |nbf: i64| {
        let mut extra = serde_json::Map::new();
        extra.insert("nbf".into(), nbf.into());
        s.state.keys.issue_with("a", Role::Admin, 600, extra)
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
