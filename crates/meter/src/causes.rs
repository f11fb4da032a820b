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

#[cfg(test)]
mod tests {
    use super::*;

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
