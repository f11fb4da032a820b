//! A card's measured batch sweeps, as the page shows them: per session and model, each batch's
//! energies and ΔE vs the FP16 row of the same batch. They are the evidence behind the optimizer's
//! batch term, and they show where batching turns a saving into a cost (on the H200's candle
//! engines, Q4_K saves 27–38 % at batch 1 and costs up to 37 % more at batch 4).

use crate::curves::preference;
use crate::dataset::{Anchor, Dataset, TARGET_RUNS};
use crate::verdict::{direction, signed_pct, Direction};
use report::Precision;

/// One model's batch sweep in one session on one card.
#[derive(Debug, Clone)]
pub struct Sweep<'a> {
    /// Session of every row.
    pub session: String,
    /// The engine that ran it ([`Anchor::engine`] of its rows).
    pub engine: String,
    /// The stack as the rows describe it.
    pub stack: String,
    /// Model name as the rows write it.
    pub model: String,
    /// Model size, B parameters.
    pub params_b: f64,
    /// Batches with at least one row, ascending (1 where the session has batch-1 rows of the model).
    pub batches: Vec<u32>,
    /// The non-FP16 formats that were swept (run at some batch > 1), as the dataset labels them.
    pub formats: Vec<String>,
    rows: Vec<&'a Anchor>,
}

/// One format at one batch of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepCell {
    /// Energy per token, mJ.
    pub energy_mj: f64,
    /// Throughput summed over the batch, tok/s.
    pub tok_s: Option<f64>,
    /// Independent runs behind the row.
    pub n: Option<u32>,
    /// ΔE vs FP16 at the same batch, % (`None` for the FP16 row).
    pub delta_pct: Option<f64>,
    /// 95 % interval of `delta_pct` ([`Anchor::delta_halfwidth_pct`]: paired where the row has its runs' ΔE spread).
    pub interval: Option<(f64, f64)>,
    /// This row or the FP16 row of its batch is a single run: no spread, so no direction.
    pub single_run: bool,
}

impl SweepCell {
    /// Which way ΔE goes ([`direction`]); none where an arm is a single run, however large ΔE is.
    pub fn direction(&self) -> Direction {
        match self.delta_pct {
            Some(d) if !self.single_run => direction(d, self.interval),
            _ => Direction::Neutral,
        }
    }
}

/// (batch, ΔE %, which way it goes).
type BatchDelta = (u32, f64, Direction);

