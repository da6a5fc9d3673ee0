//! The ballot box as exported at the close, and the results the trustees'
//! opening writes: the two files that cross between the server and the
//! trustees' machine.
//!
//! The box holds sealed ballots only (no voter, no time finer than the
//! board's period) and every district's ballot, so the opening needs
//! nothing else; its digests are the board's ([`super::ballot`]), so anyone
//! holding the public board can check a box against it.
//!
//! The opening ([`open_box`], [`open_box_with_shares`]) refuses a box whose
//! ballots do not give its digests (a ballot deleted, added, altered or
//! moved to another period) or, when given, whose digest is not the board's;
//! opens every ballot on every core; counts anything that does not open or
//! decode as spoiled with its reason, never as a vote; groups the districts
//! into units ([`plan_units`]: a district of at least `ballotsMin` ballots
//! alone, the smaller ones only inside their region, the rest together);
//! shuffles each unit's ballots (so their published order tells nothing of
//! the casting order) and counts them. [`recount`] recomputes a results
//! file's counts from its opened ballots; [`check_against_box`] checks it
//! against the box it claims to open.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::rngs::{OsRng, StdRng};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ballot;

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

// ------------------------------------------------------------ the opening

/// Why a box is not opened.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the box is of format {0:?}, not {BOX_FORMAT}: export it again from the server")]
    Format(String),
    #[error("the box is malformed: {0}")]
    Malformed(String),
    #[error(
        "district {district}'s ballots do not give its digest (a ballot was deleted, added or \
         altered since the board published it): the box is refused"
    )]
    DistrictDigest { district: String },
    #[error(
        "the districts' digests do not give the box's digest (a district was altered, added or \
         removed): the box is refused"
    )]
    BoxDigest,
    #[error(
        "the box's digest {found} is not the board's published digest {given}: this box is not \
         the one the board published, it is refused"
    )]
    BoardDigest { given: String, found: String },
    #[error("--board-digest {0:?} is not a digest: 64 hex digits, as the board prints it")]
    BoardDigestForm(String),
    #[error(
        "the key put together is not the box's public key: these trustees' shares belong to \
         another election"
    )]
    KeyMismatch,
    #[error("{0}")]
    Key(#[from] super::trustee::TrusteeError),
}

/// A box whose digests were checked: its sealed ballots decoded, in the
/// box's order.
pub struct CheckedBox<'a> {
    pub file: &'a BoxFile,
    /// Every ballot's sealed bytes, one after the other.
    bytes: Vec<u8>,
    /// Per ballot in box order: its district's index in `file.districts`,
    /// where its bytes start, and their length.
    ballots: Vec<(u32, u64, u32)>,
    /// The box's digest, recomputed.
    pub digest: ballot::Digest32,
}

impl CheckedBox<'_> {
    pub fn len(&self) -> usize {
        self.ballots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ballots.is_empty()
    }

    fn sealed(&self, i: usize) -> (usize, &[u8]) {
        let (d, start, len) = self.ballots[i];
        (
            d as usize,
            &self.bytes[start as usize..start as usize + len as usize],
        )
    }
}

fn digest_of_hex(s: &str) -> Option<ballot::Digest32> {
    hex::decode(s.trim()).ok()?.try_into().ok()
}

/// A district's board digest from its ballots: by period ascending, each
/// period's trackers sorted.
fn district_digest(
    election_id: i64,
    d: &BoxDistrict,
    sealed: &[&[u8]],
) -> Result<ballot::Digest32, OpenError> {
    let mut periods: BTreeMap<i64, Vec<ballot::Tracker>> = BTreeMap::new();
    for (b, s) in d.ballots.iter().zip(sealed) {
        periods
            .entry(b.period)
            .or_default()
            .push(ballot::tracker(s));
    }
    let mut digest = ballot::board_digest_start(election_id, d.id);
    for (period, mut trackers) in periods {
        trackers.sort_unstable();
        if trackers.windows(2).any(|w| w[0] == w[1]) {
            return Err(OpenError::Malformed(format!(
                "district {} holds the same sealed ballot twice",
                district_name(d)
            )));
        }
        digest = ballot::board_digest_extend(&digest, period, &trackers);
    }
    Ok(digest)
}

fn district_name(d: &BoxDistrict) -> String {
    d.code.clone().unwrap_or_else(|| d.id.to_string())
}

