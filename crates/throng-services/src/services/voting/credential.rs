//! Voter credentials: one per voter on an authority's roll, handed out once
//! (the roll import's answer), kept only as a keyed hash.
//!
//! A credential is [`CREDENTIAL_CHARS`] characters of a 32-character
//! alphabet without look-alikes (no 0, O, 1, l or I): 65 random bits,
//! printed in groups (`ABCD-EFGH-JKLMN`); dashes, spaces and case do not
//! matter when typed. Stored is HMAC-SHA256 under `voting-credential.key`
//! (the data directory or `THRONG_VOTING_CREDENTIAL_KEY`, never the
//! database) over the election, the voter's number and the credential, so
//! a copy of the database alone cannot test guesses offline.
//!
//! An import's credentials are derived from a random seed held only while
//! the import answers (HMAC of the seed and the voter's line): millions of
//! them need not be held in memory at once, and the seed is gone after.

use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The alphabet: digits 2-9 and capital letters but I and O (32).
pub const ALPHABET: &[u8; 32] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZ";
/// Characters of a credential: 13 x 5 = 65 bits.
pub const CREDENTIAL_CHARS: usize = 13;
/// Bytes of a stored credential hash (a truncated HMAC-SHA256).
pub const CREDENTIAL_HASH_BYTES: usize = 16;

/// Login attempts per voter id in [`LOGIN_WINDOW_MS`] at most, right or wrong.
pub const LOGIN_ATTEMPTS_PER_VOTER_MAX: u32 = 5;
/// Login attempts per client (IPv4 address or IPv6 /64) in
/// [`LOGIN_WINDOW_MS`] at most.
pub const LOGIN_ATTEMPTS_PER_CLIENT_MAX: u32 = 60;
/// The window the login limits count in.
pub const LOGIN_WINDOW_MS: i64 = 60_000;
/// Keys a login limiter tracks at most; past it (after dropping expired
/// windows) attempts by new keys are refused until windows expire.
pub const LOGIN_LIMITER_KEYS_MAX: usize = 200_000;

type HmacSha256 = Hmac<Sha256>;

/// Hashes credentials under the node's credential key.
pub struct CredentialKey {
    mac: HmacSha256,
    fingerprint: String,
}

impl CredentialKey {
    pub fn new(key: &[u8; 32]) -> CredentialKey {
        let mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
        let mut fp = mac.clone();
        fp.update(b"throng voting credential key fingerprint");
        let fingerprint = hex(&fp.finalize().into_bytes()[..8]);
        CredentialKey { mac, fingerprint }
    }

