//! Personal data at rest: AES-256-GCM with a random 96-bit nonce per record
//! and the record id as associated data, so a sealed blob copied onto another
//! record does not open. Sealed layout: nonce (12 bytes) || ciphertext+tag.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use rand::RngCore;
use sha2::{Digest, Sha256};

const NONCE_BYTES: usize = 12;

pub struct PiiCipher {
    cipher: Aes256Gcm,
    fingerprint: String,
}

impl PiiCipher {
    pub fn new(key: &[u8; 32]) -> PiiCipher {
        let mut h = Sha256::new();
        h.update(b"throng pii key fingerprint v1");
        h.update(key);
        PiiCipher {
            cipher: Aes256Gcm::new_from_slice(key).expect("32-byte key"),
            fingerprint: hex::encode(&h.finalize()[..16]),
        }
    }

    /// A one-way fingerprint of the key, stored in the database so that a
    /// node started with the wrong key refuses to start instead of writing
    /// records nobody can read.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn seal(&self, record_id: &str, plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::thread_rng().fill_bytes(&mut nonce);
        let ct = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: record_id.as_bytes(),
                },
            )
            .expect("AES-GCM encryption does not fail for in-memory buffers");
        let mut out = Vec::with_capacity(NONCE_BYTES + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        out
    }

    /// `None` when the blob was tampered with, moved, or sealed by another key.
    pub fn open(&self, record_id: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_BYTES + 16 {
            return None;
        }
        let (nonce, ct) = sealed.split_at(NONCE_BYTES);
        self.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: record_id.as_bytes(),
                },
            )
            .ok()
    }
}

/// A keyed blind index: HMAC-SHA256 of a value (a national id) under its
/// own key, so a value can be looked up without storing it, and without a
/// plain hash that anyone could compute for every plausible id (national
/// ids are few and structured: an unkeyed hash is reversed by trying them).
/// Its key is not the PII key: the index can be rebuilt or rotated apart.
pub struct BlindIndex {
    key: [u8; 32],
    fingerprint: String,
}

impl BlindIndex {
    pub fn new(key: &[u8; 32]) -> BlindIndex {
        let mut h = Sha256::new();
        h.update(b"throng blind index key fingerprint v1");
        h.update(key);
        BlindIndex {
            key: *key,
            fingerprint: hex::encode(&h.finalize()[..16]),
        }
    }

    /// Stored in `meta`: nodes with different keys would not see each
    /// other's entries, so a node with another key refuses to start.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The index entry of `value` within `scope` (e.g. a rule and a day):
    /// HMAC(key, len(scope) || scope || value).
    pub fn of(&self, scope: &[u8], value: &[u8]) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut m =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(&(scope.len() as u32).to_be_bytes());
        m.update(scope);
        m.update(value);
        m.finalize().into_bytes().into()
    }
}

/// SHA-256 of a secret code (access codes are random 128-bit, so a plain hash
/// is enough; no password stretching needed).
pub fn hash_code(code: &str) -> Vec<u8> {
    Sha256::digest(code.as_bytes()).to_vec()
}

/// Constant-time comparison of a presented code against its stored hash.
pub fn code_matches(code: &str, stored_hash: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    hash_code(code).ct_eq(stored_hash).into()
}

/// Letters for codes people read aloud or type from paper: digits 2-9 and
/// capital letters but I and O (32), so no 0/O, 1/I/l to confuse.
pub const READABLE_ALPHABET: &[u8; 32] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZ";

/// `chars` random letters of [`READABLE_ALPHABET`] (5 bits each).
pub fn readable_code(chars: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..chars)
        .map(|_| READABLE_ALPHABET[(rng.next_u32() & 31) as usize] as char)
        .collect()
}

/// A random URL-safe token of `bytes` random bytes.
pub fn random_token(bytes: usize) -> String {
    use base64::Engine;
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_data_opens_only_for_its_record() {
        let c = PiiCipher::new(&[7u8; 32]);
        let sealed = c.seal("r1", b"+421900123456");
        assert!(!sealed.windows(13).any(|w| w == b"+421900123456"));
        assert_eq!(c.open("r1", &sealed).unwrap(), b"+421900123456");
        assert!(c.open("r2", &sealed).is_none());
        assert!(PiiCipher::new(&[8u8; 32]).open("r1", &sealed).is_none());
    }

    #[test]
    fn blind_index_entries_depend_on_key_scope_and_value() {
        let b = BlindIndex::new(&[7u8; 32]);
        let e = b.of(b"person", b"9001010001");
        assert_eq!(e, b.of(b"person", b"9001010001"));
        assert_ne!(e, b.of(b"person", b"9001010002"));
        assert_ne!(e, b.of(b"day:1", b"9001010001"));
        assert_ne!(e, BlindIndex::new(&[8u8; 32]).of(b"person", b"9001010001"));
        assert_ne!(&e[..], &Sha256::digest(b"9001010001")[..]);
    }
}
