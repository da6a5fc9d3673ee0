//! Receipt ids: what a voter gets for a cast ballot, and the ballot's id.
//!
//! 16 bytes, printed as a UUID: the district's index in its election (2
//! bytes, big-endian), 6 random bytes, and 8 bytes of HMAC-SHA256 over the
//! election id and those 8 bytes, keyed by a secret the nodes share
//! (`meta.voting_receipt_key`, made once per store). A receipt is checked by
//! its MAC, so a published ballot needs no index by id: on SQLite the
//! published ballots and the marks are appended (no random page written per
//! ballot), and a receipt is found either in the small box (not counted
//! yet) or, MAC-valid and gone from the box, in a published round.
//!
//! The random part is 48 bits per district: two ballots of one district in
//! one election share it with a chance of ~n²/2^49 (5e-6 for 50,000 voters);
//! they would then share a receipt, never a count (ballots are rows, not
//! keys).

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::store::{Store, StoreError};

const META_KEY: &str = "voting_receipt_key";

#[derive(Clone)]
pub struct ReceiptKey([u8; 32]);

impl ReceiptKey {
    /// The store's key, made on first use (every node reads the same one).
    pub async fn load_or_create(store: &Store) -> Result<ReceiptKey, StoreError> {
        let mut fresh = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut fresh);
        let stored = store.meta_set_once(META_KEY, &hex::encode(fresh)).await?;
        let bytes = hex::decode(stored.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| StoreError::Internal(format!("meta.{META_KEY} is not 32 hex bytes")))?;
        Ok(ReceiptKey(bytes))
    }

    #[cfg(test)]
    pub fn for_tests(bytes: [u8; 32]) -> ReceiptKey {
        ReceiptKey(bytes)
    }

    fn mac(&self, election_id: i64, head: &[u8; 8]) -> [u8; 8] {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(&election_id.to_be_bytes());
        m.update(head);
        let tag = m.finalize().into_bytes();
        tag[..8].try_into().expect("a SHA-256 tag has 32 bytes")
    }

    /// A new receipt (= ballot id) for a ballot of the district at
    /// `district_index` in the election's list.
    pub fn mint(&self, election_id: i64, district_index: u16) -> [u8; 16] {
        let mut head = [0u8; 8];
        head[..2].copy_from_slice(&district_index.to_be_bytes());
        rand::thread_rng().fill_bytes(&mut head[2..]);
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&head);
        id[8..].copy_from_slice(&self.mac(election_id, &head));
        id
    }

    /// The district index of a receipt this store minted for `election_id`;
    /// `None` for any other 16 bytes.
    pub fn verify(&self, election_id: i64, id: &[u8; 16]) -> Option<u16> {
        let head: [u8; 8] = id[..8].try_into().expect("16 bytes");
        let want = self.mac(election_id, &head);
        // Constant time: a receipt's MAC is a secret until it is right.
        use subtle::ConstantTimeEq;
        if bool::from(want.ct_eq(&id[8..])) {
            Some(u16::from_be_bytes([id[0], id[1]]))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_receipt_verifies_and_names_its_district() {
        let k = ReceiptKey::for_tests([7; 32]);
        let id = k.mint(1, 42);
        assert_eq!(k.verify(1, &id), Some(42));
        assert_eq!(k.verify(2, &id), None, "another election");
        assert_eq!(
            ReceiptKey::for_tests([8; 32]).verify(1, &id),
            None,
            "another key"
        );
        for i in 0..16 {
            let mut bent = id;
            bent[i] ^= 1;
            assert_eq!(k.verify(1, &bent), None, "byte {i} altered");
        }
        assert_ne!(k.mint(1, 42), id, "random");
    }
}
