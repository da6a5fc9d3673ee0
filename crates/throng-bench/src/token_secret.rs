//! The token secret the bench shares with its child servers, so its load
//! can carry tokens they accept.

use std::sync::OnceLock;

use base64::Engine;

/// `THRONG_TOKEN_SECRET` if set, else a random one, set in this process's
/// environment before any child or runtime thread starts (the harness asks
/// an experiment for its `serve_args` first, and the children inherit the
/// environment).
pub fn token_secret() -> &'static [u8] {
    static SECRET: OnceLock<Vec<u8>> = OnceLock::new();
    SECRET.get_or_init(|| {
        let b64 = match std::env::var("THRONG_TOKEN_SECRET") {
            Ok(v) => v,
            Err(_) => {
                let mut key = [0u8; 32];
                rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut key);
                let v = base64::engine::general_purpose::STANDARD.encode(key);
                std::env::set_var("THRONG_TOKEN_SECRET", &v);
                v
            }
        };
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .expect("THRONG_TOKEN_SECRET is base64")
    })
}
