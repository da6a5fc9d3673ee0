//! The Artillery script schema as serde types. Artillery ignores keys it does not know, so
//! these types are open too: [`super::parse`] reads the script through `serde_ignored` and
//! warns once, by name, about every key they leave out (a typo, or something throng does not
//! do). Keys Artillery acts on but throng cannot honour (JavaScript hooks, some plugins) are
//! read here and turned into warnings by [`super::load`]. throng's own extensions
//! (`config.http.retryAfter`) stay closed: a typo there is an error naming its line.
//!
//! # Closed-model phases (a throng extension)
//!
//! Artillery's phases are open-model only (`arrivalRate`, `arrivalCount`, `rampTo`, `pause`):
//! each arrival is a new virtual user that runs the scenario once. throng adds a phase kind
//! with a fixed pool of looping virtual users, the JMeter thread-group / k6 "VUs" model:
//!
//! ```yaml
//! config:
//!   phases:
//!     - duration: 45
//!       vusers: 100        # hold 100 looping virtual users for 45 s
//!     - duration: 45
//!       vusers: 200        # add 100 more at the phase start ...
//!       rampUp: 10         # ... spread evenly over the first 10 s
//!       name: hold
//! ```
//!
//! - Keys: `vusers` (a whole number from 1 to [`super::VUSERS_MAX`]), `duration`, optional
//!   `rampUp` (a duration, at most `duration`) and `name`. `vusers` cannot be combined with
//!   `arrivalRate`, `arrivalCount`, `rampTo`, `maxVusers` or `pause`; `rampUp` needs `vusers`.
//! - Each virtual user runs the scenario (weighted pick among scenarios, as for arrivals) to
//!   its end, then at once starts again with fresh variables and, for each `payload`, the
//!   next CSV row (with `order: sequence` every iteration takes the next row, like JMeter's
//!   CSV data set). A failed iteration (`vusers.failed`) is followed by a new one as well.
//!   Its keep-alive connections are kept from one iteration to the next (as k6 does), so a
//!   fast loop does not open a connection per iteration.
//! - Consecutive closed phases resize the pool: going up adds users at the phase start (or
//!   over `rampUp`); going down stops surplus users when they finish their current
//!   iteration, so no request is cut. When a closed phase ends and the next phase is
//!   open-model or a pause, or the script ends, every pool user finishes its current
//!   iteration and stops.
//! - Metrics: each iteration counts as one Artillery virtual user (`vusers.created`,
//!   `vusers.completed` or `vusers.failed`, `vusers.session_length`), since an Artillery
//!   virtual user is one run of a scenario; so `vusers.created` counts iterations started,
//!   not pool members. The pool size actually held is in the report's `phases` list
//!   ([`crate::report::PhaseReport`]): `vusers_target`, `vusers_concurrent_max` and the
//!   time-weighted `vusers_concurrent_mean` of running virtual users during each phase.

use std::{collections::BTreeMap, fmt, marker::PhantomData};

use serde::{de, Deserialize, Deserializer};
use serde_json::Value;

use super::duration::Seconds;

/// A value Artillery lets you write either once or as a list (`payload`, `capture`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct OneOrMany<T>(pub Vec<T>);

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> de::Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("one item or a list of items")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Vec::<T>::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(OneOrMany)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|t| OneOrMany(vec![t]))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                T::deserialize(de::value::StrDeserializer::<E>::new(v)).map(|t| OneOrMany(vec![t]))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ScriptFile {
    /// May come from `--config FILE` instead.
    #[serde(default)]
    pub config: Config,
    #[serde(default)]
    pub scenarios: Vec<Scenario>,
    /// Artillery's once-per-run flows; accepted, warned about, not run.
    pub before: Option<Value>,
    pub after: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub target: Option<String>,
    #[serde(default)]
    pub environments: BTreeMap<String, Config>,
    pub phases: Option<Vec<Phase>>,
    pub payload: Option<OneOrMany<Payload>>,
    pub variables: Option<BTreeMap<String, Value>>,
    pub defaults: Option<Defaults>,
    pub http: Option<HttpConfig>,
    pub ensure: Option<Ensure>,
    /// The apdex plugin's settings (`threshold`, ms), also read from `plugins.apdex`.
    pub apdex: Option<Value>,
    // Accepted for compatibility; see `super::load` for what each one does.
    pub processor: Option<Value>,
    pub plugins: Option<BTreeMap<String, Value>>,
    pub tls: Option<Value>,
    pub engines: Option<Value>,
    pub include_files: Option<Value>,
    pub ws: Option<Value>,
    pub socketio: Option<Value>,
    pub statsd: Option<Value>,
}

