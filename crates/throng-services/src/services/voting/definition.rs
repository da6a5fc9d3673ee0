//! An election as its authority defines it: districts, parties, each
//! district's candidate lists, how many candidates a vote may name, the
//! opening and closing times. Read from JSON (the API) or YAML (the CLI,
//! which sends it on as JSON); every problem is reported with the path of
//! the value at fault (`districts[3].code`), all of them at once.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::model::{CANDIDATES_PER_VOTE_LIMIT, DISTRICTS_PER_ELECTION_MAX};

/// Parties in one election at most.
pub const PARTIES_PER_ELECTION_MAX: usize = 100;
/// Candidates on one party's list in one district at most.
pub const CANDIDATES_PER_LIST_MAX: usize = 200;
/// Candidates in one election at most (all districts' lists).
pub const CANDIDATES_PER_ELECTION_MAX: usize = 100_000;
/// Characters of a name (election, district, party, candidate) at most.
pub const NAME_CHARS_MAX: usize = 200;
/// Characters of a district's or party's code at most: letters, digits,
/// `-` and `_`.
pub const CODE_CHARS_MAX: usize = 32;
/// Problems reported at most for one definition.
pub const DEFINITION_ERRORS_MAX: usize = 50;

/// An election's definition.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Definition {
    pub name: String,
    /// RFC 3339, with an offset.
    #[schema(format = DateTime)]
    pub opens_at: String,
    /// RFC 3339, with an offset; after `opensAt`.
    #[schema(format = DateTime)]
    pub closes_at: String,
    /// Candidates a vote may name at most (0 to 100).
    pub candidates_per_vote_max: i64,
    /// Not possible: ballots are sealed to the trustees' key until they
    /// open them after the close. Only `false` is accepted.
    #[serde(default)]
    pub live_results: bool,
    pub parties: Vec<PartyDefinition>,
    pub districts: Vec<DistrictDefinition>,
}

/// A party: its code (as lists and results name it), name and colour.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartyDefinition {
    pub code: String,
    pub name: String,
    /// `#rrggbb`.
    pub colour: String,
}

/// A district: its code (as the roll names it), name and candidate lists.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DistrictDefinition {
    pub code: String,
    pub name: String,
    /// Where the district is published if fewer than the minimum vote in
    /// it: only together with its region's other small districts, never on
    /// its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub lists: Vec<ListDefinition>,
}

/// One party's list in a district, in list order.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListDefinition {
    /// A party's code.
    pub party: String,
    pub candidates: Vec<String>,
}

/// A problem with a definition: where, and what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldProblem {
    /// The value at fault, e.g. `districts[3].code` (empty: the document).
    pub path: String,
    pub message: String,
}

/// A definition checked: times in ms.
#[derive(Clone, Debug)]
pub struct Checked {
    pub definition: Definition,
    pub opens_at_ms: i64,
    pub closes_at_ms: i64,
}

/// Parses a definition from JSON: its shape first (one problem, with its
/// path), then every rule.
pub fn parse_json(bytes: &[u8]) -> Result<Checked, Vec<FieldProblem>> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let definition: Definition = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        vec![FieldProblem {
            path: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        }]
    })?;
    check(definition)
}

