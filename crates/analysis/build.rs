//! Writes `data/anchors.csv` with the text of its last column, `curve_note`, removed; the
//! `slim-anchors` feature (the page's landing module) embeds that instead of the file: nothing in the landing view shows it, and it is a
//! third of the file (≈ 1.7 KB gz of the first load). The full page module, the CLI and the meter
//! embed the file unchanged. `dataset::tests` checks that both parse to the same rows but that note.

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
/// toggles twice, so it needs no special case). A field spanning lines would break the line-based
/// cut: the dataset test would catch it (row count and every other field must match).
fn without_last_field(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            out.push_str(line);
        } else {
            let mut quoted = false;
            let mut last = None;
            for (at, c) in line.char_indices() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => last = Some(at),
                    _ => {}
                }
            }
            out.push_str(last.map_or(line, |at| &line[..=at]));
        }
        out.push('\n');
    }
    out
}
