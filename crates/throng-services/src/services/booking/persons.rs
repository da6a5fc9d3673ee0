//! The set of active registrations' person keys (see `availability.rs`), in
//! about 6.5 bytes per key.
//!
//! Why not a hash set: a hash table of `u64` takes 9 bytes per bucket at
//! 44-88% load, and when it doubles the old and new tables live at once. In
//! `throng bench booking` (~1 million registrations) that table was ~28 MiB
//! of the server's 94 MiB peak; at 5,000,000 registrations its last doubling
//! would hold ~108 MiB. Here the keys are uniform (HMAC prefixes), so
//! their top bits spread them evenly over `SHARDS` small sorted vectors: a
//! lookup is a binary search in one of them, an insert or a removal moves
//! the shard's tail (~4 KB at 5,000,000 keys), and a shard grows by an
//! eighth of its length, so no step copies more than one shard.
//!
//! A key is its top `KEPT_BITS` bits: the shard's `SHARD_BITS` are implied
//! by the shard it is in and the next 48 are stored, 6 bytes instead of 8
//! (the set is the booking server's largest structure that grows with the
//! registrations). Two people are taken for one only if their keys agree
//! in those 60 bits: among 5,000,000 active registrations, a chance of
//! about 1 in 90,000 that it happens once (n^2 / 2^61).

/// Shards, by the key's top `SHARD_BITS` bits.
const SHARD_BITS: u32 = 12;
const SHARDS: usize = 1 << SHARD_BITS;
/// The bits of a key that tell two people apart: the shard's and the 48
/// stored.
const KEPT_BITS: u32 = SHARD_BITS + 48;
/// A shard's capacity grows by at least this many keys.
const SHARD_GROWTH_MIN: usize = 16;

/// A key's 48 bits after the shard's, big-endian (their order as bytes is
/// their order as numbers).
type Stored = [u8; 6];

pub struct PersonSet {
    shards: Vec<Vec<Stored>>,
}

impl Default for PersonSet {
    fn default() -> Self {
        PersonSet {
            shards: (0..SHARDS).map(|_| Vec::new()).collect(),
        }
    }
}

impl PersonSet {
    /// The key's shard and what that shard stores of it.
    fn split(key: u64) -> (usize, Stored) {
        let shard = (key >> (64 - SHARD_BITS)) as usize;
        let kept = (key >> (64 - KEPT_BITS)).to_be_bytes();
        let mut stored = Stored::default();
        stored.copy_from_slice(&kept[8 - std::mem::size_of::<Stored>()..]);
        (shard, stored)
    }

    /// Adds `key`; `false` if it was there already.
    pub fn insert(&mut self, key: u64) -> bool {
        let (shard, stored) = Self::split(key);
        let shard = &mut self.shards[shard];
        match shard.binary_search(&stored) {
            Ok(_) => false,
            Err(at) => {
                if shard.len() == shard.capacity() {
                    shard.reserve_exact((shard.len() / 8).max(SHARD_GROWTH_MIN));
                }
                shard.insert(at, stored);
                true
            }
        }
    }

    /// Removes `key`; `false` if it was not there.
    pub fn remove(&mut self, key: u64) -> bool {
        let (shard, stored) = Self::split(key);
        let shard = &mut self.shards[shard];
        match shard.binary_search(&stored) {
            Ok(at) => {
                shard.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    #[cfg(test)]
    pub fn contains(&self, key: u64) -> bool {
        let (shard, stored) = Self::split(key);
        self.shards[shard].binary_search(&stored).is_ok()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards.iter().map(Vec::len).sum()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the keys' storage (capacity, not length).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.shards.capacity() * std::mem::size_of::<Vec<u64>>()
            + self
                .shards
                .iter()
                .map(|s| s.capacity() * std::mem::size_of::<Stored>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// xorshift: uniform keys, like HMAC prefixes.
    fn keys(seed: u64) -> impl Iterator<Item = u64> {
        let mut x = seed;
        std::iter::repeat_with(move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
    }

    /// A key as the set tells people apart: its top `KEPT_BITS` bits.
    fn person(key: u64) -> u64 {
        key >> (64 - KEPT_BITS)
    }

    /// The same answers as a hash set of the keys' top `KEPT_BITS` bits over
    /// random inserts, repeats and removals, including keys at the shards'
    /// edges and keys that differ only below those bits.
    #[test]
    fn answers_as_a_hash_set_does() {
        let mut ours = PersonSet::default();
        let mut reference = HashSet::new();
        let mut pool: Vec<u64> = keys(0x9E37_79B9_7F4A_7C15).take(20_000).collect();
        pool.extend([
            0,
            1,
            1 << 4,
            u64::MAX,
            u64::MAX - 1,
            u64::MAX - (1 << 4),
            1 << 52,
            (1 << 52) - 1,
            (1 << 52) - (1 << 4),
        ]);
        let mut pick = keys(7);
        for step in 0..200_000 {
            let key = pool[(pick.next().unwrap() % pool.len() as u64) as usize];
            match step % 3 {
                0 | 1 => assert_eq!(
                    ours.insert(key),
                    reference.insert(person(key)),
                    "insert {key}"
                ),
                _ => assert_eq!(
                    ours.remove(key),
                    reference.remove(&person(key)),
                    "remove {key}"
                ),
            }
            assert_eq!(ours.len(), reference.len());
        }
        for key in &pool {
            assert_eq!(
                ours.contains(*key),
                reference.contains(&person(*key)),
                "{key}"
            );
        }
    }

    /// Keys that agree in their top `KEPT_BITS` bits are one person; one
    /// bit above them apart, two.
    #[test]
    fn a_person_is_the_keys_top_sixty_bits() {
        let mut set = PersonSet::default();
        let key = 0xA5A5_5A5A_0F0F_F0F0u64;
        assert!(set.insert(key));
        assert!(
            !set.insert(key ^ 0b1111),
            "differs only below the kept bits"
        );
        assert!(set.insert(key ^ (1 << 4)));
        assert!(set.insert(key ^ (1 << 63)));
        assert_eq!(set.len(), 3);
    }

    /// A million keys take under 7.5 bytes each, where a hash set of `u64`
    /// takes 9 per bucket at up to 88% load (and twice that while it grows).
    #[test]
    fn a_million_keys_take_under_seven_and_a_half_bytes_each() {
        let mut set = PersonSet::default();
        for key in keys(0x2545_F491_4F6C_DD1D).take(1_000_000) {
            set.insert(key);
        }
        assert_eq!(set.len(), 1_000_000);
        let per_key = set.heap_bytes() as f64 / set.len() as f64;
        assert!(per_key < 7.5, "{per_key:.2} bytes per key");
    }
}
