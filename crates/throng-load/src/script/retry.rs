//! `config.http.retryAfter` (a throng-load extension; Artillery has no equivalent): a virtual
//! user answered 429 or 503 waits as `Retry-After` says, plus random jitter, and sends the
//! same request again, as a well-behaved client (a browser page, an SDK) does under a crowd.
//!
//! ```yaml
//! config:
//!   http:
//!     retryAfter:
//!       retries: 20          # resends per request, 1..=100
//!       jitterMs: 1000       # 0..=jitterMs added to each wait, at most 60000
//!       statuses: [429, 503] # which answers are retried, 400..=599
//!       defaultS: 1          # the wait when Retry-After is missing or not delta-seconds
//!       waitMaxS: 60         # a longer Retry-After is cut to this
//! ```
//!
//! Every attempt is counted as a response of its own (`http.codes.429`, `http.response_time`);
//! `http.retries` counts resends, `http.retry_after_missing` the answers of a retried status
//! without a `Retry-After` in delta-seconds. Retries end with the last phase: a wait that would end after
//! it is not started (`http.retries_abandoned`), so the run ends on time whatever the server
//! asks for; the last answer then goes through captures and expectations as usual.

use std::time::Duration;

use http::HeaderMap;

use super::{err, model::RetryAfterRaw, ScriptError};

pub const RETRIES_MAX: u32 = 100;
pub const JITTER_MS_MAX: u64 = 60_000;
pub const WAIT_MAX_S_LIMIT: u64 = 3_600;

#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub retries: u32,
    pub jitter_ms: u64,
    pub statuses: Vec<u16>,
    pub default_wait: Duration,
    pub wait_max: Duration,
}

impl RetryPolicy {
    /// Validates `config.http.retryAfter`; errors name the key and what is accepted.
    pub fn from_raw(raw: &RetryAfterRaw) -> Result<RetryPolicy, ScriptError> {
        let key = "config.http.retryAfter";
        let retries = raw.retries.unwrap_or(20);
        if !(1..=RETRIES_MAX).contains(&retries) {
            return err(format!("{key}.retries: 1 to {RETRIES_MAX}, got {retries}"));
        }
        let jitter_ms = raw.jitter_ms.unwrap_or(1_000);
        if jitter_ms > JITTER_MS_MAX {
            return err(format!(
                "{key}.jitterMs: 0 to {JITTER_MS_MAX}, got {jitter_ms}"
            ));
        }
        let statuses = raw.statuses.clone().unwrap_or_else(|| vec![429, 503]);
        if statuses.is_empty() || statuses.iter().any(|s| !(400..=599).contains(s)) {
            return err(format!(
                "{key}.statuses: a non-empty list of statuses from 400 to 599, got {statuses:?}"
            ));
        }
        let seconds = |name: &str, v: Option<f64>, default: f64| -> Result<Duration, ScriptError> {
            let v = v.unwrap_or(default);
            if !(0.0..=WAIT_MAX_S_LIMIT as f64).contains(&v) {
                return err(format!(
                    "{key}.{name}: 0 to {WAIT_MAX_S_LIMIT} seconds, got {v}"
                ));
            }
            Ok(Duration::from_secs_f64(v))
        };
        Ok(RetryPolicy {
            retries,
            jitter_ms,
            statuses,
            default_wait: seconds("defaultS", raw.default_s, 1.0)?,
            wait_max: seconds("waitMaxS", raw.wait_max_s, 60.0)?,
        })
    }

    pub fn retries_status(&self, status: u16) -> bool {
        self.statuses.contains(&status)
    }

    /// How long to wait before resending after an answer whose `Retry-After` asked for
    /// `asked` ([`retry_after`]; `None`: `defaultS`): at most `waitMaxS`, plus jitter.
    pub fn wait(&self, asked: Option<Duration>, jitter_draw: u64) -> Duration {
        let asked = asked.unwrap_or(self.default_wait);
        let jitter = match self.jitter_ms {
            0 => 0,
            j => jitter_draw % (j + 1),
        };
        asked.min(self.wait_max) + Duration::from_millis(jitter)
    }
}

/// An answer's `Retry-After` in delta-seconds; `None` when missing or another form.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(raw: RetryAfterRaw) -> Result<RetryPolicy, ScriptError> {
        RetryPolicy::from_raw(&raw)
    }

    #[test]
    fn defaults_and_bounds() {
        let p = policy(RetryAfterRaw::default()).unwrap();
        assert_eq!(p.retries, 20);
        assert_eq!(p.statuses, vec![429, 503]);
        assert!(p.retries_status(429) && !p.retries_status(500));
        for bad in [
            RetryAfterRaw {
                retries: Some(0),
                ..Default::default()
            },
            RetryAfterRaw {
                jitter_ms: Some(JITTER_MS_MAX + 1),
                ..Default::default()
            },
            RetryAfterRaw {
                statuses: Some(vec![200]),
                ..Default::default()
            },
            RetryAfterRaw {
                statuses: Some(vec![]),
                ..Default::default()
            },
            RetryAfterRaw {
                wait_max_s: Some(-1.0),
                ..Default::default()
            },
        ] {
            let e = policy(bad).unwrap_err().0;
            assert!(e.starts_with("config.http.retryAfter."), "{e}");
        }
    }

    #[test]
    fn waits_as_the_answer_says() {
        let p = policy(RetryAfterRaw {
            jitter_ms: Some(0),
            wait_max_s: Some(5.0),
            ..Default::default()
        })
        .unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(
            p.wait(retry_after(&h), 7),
            Duration::from_secs(1),
            "no header: defaultS"
        );
        h.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(p.wait(retry_after(&h), 7), Duration::from_secs(3));
        h.insert(http::header::RETRY_AFTER, "120".parse().unwrap());
        assert_eq!(
            p.wait(retry_after(&h), 7),
            Duration::from_secs(5),
            "cut to waitMaxS"
        );
        h.insert(
            http::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(
            p.wait(retry_after(&h), 7),
            Duration::from_secs(1),
            "a date: defaultS"
        );
        let j = policy(RetryAfterRaw {
            jitter_ms: Some(1000),
            ..Default::default()
        })
        .unwrap();
        h.insert(http::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(j.wait(retry_after(&h), 1_500), Duration::from_millis(2_499));
        assert!(j.wait(retry_after(&h), u64::MAX) <= Duration::from_millis(3_000));
    }
}
