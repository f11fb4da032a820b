//! `quantenergy compare`: where each report's measured ΔE sits against the published crossover
//! curve of its class — the page's overlay as a table. Every number comes from
//! `analysis::compare::place`, the function the page calls for each dropped report.

use analysis::compare::{
    place, place_report, sigmas_label, size_label, NoCurve, Outcome, Placement, Subject,
};
use analysis::default_classes;
use analysis::verdict::signed_pct;
use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::validate::{check_file, print_check, FileCheck};

/// `quantenergy compare`'s arguments.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// energy.json reports (quantenergy/1.x or ecocompute-energy/1.x); `-` reads standard input.
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Print a JSON array (one object per file) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Compare with the curve of the report's card class and precision even when no curve of it
    /// was measured with the report's engine (e.g. a llama.cpp BF16 report against the
    /// candle-graph curve): the residual then includes what the stack does to the answer. Marked
    /// as such in the output. A report whose engine has a curve of its own is placed on it.
    #[arg(long)]
    pub any_stack: bool,
}

/// One file's line of `--json`.
#[derive(Serialize)]
struct Row<'a> {
    file: &'a str,
    #[serde(flatten)]
    placement: &'a Placement,
}

/// A file that could not be placed: unreadable, not JSON or invalid.
#[derive(Serialize)]
struct Refused<'a> {
    file: &'a str,
    outcome: &'static str,
    errors: Vec<Issue>,
}

#[derive(Serialize)]
struct Issue {
    path: String,
    message: String,
}

/// Place every file and print the table (or JSON). Exit 2 when any file is unreadable, not JSON
/// or invalid; else 1 when any measured report lies outside its curve's band; else 0.
pub fn run(a: &CompareArgs) -> Result<u8> {
    let checks: Vec<(&str, FileCheck)> = a
        .files
        .iter()
        .map(|f| (f.as_str(), check_file(f)))
        .collect();
    let placed: Vec<(&str, Option<Placement>)> = checks
        .iter()
        .map(|(f, c)| (*f, c.report().map(|r| place_one(r, a.any_stack))))
        .collect();
    let any_refused = placed.iter().any(|(_, p)| p.is_none());
    let any_outside = placed
        .iter()
        .any(|(_, p)| matches!(p.as_ref().map(|p| &p.outcome), Some(Outcome::Outside(_))));

    if a.json {
        let mut rows = Vec::new();
        for ((file, check), (_, p)) in checks.iter().zip(&placed) {
            rows.push(match p {
                Some(placement) => serde_json::to_value(Row { file, placement })?,
                None => serde_json::to_value(Refused {
                    file,
                    outcome: if check.unreadable() {
                        "unreadable"
                    } else {
                        "invalid"
                    },
                    errors: check
                        .errors()
                        .into_iter()
                        .map(|(path, message)| Issue { path, message })
                        .collect(),
                })?,
            });
        }
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&checks, &placed);
    }
    Ok(if any_refused {
        2
    } else if any_outside {
        1
    } else {
        0
    })
}

/// Place one report; with `any_stack`, when its engine has no curve of the class, against the one
/// the class prefers. The subject keeps its engine for the output, so a cross-stack comparison
/// stays visible.
pub fn place_one(r: &report::Report, any_stack: bool) -> Placement {
    let own = place_report(r, default_classes());
    // Only a refusal for the stack is lifted: never swap a report off its own engine's curve.
    if !any_stack || !matches!(own.curve, Err(NoCurve::Stack { .. })) {
        return own;
    }
    let subject = Subject::from_report(r);
    let mut p = place(
        &Subject {
            engine: None,
            ..subject.clone()
        },
        default_classes(),
    );
    p.subject = subject;
    p
}

/// The report's engine differs from every engine its curve was measured with.
fn cross_stack(p: &Placement) -> Option<&str> {
    let e = p.subject.engine.as_deref()?;
    let key = analysis::compare::engine_key(e);
    (!p.curve_engines.is_empty() && !p.curve_engines.contains(&key)).then_some(e)
}

const HEADERS: [&str; 10] = [
    "file",
    "card · arch",
    "precision",
    "size",
    "stack",
    "measured ΔE",
    "curve ΔE",
    "95 % band",
    "σ",
    "result",
];