impl Sweep<'_> {
    fn row(&self, batch: u32, label: &str) -> Option<&Anchor> {
        self.rows
            .iter()
            .copied()
            .find(|a| a.batch == batch && a.precision_label() == label)
    }

    /// The `label` row at `batch` (`FP16` for the baseline), with its ΔE vs FP16 at that batch.
    pub fn cell(&self, batch: u32, label: &str) -> Option<SweepCell> {
        let a = self.row(batch, label)?;
        let fp16 = self.row(batch, Precision::Fp16.as_str());
        let is_fp16 = a.precision == Precision::Fp16;
        let delta_pct = if is_fp16 { None } else { a.delta_pct() };
        let interval = fp16.filter(|_| !is_fp16).and_then(|f| a.delta_interval(f));
        Some(SweepCell {
            energy_mj: a.energy_mj?,
            tok_s: a.throughput_tok_s,
            n: a.n,
            delta_pct,
            interval,
            single_run: a.n == Some(1) || fp16.is_some_and(|f| f.n == Some(1)),
        })
    }

    /// `format`'s (batch, ΔE %, direction) at every batch with a ΔE.
    fn deltas(&self, format: &str) -> Vec<BatchDelta> {
        self.batches
            .iter()
            .filter_map(|&b| {
                let c = self.cell(b, format)?;
                Some((b, c.delta_pct?, c.direction()))
            })
            .collect()
    }

    /// What a sweep's batch is: the sequences one engine decodes together, or for a server the
    /// concurrent request streams it is sent (it batches them itself).
    pub fn batch_word(&self) -> &'static str {
        if self.is_server() {
            "streams"
        } else {
            "batch"
        }
    }

    /// The sweep ran an inference server, sent concurrent request streams: its rows' stack says how
    /// the meter drove it, in the report's own words ([`report::ServingMode::words`]).
    pub fn is_server(&self) -> bool {
        [report::ServingMode::Started, report::ServingMode::External]
            .iter()
            .any(|m| self.stack.contains(m.words()))
    }

    /// "batch 4", or "8 streams" for a server.
    pub fn at(&self, batch: u32) -> String {
        match (self.is_server(), batch) {
            (true, 1) => "1 stream".to_string(),
            (true, b) => format!("{b} streams"),
            (false, b) => format!("batch {b}"),
        }
    }

    /// The sentence for a saving at batch 1 that becomes a cost at some batch (or the reverse),
    /// with both batches — only where both directions are clear of their intervals.
    pub fn flip(&self, format: &str) -> Option<String> {
        let points = self.deltas(format);
        // Only points with a direction: a single run's extreme ΔE must not hide a clear flip.
        let batched = || {
            points
                .iter()
                .filter(|p| p.0 > 1 && p.2 != Direction::Neutral)
        };
        let worst = batched().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let best = batched().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let &(_, d1, d1_dir) = points.iter().find(|p| p.0 == 1)?;
        match (d1_dir, worst.2, best.2) {
            (Direction::Saves, Direction::Costs, _) => Some(format!(
                "{format} saves {:.0} % at {} but costs {:.0} % more at {}",
                -d1,
                self.at(1),
                worst.1,
                self.at(worst.0)
            )),
            (Direction::Costs, _, Direction::Saves) => Some(format!(
                "{format} costs {d1:.0} % more at {} but saves {:.0} % at {}",
                self.at(1),
                -best.1,
                self.at(best.0)
            )),
            _ => None,
        }
    }

    /// What batching does to `format` in one sentence: its [`Sweep::flip`] where there is one,
    /// otherwise ΔE at every batch (a format never run at batch > 1 has none).
    pub fn summary(&self, format: &str) -> Option<String> {
        let points = self.deltas(format);
        if !points.iter().any(|p| p.0 > 1) {
            return None;
        }
        if let Some(f) = self.flip(format) {
            return Some(f);
        }
        let list: Vec<String> = points
            .iter()
            .map(|(b, d, _)| format!("{} at {}", signed_pct(*d, 0), self.at(*b)))
            .collect();
        let all = |want: Direction| points.iter().all(|p| p.2 == want);
        let load = if self.is_server() {
            "number of streams"
        } else {
            "batch"
        };
        let lead = if all(Direction::Costs) {
            format!("costs more at every {load} measured")
        } else if all(Direction::Saves) {
            format!("saves at every {load} measured")
        } else {
            "vs FP16".to_string()
        };
        Some(format!("{format} {lead}: {}", list.join(", ")))
    }
}

/// " (n = 2)" for a row behind fewer runs than the campaign's target ([`TARGET_RUNS`]); nothing
/// otherwise.
pub fn below_target(n: Option<u32>) -> String {
    match n {
        Some(n) if n < TARGET_RUNS => format!(" (n = {n})"),
        _ => String::new(),
    }
}

