//! Receipts: what a voter gets for a cast ballot, and the seal of the box.
//!
//! A receipt is 16 bytes printed as a UUID: 8 random bytes and 8 bytes of
//! HMAC-SHA256 over the election id and those random bytes, so the server
//! recognises a receipt it minted without storing it. What it stores, while
//! the ballot waits, is the receipt's tag (HMAC-SHA256 over the election id
//! and the whole receipt, first 16 bytes), as the key of the ballot's box
//! row. Both MACs are keyed by a secret kept outside the database
//! (`voting-receipt.key` in the data directory, or
//! `THRONG_VOTING_RECEIPT_KEY`; nodes sharing a store share it). A round
//! deletes the box row and publishes the ballot without the tag; a receipt
//! the server minted whose tag is no longer in the box was published (the
//! box loses a ballot only in the round that publishes it). So a receipt
//! answers "received" or "counted" and nothing more, and a copy of the
//! database, the event log or the log cannot turn a receipt into a choice.
//!
//! Receipts of 16 random bytes without the check (a database upgraded from
//! that format) have their tags in `voting_receipts_counted` once published;
//! only the upgrade (migration 0031, `VotingStore::adopt_legacy`) writes that
//! table, with the tags of the ballots waiting in the box.
//!
//! The box row's choice is sealed (AES-256-GCM, a key derived from the same
//! secret, the row's election, district and tag as associated data): a
//! database copy or a WAL frame taken while ballots wait shows which rows
//! exist, not what they hold.

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::platform::crypto::PiiCipher;

/// Bytes of a receipt and of its stored tag.
pub const RECEIPT_BYTES: usize = 16;
/// Random bytes leading a receipt; the rest is their check.
const RECEIPT_RANDOM_BYTES: usize = 8;

pub struct ReceiptKey {
    mint_key: [u8; 32],
    tag_key: [u8; 32],
    seal: PiiCipher,
    fingerprint: String,
}

fn derive(secret: &[u8; 32], purpose: &[u8]) -> [u8; 32] {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(purpose);
    m.finalize().into_bytes().into()
}

impl ReceiptKey {
    pub fn new(secret: &[u8; 32]) -> ReceiptKey {
        let mut h = Sha256::new();
        h.update(b"throng voting receipt key fingerprint v1");
        h.update(secret);
        ReceiptKey {
            mint_key: derive(secret, b"throng voting receipt check v1"),
            tag_key: derive(secret, b"throng voting receipt tag v1"),
            seal: PiiCipher::new(&derive(secret, b"throng voting ballot box seal v1")),
            fingerprint: hex::encode(&h.finalize()[..16]),
        }
    }

    /// A one-way fingerprint of the key, kept in `meta` so that a node
    /// started with another key refuses to start (its receipts would be
    /// unknown and the box unreadable).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn check_mac(&self, election_id: i64, random: &[u8]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.mint_key).expect("any key length");
        m.update(&election_id.to_be_bytes());
        m.update(random);
        m
    }

    /// A new receipt for a ballot of `election_id`: random bytes and their
    /// check.
    pub fn mint(&self, election_id: i64) -> [u8; RECEIPT_BYTES] {
        let mut r = [0u8; RECEIPT_BYTES];
        rand::thread_rng().fill_bytes(&mut r[..RECEIPT_RANDOM_BYTES]);
        let check = self
            .check_mac(election_id, &r[..RECEIPT_RANDOM_BYTES])
            .finalize()
            .into_bytes();
        r[RECEIPT_RANDOM_BYTES..].copy_from_slice(&check[..RECEIPT_BYTES - RECEIPT_RANDOM_BYTES]);
        r
    }

    /// Whether this key minted `receipt` for `election_id` (compared in
    /// constant time).
    pub fn minted(&self, election_id: i64, receipt: &[u8; RECEIPT_BYTES]) -> bool {
        self.check_mac(election_id, &receipt[..RECEIPT_RANDOM_BYTES])
            .verify_truncated_left(&receipt[RECEIPT_RANDOM_BYTES..])
            .is_ok()
    }

    /// What is stored for a receipt of `election_id`.
    pub fn tag(&self, election_id: i64, receipt: &[u8; RECEIPT_BYTES]) -> [u8; RECEIPT_BYTES] {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.tag_key).expect("any key length");
        m.update(&election_id.to_be_bytes());
        m.update(receipt);
        let t = m.finalize().into_bytes();
        t[..RECEIPT_BYTES]
            .try_into()
            .expect("a SHA-256 tag has 32 bytes")
    }

    fn row(election_id: i64, district_id: i64, tag: &[u8]) -> String {
        format!(
            "voting box {election_id} {district_id} {}",
            hex::encode(tag)
        )
    }

    /// Seals a ballot's choice for its box row.
    pub fn seal(&self, election_id: i64, district_id: i64, tag: &[u8], choice: &[u8]) -> Vec<u8> {
        self.seal
            .seal(&Self::row(election_id, district_id, tag), choice)
    }

    /// Opens a box row's choice; `None` when the row was sealed by another
    /// key, altered or moved.
    pub fn open(
        &self,
        election_id: i64,
        district_id: i64,
        tag: &[u8],
        sealed: &[u8],
    ) -> Option<Vec<u8>> {
        self.seal
            .open(&Self::row(election_id, district_id, tag), sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_depend_on_key_election_and_receipt() {
        let k = ReceiptKey::new(&[7; 32]);
        let r = k.mint(1);
        assert_eq!(k.tag(1, &r), k.tag(1, &r));
        assert_ne!(k.tag(1, &r), k.tag(2, &r), "another election");
        assert_ne!(
            k.tag(1, &r),
            ReceiptKey::new(&[8; 32]).tag(1, &r),
            "another key"
        );
        assert_ne!(&k.tag(1, &r)[..], &r[..], "not the receipt");
        assert_ne!(k.mint(1), r, "random");
    }

    #[test]
    fn a_receipt_is_recognised_only_by_its_key_in_its_election() {
        let k = ReceiptKey::new(&[7; 32]);
        let r = k.mint(1);
        assert!(k.minted(1, &r));
        assert!(!k.minted(2, &r), "another election");
        assert!(!ReceiptKey::new(&[8; 32]).minted(1, &r), "another key");
        for i in 0..RECEIPT_BYTES {
            let mut forged = r;
            forged[i] ^= 1;
            assert!(!k.minted(1, &forged), "byte {i} altered");
        }
        assert!(!k.minted(1, &[0; RECEIPT_BYTES]));
    }

    #[test]
    fn a_sealed_choice_opens_only_in_its_row_with_its_key() {
        let k = ReceiptKey::new(&[7; 32]);
        let tag = k.tag(1, &k.mint(1));
        let sealed = k.seal(1, 3, &tag, b"2|[5,6]");
        assert!(!sealed.windows(7).any(|w| w == b"2|[5,6]"));
        assert_eq!(
            k.open(1, 3, &tag, &sealed).as_deref(),
            Some(&b"2|[5,6]"[..])
        );
        assert_eq!(k.open(1, 4, &tag, &sealed), None, "another district");
        assert_eq!(ReceiptKey::new(&[8; 32]).open(1, 3, &tag, &sealed), None);
    }
}