/// Checks a box against its own digests (every district's from its
/// ballots, the box's from the districts') and, when given, the board's
/// published digest (hex).
pub fn check_box<'a>(
    b: &'a BoxFile,
    board_digest: Option<&str>,
) -> Result<CheckedBox<'a>, OpenError> {
    if b.format != BOX_FORMAT {
        return Err(OpenError::Format(b.format.clone()));
    }
    let given = match board_digest {
        Some(s) => Some(digest_of_hex(s).ok_or_else(|| OpenError::BoardDigestForm(s.into()))?),
        None => None,
    };
    if b.districts.windows(2).any(|w| w[0].id >= w[1].id) {
        return Err(OpenError::Malformed(
            "its districts are not in ascending id order, or one repeats".into(),
        ));
    }
    let total: usize = b.districts.iter().map(|d| d.ballots.len()).sum();
    let mut bytes = Vec::with_capacity(total * ballot::SEALED_BYTES);
    let mut ballots = Vec::with_capacity(total);
    let mut digests = Vec::with_capacity(b.districts.len());
    for (di, d) in b.districts.iter().enumerate() {
        let first = ballots.len();
        for (i, ballot) in d.ballots.iter().enumerate() {
            let sealed = ballot::from_b64(&ballot.sealed).ok_or_else(|| {
                OpenError::Malformed(format!(
                    "district {}: ballot {} is not base64url",
                    district_name(d),
                    i + 1
                ))
            })?;
            ballots.push((di as u32, bytes.len() as u64, sealed.len() as u32));
            bytes.extend_from_slice(&sealed);
        }
        let sealed: Vec<&[u8]> = ballots[first..]
            .iter()
            .map(|&(_, start, len)| &bytes[start as usize..start as usize + len as usize])
            .collect();
        let digest = district_digest(b.election_id, d, &sealed)?;
        if digest_of_hex(&d.digest) != Some(digest) {
            return Err(OpenError::DistrictDigest {
                district: district_name(d),
            });
        }
        digests.push((d.id, digest));
    }
    let digest = ballot::box_digest(b.election_id, &digests);
    if digest_of_hex(&b.digest) != Some(digest) {
        return Err(OpenError::BoxDigest);
    }
    if let Some(given) = given {
        if given != digest {
            return Err(OpenError::BoardDigest {
                given: hex::encode(given),
                found: hex::encode(digest),
            });
        }
    }
    Ok(CheckedBox {
        file: b,
        bytes,
        ballots,
        digest,
    })
}

/// Sorts every district's ballots by period, then tracker, and writes the
/// districts' and the box's digests: a box as the server exports it.
pub fn seal_digests(b: &mut BoxFile) {
    b.districts.sort_by_key(|d| d.id);
    let mut digests = Vec::with_capacity(b.districts.len());
    for d in &mut b.districts {
        let mut keyed: Vec<(i64, ballot::Tracker, BoxBallot)> = d
            .ballots
            .drain(..)
            .map(|x| {
                let t = ballot::tracker(&ballot::from_b64(&x.sealed).unwrap_or_default());
                (x.period, t, x)
            })
            .collect();
        keyed.sort_by_key(|a| (a.0, a.1));
        let mut digest = ballot::board_digest_start(b.election_id, d.id);
        let mut i = 0;
        while i < keyed.len() {
            let period = keyed[i].0;
            let end = i + keyed[i..].iter().take_while(|k| k.0 == period).count();
            let trackers: Vec<ballot::Tracker> = keyed[i..end].iter().map(|k| k.1).collect();
            digest = ballot::board_digest_extend(&digest, period, &trackers);
            i = end;
        }
        d.ballots = keyed.into_iter().map(|k| k.2).collect();
        d.digest = hex::encode(digest);
        digests.push((d.id, digest));
    }
    b.digest = hex::encode(ballot::box_digest(b.election_id, &digests));
}

/// How the districts are published: each unit's kind, name and districts
/// (indexes into the box's districts, ascending). Districts first (by id),
/// then regions (by name), then the rest.
pub fn plan_units(b: &BoxFile) -> Vec<(UnitKind, String, Vec<usize>)> {
    let min = b.ballots_min.max(0) as usize;
    let mut units = Vec::new();
    let mut regions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut rest = Vec::new();
    for (i, d) in b.districts.iter().enumerate() {
        if d.ballots.len() >= min {
            units.push((UnitKind::District, district_name(d), vec![i]));
        } else if let Some(r) = d.region.as_deref() {
            regions.entry(r).or_default().push(i);
        } else {
            rest.push(i);
        }
    }
    for (name, members) in regions {
        let n: usize = members.iter().map(|&i| b.districts[i].ballots.len()).sum();
        if n >= min {
            units.push((UnitKind::Region, name.to_string(), members));
        } else {
            rest.extend(members);
        }
    }
    if !rest.is_empty() {
        rest.sort_unstable();
        units.push((UnitKind::Rest, "rest".into(), rest));
    }
    units
}

/// Ballots opened per progress report.
const OPEN_BLOCK: usize = 1024;

/// Opens one sealed ballot of district `d` and decodes it against the
/// district's ballot.
fn open_one(
    opener: &ballot::Opener,
    b: &BoxFile,
    d: &BoxDistrict,
    sealed: &[u8],
    lengths: &[usize],
) -> OpenedBallot {
    let spoiled = |s: ballot::Spoiled| OpenedBallot {
        party_id: None,
        candidate_ids: Vec::new(),
        spoiled: Some(s.as_str().to_string()),
    };
    let Some(plain) = opener.open(b.election_id, d.id, sealed) else {
        return spoiled(ballot::Spoiled::Unopenable);
    };
    let max = b.candidates_per_vote_max.max(0) as usize;
    match ballot::Choice::decode(&plain, lengths, max) {
        Ok(choice) => {
            let list = &d.lists[choice.list as usize - 1];
            let mut candidate_ids: Vec<i64> = choice
                .candidates
                .iter()
                .map(|&c| list.candidate_ids[c as usize])
                .collect();
            candidate_ids.sort_unstable();
            OpenedBallot {
                party_id: Some(list.party_id),
                candidate_ids,
                spoiled: None,
            }
        }
        Err(s) => spoiled(s),
    }
}

