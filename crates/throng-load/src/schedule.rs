//! Arrival times of virtual users, computed lazily from phases so a long, busy test never
//! materialises its schedule.
//!
//! - `arrivalCount: N` over `D`: exactly N arrivals at `k * D / N`.
//! - `arrivalRate: R` over `D`: `round(R * D)` arrivals at `k / R`.
//! - `arrivalRate: R1, rampTo: R2`: the rate grows linearly; arrival `k` is where the
//!   cumulative count `R1 t + (R2 - R1) t^2 / 2D` reaches `k`.
//! - `vusers: N` over `D` (throng's closed-model extension): no arrivals; the runner holds
//!   a pool of N looping virtual users instead, the new ones started evenly over `rampUp`
//!   ([`Phase::closed_start_offset`]).

use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    Count(u64),
    Rate { from_per_s: f64, to_per_s: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    Arrivals {
        name: String,
        duration: Duration,
        arrivals: Arrivals,
        /// Concurrent virtual users allowed; arrivals above it are `vusers.skipped`.
        max_vusers: Option<u64>,
    },
    Pause {
        name: String,
        duration: Duration,
    },
    /// Closed model: `vusers` virtual users each loop the scenario for the whole phase.
    Closed {
        name: String,
        duration: Duration,
        vusers: u64,
        /// Users added by this phase start evenly over this time (zero: all at once).
        ramp_up: Duration,
    },
}

impl Phase {
    pub fn duration(&self) -> Duration {
        match self {
            Phase::Arrivals { duration, .. }
            | Phase::Pause { duration, .. }
            | Phase::Closed { duration, .. } => *duration,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Phase::Arrivals { name, .. }
            | Phase::Pause { name, .. }
            | Phase::Closed { name, .. } => name,
        }
    }

    /// The closed phase's pool size, `None` for open-model and pause phases.
    pub fn vusers(&self) -> Option<u64> {
        match self {
            Phase::Closed { vusers, .. } => Some(*vusers),
            _ => None,
        }
    }

    /// Start offset of the `j`-th of `added` users a closed phase adds (0-based): evenly
    /// spread over `rampUp`, the first at the phase start.
    pub fn closed_start_offset(&self, j: u64, added: u64) -> Duration {
        match self {
            Phase::Closed { ramp_up, .. } if added > 0 => {
                ramp_up.mul_f64(j.min(added) as f64 / added as f64)
            }
            _ => Duration::ZERO,
        }
    }

    /// Number of arrivals in this phase (none in pause and closed phases).
    pub fn arrival_count(&self) -> u64 {
        match self {
            Phase::Pause { .. } | Phase::Closed { .. } => 0,
            Phase::Arrivals {
                duration, arrivals, ..
            } => match arrivals {
                Arrivals::Count(n) => *n,
                Arrivals::Rate {
                    from_per_s,
                    to_per_s,
                } => ((from_per_s + to_per_s) / 2.0 * duration.as_secs_f64()).round() as u64,
            },
        }
    }

    /// Offset of arrival `k` (0-based) from the phase start; `k < arrival_count()`.
    pub fn arrival_offset(&self, k: u64) -> Duration {
        debug_assert!(k < self.arrival_count());
        let Phase::Arrivals {
            duration, arrivals, ..
        } = self
        else {
            return Duration::ZERO;
        };
        let d = duration.as_secs_f64();
        let t = match arrivals {
            Arrivals::Count(n) => k as f64 * d / *n as f64,
            Arrivals::Rate {
                from_per_s,
                to_per_s,
            } => ramp_time(*from_per_s, *to_per_s, d, k as f64),
        };
        Duration::from_secs_f64(t.clamp(0.0, d))
    }
}

/// Solves `r1 t + (r2 - r1) t^2 / (2 d) = k` for `t` in `[0, d]`.
fn ramp_time(r1: f64, r2: f64, d: f64, k: f64) -> f64 {
    let a = (r2 - r1) / (2.0 * d);
    if a.abs() < 1e-12 {
        return k / r1;
    }
    let disc = (r1 * r1 + 4.0 * a * k).max(0.0);
    (-r1 + disc.sqrt()) / (2.0 * a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(arrivals: Arrivals, secs: u64) -> Phase {
        Phase::Arrivals {
            name: String::new(),
            duration: Duration::from_secs(secs),
            arrivals,
            max_vusers: None,
        }
    }

    #[test]
    fn count_is_exact_and_even() {
        let p = phase(Arrivals::Count(10), 30);
        assert_eq!(p.arrival_count(), 10);
        assert_eq!(p.arrival_offset(0), Duration::ZERO);
        assert_eq!(p.arrival_offset(1), Duration::from_secs(3));
        assert_eq!(p.arrival_offset(9), Duration::from_secs(27));
    }

    #[test]
    fn rate_and_ramp() {
        let p = phase(
            Arrivals::Rate {
                from_per_s: 5.0,
                to_per_s: 5.0,
            },
            2,
        );
        assert_eq!(p.arrival_count(), 10);
        assert_eq!(p.arrival_offset(5), Duration::from_secs(1));
        let ramp = phase(
            Arrivals::Rate {
                from_per_s: 0.0,
                to_per_s: 10.0,
            },
            10,
        );
        assert_eq!(ramp.arrival_count(), 50);
        // Half of the arrivals come in the last ~29% of the time when the rate ramps up.
        let mid = ramp.arrival_offset(25).as_secs_f64();
        assert!((mid - 50f64.sqrt()).abs() < 1e-6, "{mid}");
        let last = ramp.arrival_offset(49).as_secs_f64();
        assert!(last <= 10.0 && last > 9.8, "{last}");
    }

    #[test]
    fn closed_phase_has_no_arrivals_and_spreads_ramp_up() {
        let p = Phase::Closed {
            name: String::new(),
            duration: Duration::from_secs(10),
            vusers: 8,
            ramp_up: Duration::from_secs(4),
        };
        assert_eq!(p.arrival_count(), 0);
        assert_eq!(p.vusers(), Some(8));
        assert_eq!(p.closed_start_offset(0, 4), Duration::ZERO);
        assert_eq!(p.closed_start_offset(1, 4), Duration::from_secs(1));
        assert_eq!(p.closed_start_offset(3, 4), Duration::from_secs(3));
    }
}
