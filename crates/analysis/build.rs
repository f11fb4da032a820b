//! Writes `data/anchors.csv` with the text of its last column, `curve_note`, removed, and without
//! the context runs' rows (a `context_depth`); the `slim-anchors` feature (the page's landing module)
//! embeds that instead of the file: nothing in the landing view shows either, and the notes are a
//! third of the file (≈ 1.7 KB gz of the first load). The full page module, the CLI and the meter
//! embed the file unchanged. `dataset::tests` checks that both parse to the same rows but those.

use std::{env, fs, path::Path};

fn main() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/anchors.csv");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed=build.rs");
    // Written in every build (cheap), so that the dataset test can check it without the feature.
    let text = fs::read_to_string(&src).expect("data/anchors.csv");
    let out = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("anchors-slim.csv");
    fs::write(out, without_last_field(&text)).expect("write anchors-slim.csv");
}

/// Every line but the header cut after its last comma outside quotes (`""` inside a quoted field
/// toggles twice, so it needs no special case), and the lines whose `context_depth` field is not
/// empty left out. A field spanning lines would break the line-based cut: the dataset test would
/// catch it (row count and every other field must match).
fn without_last_field(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let depth_at = text
        .lines()
        .next()
        .and_then(|h| h.split(',').position(|c| c == "context_depth"));
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            out.push_str(line);
        } else {
            let mut quoted = false;
            let mut commas = Vec::new();
            for (at, c) in line.char_indices() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => commas.push(at),
                    _ => {}
                }
            }
            // Field k lies between comma k − 1 and comma k.
            let context_run =
                depth_at.is_some_and(|k| match (commas.get(k.wrapping_sub(1)), commas.get(k)) {
                    (Some(&a), Some(&b)) => b > a + 1,
                    (None, Some(&b)) if k == 0 => b > 0,
                    _ => false,
                });
            if context_run {
                continue;
            }
            out.push_str(commas.last().map_or(line, |&at| &line[..=at]));
        }
        out.push('\n');
    }
    out
}
