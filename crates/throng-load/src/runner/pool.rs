//! Closed-model phases (`vusers`): a pool of virtual users that loop the scenario, and the
//! gauge of running virtual users that the per-phase report reads.
//!
//! The pool is two numbers under one lock: the `target` size the current phase asks for and
//! the users `running` (started and not yet told to stop). Raising the target starts the
//! missing users; a user that finishes an iteration while `running > target` stops, so a
//! step down never cuts a request, and a step back up first keeps users that were about
//! to stop instead of starting new ones. Counting rather than numbering users means no
//! two users can ever hold the same slot.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Instant,
};

use super::{pick_scenario, vuser, Ctx};

#[derive(Default)]
struct PoolState {
    target: u64,
    running: u64,
}

/// The closed-model pool's size: what the phase asks for and what is running.
#[derive(Default)]
pub(crate) struct Pool {
    state: Mutex<PoolState>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn target(&self) -> u64 {
        self.lock().target
    }

    /// Sets the pool size and returns how many users to start now (0 when the running users
    /// cover it; surplus users stop at the end of their current iteration).
    pub fn set_target(&self, target: u64) -> u64 {
        let mut s = self.lock();
        s.target = target;
        let start = target.saturating_sub(s.running);
        s.running += start;
        start
    }

    /// Called by a user after each iteration: whether to run another one. A surplus user
    /// leaves the pool here.
    fn keep_going(&self) -> bool {
        let mut s = self.lock();
        if s.running > s.target {
            s.running -= 1;
            false
        } else {
            true
        }
    }
}

/// One pool member: runs iterations (fresh variables and payload rows each time, the same
/// keep-alive connections) until the pool no longer needs it.
pub(crate) async fn closed_user(ctx: Arc<Ctx>) {
    let mut conns = HashMap::new();
    loop {
        let scenario = pick_scenario(&ctx.script);
        vuser::session(&ctx, scenario, &mut conns).await;
        if !ctx.pool.keep_going() {
            break;
        }
        // An iteration that fails at once (connection refused) must not starve the others.
        tokio::task::yield_now().await;
    }
    drop(conns);
    ctx.running.leave();
}

struct GaugeState {
    value: u64,
    since: Instant,
    /// Integral of `value` over time, in user-seconds, since the gauge was made.
    area: f64,
    /// Highest `value` since the last [`Gauge::mark`].
    max: u64,
}

impl GaugeState {
    fn advance(&mut self, now: Instant) {
        self.area += self.value as f64 * now.saturating_duration_since(self.since).as_secs_f64();
        self.since = now;
    }
}

/// Running virtual users, with the time integral and the maximum needed for a phase's mean
/// and max concurrency.
pub(crate) struct Gauge {
    state: Mutex<GaugeState>,
}

/// The gauge at a phase boundary.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    pub at: Instant,
    area: f64,
    /// Highest value between the previous mark and this one.
    pub max: u64,
}

impl Mark {
    /// Time-weighted mean of the gauge between `start` and `self`.
    pub fn mean_since(&self, start: &Mark) -> f64 {
        let secs = self.at.saturating_duration_since(start.at).as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        (self.area - start.area) / secs
    }
}

impl Default for Gauge {
    fn default() -> Self {
        Self {
            state: Mutex::new(GaugeState {
                value: 0,
                since: Instant::now(),
                area: 0.0,
                max: 0,
            }),
        }
    }
}

impl Gauge {
    fn lock(&self) -> MutexGuard<'_, GaugeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self) -> u64 {
        self.lock().value
    }

    pub fn enter(&self) {
        let mut s = self.lock();
        s.advance(Instant::now());
        s.value += 1;
        s.max = s.max.max(s.value);
    }

    pub fn leave(&self) {
        let mut s = self.lock();
        s.advance(Instant::now());
        s.value = s.value.saturating_sub(1);
    }

    /// Reads the gauge at a phase boundary and restarts the maximum from the current value.
    pub fn mark(&self) -> Mark {
        let now = Instant::now();
        let mut s = self.lock();
        s.advance(now);
        let mark = Mark {
            at: now,
            area: s.area,
            max: s.max,
        };
        s.max = s.value;
        mark
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_starts_missing_users_and_stops_surplus_after_their_iteration() {
        let pool = Pool::default();
        assert_eq!(pool.set_target(3), 3);
        assert_eq!(pool.set_target(5), 2);
        assert_eq!(pool.set_target(2), 0, "a step down starts nobody");
        // Three of the five stop as they finish; the other two keep going.
        let verdicts: Vec<bool> = (0..5).map(|_| pool.keep_going()).collect();
        assert_eq!(verdicts, [false, false, false, true, true]);
        assert_eq!(pool.set_target(4), 2);
        // Back up while one surplus user is still finishing: it is kept, not replaced.
        assert_eq!(pool.set_target(1), 0);
        assert_eq!(pool.set_target(4), 0);
        assert!(pool.keep_going());
        assert_eq!(pool.set_target(0), 0);
        assert!((0..4).all(|_| !pool.keep_going()));
        assert_eq!(pool.set_target(1), 1);
    }

    #[test]
    fn gauge_mean_and_max_between_marks() {
        let g = Gauge::default();
        let start = g.mark();
        g.enter();
        g.enter();
        std::thread::sleep(std::time::Duration::from_millis(50));
        g.leave();
        let end = g.mark();
        assert_eq!(end.max, 2);
        let mean = end.mean_since(&start);
        assert!(mean > 1.5 && mean <= 2.0, "{mean}");
        let next = g.mark();
        assert_eq!(next.max, 1, "the max restarts from the current value");
    }
}
