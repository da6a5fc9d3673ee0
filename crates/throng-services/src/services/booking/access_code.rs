//! A registration's access code: 12 letters of the readable alphabet
//! (digits 2-9 and capitals but I and O: no 0/O or 1/I/l to confuse; 60
//! bits), shown and sent in groups of four (`K7QM-3XHT-9WCF`) so it can be
//! read aloud over the phone and typed from paper. Stored as the SHA-256 of
//! its letters without the dashes; typed in any case, with or without
//! dashes or spaces. Codes minted before (22 URL-safe base64 characters,
//! case-sensitive) were stored as the hash of the code as given and still
//! open their registrations.

use crate::platform::crypto;

/// Letters of a code.
pub const CODE_CHARS: usize = 12;
/// Letters between two dashes as shown.
const GROUP_CHARS: usize = 4;

/// A new code, as shown to the person (with dashes).
pub fn mint() -> String {
    shown(&crypto::readable_code(CODE_CHARS))
}

/// What is stored for `code` (as shown or as typed).
pub fn hash(code: &str) -> Vec<u8> {
    crypto::hash_code(&canonical(code).unwrap_or_else(|| code.trim().to_string()))
}

/// Whether `presented` opens a registration whose code hashed to `stored`:
/// as a readable code in any case or grouping, or as given (older codes).
pub fn matches(presented: &str, stored: &[u8]) -> bool {
    let presented = presented.trim();
    let as_given = crypto::code_matches(presented, stored);
    let readable = canonical(presented).is_some_and(|c| crypto::code_matches(&c, stored));
    as_given | readable
}

/// The code's letters upper-cased without dashes and spaces, if they are
/// [`CODE_CHARS`] letters of the readable alphabet.
fn canonical(code: &str) -> Option<String> {
    let letters: String = code
        .chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (letters.len() == CODE_CHARS
        && letters
            .bytes()
            .all(|b| crypto::READABLE_ALPHABET.contains(&b)))
    .then_some(letters)
}

fn shown(letters: &str) -> String {
    letters
        .as_bytes()
        .chunks(GROUP_CHARS)
        .map(|g| std::str::from_utf8(g).expect("ASCII"))
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_short_readable_and_grouped() {
        for _ in 0..200 {
            let code = mint();
            assert_eq!(code.len(), CODE_CHARS + 2, "{code}");
            let groups: Vec<&str> = code.split('-').collect();
            assert_eq!(groups.len(), 3, "{code}");
            assert!(groups.iter().all(|g| g.len() == 4));
            assert!(
                !code.contains(['0', 'O', '1', 'l', 'I']),
                "{code} has a letter people confuse"
            );
        }
        assert_ne!(mint(), mint());
    }

    #[test]
    fn a_code_opens_in_any_case_and_grouping_and_old_codes_still_open() {
        let code = mint();
        let stored = hash(&code);
        let letters = code.replace('-', "");
        for typed in [
            code.clone(),
            code.to_lowercase(),
            letters.clone(),
            format!(" {} {} {} ", &letters[..4], &letters[4..8], &letters[8..]),
        ] {
            assert!(matches(&typed, &stored), "{typed:?}");
        }
        assert!(!matches(&mint(), &stored));
        assert!(!matches(&letters[..11], &stored));
        // A code from before: as given, case and all.
        let old = "q3XbT9vKp2LmW8sR-_aZ0b";
        let old_stored = crypto::hash_code(old);
        assert_eq!(hash(old), old_stored);
        assert!(matches(old, &old_stored));
        assert!(!matches(&old.to_lowercase(), &old_stored));
    }
}
