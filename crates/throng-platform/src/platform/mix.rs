//! Deterministic pseudo-random draws per sequence number (splitmix64): seeds
//! and load streams pick without a shared RNG and without locks, and the same
//! number always draws the same value.

/// The `seq`-th value of the stream named by `salt`.
pub fn mix64(seq: u64, salt: u64) -> u64 {
    let mut z = seq.wrapping_add(salt).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A number in `lo..=hi` drawn from `mix64(seq, salt)`.
pub fn pick(seq: u64, salt: u64, lo: i64, hi: i64) -> i64 {
    lo + (mix64(seq, salt) % ((hi - lo + 1) as u64)) as i64
}
