//! Ballots sealed ahead of each run. A vote page seals its ballot in the
//! voter's browser; in `throng bench voting` the load generator plays those
//! browsers on the server's own two cores, and sealing on the spot (HPKE,
//! ~60-90 us of CPU a ballot) would measure the generator as much as the
//! server. So before each run the votes it may send are sealed, on every
//! core, while the server idles (as the write-up's load test reads its
//! ballots from a prepared CSV); the run then only copies them into
//! requests. A vote beyond what was sealed ahead (the run went faster than
//! planned for) is sealed on the spot and counted, and the bench's notes say
//! how many.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::Instant;

use crate::services::voting::ballot::SEALED_BYTES;

/// One sealed ballot.
pub type Sealed = [u8; SEALED_BYTES];

/// The ballots of votes `first..` (the bench's vote numbers, in the order
/// the shared counter hands them out), sealed ahead.
#[derive(Default)]
pub struct SealedAhead {
    window: RwLock<Window>,
    sealed_ahead: AtomicU64,
    sealed_live: AtomicU64,
    sealing_ms: AtomicU64,
}

#[derive(Default)]
struct Window {
    /// The vote number of the first ballot in `bytes`.
    first: u64,
    /// [`SEALED_BYTES`] per ballot, in vote-number order.
    bytes: Vec<u8>,
}

impl Window {
    fn end(&self) -> u64 {
        self.first + (self.bytes.len() / SEALED_BYTES) as u64
    }
}

/// What sealing ahead did over the bench, for its notes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SealingSummary {
    pub sealed_ahead: u64,
    pub sealed_live: u64,
    pub sealing_s: f64,
}

impl SealedAhead {
    /// The ballot of vote `i`, or `seal(i)` (counted as sealed on the spot)
    /// when it was not sealed ahead.
    pub fn take(&self, i: u64, seal: impl FnOnce(u64) -> Sealed) -> Sealed {
        {
            let w = self.window.read().unwrap_or_else(|e| e.into_inner());
            if let Some(k) = i.checked_sub(w.first) {
                let at = k as usize * SEALED_BYTES;
                if let Some(b) = w.bytes.get(at..at + SEALED_BYTES) {
                    return b.try_into().expect("a slice of SEALED_BYTES");
                }
            }
        }
        self.sealed_live.fetch_add(1, Ordering::Relaxed);
        seal(i)
    }

    /// Forgets the ballots of votes before `next` (sent already) and seals
    /// those of votes up to `until` (exclusive) that are not sealed yet,
    /// split over `threads` threads. Call it between runs, not during one.
    pub fn extend(
        &self,
        next: u64,
        until: u64,
        threads: usize,
        seal: impl Fn(u64) -> Sealed + Sync,
    ) {
        let started = Instant::now();
        let mut w = self.window.write().unwrap_or_else(|e| e.into_inner());
        if next > w.first {
            let sent = ((next - w.first) as usize * SEALED_BYTES).min(w.bytes.len());
            w.bytes.drain(..sent);
            w.first = next;
        }
        let from = w.end();
        if until <= from {
            return;
        }
        let n = until - from;
        let threads = (threads.max(1) as u64).min(n);
        let chunk = n.div_ceil(threads);
        let parts: Vec<Vec<u8>> = std::thread::scope(|s| {
            let seal = &seal;
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let lo = from + t * chunk;
                    let hi = (lo + chunk).min(until);
                    s.spawn(move || {
                        let mut out = Vec::with_capacity((hi - lo) as usize * SEALED_BYTES);
                        for i in lo..hi {
                            out.extend_from_slice(&seal(i));
                        }
                        out
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|h| h.join().expect("a sealing thread"))
                .collect()
        });
        for part in parts {
            w.bytes.extend_from_slice(&part);
        }
        self.sealed_ahead.fetch_add(n, Ordering::Relaxed);
        self.sealing_ms
            .fetch_add(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    pub fn summary(&self) -> SealingSummary {
        SealingSummary {
            sealed_ahead: self.sealed_ahead.load(Ordering::Relaxed),
            sealed_live: self.sealed_live.load(Ordering::Relaxed),
            sealing_s: self.sealing_ms.load(Ordering::Relaxed) as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in ballot that names its vote number.
    fn fake(i: u64) -> Sealed {
        let mut b = [0u8; SEALED_BYTES];
        b[..8].copy_from_slice(&i.to_be_bytes());
        b
    }

    fn number(b: &Sealed) -> u64 {
        u64::from_be_bytes(b[..8].try_into().unwrap())
    }

    #[test]
    fn each_vote_gets_its_own_ballot_sealed_ahead_then_sealed_on_the_spot() {
        let pool = SealedAhead::default();
        pool.extend(0, 1000, 3, fake);
        for i in 0..1000 {
            assert_eq!(number(&pool.take(i, |_| panic!("{i} was sealed ahead"))), i);
        }
        assert_eq!(number(&pool.take(1000, fake)), 1000);
        assert_eq!(
            pool.summary(),
            SealingSummary {
                sealed_ahead: 1000,
                sealed_live: 1,
                sealing_s: pool.summary().sealing_s
            }
        );
    }

    #[test]
    fn extending_forgets_what_was_sent_and_keeps_what_was_not() {
        let pool = SealedAhead::default();
        pool.extend(0, 100, 2, fake);
        // Votes 0..40 were sent; the next run may send up to 150 more.
        pool.extend(40, 190, 2, fake);
        assert_eq!(
            pool.summary().sealed_ahead,
            190,
            "0..100 kept, 100..190 added"
        );
        for i in 40..190 {
            assert_eq!(number(&pool.take(i, |_| panic!("{i}"))), i);
        }
        assert_eq!(number(&pool.take(39, fake)), 39, "a sent vote is not kept");
        assert_eq!(pool.summary().sealed_live, 1);
        // Everything sent and more: nothing kept, sealing starts at `next`.
        pool.extend(500, 510, 4, fake);
        assert_eq!(number(&pool.take(505, |_| panic!())), 505);
        assert_eq!(pool.summary().sealed_ahead, 200);
    }
}