    /// Stored beside the data, so a node with another key refuses to start.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The stored hash of `credential` (normalised) for voter `voter` of
    /// `election`.
    pub fn hash(
        &self,
        election: i64,
        voter: i64,
        credential: &[u8],
    ) -> [u8; CREDENTIAL_HASH_BYTES] {
        let mut m = self.mac.clone();
        m.update(&election.to_be_bytes());
        m.update(&voter.to_be_bytes());
        m.update(credential);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; CREDENTIAL_HASH_BYTES];
        out.copy_from_slice(&full[..CREDENTIAL_HASH_BYTES]);
        out
    }

    /// Whether `credential` (as typed) is voter `voter`'s, in constant time.
    pub fn verify(&self, election: i64, voter: i64, typed: &str, stored: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        let Some(c) = normalise(typed) else {
            return false;
        };
        let h = self.hash(election, voter, &c);
        stored.len() == CREDENTIAL_HASH_BYTES && bool::from(h.ct_eq(stored))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A credential as typed, without dashes or spaces, upper-cased; `None`
/// unless it is [`CREDENTIAL_CHARS`] characters of the alphabet.
pub fn normalise(typed: &str) -> Option<[u8; CREDENTIAL_CHARS]> {
    let mut out = [0u8; CREDENTIAL_CHARS];
    let mut n = 0;
    for b in typed.bytes() {
        if b == b'-' || b == b' ' {
            continue;
        }
        let b = b.to_ascii_uppercase();
        if !ALPHABET.contains(&b) || n == CREDENTIAL_CHARS {
            return None;
        }
        out[n] = b;
        n += 1;
    }
    (n == CREDENTIAL_CHARS).then_some(out)
}

/// Derives an import's credentials from its random seed.
pub struct CredentialSource {
    mac: HmacSha256,
}

impl CredentialSource {
    /// A fresh random seed.
    pub fn random() -> CredentialSource {
        let seed: [u8; 32] = rand::random();
        CredentialSource {
            mac: HmacSha256::new_from_slice(&seed).expect("HMAC takes any key length"),
        }
    }

    /// The credential of the roll's `n`th voter (normalised form).
    pub fn credential(&self, n: u64) -> [u8; CREDENTIAL_CHARS] {
        let mut m = self.mac.clone();
        m.update(&n.to_be_bytes());
        let bytes = m.finalize().into_bytes();
        let mut bits = u128::from_be_bytes(bytes[..16].try_into().expect("16 bytes"));
        let mut out = [0u8; CREDENTIAL_CHARS];
        for c in out.iter_mut() {
            *c = ALPHABET[(bits & 31) as usize];
            bits >>= 5;
        }
        out
    }
}

/// A credential as printed: groups of 4, 4 and 5.
pub fn printed(c: &[u8; CREDENTIAL_CHARS]) -> String {
    let s = std::str::from_utf8(c).expect("alphabet is ASCII");
    format!("{}-{}-{}", &s[..4], &s[4..8], &s[8..])
}

/// Attempts per key in fixed windows, in a bounded table.
pub struct AttemptLimiter {
    per_window: u32,
    table: Mutex<HashMap<String, (i64, u32)>>,
}

impl AttemptLimiter {
    pub fn new(per_window: u32) -> AttemptLimiter {
        AttemptLimiter {
            per_window,
            table: Mutex::default(),
        }
    }

    /// Counts an attempt by `key` at `now_ms`: `Ok` if allowed, else the
    /// seconds until its window ends.
    pub fn attempt(&self, key: &str, now_ms: i64) -> Result<(), u64> {
        let mut t = self.table.lock().expect("not poisoned");
        if !t.contains_key(key) && t.len() >= LOGIN_LIMITER_KEYS_MAX {
            t.retain(|_, (start, _)| now_ms - *start < LOGIN_WINDOW_MS);
            if t.len() >= LOGIN_LIMITER_KEYS_MAX {
                return Err((LOGIN_WINDOW_MS / 1000) as u64);
            }
        }
        let entry = t.entry(key.to_string()).or_insert((now_ms, 0));
        if now_ms - entry.0 >= LOGIN_WINDOW_MS {
            *entry = (now_ms, 0);
        }
        if entry.1 >= self.per_window {
            let left = LOGIN_WINDOW_MS - (now_ms - entry.0);
            return Err(((left + 999) / 1000).max(1) as u64);
        }
        entry.1 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_unambiguous_and_round_trip() {
        let src = CredentialSource::random();
        let key = CredentialKey::new(&[7u8; 32]);
        for n in 0..200 {
            let c = src.credential(n);
            let p = printed(&c);
            assert!(!p.contains(['0', 'O', '1', 'l', 'I']), "{p}");
            assert_eq!(normalise(&p.to_lowercase()), Some(c));
            let h = key.hash(3, n as i64 + 1, &c);
            assert!(key.verify(3, n as i64 + 1, &p, &h));
            assert!(!key.verify(3, n as i64 + 2, &p, &h));
            assert!(!key.verify(4, n as i64 + 1, &p, &h));
        }
        assert_ne!(src.credential(1), src.credential(2));
        assert!(normalise("ABCD-EFGH-JKLM").is_none());
        assert!(normalise("ABCD-EFGH-JKLMN2").is_none());
        assert!(normalise("ABCD-EFGH-JKLM0").is_none());
    }

    #[test]
    fn the_limiter_counts_in_windows() {
        let l = AttemptLimiter::new(5);
        for _ in 0..5 {
            assert!(l.attempt("a", 1000).is_ok());
        }
        assert_eq!(l.attempt("a", 1000), Err(60));
        assert!(l.attempt("b", 1000).is_ok());
        assert!(l.attempt("a", 1000 + LOGIN_WINDOW_MS).is_ok());
    }
}
