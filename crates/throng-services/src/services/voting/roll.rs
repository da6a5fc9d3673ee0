//! The in-memory roll of one election: each voter's district and whether
//! the voter voted, for voter ids in a dense range (the seed numbers voters
//! 1..=N). 5,000,000 voters cost 5 MB (a `u8` district slot per voter
//! while the election has fewer than 255 districts, `u16` past that: 10 MB)
//! plus 625 KB of voted bits.
//!
//! On SQLite (one process, one writer) the voted bit is the decision: the
//! writer test-and-sets it inside the transaction that records the vote and
//! clears it if that transaction fails, as booking's availability index
//! decides slots. On PostgreSQL the database's unique key decides; the bits
//! only remember answers this node already saw, so a repeated vote is
//! answered without a round trip.

use std::sync::atomic::{AtomicU64, Ordering};

/// Voter ids may span at most this many times the number of voters (plus
/// a margin) for the dense layout.
const SPAN_PER_VOTER_MAX: i64 = 4;
const SPAN_MARGIN: i64 = 1 << 20;

pub struct Roll {
    /// The smallest voter id.
    base: i64,
    /// Per voter id - base: 1 + the district's index in the election's
    /// district list, 0 for "not a voter".
    district_slot: Slots,
    voted: Vec<AtomicU64>,
}

/// The district slots, one byte each until a district index needs more
/// (then widened once, while the roll is built): the roll is most of the
/// voting service's resident memory, and elections have tens to hundreds
/// of districts.
enum Slots {
    Narrow(Vec<u8>),
    Wide(Vec<u16>),
}

impl Slots {
    fn len(&self) -> usize {
        match self {
            Slots::Narrow(v) => v.len(),
            Slots::Wide(v) => v.len(),
        }
    }

    #[inline]
    fn get(&self, i: usize) -> u16 {
        match self {
            Slots::Narrow(v) => v[i] as u16,
            Slots::Wide(v) => v[i],
        }
    }

    fn set(&mut self, i: usize, slot: u16) {
        match self {
            Slots::Narrow(v) => match u8::try_from(slot) {
                Ok(b) => v[i] = b,
                Err(_) => {
                    let mut wide: Vec<u16> = v.iter().map(|&b| b as u16).collect();
                    wide[i] = slot;
                    *self = Slots::Wide(wide);
                }
            },
            Slots::Wide(v) => v[i] = slot,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Slots::Narrow(v) => v.len(),
            Slots::Wide(v) => v.len() * 2,
        }
    }
}

/// Where a voter id stands on the roll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Unknown,
    /// On the roll, in the district at this index of the election's list.
    InDistrict(usize),
}

