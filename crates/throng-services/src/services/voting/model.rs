//! Voting's domain types, parsed from input (parse, don't validate): ids
//! from the write-up's headers, the vote body, and the static election data
//! (election, districts, parties, each district's lists) that every vote is
//! checked against in memory.

use std::collections::HashMap;

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::platform::error::ApiError;

/// The event a published ballot appends (see `mixer.rs`).
pub const EVENT_BALLOT_CAST: &str = "voting.BallotCast";
/// The header naming the voter (the write-up's).
pub const VOTER_HEADER: &str = "voter-id";
/// The header naming the voter's district (the write-up's).
pub const DISTRICT_HEADER: &str = "election-district-id";
/// Districts per election at most (the election's page lists them all).
pub const DISTRICTS_PER_ELECTION_MAX: i64 = 1000;
/// Candidates a vote may name, whatever the election says, at most.
pub const CANDIDATES_PER_VOTE_LIMIT: i64 = 100;

/// The event-stream category of the elections' ballot streams.
pub const BALLOT_STREAM_CATEGORY: &str = "ballots";

/// The category of election streams (`election-{id}`): the authority's
/// actions on an election, each with who took it.
pub const ELECTION_STREAM_CATEGORY: &str = "election";

/// The event stream of an election's lifecycle.
pub fn election_stream(election_id: i64) -> String {
    format!("{ELECTION_STREAM_CATEGORY}-{election_id}")
}

/// The event stream of an election's ballots.
pub fn ballot_stream(election_id: i64) -> String {
    format!("{BALLOT_STREAM_CATEGORY}-{election_id}")
}

/// Whether `stream` is an election's ballot stream (`ballots-{id}`), the
/// only place the tally counts a ballot from.
pub fn is_ballot_stream(stream: &str) -> bool {
    stream.strip_prefix("ballots-").is_some_and(|id| {
        id.parse::<i64>()
            .is_ok_and(|id| ballot_stream(id) == stream)
    })
}

/// A positive id from a header: `1` to `9223372036854775807`, decimal.
pub fn header_id(headers: &HeaderMap, name: &'static str) -> Result<i64, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "invalid_header",
            format!(
                "{name}: send one header with a positive integer id (1 to 9223372036854775807)"
            ),
        )
    };
    let mut values = headers.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(bad());
    };
    let text = value.to_str().map_err(|_| bad())?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<i64>() {
        Ok(id) if id >= 1 => Ok(id),
        _ => Err(bad()),
    }
}

/// The body of `POST .../votes`, as sent.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VoteRequest {
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub party_id: i64,
    #[serde(default)]
    pub candidate_ids: CandidateList,
}

/// Candidate ids as sent, refused while parsing once past
/// [`CANDIDATES_PER_VOTE_LIMIT`]: a huge array costs nothing past that.
#[derive(Debug, Default)]
pub struct CandidateList {
    pub ids: Vec<i64>,
    /// More ids were sent than the limit (the rest were not kept).
    pub over_limit: bool,
}

impl<'de> Deserialize<'de> for CandidateList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CandidateList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of candidate ids")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<CandidateList, A::Error> {
                let mut out = CandidateList::default();
                use crate::platform::extract::whole::Whole;
                while let Some(Whole(id)) = seq.next_element::<Whole<i64>>()? {
                    if out.ids.len() as i64 >= CANDIDATES_PER_VOTE_LIMIT {
                        out.over_limit = true;
                    } else {
                        out.ids.push(id);
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V)
    }
}

/// A vote that passed every rule of its district's ballot.
#[derive(Clone, Debug)]
pub struct Vote {
    pub election_id: i64,
    pub district_id: i64,
    pub party_id: i64,
    /// In the order sent (a preference order).
    pub candidate_ids: Vec<i64>,
}

impl Vote {
    /// The candidate ids as a JSON array, as stored and published.
    pub fn candidates_json(&self) -> String {
        let mut out = String::with_capacity(2 + self.candidate_ids.len() * 8);
        out.push('[');
        for (i, c) in self.candidate_ids.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(itoa::Buffer::new().format(*c));
        }
        out.push(']');
        out
    }
}

#[derive(Clone, Debug)]
pub struct Party {
    pub id: i64,
    pub name: String,
    pub short_name: String,
    /// As the authority's definition names it (none for seeded elections).
    pub code: Option<String>,
    /// `#rrggbb` from the definition; else derived from the id.
    pub colour: Option<String>,
}

/// Party colours: Tableau 10, told apart by most colour-blind readers too.
const PARTY_COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

