//! The election's key, made and split among its trustees away from the
//! server (`throng voting keygen`), and put together again only to open the
//! box (`throng voting open`).
//!
//! The key ceremony makes an X25519 key pair ([`ballot::generate_key`]),
//! splits the private key t-of-n with Shamir's scheme over GF(256), a byte
//! at a time (`vsss_rs::Gf256`), and writes:
//! - the public key file ([`KEY_FORMAT`]): what the election is configured
//!   with and what the vote page seals to;
//! - one share file per trustee ([`SHARE_FORMAT`], mode 0600), each naming
//!   the public key it belongs to, the threshold, the trustees and its
//!   index (its x coordinate, 1..=n).
//!
//! Nothing else is kept: the private key is wiped from memory once split.
//! A threshold of 1 is the constant polynomial: every share is the key.
//!
//! Putting shares together ([`combine`]) refuses fewer than the threshold,
//! shares of different keys or ceremonies, repeated indexes, and a result
//! whose public key is not the one the shares name: shares that do not put
//! the key together open nothing.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rand::{CryptoRng, RngCore};
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, Zeroizing};

use super::ballot::{self, KEY_BYTES};

/// `format` of the public key file.
pub const KEY_FORMAT: &str = "throng-election-key/1";
/// `format` of a trustee's share file.
pub const SHARE_FORMAT: &str = "throng-election-share/1";
/// Trustees a key can be split among (a share's index is one byte).
pub const TRUSTEES_MAX: usize = 255;
/// The public key file's name in the ceremony's directory.
pub const KEY_FILE: &str = "election-key.json";

/// The election's public key, as the ceremony writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyFile {
    /// [`KEY_FORMAT`].
    pub format: String,
    /// [`ballot::SUITE`].
    pub suite: String,
    /// base64url, 32 bytes.
    pub public_key: String,
    /// Shares needed to open the box.
    pub threshold: usize,
    /// Shares made.
    pub trustees: usize,
}

/// One trustee's share of the private key.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShareFile {
    /// [`SHARE_FORMAT`].
    pub format: String,
    /// The public key this share belongs to (base64url).
    pub public_key: String,
    pub threshold: usize,
    pub trustees: usize,
    /// The share's index, 1..=trustees.
    pub index: usize,
    /// The share's value (base64url, 32 bytes): the polynomial at `index`,
    /// byte by byte.
    pub share: String,
}

impl std::fmt::Debug for ShareFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareFile")
            .field("public_key", &self.public_key)
            .field("threshold", &self.threshold)
            .field("trustees", &self.trustees)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Drop for ShareFile {
    fn drop(&mut self) {
        self.share.zeroize();
    }
}

/// What a key ceremony made: the public key and every trustee's share.
pub struct Ceremony {
    pub key: KeyFile,
    pub shares: Vec<ShareFile>,
}

/// Why a ceremony or a combination is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrusteeError {
    #[error(
        "a threshold of {threshold} of {trustees} trustees cannot be made: the threshold must be \
         at least 1 and at most the trustees, the trustees at most {TRUSTEES_MAX}"
    )]
    BadSplit { threshold: usize, trustees: usize },
    #[error("no share given: the opening needs {0} of the trustees' share files")]
    NoShares(usize),
    #[error("{have} share(s) given but this key needs {need}: bring {more} more trustee(s)' share files", more = need - have)]
    TooFew { have: usize, need: usize },
    #[error(
        "the shares belong to different keys or ceremonies (public key, threshold or trustees \
         differ): share {first} and share {other}"
    )]
    DifferentKeys { first: usize, other: usize },
    #[error("share {0} is given twice: each trustee's share counts once")]
    RepeatedIndex(usize),
    #[error("share {index} is not a share file: {why}")]
    BadShare { index: usize, why: String },
    #[error(
        "the shares do not put together the key they name (one of them is altered or from \
         another ceremony): nothing is opened"
    )]
    WrongKey,
}