impl Roll {
    /// An empty roll for voter ids `lo..=hi` (`count` of them), filled
    /// with [`Roll::put`]. No voters: `lo > hi`.
    pub fn with_range(lo: i64, hi: i64, count: i64) -> anyhow::Result<Roll> {
        if lo > hi {
            return Ok(Roll {
                base: 1,
                district_slot: Slots::Narrow(Vec::new()),
                voted: Vec::new(),
            });
        }
        let span = hi
            .checked_sub(lo)
            .and_then(|s| s.checked_add(1))
            .unwrap_or(i64::MAX);
        if span
            > count
                .saturating_mul(SPAN_PER_VOTER_MAX)
                .saturating_add(SPAN_MARGIN)
        {
            anyhow::bail!(
                "voter ids {lo}..={hi} are too sparse for the in-memory roll ({count} voters)"
            );
        }
        let words = (span as usize).div_ceil(64);
        Ok(Roll {
            base: lo,
            district_slot: Slots::Narrow(vec![0u8; span as usize]),
            voted: (0..words).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Puts a voter in the district at `index` (ids outside the range are
    /// ignored).
    pub fn put(&mut self, voter_id: i64, index: u16) {
        if let Some(i) = self.index(voter_id) {
            self.district_slot.set(i, index.saturating_add(1));
        }
    }

    /// Builds the roll from (voter id, district index) pairs.
    pub fn build(voters: &[(i64, u16)]) -> anyhow::Result<Roll> {
        let lo = voters.iter().map(|v| v.0).min().unwrap_or(1);
        let hi = voters.iter().map(|v| v.0).max().unwrap_or(0);
        let mut roll = Roll::with_range(lo, hi, voters.len() as i64)?;
        for &(id, d) in voters {
            roll.put(id, d);
        }
        Ok(roll)
    }

    fn index(&self, voter_id: i64) -> Option<usize> {
        let i = voter_id.checked_sub(self.base)?;
        (0..self.district_slot.len() as i64)
            .contains(&i)
            .then_some(i as usize)
    }

    pub fn standing(&self, voter_id: i64) -> Standing {
        match self.index(voter_id).map(|i| self.district_slot.get(i)) {
            Some(slot) if slot > 0 => Standing::InDistrict(slot as usize - 1),
            _ => Standing::Unknown,
        }
    }

    pub fn has_voted(&self, voter_id: i64) -> bool {
        self.index(voter_id)
            .is_some_and(|i| self.voted[i / 64].load(Ordering::Acquire) & (1 << (i % 64)) != 0)
    }

    /// Sets the voter's bit; `true` if this call set it (the voter had not
    /// voted). Unknown voters are never set.
    pub fn test_and_set(&self, voter_id: i64) -> bool {
        let Some(i) = self.index(voter_id) else {
            return false;
        };
        let bit = 1u64 << (i % 64);
        self.voted[i / 64].fetch_or(bit, Ordering::AcqRel) & bit == 0
    }

    /// Clears the voter's bit (the vote that set it did not commit).
    pub fn clear(&self, voter_id: i64) {
        if let Some(i) = self.index(voter_id) {
            self.voted[i / 64].fetch_and(!(1u64 << (i % 64)), Ordering::AcqRel);
        }
    }

    /// Voter ids on the roll of the district at `index` who have not voted,
    /// scanning from `start` (wrapping), at most `max`.
    pub fn not_voted_in(&self, index: usize, start: u64, max: usize) -> Vec<i64> {
        let n = self.district_slot.len();
        if n == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let first = (start % n as u64) as usize;
        for k in 0..n {
            let i = (first + k) % n;
            let id = self.base + i as i64;
            if self.district_slot.get(i) as usize == index + 1 && !self.has_voted(id) {
                out.push(id);
                if out.len() >= max {
                    break;
                }
            }
        }
        out
    }

    pub fn voters(&self) -> usize {
        match &self.district_slot {
            Slots::Narrow(v) => v.iter().filter(|s| **s > 0).count(),
            Slots::Wide(v) => v.iter().filter(|s| **s > 0).count(),
        }
    }

    /// Voters per district index.
    pub fn counts(&self, districts: usize) -> Vec<i64> {
        let mut counts = vec![0i64; districts];
        let mut add = |s: usize| {
            if s > 0 && s <= districts {
                counts[s - 1] += 1;
            }
        };
        match &self.district_slot {
            Slots::Narrow(v) => v.iter().for_each(|s| add(*s as usize)),
            Slots::Wide(v) => v.iter().for_each(|s| add(*s as usize)),
        }
        counts
    }

    /// Bytes held (for the start-up log).
    pub fn bytes(&self) -> usize {
        self.district_slot.bytes() + self.voted.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_and_set_decides_once_and_clear_releases() {
        let roll = Roll::build(&[(10, 0), (11, 1), (200, 2)]).unwrap();
        assert_eq!(roll.standing(11), Standing::InDistrict(1));
        assert_eq!(roll.standing(12), Standing::Unknown);
        assert_eq!(roll.standing(9), Standing::Unknown);
        assert_eq!(roll.standing(i64::MIN), Standing::Unknown);
        assert_eq!(roll.standing(i64::MAX), Standing::Unknown);
        assert!(roll.test_and_set(200));
        assert!(!roll.test_and_set(200));
        assert!(roll.has_voted(200));
        roll.clear(200);
        assert!(!roll.has_voted(200));
        assert!(roll.test_and_set(200));
        assert!(!roll.test_and_set(5));
        assert_eq!(roll.not_voted_in(0, 0, 10), vec![10]);
        assert_eq!(roll.counts(3), vec![1, 1, 1]);
    }

    #[test]
    fn a_district_index_past_a_byte_widens_the_slots() {
        let mut roll = Roll::with_range(1, 4, 4).unwrap();
        roll.put(1, 3);
        roll.put(2, 254);
        assert_eq!(roll.bytes(), 4 + 8);
        roll.put(3, 255);
        roll.put(4, 1000);
        assert_eq!(roll.bytes(), 8 + 8);
        assert_eq!(roll.standing(1), Standing::InDistrict(3));
        assert_eq!(roll.standing(2), Standing::InDistrict(254));
        assert_eq!(roll.standing(3), Standing::InDistrict(255));
        assert_eq!(roll.standing(4), Standing::InDistrict(1000));
        roll.put(4, u16::MAX);
        assert_eq!(
            roll.standing(4),
            Standing::InDistrict(u16::MAX as usize - 1)
        );
        assert_eq!(roll.counts(1001)[1000], 0);
        assert_eq!(roll.not_voted_in(255, 0, 10), vec![3]);
        assert_eq!(roll.voters(), 4);
    }

    #[test]
    fn sparse_ids_are_refused() {
        assert!(Roll::build(&[(1, 0), (1 << 40, 0)]).is_err());
    }
}
