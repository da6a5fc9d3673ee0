//! Generated secrets in the data directory: created on first run with mode
//! 0600, read on every later run. Nodes sharing one PostgreSQL must share
//! them: point them at the same `--data-dir`, or pass `THRONG_PII_KEY` and
//! `THRONG_TOKEN_SECRET` (base64) in the environment.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;
use rand::RngCore;

/// Bytes in every generated secret (256 bits).
pub const SECRET_BYTES: usize = 32;

pub struct Secrets {
    pub pii_key: [u8; SECRET_BYTES],
    pub token_secret: [u8; SECRET_BYTES],
}

impl Secrets {
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Secrets> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            anyhow::anyhow!("cannot create the data directory {}: {e}", data_dir.display())
        })?;
        Ok(Secrets {
            pii_key: from_env_or_file("THRONG_PII_KEY", &data_dir.join("pii.key"))?,
            token_secret: from_env_or_file("THRONG_TOKEN_SECRET", &data_dir.join("token.secret"))?,
        })
    }
}

fn from_env_or_file(var: &str, path: &Path) -> anyhow::Result<[u8; SECRET_BYTES]> {
    if let Ok(b64) = std::env::var(var) {
        return decode(&b64).map_err(|e| anyhow::anyhow!("{var}: {e}"));
    }
    match std::fs::read_to_string(path) {
        Ok(text) => decode(text.trim()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

fn decode(b64: &str) -> Result<[u8; SECRET_BYTES], String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("not base64: {e}"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("expected {SECRET_BYTES} bytes, found {}", b.len()))
}

fn create(path: &Path) -> anyhow::Result<[u8; SECRET_BYTES]> {
    let mut key = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut key);
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(f) => f,
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let text = std::fs::read_to_string(path)?;
            return decode(text.trim()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
        }
        Err(e) => return Err(anyhow::anyhow!("cannot create {}: {e}", path.display())),
    };
    file.write_all(base64::engine::general_purpose::STANDARD.encode(key).as_bytes())?;
    file.sync_all()?;
    tracing::info!(path = %path.display(), "generated a new secret");
    Ok(key)
}
