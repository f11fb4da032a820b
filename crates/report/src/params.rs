//! Model sizes: the largest a report may state, and a size guessed from a model name
//! (`Qwen2-0.5B` → 0.5).

/// The largest model size a report or a share link may state, billions of parameters (100 T):
/// above it a size is a typo or an attack, and every curve, estimate and optimizer figure would
/// be nonsense.
pub const MAX_PARAMS_B: f64 = 1e5;

/// Parameters in billions guessed from a model name: the number written directly before a `B`
/// (`Qwen2-0.5B`, `TinyLlama-1.1B-Chat-v1.0`, `Llama-3.1-8B`, `mistral-7b-v0.3`), or, failing
/// that, before an `M` (`opt-125m` → 0.125). The number must start a word (start of text or after
/// a non-alphanumeric character) and the unit must end it, so version numbers (`3.1`, `v0.3`,
/// `Qwen2.5`) and mixture names (`8x7B`) are not read as sizes. `None` when nothing fits.
pub fn guess_params_b(model_name: &str) -> Option<f64> {
    if model_name.len() > 1024 {
        return None;
    }
    let b = model_name.as_bytes();
    let mut billions: Option<f64> = None;
    let mut millions: Option<f64> = None;
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || (!b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'.');
        if !(starts_word && b[i].is_ascii_digit()) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        let num = &model_name[start..i];
        let unit = b.get(i).copied();
        let ends_word = b.get(i + 1).is_none_or(|c| !c.is_ascii_alphanumeric());
        if ends_word {
            let v: Option<f64> = num.parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0);
            match unit {
                Some(b'b' | b'B') if billions.is_none() => billions = v,
                Some(b'm' | b'M') if millions.is_none() => millions = v.map(|m| m / 1000.0),
                _ => {}
            }
        }
    }
    billions.or(millions).filter(|v| *v > 0.0 && *v < 100_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_from_names() {
        let cases = [
            ("Qwen2-0.5B", Some(0.5)),
            ("TinyLlama-1.1B-Chat", Some(1.1)),
            ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", Some(1.1)),
            ("Llama-3.1-8B", Some(8.0)),
            ("meta-llama/Llama-3.1-8B-Instruct", Some(8.0)),
            ("Qwen2.5-14B", Some(14.0)),
            ("Qwen/Qwen2.5-3B-Instruct", Some(3.0)),
            ("Mistral-7B-v0.3", Some(7.0)),
            ("mistralai/Mistral-7B-Instruct-v0.2", Some(7.0)),
            ("Yi-6B", Some(6.0)),
            ("llama-2-7b-hf", Some(7.0)),
            ("Qwen2.5-0.5B-Instruct-GGUF", Some(0.5)),
            ("facebook/opt-125m", Some(0.125)),
            ("phi-2", None),
            ("gpt2", None),
            ("Mixtral-8x7B", None),
            ("Llama-3.1", None),
            ("", None),
            ("7", None),
            ("B", None),
            ("0B", None),
        ];
        for (name, want) in cases {
            assert_eq!(guess_params_b(name), want, "{name}");
        }
    }
}
