//! Durations as Artillery writes them: a number of seconds, or a string such as `"30s"`,
//! `"5m"`, `"1h"`, `"250ms"`, `"2 min"`.

use std::{fmt, time::Duration};

use serde::{de, Deserialize, Deserializer};

/// A non-negative duration parsed from a number of seconds or a unit string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seconds(pub Duration);

impl Seconds {
    pub fn as_secs_f64(&self) -> f64 {
        self.0.as_secs_f64()
    }
}

/// Parses `"30"`, `"30s"`, `"1.5 min"`, `"2h"`, `"500ms"`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| {
        format!("invalid duration {text:?}: expected a number with an optional unit (ms, s, m, h)")
    })?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 0.001,
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        other => {
            return Err(format!(
                "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m or h)"
            ))
        }
    };
    from_secs(value * scale).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

/// Seconds as a duration; negative, NaN or absurdly long values are errors.
pub fn from_secs(secs: f64) -> Result<Duration, String> {
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "must be a non-negative number of seconds, got {secs}"
        ));
    }
    // Ten years: anything longer is a typo, and Duration::from_secs_f64 would panic near u64::MAX.
    if secs > 315_360_000.0 {
        return Err(format!("{secs} seconds is longer than ten years"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration in seconds or a string such as \"30s\", \"5m\", \"1h\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                self.visit_f64(v as f64)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                from_secs(v).map(Seconds).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
                if v.contains("{{") {
                    // A template, rendered before the script is read for good
                    // (`super::render_config_templates`).
                    return Ok(Seconds(Duration::ZERO));
                }
                parse(v).map(Seconds).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2 min").unwrap(), Duration::from_secs(120));
        assert!(parse("-5").is_err());
        assert!(parse("5 parsecs").is_err());
        assert!(parse("soon").is_err());
    }
}