impl Party {
    /// The party's colour on results pages, `#rrggbb`: derived from its id
    /// alone, so it is the same on every page, node and day. Ids 1 to 10
    /// take the palette; others a hue 137.5 degrees (the golden angle)
    /// from the previous id's, so neighbours differ.
    pub fn color(&self) -> String {
        match &self.colour {
            Some(c) => c.clone(),
            None => party_color(self.id),
        }
    }
}

pub fn party_color(id: i64) -> String {
    if (1..=PARTY_COLORS.len() as i64).contains(&id) {
        return PARTY_COLORS[id as usize - 1].to_string();
    }
    let hue = (id.rem_euclid(360 * 8) as f64 * 137.508).rem_euclid(360.0);
    let (s, l) = (0.55, 0.45);
    let c = (1.0 - (2.0 * l - 1.0f64).abs()) * s;
    let h = hue / 60.0;
    let x = c * (1.0 - (h.rem_euclid(2.0) - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

#[derive(Clone, Debug)]
pub struct Candidate {
    pub id: i64,
    pub name: String,
    pub list_position: i32,
}

/// One party's list in one district.
#[derive(Clone, Debug)]
pub struct PartyList {
    pub party_id: i64,
    /// In list order.
    pub candidates: Vec<Candidate>,
}

#[derive(Clone, Debug)]
pub struct District {
    pub id: i64,
    pub name: String,
    /// As the authority's definition names it (none for seeded elections).
    pub code: Option<String>,
    /// Where the district is published when too few voted in it on its
    /// own (see `opening.rs`).
    pub region: Option<String>,
    /// The district's ballot, in party-id order.
    pub lists: Vec<PartyList>,
    /// Voters on the district's roll.
    pub voters: i64,
}

impl District {
    pub fn list(&self, party_id: i64) -> Option<&PartyList> {
        self.lists
            .binary_search_by_key(&party_id, |l| l.party_id)
            .ok()
            .map(|i| &self.lists[i])
    }
}

/// An election's static data (it does not change while the election is open).
#[derive(Clone, Debug)]
pub struct Election {
    pub id: i64,
    pub name: String,
    pub opens_at_ms: i64,
    pub closes_at_ms: i64,
    pub candidates_per_vote_max: i64,
    /// In id order.
    pub districts: Vec<District>,
    /// In id order.
    pub parties: Vec<Party>,
    /// Where the election is in its lifecycle.
    pub state: ElectionState,
    /// Changed by every roll import: nodes reload the roll when it does.
    pub roll_version: i64,
    /// The key ballots are sealed to (none yet: the election cannot open).
    pub public_key: Option<Vec<u8>>,
    /// The board's last period (0: none yet), and whether it was the last
    /// one (taken after the close: the box is complete).
    pub board_period: i64,
    pub board_final: bool,
}

/// An election's lifecycle: draft (defined, roll amendable), open (votes
/// taken between the opening and closing times), suspended (no votes for
/// now), closed (no more votes; the box is being published), tallied
/// (every ballot published and counted), published (results public).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ElectionState {
    Draft,
    Open,
    Suspended,
    Closed,
    Tallied,
    Published,
}

impl ElectionState {
    pub fn as_str(self) -> &'static str {
        match self {
            ElectionState::Draft => "draft",
            ElectionState::Open => "open",
            ElectionState::Suspended => "suspended",
            ElectionState::Closed => "closed",
            ElectionState::Tallied => "tallied",
            ElectionState::Published => "published",
        }
    }

    pub fn parse(s: &str) -> Option<ElectionState> {
        Some(match s {
            "draft" => ElectionState::Draft,
            "open" => ElectionState::Open,
            "suspended" => ElectionState::Suspended,
            "closed" => ElectionState::Closed,
            "tallied" => ElectionState::Tallied,
            "published" => ElectionState::Published,
            _ => return None,
        })
    }

    /// No more votes will be taken: closed or later.
    pub fn is_over(self) -> bool {
        matches!(
            self,
            ElectionState::Closed | ElectionState::Tallied | ElectionState::Published
        )
    }
}

impl Election {
    pub fn district(&self, id: i64) -> Option<&District> {
        self.districts
            .binary_search_by_key(&id, |d| d.id)
            .ok()
            .map(|i| &self.districts[i])
    }

    pub fn party(&self, id: i64) -> Option<&Party> {
        self.parties
            .binary_search_by_key(&id, |p| p.id)
            .ok()
            .map(|i| &self.parties[i])
    }

    pub fn is_open(&self, now_ms: i64) -> bool {
        self.state == ElectionState::Open && (self.opens_at_ms..self.closes_at_ms).contains(&now_ms)
    }

    /// Whether party and candidate figures are public now: only once the
    /// authority published the trustees' results (nobody can read a ballot
    /// before the opening).
    pub fn results_shown(&self) -> bool {
        self.state == ElectionState::Published
    }

    pub fn district_by_code(&self, code: &str) -> Option<usize> {
        self.districts
            .iter()
            .position(|d| d.code.as_deref() == Some(code))
    }

    /// 409 `election_closed` unless open at `now_ms`, saying when it opens
    /// or when it closed.
    pub fn check_open(&self, now_ms: i64) -> Result<(), ApiError> {
        let at = |ms| crate::base::clock::rfc3339_ms(ms);
        match self.state {
            ElectionState::Open => {}
            ElectionState::Draft => {
                return Err(ApiError::conflict(
                    "election_closed",
                    "the election is a draft: it takes votes once its authority opens it",
                ))
            }
            ElectionState::Suspended => {
                return Err(ApiError::conflict(
                    "election_suspended",
                    "voting is suspended for now; try again later",
                ))
            }
            _ => {
                return Err(ApiError::conflict(
                    "election_closed",
                    format!("the election closed at {}", at(self.closes_at_ms)),
                ))
            }
        }
        if now_ms < self.opens_at_ms {
            return Err(ApiError::conflict(
                "election_closed",
                format!("the election opens at {}", at(self.opens_at_ms)),
            ));
        }
        if now_ms >= self.closes_at_ms {
            return Err(ApiError::conflict(
                "election_closed",
                format!("the election closed at {}", at(self.closes_at_ms)),
            ));
        }
        Ok(())
    }

    /// The vote a body makes in `district`, or the rule it breaks.
    pub fn parse_vote(&self, district: &District, req: VoteRequest) -> Result<Vote, ApiError> {
        let n_max = self.candidates_per_vote_max;
        if req.candidate_ids.over_limit || req.candidate_ids.ids.len() as i64 > n_max {
            return Err(ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "too_many_candidates",
                format!("candidateIds: at most {n_max} candidates in this election"),
            ));
        }
        let Some(list) = district.list(req.party_id) else {
            return Err(ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "party_not_on_ballot",
                format!(
                    "partyId: party {} is not on the ballot of district {}",
                    req.party_id, district.id
                ),
            ));
        };
        let ids = req.candidate_ids.ids;
        for (i, c) in ids.iter().enumerate() {
            if ids[..i].contains(c) {
                return Err(ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "repeated_candidate",
                    format!("candidateIds: candidate {c} is named twice"),
                ));
            }
            if !list.candidates.iter().any(|x| x.id == *c) {
                return Err(ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "candidate_not_on_list",
                    format!(
                        "candidateIds: candidate {c} is not on party {}'s list in district {}",
                        req.party_id, district.id
                    ),
                ));
            }
        }
        Ok(Vote {
            election_id: self.id,
            district_id: district.id,
            party_id: req.party_id,
            candidate_ids: ids,
        })
    }
}

