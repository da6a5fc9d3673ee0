//! Generated secrets in the data directory: created on first run with mode
//! 0600 (the directory 0700), read on every later run; an existing secret
//! that other users may read, or that another user owns, is refused. Nodes sharing one PostgreSQL must share
//! them: point them at the same `--data-dir`, or pass `THRONG_PII_KEY`,
//! `THRONG_TOKEN_SECRET` and each service's own secrets ([`SecretSpec`]:
//! its file and variable) as base64 in the environment.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;

use crate::base::private_fs;
use rand::RngCore;

/// Bytes in every generated secret (256 bits).
pub const SECRET_BYTES: usize = 32;

/// A secret of a service's own, kept as `file` in the data directory
/// unless the environment variable `env` holds it.
pub struct SecretSpec {
    pub file: &'static str,
    pub env: &'static str,
}

/// The platform's secrets, and where services' own are kept.
pub struct Secrets {
    pub pii_key: [u8; SECRET_BYTES],
    pub token_secret: [u8; SECRET_BYTES],
    data_dir: std::path::PathBuf,
}

impl Secrets {
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Secrets> {
        private_fs::create_dir(data_dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create the data directory {}: {e}",
                data_dir.display()
            )
        })?;
        if let Some(exposed) = private_fs::exposed(data_dir) {
            tracing::warn!("the data directory holds the secrets and the database: {exposed}");
        }
        Ok(Secrets {
            pii_key: from_env_or_file("THRONG_PII_KEY", &data_dir.join("pii.key"))?,
            token_secret: from_env_or_file("THRONG_TOKEN_SECRET", &data_dir.join("token.secret"))?,
            data_dir: data_dir.to_path_buf(),
        })
    }

    /// A service's secret: from its variable, else its file, created on
    /// first use as the platform's are.
    pub fn key(&self, spec: &SecretSpec) -> anyhow::Result<[u8; SECRET_BYTES]> {
        from_env_or_file(spec.env, &self.path_of(spec))
    }

    /// Where `spec` is kept in the data directory.
    pub fn path_of(&self, spec: &SecretSpec) -> std::path::PathBuf {
        assert!(
            is_secret_file(spec.file),
            "secret files are named *.key or *.secret, so backups find them: {}",
            spec.file
        );
        self.data_dir.join(spec.file)
    }
}

fn from_env_or_file(var: &str, path: &Path) -> anyhow::Result<[u8; SECRET_BYTES]> {
    if let Ok(b64) = std::env::var(var) {
        return decode(&b64).map_err(|e| anyhow::anyhow!("{var}: {e}"));
    }
    match std::fs::read_to_string(path) {
        // A key others could read is a key others may have: refuse it.
        Ok(_) if private_fs::exposed(path).is_some() => Err(anyhow::anyhow!(
            "refusing the secret {}; if others may have read it, it is no longer secret \
             (set {var} instead, or fix the file)",
            private_fs::exposed(path).unwrap_or_default()
        )),
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

/// Creates the secret atomically: written and synced under a temporary
/// name, then hard-linked into place. `link` fails if another process got
/// there first, and then its file is complete, so nobody ever reads a
/// half-written secret (two nodes starting at once on one data directory).
fn create(path: &Path) -> anyhow::Result<[u8; SECRET_BYTES]> {
    let mut key = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut key);
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(
            base64::engine::general_purpose::STANDARD
                .encode(key)
                .as_bytes(),
        )?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow::anyhow!("cannot create {}: {e}", tmp.display()));
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                // Make the new name itself durable.
                let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
            }
            tracing::info!(path = %path.display(), "generated a new secret");
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path)?;
            decode(text.trim()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
        }
        Err(e) => Err(anyhow::anyhow!("cannot create {}: {e}", path.display())),
    }
}

/// Secret files in the data directory are named `*.key` or `*.secret`
/// (the platform's and every [`SecretSpec`]'s): what a backup bundles.
pub fn is_secret_file(name: &str) -> bool {
    (name.ends_with(".key") || name.ends_with(".secret"))
        && !name.starts_with('.')
        && !name.contains(".tmp-")
}

/// The format of a secrets bundle: `{"throngSecrets": 1, "secrets":
/// {"pii.key": "<base64>", ...}}`, written 0600.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    throng_secrets: u32,
    secrets: std::collections::BTreeMap<String, String>,
}

const BUNDLE_FORMAT: u32 = 1;

/// Writes every secret file of `data_dir` into one bundle at `to`, apart
/// from the database's copy: whoever holds both holds the personal data.
/// Answers the secrets' names (none when they come from the environment).
pub fn write_bundle(data_dir: &Path, to: &Path) -> anyhow::Result<Vec<String>> {
    let mut secrets = std::collections::BTreeMap::new();
    let entries = std::fs::read_dir(data_dir).map_err(|e| {
        anyhow::anyhow!("cannot read the data directory {}: {e}", data_dir.display())
    })?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_file() && is_secret_file(&name) {
            let text = std::fs::read_to_string(entry.path())?;
            decode(text.trim()).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            secrets.insert(name, text.trim().to_string());
        }
    }
    let names = secrets.keys().cloned().collect();
    let json = serde_json::to_vec_pretty(&Bundle {
        throng_secrets: BUNDLE_FORMAT,
        secrets,
    })?;
    let _ = std::fs::remove_file(to);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", to.display()))?;
    file.write_all(&json)?;
    file.sync_all()?;
    Ok(names)
}

/// Installs the bundle at `from` into `data_dir`. A secret already there
/// with another value is replaced only with `replace`: data sealed with the
/// old key would become unreadable. Answers the names installed.
pub fn install_bundle(from: &Path, data_dir: &Path, replace: bool) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read(from)
        .map_err(|e| anyhow::anyhow!("cannot read the secrets {}: {e}", from.display()))?;
    let bundle: Bundle = serde_json::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a secrets bundle: {e}", from.display()))?;
    anyhow::ensure!(
        bundle.throng_secrets == BUNDLE_FORMAT,
        "{}: unknown bundle format {}",
        from.display(),
        bundle.throng_secrets
    );
    for (name, value) in &bundle.secrets {
        anyhow::ensure!(
            is_secret_file(name) && !name.contains('/'),
            "{}: {name} is not a secret's name",
            from.display()
        );
        decode(value).map_err(|e| anyhow::anyhow!("{}: {name}: {e}", from.display()))?;
        if let Ok(old) = std::fs::read_to_string(data_dir.join(name)) {
            if old.trim() != value && !replace {
                anyhow::bail!(
                    "{} already holds a different {name}: data sealed with it would become \
                     unreadable; pass --force to replace it",
                    data_dir.display()
                );
            }
        }
    }
    private_fs::create_dir(data_dir)?;
    for (name, value) in &bundle.secrets {
        let path = data_dir.join(name);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(value.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
    }
    std::fs::File::open(data_dir)?.sync_all()?;
    Ok(bundle.secrets.into_keys().collect())
}
