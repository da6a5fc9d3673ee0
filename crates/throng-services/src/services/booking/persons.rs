//! The set of active registrations' person keys (see `availability.rs`), in
//! about 8.5 bytes per key.
//!
//! Why not a hash set: a hash table of `u64` takes 9 bytes per bucket at
//! 44-88% load, and when it doubles the old and new tables live at once. In
//! `throng bench booking` (~1 million registrations) that table was ~28 MiB
//! of the server's 94 MiB peak; at 5,000,000 registrations its last doubling
//! would hold ~108 MiB. Here the keys are uniform (HMAC prefixes), so
//! their top bits spread them evenly over `SHARDS` small sorted vectors: a
//! lookup is a binary search in one of them, an insert or a removal moves
//! the shard's tail (~5 KB at 5,000,000 keys), and a shard grows by an
//! eighth of its length, so no step copies more than one shard.

/// Shards, by the key's top `SHARD_BITS` bits.
const SHARD_BITS: u32 = 12;
const SHARDS: usize = 1 << SHARD_BITS;
/// A shard's capacity grows by at least this many keys.
const SHARD_GROWTH_MIN: usize = 16;

pub struct PersonSet {
    shards: Vec<Vec<u64>>,
}

impl Default for PersonSet {
    fn default() -> Self {
        PersonSet {
            shards: (0..SHARDS).map(|_| Vec::new()).collect(),
        }
    }
}

impl PersonSet {
    fn shard(key: u64) -> usize {
        (key >> (64 - SHARD_BITS)) as usize
    }

    /// Adds `key`; `false` if it was there already.
    pub fn insert(&mut self, key: u64) -> bool {
        let shard = &mut self.shards[Self::shard(key)];
        match shard.binary_search(&key) {
            Ok(_) => false,
            Err(at) => {
                if shard.len() == shard.capacity() {
                    shard.reserve_exact((shard.len() / 8).max(SHARD_GROWTH_MIN));
                }
                shard.insert(at, key);
                true
            }
        }
    }

    /// Removes `key`; `false` if it was not there.
    pub fn remove(&mut self, key: u64) -> bool {
        let shard = &mut self.shards[Self::shard(key)];
        match shard.binary_search(&key) {
            Ok(at) => {
                shard.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    #[cfg(test)]
    pub fn contains(&self, key: u64) -> bool {
        self.shards[Self::shard(key)].binary_search(&key).is_ok()
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
                .map(|s| s.capacity() * std::mem::size_of::<u64>())
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

    /// The same answers as a hash set over random inserts, repeats and
    /// removals, including keys at the shards' edges.
    #[test]
    fn answers_as_a_hash_set_does() {
        let mut ours = PersonSet::default();
        let mut reference = HashSet::new();
        let mut pool: Vec<u64> = keys(0x9E37_79B9_7F4A_7C15).take(20_000).collect();
        pool.extend([0, 1, u64::MAX, u64::MAX - 1, 1 << 52, (1 << 52) - 1]);
        let mut pick = keys(7);
        for step in 0..200_000 {
            let key = pool[(pick.next().unwrap() % pool.len() as u64) as usize];
            match step % 3 {
                0 | 1 => assert_eq!(ours.insert(key), reference.insert(key), "insert {key}"),
                _ => assert_eq!(ours.remove(key), reference.remove(&key), "remove {key}"),
            }
            assert_eq!(ours.len(), reference.len());
        }
        for key in &pool {
            assert_eq!(ours.contains(*key), reference.contains(key), "{key}");
        }
    }

    /// A million keys take under 10 bytes each, where a hash set of `u64`
    /// takes 9 per bucket at up to 88% load (and twice that while it grows).
    #[test]
    fn a_million_keys_take_under_ten_bytes_each() {
        let mut set = PersonSet::default();
        for key in keys(0x2545_F491_4F6C_DD1D).take(1_000_000) {
            set.insert(key);
        }
        assert_eq!(set.len(), 1_000_000);
        let per_key = set.heap_bytes() as f64 / set.len() as f64;
        assert!(per_key < 10.0, "{per_key:.2} bytes per key");
    }
}
