//! A sealed ballot: the voter's choice in a fixed-length encoding, sealed
//! in the voter's browser to the election's public key with HPKE (RFC 9180,
//! base mode: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM; the
//! `hpke` crate here, `@hpke/core` on the vote page). The server stores the
//! sealed bytes and cannot open them: the private key exists only as the
//! trustees' shares (`trustee.rs`) and is put together only by the opening
//! (`opening.rs`), after the close, away from the server.
//!
//! The choice, [`PLAIN_BYTES`] bytes whatever it holds (so the length of a
//! sealed ballot tells nothing):
//! - byte 0: the encoding's version, [`PLAIN_VERSION`];
//! - byte 1: the chosen list, as its 1-based position on the district's
//!   ballot (the ballot's `parties`, in the order the ballot lists them);
//!   0 chooses no list (a blank ballot, counted as spoiled);
//! - bytes 2..27: one bit per candidate of that list, by their 0-based
//!   position on it (bit `i % 8` of byte `2 + i / 8`), so candidates are in
//!   canonical order whatever order the voter clicked them in;
//! - bytes 27..32: zero.
//!
//! The HPKE `info` binds a ballot to its election and district, so a ballot
//! moved to another district's box does not open.
//!
//! A ballot's tracker is SHA-256 of its sealed bytes: the voter's page
//! computes it, and the public board lists the trackers of the ballots cast.

use hpke::aead::AesGcm128;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem as _, OpModeR, OpModeS, Serializable};
use rand::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};

/// The HPKE suite, as the key files and the election's answer name it.
pub const SUITE: &str = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM";

type Kem = X25519HkdfSha256;

/// Bytes of the election's public key (and of its private key).
pub const KEY_BYTES: usize = 32;
/// Bytes of the encapsulated key leading a sealed ballot.
pub const ENC_BYTES: usize = 32;
/// Bytes of an encoded choice.
pub const PLAIN_BYTES: usize = 32;
/// The encoding's version (byte 0 of a choice).
pub const PLAIN_VERSION: u8 = 1;
/// Bytes of AES-GCM's tag.
const AEAD_TAG_BYTES: usize = 16;
/// Bytes of every sealed ballot.
pub const SEALED_BYTES: usize = ENC_BYTES + PLAIN_BYTES + AEAD_TAG_BYTES;
/// Candidates of one list the encoding can name (its bitmap's bits).
pub const LIST_CANDIDATES_MAX: usize = 200;
/// Lists of one ballot the encoding can name.
pub const BALLOT_LISTS_MAX: usize = 255;
const BITMAP_AT: usize = 2;
const BITMAP_BYTES: usize = LIST_CANDIDATES_MAX / 8;

/// Bytes of a tracker.
pub const TRACKER_BYTES: usize = 32;

/// A ballot's tracker: SHA-256 of its sealed bytes.
pub type Tracker = [u8; TRACKER_BYTES];

/// The tracker of sealed bytes.
pub fn tracker(sealed: &[u8]) -> Tracker {
    Sha256::digest(sealed).into()
}

/// A tracker as pages and the API print it: base64url without padding
/// (43 characters).
pub fn tracker_text(t: &Tracker) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t)
}

/// A tracker from its printed form.
pub fn parse_tracker(s: &str) -> Option<Tracker> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim())
        .ok()?;
    bytes.try_into().ok()
}

/// Bytes as the key files, the box and the API carry them: base64url
/// without padding.
pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Bytes from [`b64`] (padding and standard alphabet accepted too).
pub fn from_b64(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let s = s.trim().trim_end_matches('=');
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(s))
        .ok()
}

/// HPKE's `info` for a ballot of `district_id` in `election_id`.
pub fn info(election_id: i64, district_id: i64) -> Vec<u8> {
    let mut v = b"throng-voting ballot v1".to_vec();
    v.extend_from_slice(&election_id.to_be_bytes());
    v.extend_from_slice(&district_id.to_be_bytes());
    v
}

/// A choice: a list (1-based position on the district's ballot) and its
/// candidates (0-based positions on that list, ascending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub list: u8,
    pub candidates: Vec<u16>,
}

