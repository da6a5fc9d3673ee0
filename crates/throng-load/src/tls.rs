//! HTTPS for both clients: one rustls client configuration per run (HTTP/1.1 by ALPN, SNI
//! from the target's host), and a [`Stream`] that is plain TCP or TLS so hyper's connection
//! and [`crate::wire`] are written once for both.
//!
//! Trust follows Node's, which Artillery users rely on: the public roots (Mozilla's, from
//! `webpki-roots`), replaced by `config.tls.ca` (or `url --ca`) when given, plus the PEM
//! files of `NODE_EXTRA_CA_CERTS`. `config.tls.rejectUnauthorized: false` (`-k/--insecure`)
//! accepts any certificate while still checking the handshake's signatures. A refused
//! certificate fails the request with Node's error code (`DEPTH_ZERO_SELF_SIGNED_CERT`,
//! `CERT_HAS_EXPIRED`, `ERR_TLS_CERT_ALTNAME_INVALID`, ...), so reports read like
//! Artillery's.

use std::{
    fmt, io,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use rustls::{
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    client::WebPkiServerVerifier,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime},
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};
use tokio_rustls::{client::TlsStream, TlsConnector};

use crate::http::HttpError;

/// What the script or the command line asks of TLS.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// False accepts any server certificate (Node's `rejectUnauthorized: false`).
    pub reject_unauthorized: bool,
    /// PEM files whose certificates replace the public roots (Node's `ca`).
    pub ca_files: Vec<PathBuf>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            reject_unauthorized: true,
            ca_files: Vec::new(),
        }
    }
}

/// A client configuration shared by every connection of a run; cheap to clone.
#[derive(Clone)]
pub struct Tls {
    connector: TlsConnector,
    /// Whether certificates are checked (for the report and messages).
    pub verifies: bool,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("verifies", &self.verifies)
            .finish()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads every certificate of a PEM file.
fn pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: cannot read PEM certificates: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: invalid PEM certificate: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no PEM certificate (-----BEGIN CERTIFICATE-----) in this file",
            path.display()
        ));
    }
    Ok(certs)
}

impl Tls {
    pub fn new(opts: &TlsOptions) -> Result<Self, String> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let mut config = if opts.reject_unauthorized {
            let mut roots = RootCertStore::empty();
            if opts.ca_files.is_empty() {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            let extra = std::env::var_os("NODE_EXTRA_CA_CERTS").map(PathBuf::from);
            for path in opts.ca_files.iter().chain(extra.iter()) {
                for cert in pem_certs(path)? {
                    roots
                        .add(cert)
                        .map_err(|e| format!("{}: not a CA certificate: {e}", path.display()))?;
                }
            }
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NodeCodes { inner }))
                .with_no_client_auth()
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
                .with_no_client_auth()
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            verifies: opts.reject_unauthorized,
        })
    }

    /// The TLS handshake on a connected socket; `host` is sent as SNI and checked against
    /// the certificate.
    pub async fn handshake(&self, tcp: TcpStream, host: &str) -> Result<Stream, HttpError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| HttpError::new("ERR_INVALID_URL", format!("{host:?}: {e}")))?;
        let stream = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| handshake_error(&e))?;
        Ok(Stream::Tls(Box::new(stream)))
    }
}

/// A Node error code carried through rustls from the verifier to [`handshake_error`].
#[derive(Debug)]
struct NodeCode(&'static str, String);

impl fmt::Display for NodeCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.1)
    }
}

impl std::error::Error for NodeCode {}

fn handshake_error(e: &io::Error) -> HttpError {
    let Some(inner) = e.get_ref() else {
        return HttpError::from_io(e);
    };
    if let Some(rustls::Error::InvalidCertificate(CertificateError::Other(other))) =
        inner.downcast_ref::<rustls::Error>()
    {
        if let Some(code) = other.0.downcast_ref::<NodeCode>() {
            return HttpError::new(code.0, format!("{}: {}", code.0, code.1));
        }
    }
    match inner.downcast_ref::<rustls::Error>() {
        Some(rustls::Error::InvalidCertificate(c)) => {
            HttpError::new(cert_code(c), format!("certificate refused: {c:?}"))
        }
        Some(other) => HttpError::new("EPROTO", format!("TLS: {other}")),
        None => HttpError::from_io(e),
    }
}

fn cert_code(e: &CertificateError) -> &'static str {
    match e {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "CERT_HAS_EXPIRED",
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "CERT_NOT_YET_VALID"
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "ERR_TLS_CERT_ALTNAME_INVALID"
        }
        CertificateError::UnknownIssuer => "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
        CertificateError::Revoked => "CERT_REVOKED",
        CertificateError::BadSignature => "CERT_SIGNATURE_FAILURE",
        _ => "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    }
}

/// The public-roots verifier, with Node's names for what it refuses (a self-signed
/// certificate is `DEPTH_ZERO_SELF_SIGNED_CERT`, as Node and so Artillery call it).
#[derive(Debug)]
struct NodeCodes {
    inner: Arc<WebPkiServerVerifier>,
}

/// Whether `cert` verifies with itself as the only trust anchor (so it is self-signed).
fn self_signed(cert: &CertificateDer<'_>, name: &ServerName<'_>, now: UnixTime) -> bool {
    let mut roots = RootCertStore::empty();
    if roots.add(cert.clone().into_owned()).is_err() {
        return false;
    }
    let Ok(v) = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider()).build()
    else {
        return false;
    };
    !matches!(
        v.verify_server_cert(cert, &[], name, &[], now),
        Err(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature
        ))
    )
}

impl ServerCertVerifier for NodeCodes {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            .map_err(|e| match e {
                rustls::Error::InvalidCertificate(c) => {
                    let code = match c {
                        CertificateError::UnknownIssuer
                            if intermediates.is_empty()
                                && self_signed(end_entity, server_name, now) =>
                        {
                            "DEPTH_ZERO_SELF_SIGNED_CERT"
                        }
                        CertificateError::UnknownIssuer if !intermediates.is_empty() => {
                            "SELF_SIGNED_CERT_IN_CHAIN"
                        }
                        ref other => cert_code(other),
                    };
                    rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                        Arc::new(NodeCode(code, format!("{c:?}"))),
                    )))
                }
                other => other,
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `rejectUnauthorized: false`: any certificate, any name; the handshake's signatures are
/// still checked so the session is the one the certificate's key made.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A connection's byte stream: plain TCP or TLS over TCP.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under the stream.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Opens a connection to `addr`, with TLS to `host` when `tls` is given.
pub async fn connect(
    addr: std::net::SocketAddr,
    tls: Option<(&Tls, &str)>,
) -> Result<Stream, HttpError> {
    let tcp = crate::http::tcp_connect(addr).await?;
    match tls {
        None => Ok(Stream::Plain(tcp)),
        Some((tls, host)) => tls.handshake(tcp, host).await,
    }
}