/// A sweep as Markdown (`quantenergy sweeps`): a heading line, its sentences, and a table of
/// energy per token and throughput per batch with ΔE vs the same batch's FP16 and its interval.
pub fn markdown(s: &Sweep) -> String {
    let mut out = format!(
        "{} · {} · session {}\n\n",
        crate::stacks::stack_label(&s.stack),
        s.model,
        s.session
    );
    for t in s.formats.iter().filter_map(|f| s.summary(f)) {
        out.push_str(&format!("{t}.\n"));
    }
    out.push_str(&format!("\n| {} | FP16 mJ/tok · tok/s |", s.batch_word()));
    for f in &s.formats {
        out.push_str(&format!(" {f} mJ/tok · tok/s | {f} ΔE vs FP16 [95 %] |"));
    }
    out.push_str("\n|---:|---:|");
    for _ in &s.formats {
        out.push_str("---:|---|");
    }
    let cell = |c: Option<SweepCell>| match c {
        Some(c) => {
            let tok_s = c.tok_s.map(|t| format!(" · {t:.0}")).unwrap_or_default();
            format!(" {:.1}{tok_s}{} |", c.energy_mj, below_target(c.n))
        }
        None => " – |".into(),
    };
    for &b in &s.batches {
        out.push_str(&format!("\n| {b} |"));
        out.push_str(&cell(s.cell(b, "FP16")));
        for f in &s.formats {
            let c = s.cell(b, f);
            out.push_str(&cell(c));
            let delta = match c.and_then(|c| Some((c.delta_pct?, c.interval))) {
                Some((d, Some((lo, hi)))) => format!(
                    " {} [{}, {}] |",
                    signed_pct(d, 1),
                    signed_pct(lo, 1),
                    signed_pct(hi, 1)
                ),
                Some((d, None)) => format!(" {} |", signed_pct(d, 1)),
                None => " – |".into(),
            };
            out.push_str(&delta);
        }
    }
    out.push('\n');
    out
}