/// A time as RFC 3339, in ms since the epoch.
pub fn parse_time(s: &str) -> Option<i64> {
    time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

fn is_code(s: &str) -> bool {
    (1..=CODE_CHARS_MAX).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn is_colour(s: &str) -> bool {
    s.len() == 7 && s.starts_with('#') && s[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// A name's problem, if any: 1 to [`NAME_CHARS_MAX`] characters, no
/// control characters, not only white space.
fn name_problem(s: &str) -> Option<String> {
    let n = s.chars().count();
    if s.trim().is_empty() {
        return Some("give a name (not only white space)".into());
    }
    if n > NAME_CHARS_MAX {
        return Some(format!(
            "at most {NAME_CHARS_MAX} characters (this has {n})"
        ));
    }
    if s.chars().any(|c| c.is_control()) {
        return Some("no control characters (line breaks, tabs)".into());
    }
    None
}

/// Every rule of a definition; all problems found (at most
/// [`DEFINITION_ERRORS_MAX`]).
pub fn check(definition: Definition) -> Result<Checked, Vec<FieldProblem>> {
    let mut problems = Vec::new();
    let mut add = |path: String, message: String| {
        if problems.len() < DEFINITION_ERRORS_MAX {
            problems.push(FieldProblem { path, message });
        }
    };
    let d = &definition;
    if let Some(m) = name_problem(&d.name) {
        add("name".into(), m);
    }
    let opens = parse_time(&d.opens_at);
    let closes = parse_time(&d.closes_at);
    if opens.is_none() {
        add(
            "opensAt".into(),
            "an RFC 3339 time with an offset, such as 2030-05-05T07:00:00+02:00".into(),
        );
    }
    if closes.is_none() {
        add(
            "closesAt".into(),
            "an RFC 3339 time with an offset, such as 2030-05-05T20:00:00+02:00".into(),
        );
    }
    if let (Some(o), Some(c)) = (opens, closes) {
        if c <= o {
            add("closesAt".into(), "must be after opensAt".into());
        }
    }
    if d.live_results {
        add(
            "liveResults".into(),
            "ballots are sealed to the trustees' key until they open them after the close, \
             so no figure exists before: remove liveResults"
                .into(),
        );
    }
    if !(0..=CANDIDATES_PER_VOTE_LIMIT).contains(&d.candidates_per_vote_max) {
        add(
            "candidatesPerVoteMax".into(),
            format!("0 to {CANDIDATES_PER_VOTE_LIMIT}"),
        );
    }
    if d.parties.is_empty() {
        add("parties".into(), "at least one party".into());
    }
    if d.parties.len() > PARTIES_PER_ELECTION_MAX {
        add(
            "parties".into(),
            format!("at most {PARTIES_PER_ELECTION_MAX} parties"),
        );
    }
    let mut party_codes = HashSet::new();
    for (i, p) in d.parties.iter().enumerate() {
        if !is_code(&p.code) {
            add(
                format!("parties[{i}].code"),
                format!("1 to {CODE_CHARS_MAX} letters, digits, '-' or '_'"),
            );
        } else if !party_codes.insert(p.code.as_str()) {
            add(
                format!("parties[{i}].code"),
                format!("{:?} names an earlier party too", p.code),
            );
        }
        if let Some(m) = name_problem(&p.name) {
            add(format!("parties[{i}].name"), m);
        }
        if !is_colour(&p.colour) {
            add(
                format!("parties[{i}].colour"),
                "a colour as #rrggbb, such as #2e8b57".into(),
            );
        }
    }
    if d.districts.is_empty() {
        add("districts".into(), "at least one district".into());
    }
    if d.districts.len() as i64 > DISTRICTS_PER_ELECTION_MAX {
        add(
            "districts".into(),
            format!("at most {DISTRICTS_PER_ELECTION_MAX} districts"),
        );
    }
    let mut district_codes = HashSet::new();
    let mut candidates = 0usize;
    for (i, district) in d.districts.iter().enumerate() {
        if !is_code(&district.code) {
            add(
                format!("districts[{i}].code"),
                format!("1 to {CODE_CHARS_MAX} letters, digits, '-' or '_'"),
            );
        } else if !district_codes.insert(district.code.as_str()) {
            add(
                format!("districts[{i}].code"),
                format!("{:?} names an earlier district too", district.code),
            );
        }
        if let Some(m) = name_problem(&district.name) {
            add(format!("districts[{i}].name"), m);
        }
        if let Some(m) = district.region.as_deref().and_then(name_problem) {
            add(format!("districts[{i}].region"), m);
        }
        if district.lists.is_empty() {
            add(
                format!("districts[{i}].lists"),
                "at least one party's list".into(),
            );
        }
        let mut listed = HashSet::new();
        for (j, list) in district.lists.iter().enumerate() {
            let at = format!("districts[{i}].lists[{j}]");
            if !party_codes.contains(list.party.as_str()) {
                add(
                    format!("{at}.party"),
                    format!("{:?} is no party's code in parties", list.party),
                );
            } else if !listed.insert(list.party.as_str()) {
                add(
                    format!("{at}.party"),
                    format!(
                        "party {:?} has an earlier list in this district",
                        list.party
                    ),
                );
            }
            if list.candidates.len() > CANDIDATES_PER_LIST_MAX {
                add(
                    format!("{at}.candidates"),
                    format!("at most {CANDIDATES_PER_LIST_MAX} candidates on a list"),
                );
            }
            candidates += list.candidates.len();
            for (k, c) in list.candidates.iter().enumerate() {
                if let Some(m) = name_problem(c) {
                    add(format!("{at}.candidates[{k}]"), m);
                }
            }
        }
    }
    if candidates > CANDIDATES_PER_ELECTION_MAX {
        add(
            "districts".into(),
            format!(
                "at most {CANDIDATES_PER_ELECTION_MAX} candidates in all (this has {candidates})"
            ),
        );
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Checked {
        opens_at_ms: opens.unwrap_or_default(),
        closes_at_ms: closes.unwrap_or_default(),
        definition,
    })
}

/// The line of `path` (as [`FieldProblem::path`] writes it) in a YAML
/// document written in block style, as authorities write definitions: the
/// line of the key or sequence item the path ends at, else of the nearest
/// part found. `None` when not even the first part is found.
pub fn yaml_line(text: &str, path: &str) -> Option<usize> {
    #[derive(Clone, Copy)]
    enum Part<'a> {
        Key(&'a str),
        Index(usize),
    }
    let mut parts = Vec::new();
    for piece in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = match piece.find('[') {
            Some(at) => (&piece[..at], &piece[at..]),
            None => (piece, ""),
        };
        if !key.is_empty() {
            parts.push(Part::Key(key));
        }
        while let Some(end) = rest.find(']') {
            parts.push(Part::Index(rest[1..end].parse().ok()?));
            rest = &rest[end + 1..];
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let content = |l: &str| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#') && t != "---"
    };
    let item = |l: &str| {
        let t = l.trim_start();
        t == "-" || t.starts_with("- ")
    };
    // Where a line's mapping key starts, and the text from there.
    let key_at = |l: &str| -> (usize, String) {
        let mut at = indent(l);
        let mut t = l.trim_start();
        while let Some(rest) = t.strip_prefix("- ") {
            at += 2 + (rest.len() - rest.trim_start().len());
            t = rest.trim_start();
        }
        (at, t.to_string())
    };
    // Lines from..to hold the node the next part looks into.
    let (mut from, mut to) = (0, lines.len());
    let mut found = None;
    for part in parts {
        let span: Vec<usize> = (from..to).filter(|&i| content(lines[i])).collect();
        let hit = || -> Option<(usize, usize)> {
            Some(match part {
                Part::Key(key) => {
                    let level = key_at(lines[*span.first()?]).0;
                    span.iter().copied().find_map(|i| {
                        let (at, t) = key_at(lines[i]);
                        let name = t.split(':').next()?.trim().trim_matches(['"', '\'']);
                        (at == level && name == key && t.contains(':')).then_some((i, at))
                    })?
                }
                Part::Index(n) => {
                    let items: Vec<usize> =
                        span.iter().copied().filter(|&i| item(lines[i])).collect();
                    let level = indent(lines[*items.first()?]);
                    let i = items
                        .into_iter()
                        .filter(|&i| indent(lines[i]) == level)
                        .nth(n)?;
                    (i, level)
                }
            })
        };
        let Some((i, level)) = hit() else { break };
        found = Some(i + 1);
        // The node's value: its own line (a compact item) and the lines
        // below it, until one as far left (a sequence may sit at its key's
        // indent).
        let end = (i + 1..to)
            .find(|&k| {
                content(lines[k])
                    && (indent(lines[k]) < level || (indent(lines[k]) == level && !item(lines[k])))
            })
            .unwrap_or(to);
        let value_line = lines[i]
            .split_once(':')
            .map(|(_, v)| v.trim())
            .unwrap_or("");
        from = if matches!(part, Part::Index(_)) || !value_line.is_empty() && !item(lines[i]) {
            i
        } else {
            i + 1
        };
        to = end;
        if matches!(part, Part::Index(_)) {
            // The item's own line starts the node; its keys follow "- ".
            from = i;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> serde_json::Value {
        serde_json::json!({
            "name": "Town council",
            "opensAt": "2030-05-05T07:00:00+02:00",
            "closesAt": "2030-05-05T20:00:00+02:00",
            "candidatesPerVoteMax": 2,
            "parties": [{"code": "GF", "name": "Green Future", "colour": "#2e8b57"},
                        {"code": "CA", "name": "Civic Alliance", "colour": "#4e79a7"}],
            "districts": [{"code": "N", "name": "North", "lists": [
                {"party": "GF", "candidates": ["Ana Horvat", "Ivan Kos"]},
                {"party": "CA", "candidates": ["Eva Novak"]}]}]
        })
    }

    fn problems(v: serde_json::Value) -> Vec<FieldProblem> {
        parse_json(&serde_json::to_vec(&v).unwrap()).unwrap_err()
    }

    #[test]
    fn a_good_definition_passes() {
        let c = parse_json(&serde_json::to_vec(&good()).unwrap()).unwrap();
        assert_eq!(c.closes_at_ms - c.opens_at_ms, 13 * 3600 * 1000);
    }

    #[test]
    fn problems_name_their_paths() {
        let mut v = good();
        v["districts"][0]["lists"][1]["party"] = "XX".into();
        v["parties"][1]["code"] = "GF".into();
        v["parties"][0]["colour"] = "green".into();
        v["closesAt"] = "2030-05-05T06:00:00+02:00".into();
        let p: Vec<String> = problems(v).into_iter().map(|p| p.path).collect();
        assert_eq!(
            p,
            [
                "closesAt",
                "parties[0].colour",
                "parties[1].code",
                "districts[0].lists[1].party"
            ]
        );
        let mut v = good();
        v["districts"][0]["code"] = 7.into();
        assert_eq!(problems(v)[0].path, "districts[0].code");
    }

    #[test]
    fn yaml_paths_map_to_lines() {
        let yaml = "name: Town council\nparties:\n  - code: GF\n    name: Green\n  - code: CA\n    name: Civic\ndistricts:\n  - code: N\n    name: North\n    lists:\n      - party: GF\n        candidates:\n          - Ana\n          - Ivan\n      - party: XX\n";
        assert_eq!(yaml_line(yaml, "name"), Some(1));
        assert_eq!(yaml_line(yaml, "parties[1].code"), Some(5));
        assert_eq!(yaml_line(yaml, "parties[1].name"), Some(6));
        assert_eq!(yaml_line(yaml, "districts[0].lists[1].party"), Some(15));
        assert_eq!(
            yaml_line(yaml, "districts[0].lists[0].candidates[1]"),
            Some(14)
        );
    }
}