/// The cells of one placed report.
fn cells(file: &str, p: &Placement) -> [String; 10] {
    let s = &p.subject;
    let dash = || "–".to_string();
    let cmp = p.outcome.comparison();
    let measured = match p.outcome {
        // Never the number of an estimate, nor of a report without a Δ.
        Outcome::NotMeasured | Outcome::NoDelta => dash(),
        _ => s.delta_pct.map(|d| signed_pct(d, 1)).unwrap_or_else(dash),
    };
    let result = match &p.outcome {
        Outcome::Inside(_) => "inside".to_string(),
        Outcome::Outside(_) => "OUTSIDE".to_string(),
        Outcome::NotMeasured => format!("not measured ({})", s.basis),
        Outcome::NoDelta => "no ΔE".to_string(),
        Outcome::NoSize => "no size".to_string(),
        Outcome::NoCurve => "no curve".to_string(),
    };
    [
        file.to_string(),
        format!(
            "{} · {}",
            s.gpu,
            if s.arch.is_empty() { "?" } else { &s.arch }
        ),
        s.precision.clone(),
        s.params_b.map(size_label).unwrap_or_else(dash),
        s.engine.clone().unwrap_or_else(|| "(none named)".into()),
        measured,
        cmp.map(|c| signed_pct(c.predicted_pct, 1))
            .unwrap_or_else(dash),
        cmp.map(|c| {
            format!(
                "{} … {}",
                signed_pct(c.band_pct.0, 1),
                signed_pct(c.band_pct.1, 1)
            )
        })
        .unwrap_or_else(dash),
        cmp.map(|c| sigmas_label(c.sigmas).replace(" σ", ""))
            .unwrap_or_else(dash),
        result,
    ]
}

fn print_table(checks: &[(&str, FileCheck)], placed: &[(&str, Option<Placement>)]) {
    let rows: Vec<(usize, [String; 10])> = placed
        .iter()
        .enumerate()
        .filter_map(|(i, (f, p))| p.as_ref().map(|p| (i, cells(f, p))))
        .collect();
    let mut width = HEADERS.map(|h| h.chars().count());
    for (_, r) in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, (c, w)) in cells.iter().zip(width).enumerate() {
            // Numbers right-aligned, text left-aligned.
            let right = (3..=8).contains(&i);
            if i > 0 {
                out.push_str("  ");
            }
            let pad = w.saturating_sub(c.chars().count());
            if right {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            } else {
                out.push_str(c);
                if i + 1 < cells.len() {
                    out.push_str(&" ".repeat(pad));
                }
            }
        }
        out
    };
    let (mut inside, mut outside, mut explained) = (0, 0, 0);
    if !rows.is_empty() {
        println!("{}", line(&HEADERS.map(String::from)));
        for (i, r) in &rows {
            println!("{}", line(r));
            let p = placed[*i].1.as_ref().expect("rows are placed files");
            match &p.outcome {
                Outcome::Inside(c) | Outcome::Outside(c) => {
                    if c.inside {
                        inside += 1;
                    } else {
                        outside += 1;
                    }
                    if let Some(e) = cross_stack(p) {
                        println!(
                            "    across stacks (--any-stack): a {e} report against the curve measured with {}",
                            p.curve_engines.join(" + ")
                        );
                    }
                    if p.subject.engine.is_none() {
                        println!(
                            "    the report names no stack.engine: compared with the curve measured with {}",
                            p.curve_engines.join(" + ")
                        );
                    }
                    if c.extrapolated {
                        println!(
                            "    outside the curve's anchor sizes ({} to {}): the band includes the extrapolation term",
                            size_label(c.anchor_range_b.0),
                            size_label(c.anchor_range_b.1)
                        );
                    }
                }
                _ => {
                    explained += 1;
                    println!("    {}", p.summary());
                }
            }
        }
    }
    let refused: Vec<&(&str, FileCheck)> = checks
        .iter()
        .filter(|(_, c)| c.report().is_none())
        .collect();
    for (f, c) in &refused {
        print_check(f, c, true);
    }
    println!(
        "{} file{}: {inside} inside the band, {outside} outside, {explained} not compared (the reason is under each){}",
        placed.len(),
        if placed.len() == 1 { "" } else { "s" },
        if refused.is_empty() {
            String::new()
        } else {
            format!(", {} unreadable or invalid", refused.len())
        }
    );
}
