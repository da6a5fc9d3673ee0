//! Signed visitor ids and display ids.
//!
//! A visitor is a random 63-bit id (the write-up's 32-bit ids collided 0.1%
//! over 6M visitors; 63 bits collide with a chance of ~n²/2^64, 2e-6 for
//! 6M), never derived from an IP address or a fingerprint. It travels as a
//! signed value: 27 characters of base64url over the id (8 bytes), a flags
//! byte (bit 0: sampled in, decided when the id was made and kept) and 11
//! bytes of HMAC-SHA256 over the site, the id and the flags, keyed by a key
//! derived from the token secret (nodes sharing the secret accept each
//! other's). A value that fails the check (forged, altered, truncated, for
//! another site) is a new visitor, never an error.
//!
//! A display id (22 characters) is a random 64-bit nonce and 8 bytes of MAC
//! over the site, the visitor and the nonce: an answer can only name a
//! display the server made for that visitor, and a repeat of the same
//! display counts once.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The purpose the MAC key is derived for (`TokenKeys::derive`).
pub const KEY_PURPOSE: &str = "throng invites visitor mac v1";

const VISITOR_BYTES: usize = 8 + 1 + 11;
/// Characters of a signed visitor id.
pub const VISITOR_CHARS: usize = 27;
const DISPLAY_BYTES: usize = 8 + 8;
/// Characters of a display id.
pub const DISPLAY_CHARS: usize = 22;

/// Characters of a pacing token at most (`PACING_DAYS_MAX` days).
pub const PACING_CHARS_MAX: usize = (1 + 2 * PACING_DAYS_MAX + 8).div_ceil(3) * 4;
/// Invitation days a pacing token remembers (the largest cap).
pub const PACING_DAYS_MAX: usize = super::model::CAP_INVITATIONS_MAX as usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visitor {
    /// 1 to 2^63-1.
    pub id: i64,
    pub sampled: bool,
}

#[derive(Clone)]
pub struct Signer {
    /// Keyed once: a clone skips hashing the key's two padded blocks on
    /// every MAC (a state check makes three).
    keyed: Hmac<Sha256>,
}

impl Signer {
    pub fn new(key: [u8; 32]) -> Signer {
        Signer {
            keyed: <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes any key length"),
        }
    }

    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = self.keyed.clone();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// A new random visitor id (1 to 2^63-1).
    pub fn new_visitor_id() -> i64 {
        loop {
            let id = (rand::thread_rng().next_u64() >> 1) as i64;
            if id != 0 {
                return id;
            }
        }
    }

    pub fn sign_visitor(&self, site_id: i64, v: Visitor) -> String {
        let mut raw = [0u8; VISITOR_BYTES];
        raw[..8].copy_from_slice(&v.id.to_be_bytes());
        raw[8] = v.sampled as u8;
        let mac = self.mac(&[b"v", &site_id.to_be_bytes(), &raw[..9]]);
        raw[9..].copy_from_slice(&mac[..11]);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The visitor a signed value names for `site_id`, if it is genuine.
    pub fn verify_visitor(&self, site_id: i64, text: &str) -> Option<Visitor> {
        if text.len() != VISITOR_CHARS {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(text).ok()?;
        if raw.len() != VISITOR_BYTES || raw[8] > 1 {
            return None;
        }
        let mac = self.mac(&[b"v", &site_id.to_be_bytes(), &raw[..9]]);
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&mac[..11], &raw[9..])) {
            return None;
        }
        let id = i64::from_be_bytes(raw[..8].try_into().ok()?);
        (id >= 1).then_some(Visitor {
            id,
            sampled: raw[8] == 1,
        })
    }

