//! A tiny reference server for measuring the load generator: `GET /health` answers `ok`, any
//! other path answers a small JSON document (so Artillery scripts have something to hit).
//!
//! Usage: `health_server [PORT] [WORKER_THREADS] [--tls]` (defaults 8080 and 1). With `--tls`
//! it serves HTTPS with a self-signed certificate for `localhost` made at start (clients need
//! `-k`/`--insecure`, or `tls.rejectUnauthorized: false` in a script).

use std::convert::Infallible;
use std::sync::Arc;

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

/// A TLS acceptor with a self-signed certificate for `localhost`.
fn self_signed() -> tokio_rustls::TlsAcceptor {
    use tokio_rustls::rustls;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])
        .expect("a self-signed certificate");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS 1.2 and 1.3")
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .expect("the certificate fits its key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tls = args.iter().any(|a| a == "--tls");
    let mut numbers = args.iter().filter(|a| *a != "--tls");
    let port: u16 = numbers.next().and_then(|a| a.parse().ok()).unwrap_or(8080);
    let threads: usize = numbers.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    let acceptor = tls.then(self_signed);
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        eprintln!(
            "health_server listening on {}://{}",
            if tls { "https" } else { "http" },
            listener.local_addr()?
        );
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => {
                        if let Ok(tls) = acceptor.accept(stream).await {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(tls), service_fn(handle))
                                .await;
                        }
                    }
                    None => {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service_fn(handle))
                            .await;
                    }
                }
            });
        }
    })
}
