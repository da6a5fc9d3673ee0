//! Captures from responses into variables: a JSON path (`$.a.b[0]`, `$..id`, `$.items[*].id`),
//! a header, or a regular expression (optionally one `group`).
//!
//! When a JSON path matches several values Artillery picks one at random; so do we.

use rand::seq::SliceRandom;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
    Wildcard,
    Descend(String),
}

/// A parsed JSON path, the subset captures use in practice.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(Vec<Seg>);

impl JsonPath {
    pub fn parse(path: &str) -> Result<Self, String> {
        let p = path.trim();
        let mut rest = p
            .strip_prefix('$')
            .ok_or_else(|| format!("{path:?} must start with $"))?;
        let mut segs = Vec::new();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("..") {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if end == 0 {
                    return Err(format!("{path:?}: expected a name after .."));
                }
                segs.push(Seg::Descend(r[..end].to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                let name = &r[..end];
                segs.push(match name {
                    "" => return Err(format!("{path:?}: empty name after .")),
                    "*" => Seg::Wildcard,
                    n => Seg::Key(n.to_string()),
                });
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']').ok_or_else(|| format!("{path:?}: missing ]"))?;
                let inner = r[..end].trim();
                segs.push(if inner == "*" {
                    Seg::Wildcard
                } else if let Ok(i) = inner.parse() {
                    Seg::Index(i)
                } else {
                    let quoted =
                        inner.len() >= 2 && (inner.starts_with('\'') || inner.starts_with('"'));
                    if !quoted {
                        return Err(format!(
                            "{path:?}: [{inner}] must be an index, * or a quoted name"
                        ));
                    }
                    Seg::Key(inner[1..inner.len() - 1].to_string())
                });
                rest = &r[end + 1..];
            } else {
                return Err(format!(
                    "{path:?}: unexpected {:?}",
                    rest.chars().next().unwrap_or(' ')
                ));
            }
        }
        Ok(Self(segs))
    }

    /// All matches in document order.
    pub fn query<'a>(&self, doc: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![doc];
        for seg in &self.0 {
            let mut next = Vec::new();
            for v in cur {
                match seg {
                    Seg::Key(k) => next.extend(v.get(k.as_str())),
                    Seg::Index(i) => next.extend(v.get(*i)),
                    Seg::Wildcard => match v {
                        Value::Array(a) => next.extend(a.iter()),
                        Value::Object(o) => next.extend(o.values()),
                        _ => {}
                    },
                    Seg::Descend(k) => descend(v, k, &mut next),
                }
            }
            cur = next;
        }
        cur
    }

    /// One match (random when several), as Artillery captures.
    pub fn pick(&self, doc: &Value) -> Option<Value> {
        self.query(doc)
            .choose(&mut rand::thread_rng())
            .map(|v| (*v).clone())
    }
}

fn descend<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(o) => {
            if let Some(hit) = o.get(key) {
                out.push(hit);
            }
            o.values().for_each(|c| descend(c, key, out));
        }
        Value::Array(a) => a.iter().for_each(|c| descend(c, key, out)),
        _ => {}
    }
}

/// Artillery's regexp capture: the whole match, or `group` (a number or a name).
pub fn regexp(re: &regex::Regex, text: &str, group: Option<&Value>) -> Option<String> {
    let caps = re.captures(text)?;
    let m = match group {
        None => caps.get(0),
        Some(Value::Number(n)) => caps.get(n.as_u64()? as usize),
        Some(Value::String(s)) => match s.parse::<usize>() {
            Ok(i) => caps.get(i),
            Err(_) => caps.name(s),
        },
        Some(_) => None,
    };
    m.map(|m| m.as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_paths() {
        let doc = json!({"a": {"b": [10, 20]}, "items": [{"id": 1}, {"id": 2}], "x y": 3});
        let q = |p: &str| {
            JsonPath::parse(p)
                .unwrap()
                .query(&doc)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(q("$.a.b[0]"), vec![json!(10)]);
        assert_eq!(q("$['x y']"), vec![json!(3)]);
        assert_eq!(q("$.items[*].id"), vec![json!(1), json!(2)]);
        assert_eq!(q("$..id"), vec![json!(1), json!(2)]);
        assert!(q("$.nope").is_empty());
        assert!(JsonPath::parse("a.b").is_err());
    }

    #[test]
    fn regexp_groups() {
        let re = regex::Regex::new(r"id=(?P<id>\d+)").unwrap();
        assert_eq!(regexp(&re, "x id=42 y", None).as_deref(), Some("id=42"));
        assert_eq!(
            regexp(&re, "x id=42 y", Some(&json!(1))).as_deref(),
            Some("42")
        );
        assert_eq!(
            regexp(&re, "x id=42 y", Some(&json!("id"))).as_deref(),
            Some("42")
        );
    }
}
