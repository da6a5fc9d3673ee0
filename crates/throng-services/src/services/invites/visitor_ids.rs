//! Visitor ids minted from a counter under a 64-bit block cipher.
//!
//! A new visitor on the embedded store is visitor number `n` (1, 2, 3, ...,
//! handed out in blocks reserved durably in `meta`, see
//! `store::numbers::reserve`), and its id is `n`
//! encrypted: a 4-round Feistel network over 64 bits whose round function
//! is AES-128 (Luby-Rackoff: a pseudo-random permutation), cycle-walked
//! into 1..2^63 so the id is a positive 63-bit number. So:
//!
//! - ids look random and reveal neither how many visitors there are nor who
//!   came first (the key is the store's own, in `meta`, shared by every
//!   node on the store and by `throng seed`);
//! - two visitors never get the same id (a permutation of distinct numbers),
//!   where random 63-bit ids collided with a chance of ~2e-6 over 6M;
//! - the server turns an id back into its dense number and keeps every
//!   visitor's standing in one byte at that index (`index.rs`), so a known
//!   visitor's check reads memory instead of a 6M-row table.
//!
//! Ids made before (random) still work: their number is some large value
//! past the counter, and their checks read the table.

use aes_gcm::aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes_gcm::aes::Aes128;

use crate::store::{Store, StoreError};

/// The `meta` key holding the cipher's key (32 hex digits).
pub const KEY_META: &str = "invites_visitor_id_key";
/// The `meta` key holding the next visitor number not yet reserved.
pub const NEXT_META: &str = "invites_visitor_next";

const ROUNDS: u8 = 4;
const DOMAIN_MAX: u64 = i64::MAX as u64;

/// The permutation between visitor numbers and ids, both in 1..2^63.
#[derive(Clone)]
pub struct IdCipher {
    aes: Aes128,
}

impl IdCipher {
    pub fn new(key: [u8; 16]) -> IdCipher {
        IdCipher {
            aes: Aes128::new(&GenericArray::from(key)),
        }
    }

    /// The round function: 32 bits of AES over (round, half).
    fn f(&self, round: u8, half: u32) -> u32 {
        let mut block = GenericArray::from([0u8; 16]);
        block[0] = round;
        block[1..5].copy_from_slice(&half.to_be_bytes());
        self.aes.encrypt_block(&mut block);
        u32::from_be_bytes([block[0], block[1], block[2], block[3]])
    }

    fn permute(&self, x: u64) -> u64 {
        let (mut l, mut r) = ((x >> 32) as u32, x as u32);
        for round in 0..ROUNDS {
            (l, r) = (r, l ^ self.f(round, r));
        }
        ((l as u64) << 32) | r as u64
    }

    fn unpermute(&self, x: u64) -> u64 {
        let (mut l, mut r) = ((x >> 32) as u32, x as u32);
        for round in (0..ROUNDS).rev() {
            (l, r) = (r ^ self.f(round, l), l);
        }
        ((l as u64) << 32) | r as u64
    }

    /// The id of visitor number `n` (1..2^63). Cycle walking: the 64-bit
    /// permutation applied again until the value is in 1..2^63, which
    /// restricts it to a permutation of that range (about two rounds).
    pub fn id_of(&self, n: u64) -> i64 {
        debug_assert!((1..=DOMAIN_MAX).contains(&n));
        let mut x = self.permute(n);
        while !(1..=DOMAIN_MAX).contains(&x) {
            x = self.permute(x);
        }
        x as i64
    }

    /// The visitor number of an id (the inverse of [`IdCipher::id_of`]).
    pub fn number_of(&self, id: i64) -> u64 {
        debug_assert!(id >= 1);
        let mut x = self.unpermute(id as u64);
        while !(1..=DOMAIN_MAX).contains(&x) {
            x = self.unpermute(x);
        }
        x
    }
}

/// The store's cipher, its key made at first use (nodes racing to make it
/// agree on the first one stored).
pub async fn load_cipher(store: &Store) -> Result<IdCipher, StoreError> {
    let key = match store.meta_get(KEY_META).await? {
        Some(k) => k,
        None => {
            let fresh: [u8; 16] = rand::random();
            store.meta_set_once(KEY_META, &hex::encode(fresh)).await?
        }
    };
    let bytes = hex::decode(key.trim())
        .ok()
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
        .ok_or_else(|| StoreError::Internal(format!("meta {KEY_META}: not 32 hex digits")))?;
    Ok(IdCipher::new(bytes))
}

/// The next visitor number not yet reserved, from `meta`'s text (1 when
/// none was ever reserved).
pub fn parse_next(value: Option<String>) -> u64 {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1)
        .max(1)
}

/// The next visitor number not yet reserved on `store`.
pub async fn reserved_end(store: &Store) -> Result<u64, StoreError> {
    Ok(parse_next(store.meta_get(NEXT_META).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_ids_map_one_to_one_within_63_bits() {
        let c = IdCipher::new([7; 16]);
        let mut seen = std::collections::HashSet::new();
        for n in (1..=20_000u64).chain([DOMAIN_MAX - 1, DOMAIN_MAX, 1 << 40]) {
            let id = c.id_of(n);
            assert!(id >= 1, "id {id} of {n}");
            assert!(seen.insert(id), "two numbers gave id {id}");
            assert_eq!(c.number_of(id), n);
        }
    }

    #[test]
    fn ids_look_random_and_depend_on_the_key() {
        let (a, b) = (IdCipher::new([1; 16]), IdCipher::new([2; 16]));
        assert_ne!(a.id_of(1), b.id_of(1));
        // Consecutive numbers give ids spread over the whole range.
        let high = (1..=1000u64).filter(|&n| a.id_of(n) > (1 << 62)).count();
        assert!(
            (400..600).contains(&high),
            "{high} of 1000 in the upper half"
        );
        // Any id decrypts to some number (old random ids included).
        for id in [1i64, 42, i64::MAX, 0x1234_5678_9abc_def0] {
            assert_eq!(a.id_of(a.number_of(id)), id);
        }
    }
}