/// A row of `voting_parties`: (election, party, name, short name, code,
/// colour).
pub type PartyRow = (i64, i64, String, String, Option<String>, Option<String>);

/// A row of `voting_elections`.
#[derive(Clone, Debug)]
pub struct ElectionRow {
    pub id: i64,
    pub name: String,
    pub opens_at_ms: i64,
    pub closes_at_ms: i64,
    pub candidates_per_vote_max: i64,
    pub state: ElectionState,
    pub roll_version: i64,
    pub public_key: Option<Vec<u8>>,
    pub board_period: i64,
    pub board_final: bool,
}

/// (election, district, name, code, region) of `voting_districts`.
pub type DistrictRow = (i64, i64, String, Option<String>, Option<String>);

/// Rows of the static tables, as loaded from either dialect.
#[derive(Default)]
pub struct ElectionRows {
    pub elections: Vec<ElectionRow>,
    /// (election, district, name, code, region)
    pub districts: Vec<DistrictRow>,
    /// (election, party, name, short name, code, colour)
    pub parties: Vec<PartyRow>,
    /// (election, candidate, district, party, list position, name)
    pub candidates: Vec<(i64, i64, i64, i64, i32, String)>,
}

impl ElectionRows {
    /// Assembles elections; `voters` counts voters per (election, district).
    pub fn assemble(self, voters: &HashMap<(i64, i64), i64>) -> Vec<Election> {
        let mut out: Vec<Election> = self
            .elections
            .into_iter()
            .map(|r| Election {
                id: r.id,
                name: r.name,
                opens_at_ms: r.opens_at_ms,
                closes_at_ms: r.closes_at_ms,
                candidates_per_vote_max: r.candidates_per_vote_max,
                districts: Vec::new(),
                parties: Vec::new(),
                state: r.state,
                roll_version: r.roll_version,
                public_key: r.public_key,
                board_period: r.board_period,
                board_final: r.board_final,
            })
            .collect();
        out.sort_by_key(|e| e.id);
        let find = |out: &mut Vec<Election>, id: i64| -> Option<usize> {
            out.binary_search_by_key(&id, |e| e.id).ok()
        };
        for (e, d, name, code, region) in self.districts {
            if let Some(i) = find(&mut out, e) {
                out[i].districts.push(District {
                    id: d,
                    name,
                    code,
                    region,
                    lists: Vec::new(),
                    voters: voters.get(&(e, d)).copied().unwrap_or(0),
                });
            }
        }
        for (e, p, name, short_name, code, colour) in self.parties {
            if let Some(i) = find(&mut out, e) {
                out[i].parties.push(Party {
                    id: p,
                    name,
                    short_name,
                    code,
                    colour,
                });
            }
        }
        for e in &mut out {
            e.districts.sort_by_key(|d| d.id);
            e.parties.sort_by_key(|p| p.id);
        }
        let mut candidates = self.candidates;
        candidates.sort_by_key(|c| (c.0, c.2, c.3, c.4, c.1));
        for (e, c, d, p, pos, name) in candidates {
            let Some(i) = find(&mut out, e) else { continue };
            let Ok(di) = out[i].districts.binary_search_by_key(&d, |x| x.id) else {
                continue;
            };
            let district = &mut out[i].districts[di];
            if district.lists.last().map(|l| l.party_id) != Some(p) {
                district.lists.push(PartyList {
                    party_id: p,
                    candidates: Vec::new(),
                });
            }
            district
                .lists
                .last_mut()
                .unwrap()
                .candidates
                .push(Candidate {
                    id: c,
                    name,
                    list_position: pos,
                });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn header_ids_are_positive_decimal_i64() {
        assert_eq!(
            header_id(&headers(&[("voter-id", "42")]), "voter-id").unwrap(),
            42
        );
        assert_eq!(
            header_id(&headers(&[("voter-id", " 7 ")]), "voter-id").unwrap(),
            7
        );
        for bad in [
            "0",
            "-1",
            "+1",
            "1.0",
            "abc",
            "",
            "9223372036854775808",
            "1e3",
            "0x10",
        ] {
            assert!(
                header_id(&headers(&[("voter-id", bad)]), "voter-id").is_err(),
                "{bad}"
            );
        }
        assert!(header_id(&headers(&[]), "voter-id").is_err());
        assert!(header_id(
            &headers(&[("voter-id", "1"), ("voter-id", "2")]),
            "voter-id"
        )
        .is_err());
    }

    #[test]
    fn huge_candidate_lists_stop_at_the_limit() {
        let ids: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
        let body = format!(r#"{{"partyId":1,"candidateIds":[{}]}}"#, ids.join(","));
        let v: VoteRequest = serde_json::from_str(&body).unwrap();
        assert!(v.candidate_ids.over_limit);
        assert_eq!(v.candidate_ids.ids.len() as i64, CANDIDATES_PER_VOTE_LIMIT);
    }

    #[test]
    fn candidates_print_as_a_json_array() {
        let v = Vote {
            election_id: 1,
            district_id: 1,
            party_id: 1,
            candidate_ids: vec![3, 10, 7],
        };
        assert_eq!(v.candidates_json(), "[3,10,7]");
        let v = Vote {
            candidate_ids: vec![],
            ..v
        };
        assert_eq!(v.candidates_json(), "[]");
    }
}

#[cfg(test)]
mod color_tests {
    use super::party_color;

    #[test]
    fn party_colors_are_stable_hex_and_differ_between_neighbours() {
        assert_eq!(party_color(1), "#4e79a7");
        assert_eq!(party_color(10), "#bab0ac");
        for id in [0, 11, 12, 99, 1_000_000, -5, i64::MAX] {
            let c = party_color(id);
            assert!(c.len() == 7 && c.starts_with('#'), "{id}: {c}");
            assert!(c[1..].bytes().all(|b| b.is_ascii_hexdigit()), "{id}: {c}");
            assert_eq!(c, party_color(id), "stable");
        }
        for id in 1..40 {
            assert_ne!(party_color(id), party_color(id + 1), "{id}");
        }
    }
}
