//! The ballot box as exported at the close, and the results the trustees'
//! opening writes: the two files that cross between the server and the
//! trustees' machine.
//!
//! The box holds sealed ballots only (no voter, no time finer than the
//! board's period) and every district's ballot, so the opening needs
//! nothing else; its digests are the board's ([`super::ballot`]), so anyone
//! holding the public board can check a box against it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `format` of a box file.
pub const BOX_FORMAT: &str = "throng-ballot-box/1";
/// `format` of a results file.
pub const RESULTS_FORMAT: &str = "throng-results/1";

/// An election's ballot box, exported once the election is closed.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoxFile {
    /// [`BOX_FORMAT`].
    pub format: String,
    pub election_id: i64,
    pub election_name: String,
    /// The election's public key (base64url, 32 bytes), as the ballots were
    /// sealed to it.
    pub public_key: String,
    /// Candidates a vote may name at most.
    pub candidates_per_vote_max: i64,
    /// A district with fewer ballots is published only inside its region
    /// (or, without one, inside the rest of the election).
    pub ballots_min: i64,
    /// By district id.
    pub districts: Vec<BoxDistrict>,
    /// [`super::ballot::box_digest`] of the districts' digests, hex.
    pub digest: String,
}

/// One district's ballot and sealed ballots.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoxDistrict {
    pub id: i64,
    pub code: Option<String>,
    pub name: String,
    /// The unit the authority names for publishing this district when it
    /// is too small on its own.
    pub region: Option<String>,
    /// The district's ballot: list `i` (0-based) is a choice's list `i + 1`.
    pub lists: Vec<BoxList>,
    /// By period, then tracker.
    pub ballots: Vec<BoxBallot>,
    /// The district's board digest after its last period, hex.
    pub digest: String,
}

/// A list of a district's ballot.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoxList {
    pub party_id: i64,
    /// Candidate ids in list order: bit `i` of a choice names
    /// `candidateIds[i]`.
    pub candidate_ids: Vec<i64>,
}

/// A sealed ballot and the board period that published its tracker.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoxBallot {
    pub period: i64,
    /// base64url of the sealed bytes.
    pub sealed: String,
}

/// The opened election, as the trustees' opening writes it and throng
/// publishes it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultsFile {
    /// [`RESULTS_FORMAT`].
    pub format: String,
    pub election_id: i64,
    /// The digest of the box opened, hex.
    pub box_digest: String,
    pub ballots_min: i64,
    /// Every district is in exactly one unit.
    pub units: Vec<ResultsUnit>,
}

/// What a unit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum UnitKind {
    /// A district with at least `ballotsMin` ballots, on its own.
    District,
    /// A region's districts that were too small on their own.
    Region,
    /// The districts too small on their own and without a region (or whose
    /// region was too small too).
    Rest,
}

/// A published unit: its counts and its opened ballots.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultsUnit {
    pub kind: UnitKind,
    /// The district's code or id, the region's name, or "rest".
    pub name: String,
    pub district_ids: Vec<i64>,
    /// Ballots opened (valid and spoiled).
    pub ballots: i64,
    pub spoiled: i64,
    /// By party id.
    pub parties: Vec<PartyCount>,
    /// Every opened ballot, in the opening's shuffled order.
    pub opened: Vec<OpenedBallot>,
}

/// A party's votes in a unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PartyCount {
    pub party_id: i64,
    pub votes: i64,
    /// By candidate id; candidates with no vote included.
    pub candidates: Vec<CandidateCount>,
}

/// A candidate's votes in a unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CandidateCount {
    pub candidate_id: i64,
    pub votes: i64,
}

/// An opened ballot: a party and its candidates (ascending ids), or
/// spoiled with the reason ([`super::ballot::Spoiled::as_str`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenedBallot {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub party_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_ids: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoiled: Option<String>,
}
