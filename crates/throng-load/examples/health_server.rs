//! A tiny reference server for measuring the load generator: `GET /health` answers `ok`, any
//! other path answers a small JSON document (so Artillery scripts have something to hit).
//!
//! Usage: `health_server [PORT] [WORKER_THREADS]` (defaults 8080 and 1).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{server::conn::http1, service::service_fn, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = if req.uri().path() == "/health" {
        Bytes::from_static(b"ok")
    } else {
        Bytes::from_static(b"{\"ok\":true}")
    };
    Ok(Response::new(Full::new(body)))
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(8080);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        eprintln!(
            "health_server listening on http://{}",
            listener.local_addr()?
        );
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    })
}
