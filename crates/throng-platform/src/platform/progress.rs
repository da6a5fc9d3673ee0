//! The progress bar every `throng seed` shows (hidden when not asked for,
//! e.g. when tests seed).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` `unit`s (slots, rows, voters), labelled `message`.
pub fn seed_bar(total: u64, unit: &str, message: &'static str, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit}, {{per_sec}}, eta {{eta}}"
        ))
        .expect("a valid progress template")
        .progress_chars("=> "),
    );
    b.set_message(message);
    b
}
