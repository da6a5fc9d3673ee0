//! Response headers that keep answers out of caches and pages out of
//! frames: `no_store` for answers that carry personal data or a token (a
//! shared cache or a browser's back button must not keep them), and
//! `security` on every answer (nosniff, no referrer, and for HTML a CSP
//! that allows the pages' own scripts and nothing else, and no framing).

use axum::http::{header, HeaderValue};
use axum::response::Response;

/// The pages' Content-Security-Policy: scripts, connections and images from
/// this origin only (no inline script); inline `<style>` is allowed (the
/// pages keep their CSS inline; styles cannot run code). One inline
/// handler is allowed by its hash: `return false` (the voting results
/// filter form), under `'unsafe-hashes'`.
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-hashes' \
    'sha256-GZIcz60Uwd6wT3vaYke/atSr53TehbYAPepOa3d03Vw='; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
    frame-ancestors 'none'";

/// `Cache-Control: no-store` (for `axum::middleware::map_response`).
pub async fn no_store(mut res: Response) -> Response {
    set_no_store(&mut res);
    res
}

/// `Cache-Control: no-store` on one answer (a handler's, where a route
/// layer would cover answers that may be cached).
pub fn set_no_store(res: &mut Response) {
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// `no_store`, and `Vary: X-Access-Code`: the answer depends on that header.
pub async fn no_store_vary_access_code(res: Response) -> Response {
    let mut res = no_store(res).await;
    res.headers_mut()
        .append(header::VARY, HeaderValue::from_static("x-access-code"));
    res
}

/// The headers every answer gets; HTML also gets the CSP and no framing.
pub async fn security(mut res: Response) -> Response {
    let html = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/html"));
    let h = res.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if html {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PAGE_CSP),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    res
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_csp_hash_is_that_of_the_allowed_handler() {
        use base64::Engine;
        use sha2::Digest;
        let hash = sha2::Sha256::digest(b"return false");
        let b64 = base64::engine::general_purpose::STANDARD.encode(hash);
        assert!(
            super::PAGE_CSP.contains(&format!("'sha256-{b64}'")),
            "{b64}"
        );
    }
}