/// Every batch sweep measured on `gpu`: for each (session, model) with an energy row at batch > 1,
/// its rows at every batch (batch 1 included), ordered by engine ([`preference`]) and size.
pub fn card_sweeps<'a>(ds: &'a Dataset, gpu: &str) -> Vec<Sweep<'a>> {
    let on_card = |a: &&'a Anchor| a.gpu == gpu && a.energy_mj.is_some_and(f64::is_finite);
    let mut out: Vec<Sweep<'a>> = Vec::new();
    for a in ds.anchors.iter().filter(on_card).filter(|a| a.batch > 1) {
        if out
            .iter()
            .any(|s| s.session == a.session && s.model == a.model)
        {
            continue;
        }
        let rows: Vec<&'a Anchor> = ds
            .anchors
            .iter()
            .filter(on_card)
            .filter(|o| o.session == a.session && o.model == a.model)
            .collect();
        let mut batches: Vec<u32> = Vec::new();
        let mut formats: Vec<String> = Vec::new();
        for r in &rows {
            // Kept sorted by inserting in place: no sort instantiated (the page module counts bytes).
            let at = batches.partition_point(|b| *b < r.batch);
            if batches.get(at) != Some(&r.batch) {
                batches.insert(at, r.batch);
            }
            let label = r.precision_label();
            if r.batch > 1 && r.precision != Precision::Fp16 && !formats.contains(&label) {
                formats.push(label);
            }
        }
        let key = (preference(a.engine()), a.params_b);
        let at = out
            .iter()
            .position(|o| (preference(&o.engine), o.params_b) > key)
            .unwrap_or(out.len());
        out.insert(
            at,
            Sweep {
                session: a.session.clone(),
                engine: a.engine().to_string(),
                stack: a.stack.clone(),
                model: a.model.clone(),
                params_b: a.params_b,
                batches,
                formats,
                rows,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep<'a>(sweeps: &'a [Sweep<'a>], model: &str) -> &'a Sweep<'a> {
        sweeps
            .iter()
            .find(|s| s.model == model)
            .unwrap_or_else(|| panic!("no sweep of {model}"))
    }

    #[test]
    fn h200_sweeps_are_each_engines_with_batch_one_included() {
        let ds = Dataset::embedded();
        let s = card_sweeps(ds, "H200");
        let names: Vec<(&str, &str)> = s
            .iter()
            .map(|s| (s.engine.as_str(), s.model.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("candle-graph", "Qwen2-1.5B [candle-graph]"),
                ("candle-graph", "Qwen2-7B [candle-graph]"),
                ("candle", "Qwen2-1.5B"),
                ("llama.cpp", "Qwen2-7B [llama.cpp]"),
            ]
        );
        // llama-server's concurrency sweep: by hand, 8 streams Q4_K 506.61 vs FP16 494.22 mJ/token,
        // 32 streams 185.20 vs 211.19 (n = 3 each).
        let l7 = sweep(&s, "Qwen2-7B [llama.cpp]");
        assert_eq!(l7.batches, [1, 8, 32]);
        let c8 = l7.cell(8, "Q4_K").unwrap();
        assert!((c8.delta_pct.unwrap() - (506.61 / 494.22 - 1.0) * 100.0).abs() < 0.01);
        assert_eq!(c8.n, Some(3));
        let c32 = l7.cell(32, "Q4_K").unwrap();
        assert!((c32.delta_pct.unwrap() - (185.20 / 211.19 - 1.0) * 100.0).abs() < 0.01);
        assert_eq!(c32.n, Some(3));
        // Its unit is the stream, in the sentence too.
        assert_eq!(l7.batch_word(), "streams");
        assert_eq!(
            l7.summary("Q4_K").unwrap(),
            "Q4_K vs FP16: −52 % at 1 stream, +3 % at 8 streams, −12 % at 32 streams"
        );
        assert!(markdown(l7).contains("| 32 | 211.2 · 984 | 185.2 · 948 |"));
        // The runs' CV is 3–9 % at 8 and 32 streams, but each run's own ΔE varies less (paired
        // SD 2.1 and 3.2 points): +2.5 % [−2.8, +7.8] at 8 streams has no direction, −12.3 %
        // [−20.2, −4.4] at 32 streams is a saving.
        assert!(!c32.single_run && !c8.single_run);
        let (lo, hi) = c32.interval.unwrap();
        assert!(
            (lo - -20.2).abs() < 0.05 && (hi - -4.4).abs() < 0.05,
            "{lo} {hi}"
        );
        assert_eq!(c8.direction(), Direction::Neutral);
        assert_eq!(c32.direction(), Direction::Saves);
        assert_eq!(l7.cell(1, "Q4_K").unwrap().direction(), Direction::Saves);
        let g7 = sweep(&s, "Qwen2-7B [candle-graph]");
        assert_eq!(g7.batches, [1, 4, 16, 64]);
        assert_eq!(g7.formats, ["Q4_K"]);
        // By hand from data/anchors.csv: batch-4 Q4_K 741.89 vs FP16 629.10 mJ/token.
        let c = g7.cell(4, "Q4_K").unwrap();
        assert!((c.delta_pct.unwrap() - (741.89 / 629.10 - 1.0) * 100.0).abs() < 0.01);
        assert_eq!(c.n, Some(3));
        let (lo, hi) = c.interval.expect("n = 3 on both arms");
        assert!(lo < c.delta_pct.unwrap() && c.delta_pct.unwrap() < hi && lo > 0.0);
        let f = g7.cell(64, "FP16").unwrap();
        assert_eq!((f.energy_mj, f.delta_pct), (76.29, None));
        assert_eq!(f.tok_s, Some(6741.51));
        assert!(g7.cell(8, "Q4_K").is_none());
        // Batch 1 is the campaign's batch-1 row of the same session.
        let b1 = g7.cell(1, "Q4_K").unwrap();
        assert!((b1.delta_pct.unwrap() - (-38.36)).abs() < 0.01);
    }

    #[test]
    fn a_saving_that_batching_turns_into_a_cost_is_said_with_both_batches() {
        let ds = Dataset::embedded();
        let s = card_sweeps(ds, "H200");
        assert_eq!(
            sweep(&s, "Qwen2-7B [candle-graph]")
                .summary("Q4_K")
                .unwrap(),
            "Q4_K saves 38 % at batch 1 but costs 18 % more at batch 4"
        );
        assert_eq!(
            sweep(&s, "Qwen2-1.5B [candle-graph]")
                .summary("Q4_K")
                .unwrap(),
            "Q4_K saves 27 % at batch 1 but costs 37 % more at batch 4"
        );
        assert!(sweep(&s, "Qwen2-7B [candle-graph]")
            .summary("Q8_0")
            .is_none());
    }

    /// A single run's extreme ΔE has no direction and must not hide a clear flip at another batch:
    /// Q4_K saves 30 % at batch 1 (n = 3), costs 20 % more at batch 4 (n = 3, CV 1 %), and one run
    /// at batch 16 says +50 %.
    #[test]
    fn a_single_run_does_not_hide_a_clear_flip() {
        let head = crate::dataset::ANCHORS_CSV.lines().next().unwrap();
        let row = |p: &str, b: u32, e: f64, f: f64, n: u32, cv: &str| {
            format!("H200,hopper,M,7.0,{p},{b},{e},{f},,100,300,{n},{cv},,gross,s,t,src,0,,,,,,\n")
        };
        let csv = [
            row("FP16", 1, 1000.0, 1000.0, 3, "1"),
            row("Q4_K", 1, 700.0, 1000.0, 3, "1"),
            row("FP16", 4, 300.0, 300.0, 3, "1"),
            row("Q4_K", 4, 360.0, 300.0, 3, "1"),
            row("FP16", 16, 100.0, 100.0, 1, ""),
            row("Q4_K", 16, 150.0, 100.0, 1, ""),
        ]
        .concat();
        let ds = Dataset::parse(&format!("{head}\n{csv}"), crate::dataset::GPUS_CSV).unwrap();
        let s = card_sweeps(&ds, "H200");
        let m = sweep(&s, "M");
        assert_eq!(m.cell(16, "Q4_K").unwrap().direction(), Direction::Neutral);
        assert_eq!(
            m.flip("Q4_K").unwrap(),
            "Q4_K saves 30 % at batch 1 but costs 20 % more at batch 4"
        );
    }

    #[test]
    fn without_a_clear_flip_the_summary_lists_every_batch() {
        // The A800 quick validation: LLM.int8() costs more at batch 1, 4 and 8 alike (by hand:
        // 9608 / 4334, 2718 / 1100, 1417 / 628 mJ/token).
        let ds = Dataset::embedded();
        let s = card_sweeps(ds, "A800");
        let m = sweep(&s, "Mistral-7B-Instruct-v0.3");
        assert_eq!(m.batches, [1, 4, 8]);
        assert_eq!(m.formats, ["INT8", "INT8-pure"]);
        assert_eq!(
            m.summary("INT8").unwrap(),
            "INT8 costs more at every batch measured: +122 % at batch 1, +147 % at batch 4, +126 % at batch 8"
        );
        // Cards without any batch > 1 energy row have no sweep.
        assert!(card_sweeps(ds, "RTX 4090").is_empty());
        assert!(
            card_sweeps(ds, "T4").is_empty(),
            "its batch-8 rows have no energy"
        );
    }

    #[test]
    fn markdown_has_a_row_per_batch_with_both_energies_and_the_interval() {
        let ds = Dataset::embedded();
        let s = card_sweeps(ds, "H200");
        let md = markdown(sweep(&s, "Qwen2-7B [candle-graph]"));
        assert!(md.starts_with("candle-graph 0.11.1 · Qwen2-7B [candle-graph] · session h200-candle-graph-2026-12\n\nQ4_K saves 38 % at batch 1 but costs 18 % more at batch 4.\n"), "{md}");
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| batch"))
            .collect();
        assert_eq!(rows.len(), 4, "{md}");
        assert!(
            rows[3].starts_with("| 64 | 76.3 · 6742 | 75.7 · 4590 | −0.7 % ["),
            "{}",
            rows[3]
        );
    }
}
