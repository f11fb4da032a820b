//! [`chain`]: an error and its causes on one line, the text a report keeps when an error
//! becomes a string (a failed arm, a failed score).

/// An error and its causes on one line, joined by `": "` as `anyhow` prints them with `{:#}`: the
/// text reports keep when an error becomes a string (a failed arm, a failed score). A cause whose
/// text the message already ends with is not repeated (some errors print their cause themselves).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// `s` without terminal escape sequences (ANSI CSI `ESC [ … final`, and a lone `ESC x`) or other
/// control characters but tab: the text a report keeps of a process's coloured output.
pub fn plain_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..=~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if !c.is_control() || c == '\t' {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_drops_colour_codes_and_control_characters() {
        let coloured =
            "\u{1b}[2m2026-12-02T15:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m loaded\u{7}\tok";
        assert_eq!(
            plain_text(coloured),
            "2026-12-02T15:00:00Z  INFO loaded\tok"
        );
        assert_eq!(plain_text("no escapes: ü"), "no escapes: ü");
        assert_eq!(plain_text("cut \u{1b}["), "cut ");
    }

    /// An error that prints its cause in its own message and also exposes it as its source (as
    /// `MeterError::Nvml` does).
    #[derive(Debug, thiserror::Error)]
    #[error("NVML: {0}")]
    struct PrintsItsCause(#[from] std::io::Error);

    #[test]
    fn chain_does_not_repeat_a_cause_the_message_already_ends_with() {
        let e = PrintsItsCause(std::io::Error::other("GPU is lost"));
        assert_eq!(chain(&e), "NVML: GPU is lost");
    }
}