/// Opens every ballot of a checked box with the election's private key,
/// on every core; `progress` is told of ballots opened as it goes. Returns
/// the opened ballots in the box's order.
fn open_all(
    checked: &CheckedBox,
    private: &[u8],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<OpenedBallot>, OpenError> {
    let b = checked.file;
    let public = ballot::from_b64(&b.public_key);
    if public.is_none() || ballot::public_of(private).map(|p| p.to_vec()) != public {
        return Err(OpenError::KeyMismatch);
    }
    let opener = ballot::Opener::new(private).ok_or(OpenError::KeyMismatch)?;
    let lengths: Vec<Vec<usize>> = b
        .districts
        .iter()
        .map(|d| d.lists.iter().map(|l| l.candidate_ids.len()).collect())
        .collect();
    let n = checked.len();
    let blocks = n.div_ceil(OPEN_BLOCK);
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(1)
        .min(blocks.max(1));
    let mut done: Vec<(usize, Vec<OpenedBallot>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let block = next.fetch_add(1, Ordering::Relaxed);
                        if block >= blocks {
                            return mine;
                        }
                        let range = block * OPEN_BLOCK..((block + 1) * OPEN_BLOCK).min(n);
                        let opened: Vec<OpenedBallot> = range
                            .clone()
                            .map(|i| {
                                let (d, sealed) = checked.sealed(i);
                                open_one(&opener, b, &b.districts[d], sealed, &lengths[d])
                            })
                            .collect();
                        progress(range.len() as u64);
                        mine.push((block, opened));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("an opening thread panicked"))
            .collect()
    });
    done.sort_unstable_by_key(|(block, _)| *block);
    Ok(done.into_iter().flat_map(|(_, v)| v).collect())
}