/// Why an opened ballot is not a vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spoiled {
    /// The sealed bytes do not open with the election's key (garbage, or
    /// sealed for another election or district).
    Unopenable,
    /// Opened, but not a choice in the encoding.
    Malformed,
    /// No list chosen.
    Blank,
    /// The list is not on the district's ballot.
    NoSuchList,
    /// A candidate past the end of the chosen list.
    NoSuchCandidate,
    /// More candidates than the election allows.
    TooManyCandidates,
}

impl Spoiled {
    pub fn as_str(self) -> &'static str {
        match self {
            Spoiled::Unopenable => "unopenable",
            Spoiled::Malformed => "malformed",
            Spoiled::Blank => "blank",
            Spoiled::NoSuchList => "no_such_list",
            Spoiled::NoSuchCandidate => "no_such_candidate",
            Spoiled::TooManyCandidates => "too_many_candidates",
        }
    }
}

impl Choice {
    /// The fixed-length encoding. Positions past the encoding's limits are
    /// the caller's mistake.
    pub fn encode(&self) -> [u8; PLAIN_BYTES] {
        let mut p = [0u8; PLAIN_BYTES];
        p[0] = PLAIN_VERSION;
        p[1] = self.list;
        for &c in &self.candidates {
            let c = c as usize;
            assert!(c < LIST_CANDIDATES_MAX, "candidate position {c}");
            p[BITMAP_AT + c / 8] |= 1 << (c % 8);
        }
        p
    }

    /// A choice from its encoding, checked against the district's ballot:
    /// `list_lengths[i]` is the number of candidates of list `i + 1`.
    pub fn decode(
        p: &[u8],
        list_lengths: &[usize],
        candidates_max: usize,
    ) -> Result<Choice, Spoiled> {
        if p.len() != PLAIN_BYTES
            || p[0] != PLAIN_VERSION
            || p[BITMAP_AT + BITMAP_BYTES..].iter().any(|&b| b != 0)
        {
            return Err(Spoiled::Malformed);
        }
        let list = p[1];
        if list == 0 {
            return Err(Spoiled::Blank);
        }
        let Some(&len) = list_lengths.get(list as usize - 1) else {
            return Err(Spoiled::NoSuchList);
        };
        let mut candidates = Vec::new();
        for (i, &byte) in p[BITMAP_AT..BITMAP_AT + BITMAP_BYTES].iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    let c = i * 8 + bit;
                    if c >= len {
                        return Err(Spoiled::NoSuchCandidate);
                    }
                    candidates.push(c as u16);
                }
            }
        }
        if candidates.len() > candidates_max {
            return Err(Spoiled::TooManyCandidates);
        }
        Ok(Choice { list, candidates })
    }
}

/// A fresh key pair: (private, public).
pub fn generate_key(rng: &mut (impl RngCore + CryptoRng)) -> ([u8; KEY_BYTES], [u8; KEY_BYTES]) {
    let (sk, pk) = Kem::gen_keypair(rng);
    (sk.to_bytes().into(), pk.to_bytes().into())
}

/// The public key of a private key (to check shares put together).
pub fn public_of(private: &[u8]) -> Option<[u8; KEY_BYTES]> {
    let sk = <Kem as hpke::Kem>::PrivateKey::from_bytes(private).ok()?;
    Some(Kem::sk_to_pk(&sk).to_bytes().into())
}

/// Whether `public` is a usable public key.
pub fn valid_public_key(public: &[u8]) -> bool {
    public.len() == KEY_BYTES && <Kem as hpke::Kem>::PublicKey::from_bytes(public).is_ok()
}

/// Seals `plain` to `public` for `district_id` of `election_id`, as the
/// vote page does: `enc || ciphertext`, [`SEALED_BYTES`] for a
/// [`PLAIN_BYTES`] choice.
pub fn seal(
    public: &[u8],
    election_id: i64,
    district_id: i64,
    plain: &[u8],
    rng: &mut (impl RngCore + CryptoRng),
) -> Option<Vec<u8>> {
    let pk = <Kem as hpke::Kem>::PublicKey::from_bytes(public).ok()?;
    let (enc, ct) = hpke::single_shot_seal::<AesGcm128, HkdfSha256, Kem, _>(
        &OpModeS::Base,
        &pk,
        &info(election_id, district_id),
        plain,
        b"",
        rng,
    )
    .ok()?;
    let mut out = enc.to_bytes().to_vec();
    out.extend_from_slice(&ct);
    Some(out)
}