/// A phase's number: a number, or a string holding one (`"{{ $env.RATE }}"` is rendered
/// to one before the script is read for good; until then it reads as NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num(pub f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                if v.contains("{{") {
                    return Ok(Num(f64::NAN));
                }
                v.trim().parse().map(Num).map_err(|_| {
                    E::custom(format!(
                        "expected a number, got {v:?} (a template that rendered to this?)"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub name: Option<String>,
    pub duration: Option<Seconds>,
    pub arrival_rate: Option<Num>,
    pub arrival_count: Option<Num>,
    pub ramp_to: Option<Num>,
    pub max_vusers: Option<Num>,
    pub pause: Option<Seconds>,
    /// throng extension: a closed-model phase holding this many looping virtual users.
    pub vusers: Option<Num>,
    /// throng extension: spread a closed phase's new users over this time.
    pub ramp_up: Option<Seconds>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub path: String,
    #[serde(default)]
    pub fields: Vec<String>,
    pub order: Option<PayloadOrder>,
    #[serde(default)]
    pub skip_header: bool,
    pub delimiter: Option<String>,
    pub cast: Option<bool>,
    pub skip_empty_lines: Option<bool>,
    #[serde(default)]
    pub load_all: bool,
    pub name: Option<String>,
    pub options: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadOrder {
    #[default]
    Random,
    Sequence,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Defaults {
    #[serde(default)]
    pub headers: BTreeMap<String, Value>,
    pub think: Option<Value>,
    pub cookie: Option<Value>,
    pub strict_capture: Option<bool>,
}

/// Artillery's `config.http`; open, since engines add their own keys (warned about).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpConfig {
    pub timeout: Option<Seconds>,
    pub defaults: Option<Defaults>,
    pub pool: Option<Value>,
    pub max_sockets: Option<Value>,
    pub extended_metrics: Option<bool>,
    /// throng-load extension: resend after 429/503 as `Retry-After` says (`super::retry`).
    pub retry_after: Option<RetryAfterRaw>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `config.http.retryAfter`, as written; checked by [`super::retry::RetryPolicy::from_raw`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryAfterRaw {
    pub retries: Option<u32>,
    pub jitter_ms: Option<u64>,
    pub statuses: Option<Vec<u16>>,
    pub default_s: Option<f64>,
    pub wait_max_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ensure {
    #[serde(default)]
    pub thresholds: Vec<BTreeMap<String, f64>>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    pub max_error_rate: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub median: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Condition {
    pub expression: String,
    pub strict: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    pub name: Option<String>,
    pub weight: Option<f64>,
    #[serde(default)]
    pub flow: Vec<StepRaw>,
    pub engine: Option<String>,
    pub before_scenario: Option<OneOrMany<String>>,
    pub after_scenario: Option<OneOrMany<String>>,
    pub before_request: Option<OneOrMany<String>>,
    pub after_response: Option<OneOrMany<String>>,
}

/// A flow step as written; [`super::load`] checks it has exactly one action.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRaw {
    pub get: Option<RequestRaw>,
    pub post: Option<RequestRaw>,
    pub put: Option<RequestRaw>,
    pub patch: Option<RequestRaw>,
    pub delete: Option<RequestRaw>,
    pub head: Option<RequestRaw>,
    pub options: Option<RequestRaw>,
    pub think: Option<Value>,
    pub log: Option<String>,
    #[serde(rename = "loop")]
    pub loop_: Option<Vec<StepRaw>>,
    pub count: Option<Value>,
    pub over: Option<Value>,
    pub while_true: Option<String>,
    /// The variable a loop's index is bound to (`$loopCount` otherwise).
    pub loop_value: Option<String>,
    /// The variable a loop's element is bound to (`$loopElement` otherwise).
    pub loop_element: Option<String>,
    /// A `parallel` step's most steps at once.
    pub limit: Option<Value>,
    /// A think step's jitter (warned about).
    pub jitter: Option<Value>,
    pub function: Option<String>,
    pub parallel: Option<Vec<StepRaw>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRaw {
    pub url: String,
    pub name: Option<String>,
    pub qs: Option<BTreeMap<String, Value>>,
    pub headers: Option<BTreeMap<String, Value>>,
    pub json: Option<Value>,
    pub body: Option<Value>,
    pub form: Option<BTreeMap<String, Value>>,
    pub capture: Option<OneOrMany<Capture>>,
    pub expect: Option<OneOrMany<BTreeMap<String, Value>>>,
    pub before_request: Option<OneOrMany<String>>,
    pub after_response: Option<OneOrMany<String>>,
    // Accepted for compatibility, warned about.
    pub form_data: Option<Value>,
    pub cookie: Option<Value>,
    pub auth: Option<Value>,
    pub follow_redirect: Option<bool>,
    pub gzip: Option<bool>,
    pub compress: Option<bool>,
    pub if_true: Option<String>,
    /// Percent chance (0-100) that the request is sent; otherwise the step is skipped.
    pub probability: Option<Value>,
    #[serde(rename = "match")]
    pub match_: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Capture {
    pub json: Option<String>,
    pub header: Option<String>,
    pub regexp: Option<String>,
    pub xpath: Option<String>,
    pub selector: Option<String>,
    #[serde(rename = "as")]
    pub as_: Option<String>,
    pub group: Option<Value>,
    pub flags: Option<String>,
    pub strict: Option<bool>,
    pub transform: Option<String>,
    pub attr: Option<String>,
    pub index: Option<Value>,
}