    /// A pacing token: the days (since the Unix epoch) of the invitations
    /// a browser was shown by `owner`'s sites, the latest
    /// `PACING_DAYS_MAX`, signed for that owner. The browser keeps it and
    /// sends it with each check (`X-Invites-Pacing`), so the visitor cap
    /// needs no write per display and no read: clearing it is clearing
    /// the visitor id too, a new visitor either way.
    pub fn sign_pacing(&self, owner: &str, days: &[i32]) -> String {
        let days = &days[days.len().saturating_sub(PACING_DAYS_MAX)..];
        let mut raw = Vec::with_capacity(1 + 2 * days.len() + 8);
        raw.push(days.len() as u8);
        for d in days {
            raw.extend_from_slice(&((*d).clamp(0, u16::MAX as i32) as u16).to_be_bytes());
        }
        let mac = self.mac(&[
            b"p",
            &(owner.len() as u32).to_be_bytes(),
            owner.as_bytes(),
            &raw,
        ]);
        raw.extend_from_slice(&mac[..8]);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The invitation days of a genuine pacing token of `owner`'s; none
    /// for anything else (forged, another owner's, malformed).
    pub fn verify_pacing(&self, owner: &str, text: &str) -> Vec<i32> {
        if text.len() > PACING_CHARS_MAX {
            return Vec::new();
        }
        let Ok(raw) = URL_SAFE_NO_PAD.decode(text) else {
            return Vec::new();
        };
        let Some(&n) = raw.first() else {
            return Vec::new();
        };
        let n = n as usize;
        if n > PACING_DAYS_MAX || raw.len() != 1 + 2 * n + 8 {
            return Vec::new();
        }
        let body = &raw[..1 + 2 * n];
        let mac = self.mac(&[
            b"p",
            &(owner.len() as u32).to_be_bytes(),
            owner.as_bytes(),
            body,
        ]);
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&mac[..8], &raw[1 + 2 * n..])) {
            return Vec::new();
        }
        body[1..]
            .chunks_exact(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as i32)
            .collect()
    }

    /// A new display id for this visitor: (nonce, signed text).
    pub fn new_display(&self, site_id: i64, visitor_id: i64) -> (i64, String) {
        let nonce = rand::thread_rng().next_u64() as i64;
        (nonce, self.sign_display(site_id, visitor_id, nonce))
    }

    pub fn sign_display(&self, site_id: i64, visitor_id: i64, nonce: i64) -> String {
        let mut raw = [0u8; DISPLAY_BYTES];
        raw[..8].copy_from_slice(&nonce.to_be_bytes());
        let mac = self.mac(&[
            b"d",
            &site_id.to_be_bytes(),
            &visitor_id.to_be_bytes(),
            &raw[..8],
        ]);
        raw[8..].copy_from_slice(&mac[..8]);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The nonce of a display id made for this visitor, if genuine.
    pub fn verify_display(&self, site_id: i64, visitor_id: i64, text: &str) -> Option<i64> {
        if text.len() != DISPLAY_CHARS {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(text).ok()?;
        if raw.len() != DISPLAY_BYTES {
            return None;
        }
        let mac = self.mac(&[
            b"d",
            &site_id.to_be_bytes(),
            &visitor_id.to_be_bytes(),
            &raw[..8],
        ]);
        if !bool::from(subtle::ConstantTimeEq::ct_eq(&mac[..8], &raw[8..])) {
            return None;
        }
        Some(i64::from_be_bytes(raw[..8].try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visitors_round_trip_and_forgeries_fail() {
        let s = Signer::new([7; 32]);
        let v = Visitor {
            id: Signer::new_visitor_id(),
            sampled: true,
        };
        let text = s.sign_visitor(3, v);
        assert_eq!(text.len(), VISITOR_CHARS);
        assert_eq!(s.verify_visitor(3, &text), Some(v));
        assert_eq!(s.verify_visitor(4, &text), None, "another site's id");
        assert_eq!(s.verify_visitor(3, &text[..20]), None, "truncated");
        assert_eq!(s.verify_visitor(3, &format!("{text}A")), None, "too long");
        let mut altered = text.clone().into_bytes();
        altered[3] = if altered[3] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            s.verify_visitor(3, std::str::from_utf8(&altered).unwrap()),
            None
        );
        assert_eq!(
            Signer::new([8; 32]).verify_visitor(3, &text),
            None,
            "another key"
        );
    }

    #[test]
    fn pacing_tokens_belong_to_their_owner() {
        let s = Signer::new([2; 32]);
        let days: Vec<i32> = (20_000..20_015).collect();
        let t = s.sign_pacing("shop", &days);
        assert!(t.len() <= PACING_CHARS_MAX);
        assert_eq!(
            s.verify_pacing("shop", &t),
            days[5..].to_vec(),
            "the latest kept"
        );
        assert!(s.verify_pacing("other", &t).is_empty());
        assert!(s.verify_pacing("shop", &t[1..]).is_empty());
        assert!(s.verify_pacing("shop", "").is_empty());
        assert_eq!(
            s.verify_pacing("shop", &s.sign_pacing("shop", &[])),
            Vec::<i32>::new()
        );
    }

    #[test]
    fn displays_belong_to_their_visitor() {
        let s = Signer::new([1; 32]);
        let (nonce, text) = s.new_display(1, 42);
        assert_eq!(text.len(), DISPLAY_CHARS);
        assert_eq!(s.verify_display(1, 42, &text), Some(nonce));
        assert_eq!(s.verify_display(1, 43, &text), None);
        assert_eq!(s.verify_display(2, 42, &text), None);
        assert_eq!(s.verify_display(1, 42, "x"), None);
    }
}