/// Makes a key pair and splits its private key `threshold` of `trustees`.
pub fn make_key(
    threshold: usize,
    trustees: usize,
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<Ceremony, TrusteeError> {
    if threshold < 1 || threshold > trustees || trustees > TRUSTEES_MAX {
        return Err(TrusteeError::BadSplit {
            threshold,
            trustees,
        });
    }
    let (private, public) = ballot::generate_key(rng);
    let private = Zeroizing::new(private);
    let public_key = ballot::b64(&public);
    let values: Vec<Zeroizing<Vec<u8>>> = if threshold == 1 {
        (1..=trustees)
            .map(|_| Zeroizing::new(private.to_vec()))
            .collect()
    } else {
        let shares = vsss_rs::Gf256::split_array(threshold, trustees, &private[..], &mut *rng)
            .map_err(|_| TrusteeError::BadSplit {
                threshold,
                trustees,
            })?;
        // Each is [index, value...], indexes 1..=trustees in order.
        shares
            .into_iter()
            .map(|mut s| {
                let v = Zeroizing::new(s[1..].to_vec());
                s.zeroize();
                v
            })
            .collect()
    };
    let shares = values
        .iter()
        .enumerate()
        .map(|(i, v)| ShareFile {
            format: SHARE_FORMAT.into(),
            public_key: public_key.clone(),
            threshold,
            trustees,
            index: i + 1,
            share: ballot::b64(v),
        })
        .collect();
    Ok(Ceremony {
        key: KeyFile {
            format: KEY_FORMAT.into(),
            suite: ballot::SUITE.into(),
            public_key,
            threshold,
            trustees,
        },
        shares,
    })
}

/// The file name of share `index` of `trustees`.
pub fn share_file_name(index: usize, trustees: usize) -> String {
    format!("share-{index}-of-{trustees}.json")
}

/// Writes a ceremony into `dir` (made if missing; refused unless empty):
/// the public key file and a share file per trustee (0600, never over an
/// existing file). Returns the files written, the key file first. On an
/// error, the files written so far are removed.
pub fn write_ceremony(dir: &Path, c: &Ceremony) -> anyhow::Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                anyhow::bail!(
                    "{} is not empty: the ceremony writes into a new or empty directory, never \
                     beside other keys",
                    dir.display()
                );
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        Err(e) => anyhow::bail!("cannot read {}: {e}", dir.display()),
    }
    let mut written = Vec::new();
    let result = (|| {
        let key = dir.join(KEY_FILE);
        write_new(&key, &serde_json::to_vec_pretty(&c.key)?, 0o644)?;
        written.push(key);
        for s in &c.shares {
            let path = dir.join(share_file_name(s.index, s.trustees));
            let json = Zeroizing::new(serde_json::to_vec_pretty(s)?);
            write_new(&path, &json, 0o600)?;
            written.push(path);
        }
        anyhow::Ok(())
    })();
    match result {
        Ok(()) => Ok(written),
        Err(e) => {
            for p in &written {
                let _ = std::fs::remove_file(p);
            }
            Err(e)
        }
    }
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    f.write_all(bytes)?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    Ok(())
}

/// A share file read and checked for its form (not yet against the others).
pub fn read_share(path: &Path) -> anyhow::Result<ShareFile> {
    let text = Zeroizing::new(
        std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
    );
    let share: ShareFile = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a trustee's share file ({SHARE_FORMAT}): {e}",
            path.display()
        )
    })?;
    if share.format != SHARE_FORMAT {
        anyhow::bail!(
            "{} is of format {:?}, not a trustee's share ({SHARE_FORMAT})",
            path.display(),
            share.format
        );
    }
    Ok(share)
}

/// A public key file read and checked.
pub fn read_key(path: &Path) -> anyhow::Result<KeyFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let key: KeyFile = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not an election key file ({KEY_FORMAT}): {e}",
            path.display()
        )
    })?;
    if key.format != KEY_FORMAT || key.suite != ballot::SUITE {
        anyhow::bail!(
            "{} is of format {:?} and suite {:?}, not {KEY_FORMAT} with {}",
            path.display(),
            key.format,
            key.suite,
            ballot::SUITE
        );
    }
    Ok(key)
}

