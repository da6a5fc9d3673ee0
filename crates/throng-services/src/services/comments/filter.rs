//! The word and link filter: a review whose title or remarks hold a listed
//! word, or a link when links are filtered, is held for moderation instead
//! of listed (`--comments-filter-words`, `--comments-filter-file`,
//! `--comments-filter-links`). Matching is case-insensitive on whole words
//! (a listed "spam" holds "Spam!" but not "spammer"); a listed phrase of
//! several words matches those words in a row.

use std::path::Path;

/// Listed words or phrases at most.
pub const FILTER_WORDS_MAX: usize = 10_000;
/// Characters of one listed word or phrase at most.
pub const FILTER_WORD_CHARS_MAX: usize = 100;

/// What holds a review: listed words and, optionally, links.
#[derive(Clone, Debug, Default)]
pub struct ContentFilter {
    /// Each listed entry as its lower-case words.
    phrases: Vec<Vec<String>>,
    links: bool,
}

impl ContentFilter {
    /// A filter of `words` (comma-separated), the lines of `file` (blank
    /// lines and lines starting with `#` skipped) and links when `links`.
    pub fn new(
        words: Option<&str>,
        file: Option<&Path>,
        links: bool,
    ) -> anyhow::Result<ContentFilter> {
        let mut entries: Vec<String> = Vec::new();
        if let Some(w) = words {
            entries.extend(w.split(',').map(str::to_string));
        }
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--comments-filter-file {}: {e}", path.display()))?;
            entries.extend(
                text.lines()
                    .filter(|l| !l.trim_start().starts_with('#'))
                    .map(str::to_string),
            );
        }
        let mut phrases = Vec::new();
        for e in entries {
            let e = e.trim();
            if e.is_empty() {
                continue;
            }
            if e.chars().count() > FILTER_WORD_CHARS_MAX {
                anyhow::bail!(
                    "a filtered word or phrase has at most {FILTER_WORD_CHARS_MAX} characters: {e:?}"
                );
            }
            let words = words_of(e);
            if !words.is_empty() {
                phrases.push(words);
            }
        }
        if phrases.len() > FILTER_WORDS_MAX {
            anyhow::bail!("at most {FILTER_WORDS_MAX} filtered words or phrases");
        }
        Ok(ContentFilter { phrases, links })
    }

    /// Why `texts` are held, for the moderators (`None`: they pass).
    pub fn check(&self, texts: &[&str]) -> Option<String> {
        for t in texts {
            if self.links && has_link(t) {
                return Some("held by the filter: it has a link".into());
            }
        }
        if self.phrases.is_empty() {
            return None;
        }
        for t in texts {
            let words = words_of(t);
            for p in &self.phrases {
                if words.windows(p.len()).any(|w| w == p.as_slice()) {
                    return Some(format!(
                        "held by the filter: it has the listed word \"{}\"",
                        p.join(" ")
                    ));
                }
            }
        }
        None
    }
}

/// The lower-case words of `text` (runs of letters and digits).
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A URL scheme, a `www.` host or a bare domain with a common top-level
/// domain (`example.com/x`).
fn has_link(text: &str) -> bool {
    let lower = text.to_lowercase();
    if lower.contains("://") || lower.contains("www.") {
        return true;
    }
    const TLDS: [&str; 12] = [
        "com", "net", "org", "io", "info", "biz", "ru", "cn", "xyz", "top", "co", "ly",
    ];
    lower
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '<' | '>' | '"' | '\''))
        .any(|token| {
            let host = token.split('/').next().unwrap_or("");
            let host = host.trim_end_matches(['.', ',', '!', '?', ';', ':']);
            let mut labels = host.rsplit('.');
            let (Some(tld), Some(name)) = (labels.next(), labels.next()) else {
                return false;
            };
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && TLDS.contains(&tld)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_match_whole_and_case_insensitive() {
        let f = ContentFilter::new(Some("spam, buy now"), None, false).unwrap();
        assert!(f.check(&["This is SPAM!"]).is_some());
        assert!(f.check(&["a spammer"]).is_none());
        assert!(f.check(&["title", "Buy  now, please"]).is_some());
        assert!(f.check(&["buy it now"]).is_none());
    }

    #[test]
    fn links_are_held_when_asked() {
        let f = ContentFilter::new(None, None, true).unwrap();
        for t in [
            "see https://x.test",
            "www.example",
            "go to cheap-pills.com now",
            "(example.org/a)",
        ] {
            assert!(f.check(&[t]).is_some(), "{t}");
        }
        for t in ["version 1.2 is fine", "e.g. this", "Node.js course", "a.b"] {
            assert!(f.check(&[t]).is_none(), "{t}");
        }
        let off = ContentFilter::new(None, None, false).unwrap();
        assert!(off.check(&["https://x.test"]).is_none());
    }
}
