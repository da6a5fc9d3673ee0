//! The HTML report is one self-contained file; `url --output` writes Artillery's shape.

use serde_json::Value;
use throng_load::report::html;

use super::{server, stderr, throng_load};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_command_writes_json_and_self_contained_html() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("u.json");
    let html_path = dir.path().join("u.html");
    let url = format!("{}/health", srv.url());
    let out = throng_load(&[
        "url",
        &url,
        "--rate",
        "200",
        "--duration",
        "2s",
        "-H",
        "x-a: 1",
        "--output",
        json_path.to_str().unwrap(),
        "--report",
        html_path.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Requests/sec") && stdout.contains("Service time"),
        "{stdout}"
    );
    assert!(
        stderr(&out).contains("req/s"),
        "live progress line on stderr"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["aggregate"]["counters"]["http.requests"], 400);
    assert_eq!(report["aggregate"]["counters"]["http.codes.200"], 400);
    assert!(report["aggregate"]["summaries"]["http.response_time"]["p99"].is_number());
    assert!(report["intermediate"].as_array().unwrap().len() >= 2);

    let page = std::fs::read_to_string(&html_path).unwrap();
    assert_self_contained(&page);
}

pub fn assert_self_contained(page: &str) {
    for id in ["chart-rate", "chart-latency", "chart-codes"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "has #{id}");
    }
    let lower = page.to_ascii_lowercase();
    for bad in [
        "src=\"http",
        "src='http",
        "href=\"http",
        "href='http",
        "<link",
        "@import",
        "url(http",
        "fetch(",
    ] {
        assert!(!lower.contains(bad), "page must not load {bad}");
    }
    assert!(page.contains("id=\"report-data\""), "data embedded");
    assert!(
        page.contains("<path") || page.contains("'<path") || page.contains("<rect"),
        "draws SVG"
    );
}

#[test]
fn html_escapes_script_breakers() {
    let mut report = throng_load::report::Report::default();
    report
        .aggregate
        .counters
        .insert("errors.</script><script>alert(1)</script>".into(), 1);
    let page = html::render(&report, "t <b>");
    assert_eq!(
        page.matches("</script>").count(),
        3,
        "only our own three script elements (data, axes, code) close"
    );
    assert!(page.contains("t &lt;b&gt;"));
    assert_self_contained(&page);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_command_posts_a_body_file_with_headers() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, br#"{"hello":"world"}"#).unwrap();
    let url = format!("{}/items", srv.url());
    let out = throng_load(&[
        "url",
        &url,
        "-c",
        "2",
        "-d",
        "300ms",
        "-m",
        "post",
        "--body-file",
        body.to_str().unwrap(),
        "-H",
        "content-type: application/json",
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("201: "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let posts: Vec<_> = srv
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST")
        .collect();
    assert!(!posts.is_empty());
    assert_eq!(&posts[0].body[..], br#"{"hello":"world"}"#);
    assert_eq!(posts[0].headers["content-type"], "application/json");

    let out = throng_load(&["url", &url, "-d", "1s"]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "neither --rate nor --connections"
    );
    assert!(stderr(&out).contains("--rate"), "{}", stderr(&out));
}