/// Puts the private key together from `shares`, checked against the public
/// key they name. Returns it (wiped when dropped) and that public key.
pub fn combine(
    shares: &[ShareFile],
) -> Result<(Zeroizing<[u8; KEY_BYTES]>, [u8; KEY_BYTES]), TrusteeError> {
    let Some(first) = shares.first() else {
        return Err(TrusteeError::NoShares(0));
    };
    let mut seen = BTreeSet::new();
    let mut points: Vec<Zeroizing<Vec<u8>>> = Vec::with_capacity(shares.len());
    for s in shares {
        if s.format != SHARE_FORMAT {
            return Err(TrusteeError::BadShare {
                index: s.index,
                why: format!("format {:?}, not {SHARE_FORMAT}", s.format),
            });
        }
        if s.public_key != first.public_key
            || s.threshold != first.threshold
            || s.trustees != first.trustees
        {
            return Err(TrusteeError::DifferentKeys {
                first: first.index,
                other: s.index,
            });
        }
        if s.index < 1 || s.index > s.trustees || s.trustees > TRUSTEES_MAX {
            return Err(TrusteeError::BadShare {
                index: s.index,
                why: format!("index {} is not one of 1..={}", s.index, s.trustees),
            });
        }
        if !seen.insert(s.index) {
            return Err(TrusteeError::RepeatedIndex(s.index));
        }
        let value = Zeroizing::new(ballot::from_b64(&s.share).unwrap_or_default());
        if value.len() != KEY_BYTES {
            return Err(TrusteeError::BadShare {
                index: s.index,
                why: format!("its value is not {KEY_BYTES} bytes of base64url"),
            });
        }
        let mut point = Zeroizing::new(Vec::with_capacity(KEY_BYTES + 1));
        point.push(s.index as u8);
        point.extend_from_slice(&value);
        points.push(point);
    }
    let need = first.threshold.max(1);
    if shares.len() < need {
        return Err(TrusteeError::TooFew {
            have: shares.len(),
            need,
        });
    }
    let public: [u8; KEY_BYTES] = ballot::from_b64(&first.public_key)
        .and_then(|p| p.try_into().ok())
        .ok_or(TrusteeError::BadShare {
            index: first.index,
            why: "its public key is not 32 bytes of base64url".into(),
        })?;
    let mut private = Zeroizing::new([0u8; KEY_BYTES]);
    if need == 1 {
        // The constant polynomial: every share is the key.
        private.copy_from_slice(&points[0][1..]);
    } else {
        let plain: Vec<Vec<u8>> = points.iter().map(|p| p.to_vec()).collect();
        let combined = vsss_rs::Gf256::combine_array(&plain);
        for mut p in plain {
            p.zeroize();
        }
        let mut combined = combined.map_err(|_| TrusteeError::WrongKey)?;
        if combined.len() != KEY_BYTES {
            combined.zeroize();
            return Err(TrusteeError::WrongKey);
        }
        private.copy_from_slice(&combined);
        combined.zeroize();
    }
    if ballot::public_of(&private[..]) != Some(public) {
        return Err(TrusteeError::WrongKey);
    }
    Ok((private, public))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn ceremony(t: usize, n: usize) -> Ceremony {
        make_key(t, n, &mut rand::rngs::OsRng).unwrap()
    }

    /// Every subset of `0..n` with `k` members.
    fn subsets(n: usize, k: usize) -> Vec<Vec<usize>> {
        (0u32..1 << n)
            .filter(|m| m.count_ones() as usize == k)
            .map(|m| (0..n).filter(|i| m & (1 << i) != 0).collect())
            .collect()
    }

    #[test]
    fn any_threshold_of_the_shares_puts_the_key_together() {
        for (t, n) in [(3, 5), (2, 2), (1, 3), (5, 5)] {
            let c = ceremony(t, n);
            let public = ballot::from_b64(&c.key.public_key).unwrap();
            for k in t..=n {
                for subset in subsets(n, k) {
                    let chosen: Vec<ShareFile> =
                        subset.iter().map(|&i| c.shares[i].clone()).collect();
                    let (private, p) = combine(&chosen).unwrap();
                    assert_eq!(p.to_vec(), public);
                    assert_eq!(ballot::public_of(&private[..]).unwrap().to_vec(), public);
                }
            }
        }
    }

    #[test]
    fn fewer_than_the_threshold_open_nothing() {
        let c = ceremony(3, 5);
        for k in 1..3 {
            for subset in subsets(5, k) {
                let chosen: Vec<ShareFile> = subset.iter().map(|&i| c.shares[i].clone()).collect();
                let err = combine(&chosen).unwrap_err();
                assert_eq!(err, TrusteeError::TooFew { have: k, need: 3 });
                assert!(err.to_string().contains("needs 3"), "{err}");
            }
        }
        assert_eq!(combine(&[]).unwrap_err(), TrusteeError::NoShares(0));
        // Two shares claiming a threshold of 2 (edited files) put no key
        // together: the polynomial is of degree 2.
        let mut forged: Vec<ShareFile> = c.shares[..2].to_vec();
        for s in &mut forged {
            s.threshold = 2;
        }
        assert_eq!(combine(&forged).unwrap_err(), TrusteeError::WrongKey);
    }

    #[test]
    fn shares_of_other_keys_repeated_or_altered_are_refused() {
        let a = ceremony(2, 3);
        let b = ceremony(2, 3);
        assert_eq!(
            combine(&[a.shares[0].clone(), b.shares[1].clone()]).unwrap_err(),
            TrusteeError::DifferentKeys { first: 1, other: 2 }
        );
        // The same public key written on another ceremony's share.
        let mut foreign = b.shares[1].clone();
        foreign.public_key = a.key.public_key.clone();
        assert_eq!(
            combine(&[a.shares[0].clone(), foreign]).unwrap_err(),
            TrusteeError::WrongKey
        );
        assert_eq!(
            combine(&[a.shares[0].clone(), a.shares[0].clone()]).unwrap_err(),
            TrusteeError::RepeatedIndex(1)
        );
        let mut altered = a.shares[2].clone();
        let mut v = ballot::from_b64(&altered.share).unwrap();
        v[5] ^= 0x40;
        altered.share = ballot::b64(&v);
        assert_eq!(
            combine(&[a.shares[0].clone(), altered]).unwrap_err(),
            TrusteeError::WrongKey
        );
        let mut short = a.shares[1].clone();
        short.share = "AAAA".into();
        assert!(matches!(
            combine(&[a.shares[0].clone(), short]).unwrap_err(),
            TrusteeError::BadShare { index: 2, .. }
        ));
    }

    #[test]
    fn a_split_outside_the_limits_is_refused() {
        let mut rng = rand::rngs::OsRng;
        for (t, n) in [(0, 3), (4, 3), (2, 256)] {
            assert!(matches!(
                make_key(t, n, &mut rng),
                Err(TrusteeError::BadSplit { .. })
            ));
        }
        assert_eq!(make_key(255, 255, &mut rng).unwrap().shares.len(), 255);
    }

    #[test]
    fn the_ceremony_writes_the_key_and_private_shares_into_an_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ceremony");
        let c = ceremony(2, 3);
        let files = write_ceremony(&out, &c).unwrap();
        assert_eq!(files.len(), 4);
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "election-key.json",
                "share-1-of-3.json",
                "share-2-of-3.json",
                "share-3-of-3.json"
            ]
        );
        let key = read_key(&files[0]).unwrap();
        assert_eq!(key, c.key);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(v["format"], KEY_FORMAT);
        assert_eq!(v["suite"], ballot::SUITE);
        assert_eq!(v["threshold"], 2);
        assert_eq!(v["trustees"], 3);
        let shares: Vec<ShareFile> = files[1..].iter().map(|f| read_share(f).unwrap()).collect();
        for f in &files[1..] {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
        let (_, public) = combine(&shares[1..]).unwrap();
        assert_eq!(ballot::b64(&public), key.public_key);
        let err = write_ceremony(&out, &ceremony(2, 3)).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
        assert!(read_share(&files[0])
            .unwrap_err()
            .to_string()
            .contains("not a trustee's share file"));
    }
}