/// A private key ready to open many ballots.
pub struct Opener {
    sk: <Kem as hpke::Kem>::PrivateKey,
}

impl Opener {
    pub fn new(private: &[u8]) -> Option<Opener> {
        Some(Opener {
            sk: <Kem as hpke::Kem>::PrivateKey::from_bytes(private).ok()?,
        })
    }

    /// The choice's bytes, or `None` when `sealed` does not open (wrong
    /// length, garbage, another key, election or district).
    pub fn open(&self, election_id: i64, district_id: i64, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < ENC_BYTES + AEAD_TAG_BYTES {
            return None;
        }
        let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(&sealed[..ENC_BYTES]).ok()?;
        hpke::single_shot_open::<AesGcm128, HkdfSha256, Kem>(
            &OpModeR::Base,
            &self.sk,
            &enc,
            &info(election_id, district_id),
            &sealed[ENC_BYTES..],
            b"",
        )
        .ok()
    }
}

// ------------------------------------------------------------- the board

/// Bytes of a board or box digest.
pub const DIGEST_BYTES: usize = 32;
pub type Digest32 = [u8; DIGEST_BYTES];

/// A district's board digest before any ballot.
pub fn board_digest_start(election_id: i64, district_id: i64) -> Digest32 {
    let mut h = Sha256::new();
    h.update(b"throng-voting board v1");
    h.update(election_id.to_be_bytes());
    h.update(district_id.to_be_bytes());
    h.finalize().into()
}

/// A district's board digest after one period added `trackers` (sorted
/// ascending; a period that added none leaves the digest as it was).
pub fn board_digest_extend(prev: &Digest32, period: i64, trackers: &[Tracker]) -> Digest32 {
    if trackers.is_empty() {
        return *prev;
    }
    debug_assert!(trackers.windows(2).all(|w| w[0] < w[1]));
    let mut d = PeriodDigest::new(prev, period, trackers.len() as u64);
    for t in trackers {
        d.add(t);
    }
    d.into_digest()
}

/// [`board_digest_extend`] fed one tracker at a time, for a period too
/// large to hold: told the period's count first (the digest covers it
/// before the trackers), then given the trackers in ascending order.
pub struct PeriodDigest {
    h: Sha256,
    left: u64,
    last: Option<Tracker>,
    in_order: bool,
}

impl PeriodDigest {
    pub fn new(prev: &Digest32, period: i64, count: u64) -> PeriodDigest {
        let mut h = Sha256::new();
        h.update(prev);
        h.update(period.to_be_bytes());
        h.update(count.to_be_bytes());
        PeriodDigest {
            h,
            left: count,
            last: None,
            in_order: true,
        }
    }

    pub fn add(&mut self, t: &Tracker) {
        self.in_order &= self.left > 0 && self.last.is_none_or(|l| l < *t);
        self.left = self.left.saturating_sub(1);
        self.last = Some(*t);
        self.h.update(t);
    }

    /// The digest, or `None` when the trackers given were not the count
    /// announced or not in ascending order.
    pub fn finish(self) -> Option<Digest32> {
        (self.in_order && self.left == 0).then(|| self.into_digest())
    }

    /// The digest of what was given, checked or not.
    fn into_digest(self) -> Digest32 {
        self.h.finalize().into()
    }
}

