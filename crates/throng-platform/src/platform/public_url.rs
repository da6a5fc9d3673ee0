//! The URL at which browsers reach this server (`serve --public-url`), for
//! the absolute URLs an answer hands out to be used on other sites (the
//! invitation snippet). Unset, it is `http://` and the request's `Host`
//! (what the caller reached), falling back to the `--listen` address; a
//! deployment behind a proxy or TLS terminator sets it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{header, HeaderMap};

/// `--public-url`, checked: `http(s)://host[:port]` and an optional path
/// prefix, with no trailing `/`, query, fragment or user.
pub fn parse(s: &str) -> Result<String, String> {
    let what = "an http:// or https:// URL such as https://throng.example.com or \
                https://example.com/throng (no user, query or fragment)";
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or(what)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority_ok = !authority.is_empty() && authority.bytes().all(host_byte);
    let path_ok = path
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b"?#\\\"'<>`".contains(&b));
    if !authority_ok || !path_ok {
        return Err(what.into());
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// Bytes of a `host[:port]` (a DNS name, IPv4, or IPv6 in brackets).
fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)
}

/// Where the server is reached from outside.
#[derive(Clone, Debug)]
pub struct PublicUrl {
    configured: Option<Arc<str>>,
    listen: SocketAddr,
}

impl PublicUrl {
    pub fn new(configured: Option<String>, listen: SocketAddr) -> PublicUrl {
        PublicUrl {
            configured: configured.map(Into::into),
            listen,
        }
    }

    /// Whether `--public-url` was given.
    pub fn configured(&self) -> Option<&str> {
        self.configured.as_deref()
    }

    /// The base URL (no trailing `/`) for a request with these headers.
    pub fn base(&self, headers: &HeaderMap) -> String {
        if let Some(c) = &self.configured {
            return c.to_string();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| !h.is_empty() && h.len() <= 260 && h.bytes().all(host_byte));
        match host {
            Some(h) => format!("http://{}", h.to_ascii_lowercase()),
            None => format!("http://{}", self.listen),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_are_checked() {
        assert_eq!(parse("https://t.example/").unwrap(), "https://t.example");
        assert_eq!(
            parse("https://t.example/throng").unwrap(),
            "https://t.example/throng"
        );
        assert_eq!(
            parse("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        for bad in [
            "t.example",
            "https://",
            "https://a b",
            "https://a/?q",
            "https://u@a",
            "https://a/\"x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unset_it_follows_the_host() {
        let p = PublicUrl::new(None, "127.0.0.1:8080".parse().unwrap());
        let mut h = HeaderMap::new();
        assert_eq!(p.base(&h), "http://127.0.0.1:8080");
        h.insert(header::HOST, "Throng.Example:9000".parse().unwrap());
        assert_eq!(p.base(&h), "http://throng.example:9000");
        h.insert(header::HOST, "evil\"><script".parse().unwrap());
        assert_eq!(p.base(&h), "http://127.0.0.1:8080");
        let p = PublicUrl::new(
            Some("https://t.example".into()),
            "127.0.0.1:8080".parse().unwrap(),
        );
        assert_eq!(p.base(&h), "https://t.example");
    }
}
