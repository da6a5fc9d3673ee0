//! The election key's ceremony, away from the server: the key pair is made,
//! its private half split t-of-n among trustees (Shamir over GF(256),
//! `vsss-rs`), and only the public key and one share file per trustee are
//! written; nothing else is kept.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ballot;

/// `format` of a public key file.
pub const KEY_FORMAT: &str = "throng-election-key/1";
/// `format` of a share file.
pub const SHARE_FORMAT: &str = "throng-election-share/1";

/// The public key file, as the authority gives it to throng.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyFile {
    pub format: String,
    pub suite: String,
    /// base64url, 32 bytes.
    pub public_key: String,
    pub threshold: u8,
    pub trustees: u8,
}

/// One trustee's share.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShareFile {
    pub format: String,
    pub public_key: String,
    pub threshold: u8,
    pub trustees: u8,
    pub index: u8,
    /// base64url.
    pub share: String,
}

fn write_private(path: &Path, body: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o
        .open(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    f.write_all(body.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// Splits `private` `threshold`-of-`trustees` and writes `public.json` and
/// `share-I-of-N.json` into `dir` (created; files must not exist).
pub fn write_key_files(
    dir: &Path,
    threshold: u8,
    trustees: u8,
    private: &[u8],
    public: &[u8],
) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=trustees).contains(&threshold),
        "the threshold must be 1 to the number of trustees"
    );
    std::fs::create_dir_all(dir)?;
    let shares = vsss_rs::Gf256::split_array(
        threshold as usize,
        trustees as usize,
        private,
        rand::rngs::OsRng,
    )
    .map_err(|e| anyhow::anyhow!("splitting the key: {e:?}"))?;
    let public_key = ballot::b64(public);
    let key = KeyFile {
        format: KEY_FORMAT.into(),
        suite: ballot::SUITE.into(),
        public_key: public_key.clone(),
        threshold,
        trustees,
    };
    write_private(
        &dir.join("public.json"),
        &serde_json::to_string_pretty(&key)?,
    )?;
    for (i, share) in shares.iter().enumerate() {
        let f = ShareFile {
            format: SHARE_FORMAT.into(),
            public_key: public_key.clone(),
            threshold,
            trustees,
            index: i as u8 + 1,
            share: ballot::b64(share),
        };
        write_private(
            &dir.join(format!("share-{}-of-{trustees}.json", i + 1)),
            &serde_json::to_string_pretty(&f)?,
        )?;
    }
    Ok(())
}