/// The whole box's digest from every district's board digest, in district
/// id order.
pub fn box_digest(election_id: i64, districts: &[(i64, Digest32)]) -> Digest32 {
    let mut h = Sha256::new();
    h.update(b"throng-voting box v1");
    h.update(election_id.to_be_bytes());
    for (d, digest) in districts {
        h.update(d.to_be_bytes());
        h.update(digest);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_ballot_opens_only_with_its_key_election_and_district() {
        let mut rng = rand::rngs::OsRng;
        let (sk, pk) = generate_key(&mut rng);
        assert_eq!(public_of(&sk), Some(pk));
        let choice = Choice {
            list: 2,
            candidates: vec![0, 7, 199],
        };
        let plain = choice.encode();
        let sealed = seal(&pk, 4, 9, &plain, &mut rng).unwrap();
        assert_eq!(sealed.len(), SEALED_BYTES);
        let opener = Opener::new(&sk).unwrap();
        let opened = opener.open(4, 9, &sealed).unwrap();
        assert_eq!(Choice::decode(&opened, &[3, 200], 3), Ok(choice));
        assert_eq!(opener.open(4, 8, &sealed), None, "another district");
        assert_eq!(opener.open(5, 9, &sealed), None, "another election");
        let (other, _) = generate_key(&mut rng);
        assert_eq!(Opener::new(&other).unwrap().open(4, 9, &sealed), None);
        let mut altered = sealed.clone();
        altered[40] ^= 1;
        assert_eq!(opener.open(4, 9, &altered), None);
    }

    #[test]
    fn every_choice_seals_to_the_same_length() {
        let mut rng = rand::rngs::OsRng;
        let (_, pk) = generate_key(&mut rng);
        for candidates in [vec![], vec![1], vec![1, 2, 3, 4, 5, 6, 7, 8, 9]] {
            let c = Choice {
                list: 1,
                candidates,
            };
            assert_eq!(
                seal(&pk, 1, 1, &c.encode(), &mut rng).unwrap().len(),
                SEALED_BYTES
            );
        }
    }

    #[test]
    fn a_choice_outside_the_ballot_is_spoiled() {
        let c = |list, candidates: &[u16]| {
            Choice {
                list,
                candidates: candidates.to_vec(),
            }
            .encode()
        };
        let lists = [2, 5];
        assert_eq!(Choice::decode(&c(0, &[]), &lists, 3), Err(Spoiled::Blank));
        assert_eq!(
            Choice::decode(&c(3, &[]), &lists, 3),
            Err(Spoiled::NoSuchList)
        );
        assert_eq!(
            Choice::decode(&c(1, &[2]), &lists, 3),
            Err(Spoiled::NoSuchCandidate)
        );
        assert_eq!(
            Choice::decode(&c(2, &[0, 1, 2, 3]), &lists, 3),
            Err(Spoiled::TooManyCandidates)
        );
        let mut p = c(2, &[1]);
        p[31] = 1;
        assert_eq!(Choice::decode(&p, &lists, 3), Err(Spoiled::Malformed));
        assert_eq!(Choice::decode(&p[..31], &lists, 3), Err(Spoiled::Malformed));
        assert_eq!(
            Choice::decode(&c(2, &[4, 1]), &lists, 3)
                .unwrap()
                .candidates,
            vec![1, 4]
        );
    }

    #[test]
    fn the_board_digest_changes_with_any_tracker() {
        let start = board_digest_start(1, 2);
        let a = [[1u8; 32], [2u8; 32]];
        let d = board_digest_extend(&start, 1, &a);
        assert_ne!(d, start);
        assert_eq!(board_digest_extend(&d, 2, &[]), d);
        let mut fed = PeriodDigest::new(&start, 1, a.len() as u64);
        a.iter().for_each(|t| fed.add(t));
        assert_eq!(fed.finish(), Some(d), "fed one at a time: the same digest");
        let mut short = PeriodDigest::new(&start, 1, a.len() as u64 + 1);
        a.iter().for_each(|t| short.add(t));
        assert_eq!(short.finish(), None, "fewer trackers than announced");
        let mut reversed = PeriodDigest::new(&start, 1, a.len() as u64);
        a.iter().rev().for_each(|t| reversed.add(t));
        assert_eq!(reversed.finish(), None, "out of order");
        assert_ne!(board_digest_extend(&start, 1, &a[..1]), d);
        assert_ne!(board_digest_extend(&start, 2, &a), d);
        assert_ne!(box_digest(1, &[(2, d)]), box_digest(1, &[(2, start)]));
    }

    #[test]
    fn trackers_print_and_parse() {
        let t = tracker(b"sealed");
        let s = tracker_text(&t);
        assert_eq!(s.len(), 43);
        assert_eq!(parse_tracker(&s), Some(t));
        assert_eq!(parse_tracker("short"), None);
    }
}
