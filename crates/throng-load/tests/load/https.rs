//! HTTPS against a local server with a certificate made for the test: refused by default as
//! Node refuses it (and so Artillery), accepted with `rejectUnauthorized: false`, `-k` or the
//! certificate as `ca`; SNI and ALPN as the server saw them.

use super::{counter, run_yaml, server, stderr, throng_load, write};
use throng_load::script::LoadOptions;

fn script(target: &str, tls: &str) -> String {
    format!(
        r#"
config:
  target: "{target}"
{tls}
  phases:
    - duration: 1
      arrivalCount: 3
scenarios:
  - flow:
      - get:
          url: "/items/7"
      - post:
          url: "/items"
          json: {{name: "a"}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_signed_certificate_is_refused_unless_trusted_or_lax() {
    let (srv, pem) = server::start_tls().await;
    let dir = tempfile::tempdir().unwrap();

    // Strict (the default): every virtual user fails with Node's code, nothing is served.
    let strict = run_yaml(
        dir.path(),
        &script(&srv.https_url(), ""),
        LoadOptions::default(),
    )
    .await
    .report;
    assert_eq!(counter(&strict, "errors.DEPTH_ZERO_SELF_SIGNED_CERT"), 3);
    assert_eq!(counter(&strict, "vusers.failed"), 3);
    assert_eq!(counter(&strict, "http.responses"), 0);
    assert!(srv.seen().is_empty());

    // Lax: the same script with rejectUnauthorized: false runs.
    let lax_tls = "  tls:\n    rejectUnauthorized: false";
    let lax = run_yaml(
        dir.path(),
        &script(&srv.https_url(), lax_tls),
        LoadOptions::default(),
    )
    .await
    .report;
    assert_eq!(counter(&lax, "http.codes.200"), 3);
    assert_eq!(counter(&lax, "http.codes.201"), 3);
    assert_eq!(counter(&lax, "vusers.completed"), 3);
    let seen = srv.seen();
    assert_eq!(seen.len(), 6);
    // The Host header names the host and its non-default port, as over plain HTTP.
    let host = seen[0].headers.get("host").unwrap().to_str().unwrap();
    assert_eq!(host, format!("localhost:{}", srv.addr.port()));
    let body: serde_json::Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(body, serde_json::json!({"name": "a"}));
    {
        let hellos = srv.log.hellos.lock().unwrap();
        // One connection per virtual user, kept alive for its two requests.
        assert_eq!(hellos.len(), 3, "{hellos:?}");
        for (sni, alpn) in hellos.iter() {
            assert_eq!(sni.as_deref(), Some("localhost"));
            assert_eq!(alpn.as_deref(), Some("http/1.1"));
        }
    }

    // Strict with the certificate as the CA: trusted.
    write(dir.path(), "ca.pem", &pem);
    let trusted = run_yaml(
        dir.path(),
        &script(&srv.https_url(), "  tls:\n    ca: ca.pem"),
        LoadOptions::default(),
    )
    .await
    .report;
    assert_eq!(counter(&trusted, "vusers.completed"), 3);

    // The certificate does not name this host: refused as Node refuses it, even trusted.
    let other = format!("https://127.0.0.1:{}", srv.addr.port());
    let wrong_name = run_yaml(
        dir.path(),
        &script(&other, "  tls:\n    ca: ca.pem"),
        LoadOptions::default(),
    )
    .await
    .report;
    assert_eq!(
        counter(&wrong_name, "errors.ERR_TLS_CERT_ALTNAME_INVALID"),
        3
    );

    // -k on the command line, as Artillery's.
    write(dir.path(), "s.yml", &script(&srv.https_url(), ""));
    let path = dir.path().join("s.yml");
    let out = throng_load(&["run", path.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("errors.DEPTH_ZERO_SELF_SIGNED_CERT"),
        "{stdout}"
    );
    let out = throng_load(&["run", "-k", path.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("http.codes.201"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_over_https_strict_lax_and_ca() {
    let (srv, pem) = server::start_tls().await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "ca.pem", &pem);
    let url = format!("{}/health", srv.https_url());
    let ca = dir.path().join("ca.pem");
    let json = dir.path().join("out.json");
    let run = |extra: &'static [&'static str]| {
        let url = url.clone();
        let json = json.clone();
        async move {
            let mut args = vec![
                "url".to_string(),
                url,
                "-c".into(),
                "2".into(),
                "-d".into(),
                "1s".into(),
                "-o".into(),
                json.to_str().unwrap().to_string(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = throng_load(&args).await;
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            report["aggregate"]["counters"].clone()
        }
    };
    let strict = run(&[]).await;
    assert!(
        strict["errors.DEPTH_ZERO_SELF_SIGNED_CERT"]
            .as_u64()
            .unwrap()
            > 0,
        "{strict}"
    );
    assert!(strict.get("http.codes.200").is_none(), "{strict}");
    let lax = run(&["-k"]).await;
    assert!(lax["http.codes.200"].as_u64().unwrap() > 10, "{lax}");
    assert!(lax.get("errors.DEPTH_ZERO_SELF_SIGNED_CERT").is_none());
    let ca_arg: &'static str = Box::leak(ca.to_str().unwrap().to_string().into_boxed_str());
    let ca_args: &'static [&'static str] = Box::leak(vec!["--ca", ca_arg].into_boxed_slice());
    let trusted = run(ca_args).await;
    assert!(
        trusted["http.codes.200"].as_u64().unwrap() > 10,
        "{trusted}"
    );
    let hyper = run(&["-k", "--engine", "hyper"]).await;
    assert!(hyper["http.codes.200"].as_u64().unwrap() > 10, "{hyper}");
}