/// The lists a unit's counts name: a district's own lists with their
/// candidates; for a unit of several districts, only their parties. Each
/// candidate stands in one district, so a candidate's count (or a ballot's
/// candidates) in a merged unit would publish that district's choices,
/// which is what merging it hides.
fn unit_lists<'a>(kind: UnitKind, lists: impl Iterator<Item = &'a BoxList>) -> Vec<BoxList> {
    lists
        .map(|l| BoxList {
            party_id: l.party_id,
            candidate_ids: if kind == UnitKind::District {
                l.candidate_ids.clone()
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// A unit's counts: every party of `lists` and every candidate of its
/// lists (0 included), by id, then the votes of `opened`.
fn count<'a>(
    lists: impl Iterator<Item = &'a BoxList>,
    opened: &[OpenedBallot],
) -> (i64, Vec<PartyCount>) {
    let mut parties: BTreeMap<i64, (i64, BTreeMap<i64, i64>)> = BTreeMap::new();
    for l in lists {
        let p = parties.entry(l.party_id).or_default();
        for &c in &l.candidate_ids {
            p.1.entry(c).or_insert(0);
        }
    }
    let mut spoiled = 0;
    for o in opened {
        match o.party_id {
            Some(party) if o.spoiled.is_none() => {
                let p = parties.entry(party).or_default();
                p.0 += 1;
                for &c in &o.candidate_ids {
                    *p.1.entry(c).or_insert(0) += 1;
                }
            }
            _ => spoiled += 1,
        }
    }
    let parties = parties
        .into_iter()
        .map(|(party_id, (votes, candidates))| PartyCount {
            party_id,
            votes,
            candidates: candidates
                .into_iter()
                .map(|(candidate_id, votes)| CandidateCount {
                    candidate_id,
                    votes,
                })
                .collect(),
        })
        .collect();
    (spoiled, parties)
}

/// Opens a box with the election's private key: checks its digests (and
/// the board's, when given), opens and decodes every ballot (anything that
/// does not is spoiled with its reason), groups the districts into units,
/// shuffles each unit's ballots and counts them.
pub fn open_box(
    b: &BoxFile,
    private: &[u8],
    board_digest: Option<&str>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ResultsFile, OpenError> {
    let checked = check_box(b, board_digest)?;
    open_checked(&checked, private, progress)
}

/// Opens a box already checked ([`check_box`]).
fn open_checked(
    checked: &CheckedBox,
    private: &[u8],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ResultsFile, OpenError> {
    let b = checked.file;
    let opened = open_all(checked, private, progress)?;
    // The opened ballots by district, in box order.
    let mut by_district: Vec<Vec<OpenedBallot>> = vec![Vec::new(); b.districts.len()];
    for (i, o) in opened.into_iter().enumerate() {
        by_district[checked.ballots[i].0 as usize].push(o);
    }
    let mut rng = StdRng::from_rng(OsRng).expect("the system's random source");
    let units = plan_units(b)
        .into_iter()
        .map(|(kind, name, members)| {
            let mut opened: Vec<OpenedBallot> = members
                .iter()
                .flat_map(|&i| std::mem::take(&mut by_district[i]))
                .collect();
            if kind != UnitKind::District {
                // Party only: see `unit_lists`.
                for o in &mut opened {
                    o.candidate_ids.clear();
                }
            }
            opened.shuffle(&mut rng);
            let lists = unit_lists(
                kind,
                members.iter().flat_map(|&i| b.districts[i].lists.iter()),
            );
            let (spoiled, parties) = count(lists.iter(), &opened);
            ResultsUnit {
                kind,
                name,
                district_ids: members.iter().map(|&i| b.districts[i].id).collect(),
                ballots: opened.len() as i64,
                spoiled,
                parties,
                opened,
            }
        })
        .collect();
    Ok(ResultsFile {
        format: RESULTS_FORMAT.into(),
        election_id: b.election_id,
        box_digest: hex::encode(checked.digest),
        ballots_min: b.ballots_min,
        units,
    })
}

/// Opens a box with the trustees' shares: puts the key together (at least
/// the threshold, all of one ceremony, checked against its public key and
/// the box's), opens, and wipes the key.
pub fn open_box_with_shares(
    b: &BoxFile,
    shares: &[super::trustee::ShareFile],
    board_digest: Option<&str>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ResultsFile, OpenError> {
    // Refuse a box that does not check before putting the key together.
    let checked = check_box(b, board_digest)?;
    let (private, public) = super::trustee::combine(shares)?;
    if Some(public.to_vec()) != ballot::from_b64(&b.public_key) {
        return Err(OpenError::KeyMismatch);
    }
    open_checked(&checked, &private[..], progress)
}

/// Problems listed at most, after which "and N more".
const PROBLEMS_MAX: usize = 20;

/// Recounts a results file: every unit's counts recomputed from its opened
/// ballots and compared with the published ones. The differences, first
/// first, when any.
pub fn recount(r: &ResultsFile) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if r.format != RESULTS_FORMAT {
        problems.push(format!(
            "the file is of format {:?}, not {RESULTS_FORMAT}",
            r.format
        ));
    }
    for u in &r.units {
        let at = format!("unit {} ({:?})", u.name, u.kind);
        if u.ballots != u.opened.len() as i64 {
            problems.push(format!(
                "{at}: ballots is {} but {} opened ballots are listed",
                u.ballots,
                u.opened.len()
            ));
        }
        for (i, o) in u.opened.iter().enumerate() {
            let valid = o.party_id.is_some() && o.spoiled.is_none();
            let spoiled = o.party_id.is_none() && o.candidate_ids.is_empty() && o.spoiled.is_some();
            if !valid && !spoiled {
                problems.push(format!(
                    "{at}: opened ballot {} is neither a vote for a party nor spoiled with \
                         a reason",
                    i + 1
                ));
            }
        }
        let (spoiled, counted) = count(std::iter::empty(), &u.opened);
        if spoiled != u.spoiled {
            problems.push(format!(
                "{at}: spoiled is {} but the opened ballots hold {spoiled}",
                u.spoiled
            ));
        }
        let counted: BTreeMap<i64, &PartyCount> = counted.iter().map(|p| (p.party_id, p)).collect();
        let listed: BTreeMap<i64, &PartyCount> =
            u.parties.iter().map(|p| (p.party_id, p)).collect();
        if listed.len() != u.parties.len() {
            problems.push(format!("{at}: a party is listed twice"));
        }
        for (party, p) in &listed {
            let votes = counted.get(party).map_or(0, |c| c.votes);
            if p.votes != votes {
                problems.push(format!(
                    "{at}: party {party} has {} votes but the opened ballots give {votes}",
                    p.votes
                ));
            }
            let got: BTreeMap<i64, i64> = counted
                .get(party)
                .map(|c| {
                    c.candidates
                        .iter()
                        .map(|c| (c.candidate_id, c.votes))
                        .collect()
                })
                .unwrap_or_default();
            let mut listed_candidates = std::collections::BTreeSet::new();
            for c in &p.candidates {
                listed_candidates.insert(c.candidate_id);
                let votes = got.get(&c.candidate_id).copied().unwrap_or(0);
                if c.votes != votes {
                    problems.push(format!(
                        "{at}: candidate {} of party {party} has {} votes but the opened \
                             ballots give {votes}",
                        c.candidate_id, c.votes
                    ));
                }
            }
            for (c, votes) in &got {
                if !listed_candidates.contains(c) {
                    problems.push(format!(
                        "{at}: candidate {c} of party {party} has {votes} votes in the \
                             opened ballots but is not listed"
                    ));
                }
            }
        }
        for (party, c) in &counted {
            if !listed.contains_key(party) {
                problems.push(format!(
                    "{at}: party {party} has {} votes in the opened ballots but is not listed",
                    c.votes
                ));
            }
        }
    }
    finish(problems)
}

fn finish(mut problems: Vec<String>) -> Result<(), Vec<String>> {
    if problems.is_empty() {
        return Ok(());
    }
    if problems.len() > PROBLEMS_MAX {
        let more = problems.len() - PROBLEMS_MAX;
        problems.truncate(PROBLEMS_MAX);
        problems.push(format!("and {more} more"));
    }
    Err(problems)
}

/// Checks a results file against the box it claims to open: the box checks
/// (its digests), the same digest and election, every district in exactly
/// one unit as the box's sizes place it, each unit holding its districts'
/// ballots and listing exactly their lists' parties and candidates.
pub fn check_against_box(r: &ResultsFile, b: &BoxFile) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    let checked = match check_box(b, None) {
        Ok(c) => c,
        Err(e) => return Err(vec![format!("the box: {e}")]),
    };
    if r.election_id != b.election_id {
        problems.push(format!(
            "the results are of election {}, the box of election {}",
            r.election_id, b.election_id
        ));
    }
    if digest_of_hex(&r.box_digest) != Some(checked.digest) {
        problems.push(format!(
            "the results opened a box of digest {}, not this box ({})",
            r.box_digest,
            hex::encode(checked.digest)
        ));
    }
    if r.ballots_min != b.ballots_min {
        problems.push(format!(
            "ballotsMin is {} in the results but {} in the box",
            r.ballots_min, b.ballots_min
        ));
    }
    let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
    for u in &r.units {
        for d in &u.district_ids {
            *seen.entry(*d).or_default() += 1;
        }
    }
    for d in &b.districts {
        match seen.remove(&d.id).unwrap_or(0) {
            1 => {}
            0 => problems.push(format!("district {} is in no unit", district_name(d))),
            k => problems.push(format!("district {} is in {k} units", district_name(d))),
        }
    }
    for d in seen.keys() {
        problems.push(format!("district id {d} is in a unit but not in the box"));
    }
    let planned = plan_units(b);
    for (kind, name, members) in &planned {
        let ids: Vec<i64> = members.iter().map(|&i| b.districts[i].id).collect();
        let Some(u) = r.units.iter().find(|u| {
            let mut mine = u.district_ids.clone();
            mine.sort_unstable();
            mine == ids
        }) else {
            problems.push(format!(
                "no unit {name} ({kind:?}) of districts {ids:?}, as the box's sizes place them"
            ));
            continue;
        };
        if u.kind != *kind || u.name != *name {
            problems.push(format!(
                "unit {} ({:?}) should be {name} ({kind:?})",
                u.name, u.kind
            ));
        }
        let ballots: usize = members.iter().map(|&i| b.districts[i].ballots.len()).sum();
        if u.ballots != ballots as i64 || u.opened.len() != ballots {
            problems.push(format!(
                "unit {name}: {} ballots ({} opened) but the box holds {ballots} for its \
                     districts",
                u.ballots,
                u.opened.len()
            ));
        }
        let lists = unit_lists(
            u.kind,
            members.iter().flat_map(|&i| b.districts[i].lists.iter()),
        );
        let (_, expected) = count(lists.iter(), &[]);
        let ids_of = |ps: &[PartyCount]| -> Vec<(i64, Vec<i64>)> {
            ps.iter()
                .map(|p| {
                    (
                        p.party_id,
                        p.candidates.iter().map(|c| c.candidate_id).collect(),
                    )
                })
                .collect()
        };
        if ids_of(&u.parties) != ids_of(&expected) {
            problems.push(format!(
                "unit {name}: its parties and candidates are not its districts' lists"
            ));
        }
    }
    if r.units.len() != planned.len() {
        problems.push(format!(
            "{} units published, the box's sizes make {}",
            r.units.len(),
            planned.len()
        ));
    }
    finish(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::voting::ballot::{Choice, Spoiled};
    use crate::services::voting::trustee;

    const ELECTION: i64 = 7;

    struct Key {
        private: [u8; 32],
        public: [u8; 32],
    }

    fn key() -> Key {
        let (private, public) = ballot::generate_key(&mut OsRng);
        Key { private, public }
    }

    fn district(id: i64, region: Option<&str>, lists: &[(i64, &[i64])]) -> BoxDistrict {
        BoxDistrict {
            id,
            code: Some(format!("D{id}")),
            name: format!("District {id}"),
            region: region.map(str::to_string),
            lists: lists
                .iter()
                .map(|(party_id, c)| BoxList {
                    party_id: *party_id,
                    candidate_ids: c.to_vec(),
                })
                .collect(),
            ballots: Vec::new(),
            digest: String::new(),
        }
    }

    fn empty_box(k: &Key, ballots_min: i64, districts: Vec<BoxDistrict>) -> BoxFile {
        BoxFile {
            format: BOX_FORMAT.into(),
            election_id: ELECTION,
            election_name: "Test".into(),
            public_key: ballot::b64(&k.public),
            candidates_per_vote_max: 3,
            ballots_min,
            districts,
            digest: String::new(),
        }
    }

    /// Seals `plain` for district `sealed_for` into district `into`'s box.
    fn cast_raw(b: &mut BoxFile, k: &Key, into: i64, sealed_for: i64, period: i64, plain: &[u8]) {
        let sealed = ballot::seal(&k.public, ELECTION, sealed_for, plain, &mut OsRng).unwrap();
        cast_bytes(b, into, period, &sealed);
    }

    fn cast_bytes(b: &mut BoxFile, into: i64, period: i64, sealed: &[u8]) {
        let d = b.districts.iter_mut().find(|d| d.id == into).unwrap();
        d.ballots.push(BoxBallot {
            period,
            sealed: ballot::b64(sealed),
        });
    }

    fn cast(b: &mut BoxFile, k: &Key, district: i64, list: u8, candidates: &[u16]) {
        let plain = Choice {
            list,
            candidates: candidates.to_vec(),
        }
        .encode();
        cast_raw(b, k, district, district, 1, &plain);
    }

    fn no_progress(_: u64) {}

    fn party(u: &ResultsUnit, id: i64) -> &PartyCount {
        u.parties.iter().find(|p| p.party_id == id).unwrap()
    }

    fn votes(u: &ResultsUnit, party_id: i64, candidate: i64) -> i64 {
        party(u, party_id)
            .candidates
            .iter()
            .find(|c| c.candidate_id == candidate)
            .unwrap()
            .votes
    }

    #[test]
    fn a_box_opens_into_the_counts_of_its_ballots() {
        let k = key();
        let mut b = empty_box(
            &k,
            1,
            vec![district(
                1,
                None,
                &[(10, &[100, 101, 102]), (20, &[200, 201])],
            )],
        );
        cast(&mut b, &k, 1, 1, &[0, 2]);
        cast(&mut b, &k, 1, 1, &[2]);
        cast(&mut b, &k, 1, 2, &[]);
        seal_digests(&mut b);
        let r = open_box(&b, &k.private, Some(&b.digest.clone()), &no_progress).unwrap();
        assert_eq!(r.format, RESULTS_FORMAT);
        assert_eq!(r.box_digest, b.digest);
        assert_eq!(r.units.len(), 1);
        let u = &r.units[0];
        assert_eq!((u.kind, u.name.as_str()), (UnitKind::District, "D1"));
        assert_eq!((u.ballots, u.spoiled), (3, 0));
        assert_eq!(party(u, 10).votes, 2);
        assert_eq!(party(u, 20).votes, 1);
        assert_eq!(
            [100, 101, 102].map(|c| votes(u, 10, c)),
            [1, 0, 2],
            "every candidate listed, 0 included"
        );
        assert_eq!([200, 201].map(|c| votes(u, 20, c)), [0, 0]);
        let mut opened = u.opened.clone();
        opened.sort_by_key(|o| (o.party_id, o.candidate_ids.clone()));
        assert_eq!(opened[0].candidate_ids, vec![100, 102]);
        assert_eq!(opened[1].candidate_ids, vec![102]);
        assert_eq!(recount(&r), Ok(()));
        assert_eq!(check_against_box(&r, &b), Ok(()));
        // The results file reads back as written.
        let text = serde_json::to_string(&r).unwrap();
        let back: ResultsFile = serde_json::from_str(&text).unwrap();
        assert_eq!(recount(&back), Ok(()));
    }

    #[test]
    fn the_trustees_shares_open_the_box_only_at_the_threshold() {
        let c = trustee::make_key(3, 5, &mut OsRng).unwrap();
        let public: [u8; 32] = ballot::from_b64(&c.key.public_key)
            .unwrap()
            .try_into()
            .unwrap();
        let k = Key {
            private: [0; 32],
            public,
        };
        let mut b = empty_box(&k, 1, vec![district(1, None, &[(10, &[100])])]);
        cast(&mut b, &k, 1, 1, &[0]);
        seal_digests(&mut b);
        for subset in [[0, 1, 2], [1, 3, 4], [0, 2, 4]] {
            let shares: Vec<_> = subset.iter().map(|&i| c.shares[i].clone()).collect();
            let r = open_box_with_shares(&b, &shares, None, &no_progress).unwrap();
            assert_eq!(party(&r.units[0], 10).votes, 1);
        }
        let two = [c.shares[0].clone(), c.shares[4].clone()];
        assert_eq!(
            open_box_with_shares(&b, &two, None, &no_progress).unwrap_err(),
            OpenError::Key(trustee::TrusteeError::TooFew { have: 2, need: 3 })
        );
        // Another election's shares.
        let other = trustee::make_key(2, 3, &mut OsRng).unwrap();
        assert_eq!(
            open_box_with_shares(&b, &other.shares[..2], None, &no_progress).unwrap_err(),
            OpenError::KeyMismatch
        );
        assert_eq!(
            open_box(&b, &key().private, None, &no_progress).unwrap_err(),
            OpenError::KeyMismatch
        );
    }

    #[test]
    fn ballots_that_do_not_open_or_decode_are_spoiled_never_votes() {
        let k = key();
        let mut b = empty_box(
            &k,
            1,
            vec![
                district(1, None, &[(10, &[100, 101, 102, 103, 104])]),
                district(2, None, &[(10, &[100, 101])]),
            ],
        );
        cast(&mut b, &k, 1, 1, &[0, 1, 2, 3]); // 4 of at most 3
        cast(&mut b, &k, 1, 0, &[]); // blank
        cast(&mut b, &k, 1, 2, &[0]); // no such list
        let mut malformed = Choice {
            list: 1,
            candidates: vec![0],
        }
        .encode();
        malformed[0] = 9;
        cast_raw(&mut b, &k, 1, 1, 1, &malformed);
        let garbage: Vec<u8> = (0..ballot::SEALED_BYTES).map(|_| rand::random()).collect();
        cast_bytes(&mut b, 1, 1, &garbage);
        cast_bytes(&mut b, 1, 1, b"short");
        // Sealed for district 2, put into district 1's box.
        let plain = Choice {
            list: 1,
            candidates: vec![0],
        }
        .encode();
        cast_raw(&mut b, &k, 1, 2, 1, &plain);
        cast(&mut b, &k, 1, 1, &[4]); // the one vote
        seal_digests(&mut b);
        let r = open_box(&b, &k.private, None, &no_progress).unwrap();
        let u = r.units.iter().find(|u| u.name == "D1").unwrap();
        assert_eq!((u.ballots, u.spoiled), (8, 7));
        assert_eq!(party(u, 10).votes, 1);
        for (c, v) in [(100, 0), (101, 0), (102, 0), (103, 0), (104, 1)] {
            assert_eq!(votes(u, 10, c), v, "candidate {c}");
        }
        let mut reasons: Vec<&str> = u
            .opened
            .iter()
            .filter_map(|o| {
                assert!(
                    o.spoiled.is_none() || (o.party_id.is_none() && o.candidate_ids.is_empty())
                );
                o.spoiled.as_deref()
            })
            .collect();
        reasons.sort_unstable();
        let mut expected = vec![
            Spoiled::TooManyCandidates.as_str(),
            Spoiled::Blank.as_str(),
            Spoiled::NoSuchList.as_str(),
            Spoiled::Malformed.as_str(),
            Spoiled::Unopenable.as_str(),
            Spoiled::Unopenable.as_str(),
            Spoiled::Unopenable.as_str(),
        ];
        expected.sort_unstable();
        assert_eq!(reasons, expected);
        assert_eq!(recount(&r), Ok(()));
        assert_eq!(check_against_box(&r, &b), Ok(()));
    }

    #[test]
    fn a_box_with_a_deleted_or_altered_ballot_is_refused() {
        let k = key();
        let mut b = empty_box(
            &k,
            1,
            vec![
                district(1, None, &[(10, &[100])]),
                district(2, None, &[(10, &[100])]),
            ],
        );
        for _ in 0..3 {
            cast(&mut b, &k, 1, 1, &[0]);
            cast(&mut b, &k, 2, 1, &[]);
        }
        seal_digests(&mut b);
        assert!(check_box(&b, Some(&b.digest)).is_ok());
        let district_1 = OpenError::DistrictDigest {
            district: "D1".into(),
        };

        let mut deleted = b.clone();
        deleted.districts[0].ballots.remove(1);
        assert_eq!(
            open_box(&deleted, &k.private, None, &no_progress).unwrap_err(),
            district_1
        );

        let mut altered = b.clone();
        let mut sealed = ballot::from_b64(&altered.districts[0].ballots[0].sealed).unwrap();
        sealed[50] ^= 1;
        altered.districts[0].ballots[0].sealed = ballot::b64(&sealed);
        assert_eq!(
            open_box(&altered, &k.private, None, &no_progress).unwrap_err(),
            district_1
        );

        // Moved to another board period.
        let mut moved = b.clone();
        moved.districts[0].ballots[0].period = 2;
        assert_eq!(check_box(&moved, None).err(), Some(district_1));

        // A deleted ballot with the district's digest rewritten to match:
        // the box's digest no longer does.
        let mut rewritten = b.clone();
        rewritten.districts[1].ballots.pop();
        let box_digest = rewritten.digest.clone();
        seal_digests(&mut rewritten);
        rewritten.digest = box_digest;
        assert_eq!(
            check_box(&rewritten, None).err(),
            Some(OpenError::BoxDigest)
        );

        // Every digest rewritten: consistent, but not the board's.
        let mut resealed = b.clone();
        resealed.districts[1].ballots.pop();
        seal_digests(&mut resealed);
        assert!(check_box(&resealed, None).is_ok());
        assert!(matches!(
            open_box(&resealed, &k.private, Some(&b.digest), &no_progress).unwrap_err(),
            OpenError::BoardDigest { .. }
        ));
        assert_eq!(
            check_box(&b, Some("abc")).err(),
            Some(OpenError::BoardDigestForm("abc".into()))
        );

        // The same ballot twice.
        let mut twice = b.clone();
        let again = twice.districts[0].ballots[0].clone();
        twice.districts[0].ballots.push(again);
        assert!(matches!(
            check_box(&twice, None).err(),
            Some(OpenError::Malformed(_))
        ));

        let mut format = b.clone();
        format.format = "throng-ballot-box/9".into();
        assert!(matches!(
            check_box(&format, None).err(),
            Some(OpenError::Format(_))
        ));
    }

    #[test]
    fn small_districts_are_published_only_inside_their_region_or_the_rest() {
        let k = key();
        let lists: &[(i64, &[i64])] = &[(10, &[100, 101])];
        let mut b = empty_box(
            &k,
            3,
            vec![
                district(1, Some("North"), lists), // 1 ballot
                district(2, Some("North"), &[(10, &[100, 101]), (20, &[200])]), // 2
                district(3, Some("North"), lists), // 5: on its own
                district(4, None, lists),          // 1, no region
                district(5, Some("South"), lists), // 1, region too small
                district(6, Some("East"), lists),  // 0
            ],
        );
        for (d, n) in [(1, 1), (2, 2), (3, 5), (4, 1), (5, 1)] {
            for _ in 0..n {
                cast(&mut b, &k, d, 1, &[1]);
            }
        }
        seal_digests(&mut b);
        let r = open_box(&b, &k.private, None, &no_progress).unwrap();
        let units: Vec<(UnitKind, &str, &[i64], i64)> = r
            .units
            .iter()
            .map(|u| (u.kind, u.name.as_str(), &u.district_ids[..], u.ballots))
            .collect();
        assert_eq!(
            units,
            [
                (UnitKind::District, "D3", &[3][..], 5),
                (UnitKind::Region, "North", &[1, 2][..], 3),
                (UnitKind::Rest, "rest", &[4, 5, 6][..], 2),
            ]
        );
        // No unit holds a small district on its own.
        for u in &r.units {
            if u.district_ids.len() == 1 {
                assert!(u.ballots >= b.ballots_min, "{}", u.name);
            }
        }
        let north = &r.units[1];
        assert_eq!(party(north, 10).votes, 3);
        assert_eq!(party(north, 20).votes, 0, "district 2's own list is listed");
        // A merged unit names no candidate: each stands in one district, so
        // their counts would publish that district's choices.
        assert!(north.parties.iter().all(|p| p.candidates.is_empty()));
        assert!(north.opened.iter().all(|o| o.candidate_ids.is_empty()));
        assert_eq!(recount(&r), Ok(()));
        assert_eq!(check_against_box(&r, &b), Ok(()));

        // A results file that publishes a small district on its own.
        let mut split = r.clone();
        let mut alone = split.units[1].clone();
        split.units[1].district_ids = vec![2];
        alone.district_ids = vec![1];
        split.units.push(alone);
        let problems = check_against_box(&split, &b).unwrap_err();
        assert!(
            problems.iter().any(|p| p.contains("no unit North")),
            "{problems:?}"
        );
    }

    /// Spearman's rank correlation of two permutations of 0..n.
    fn spearman(a: &[usize], b: &[usize]) -> f64 {
        let n = a.len() as f64;
        let d2: f64 = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
            .sum();
        1.0 - 6.0 * d2 / (n * (n * n - 1.0))
    }

    #[test]
    fn the_opened_order_is_independent_of_the_casting_order() {
        let k = key();
        let candidates: Vec<i64> = (0..20).map(|c| 1000 + c).collect();
        let mut b = empty_box(&k, 1, vec![district(1, None, &[(10, &candidates)])]);
        b.candidates_per_vote_max = 5;
        // 1,000 distinct choices of 1 to 5 of the list's 20 candidates, in
        // the order cast; each board period publishes ten.
        let mut cast_order = std::collections::HashMap::new();
        let choices: Vec<Vec<u16>> = (1u32..1 << 20)
            .filter(|m| (1..=5).contains(&m.count_ones()))
            .take(1000)
            .map(|m| (0..20).filter(|i| m & (1 << i) != 0).collect())
            .collect();
        for (i, c) in choices.iter().enumerate() {
            let plain = Choice {
                list: 1,
                candidates: c.clone(),
            }
            .encode();
            let sealed = ballot::seal(&k.public, ELECTION, 1, &plain, &mut OsRng).unwrap();
            cast_order.insert(ballot::tracker(&sealed), i);
            cast_bytes(&mut b, 1, i as i64 / 10, &sealed);
        }
        seal_digests(&mut b);
        let cast_index = |ids: &[i64]| -> usize {
            let positions: Vec<u16> = ids.iter().map(|&c| (c - 1000) as u16).collect();
            choices.iter().position(|c| *c == positions).unwrap()
        };
        // The box's own order follows the casting order (periods).
        let boxed: Vec<usize> = b.districts[0]
            .ballots
            .iter()
            .map(|x| cast_order[&ballot::tracker(&ballot::from_b64(&x.sealed).unwrap())])
            .collect();
        let identity: Vec<usize> = (0..1000).collect();
        assert!(spearman(&boxed, &identity) > 0.9);

        let r = open_box(&b, &k.private, None, &no_progress).unwrap();
        let u = &r.units[0];
        assert_eq!((u.ballots, u.spoiled), (1000, 0));
        let opened: Vec<usize> = u
            .opened
            .iter()
            .map(|o| cast_index(&o.candidate_ids))
            .collect();
        let mut seen = opened.clone();
        seen.sort_unstable();
        assert_eq!(seen, identity, "every ballot opened once");
        // Rank of each ballot in the published order, by casting index.
        let mut published_rank = vec![0; 1000];
        for (pos, &i) in opened.iter().enumerate() {
            published_rank[i] = pos;
        }
        let rho = spearman(&identity, &published_rank);
        assert!(rho.abs() < 0.15, "rho = {rho}");
        assert_eq!(recount(&r), Ok(()));
        assert_eq!(check_against_box(&r, &b), Ok(()));
    }

    #[test]
    fn recount_and_the_box_check_detect_an_altered_result() {
        let k = key();
        let mut b = empty_box(
            &k,
            1,
            vec![
                district(1, None, &[(10, &[100, 101]), (20, &[200])]),
                district(2, None, &[(10, &[100, 101])]),
            ],
        );
        for _ in 0..3 {
            cast(&mut b, &k, 1, 1, &[0]);
            cast(&mut b, &k, 1, 2, &[0]);
            cast(&mut b, &k, 2, 1, &[1]);
        }
        cast(&mut b, &k, 1, 0, &[]);
        seal_digests(&mut b);
        let r = open_box(&b, &k.private, None, &no_progress).unwrap();
        assert_eq!(recount(&r), Ok(()));

        let mut count = r.clone();
        count.units[0].parties[0].votes += 1;
        let problems = recount(&count).unwrap_err();
        assert_eq!(
            problems,
            ["unit D1 (District): party 10 has 4 votes but the opened ballots give 3"]
        );

        let mut candidate = r.clone();
        candidate.units[1].parties[0].candidates[1].votes = 2;
        let problems = recount(&candidate).unwrap_err();
        assert!(
            problems[0].contains("candidate 101 of party 10 has 2 votes"),
            "{problems:?}"
        );

        let mut spoiled = r.clone();
        spoiled.units[0].spoiled = 0;
        assert!(recount(&spoiled).unwrap_err()[0].contains("spoiled is 0"));

        // A ballot changed: counts and ballots no longer agree.
        let mut ballot = r.clone();
        let o = ballot.units[0]
            .opened
            .iter_mut()
            .find(|o| o.party_id == Some(20))
            .unwrap();
        o.party_id = Some(10);
        o.candidate_ids = vec![101];
        assert_eq!(recount(&ballot).unwrap_err().len(), 4);

        // A ballot dropped, its counts adjusted: recount matches, the box
        // does not.
        let mut dropped = r.clone();
        let o = dropped.units[1].opened.pop().unwrap();
        assert_eq!(o.candidate_ids, vec![101]);
        dropped.units[1].ballots -= 1;
        dropped.units[1].parties[0].votes -= 1;
        dropped.units[1].parties[0].candidates[1].votes -= 1;
        assert_eq!(recount(&dropped), Ok(()));
        let problems = check_against_box(&dropped, &b).unwrap_err();
        assert!(problems[0].contains("unit D2: 2 ballots"), "{problems:?}");

        let mut other_box = b.clone();
        cast(&mut other_box, &k, 2, 1, &[0]);
        seal_digests(&mut other_box);
        let problems = check_against_box(&r, &other_box).unwrap_err();
        assert!(problems[0].contains("not this box"), "{problems:?}");
    }
}
