//! The embedded dataset: `data/anchors.csv` (published measurements with provenance) and
//! `data/gpus.csv` (card catalog). Both the page and the meter read these same bytes.

use crate::engine::{is_candle_stack, StackEngines};
use report::{Arch, Precision};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// `data/anchors.csv`, embedded (the CLI, the meter, the pre-render, every test). The page's two
/// modules (`page-anchors`) embed no copy: they read the one `index.html` carries and hand it to
/// [`provide_anchors_csv`] before the first use, so the page downloads the file once, not twice.
#[cfg(not(feature = "page-anchors"))]
pub const ANCHORS_CSV: &str = include_str!("../../../data/anchors.csv");

#[cfg(feature = "page-anchors")]
static PROVIDED: OnceLock<String> = OnceLock::new();

/// Give this build its `data/anchors.csv` text (`page-anchors`): the first call wins, before
/// [`Dataset::embedded`] is first read.
#[cfg(feature = "page-anchors")]
pub fn provide_anchors_csv(text: String) {
    let _ = PROVIDED.set(text);
}

/// The `data/anchors.csv` text this build reads: the embedded file, or (`page-anchors`) the text
/// provided to it, empty until then.
pub fn anchors_csv() -> &'static str {
    #[cfg(feature = "page-anchors")]
    return PROVIDED.get().map_or("", String::as_str);
    #[cfg(not(feature = "page-anchors"))]
    ANCHORS_CSV
}
/// `data/gpus.csv`, embedded.
pub const GPUS_CSV: &str = include_str!("../../../data/gpus.csv");

/// Independent runs our campaigns aim for behind every row: the fewest that give a usable 95 %
/// interval (t(n−1)/√n, the paired half-width per point of SD, is 8.98 at two runs, 2.48 at
/// three). The meter's aggregate notes a row below it, the page marks it.
pub const TARGET_RUNS: u32 = 3;

/// A problem in an embedded CSV, naming file, row and column.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DataError {
    #[error("{file}: row {row}: column `{column}`: {message}")]
    /// A cell that cannot be read.
    Field {
        /// The CSV file (`anchors.csv`).
        file: &'static str,
        /// 1-based row, counting the header line.
        row: usize,
        /// The column's header.
        column: &'static str,
        /// What was found and what was expected.
        message: String,
    },
    /// The file as a whole cannot be read (bad CSV, a missing column).
    #[error("{file}: {message}")]
    Csv {
        /// The CSV file.
        file: &'static str,
        /// The csv reader's message.
        message: String,
    },
}

/// One published measured configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anchor {
    /// Card name as published (`RTX 4090`).
    pub gpu: String,
    /// Architecture class of the card.
    pub arch: Arch,
    /// Model name as published.
    pub model: String,
    /// Model size, B parameters.
    pub params_b: f64,
    /// Precision; see [`Anchor::precision_label`] for the CSV's spelling.
    pub precision: Precision,
    /// What follows the precision in the CSV cell when the row names a variant of a format
    /// (`mlperf-client-file` in `GGUF-Q4_0-mlperf-client-file`); see [`Anchor::precision_label`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_variant: Option<String>,
    /// Batch size.
    pub batch: u32,
    /// GPU-package energy per generated token, mJ (= J per 1k tokens). `None` when the source
    /// publishes no usable figure.
    pub energy_mj: Option<f64>,
    /// Energy per token of the FP16 arm it is compared with, mJ.
    pub fp16_energy_mj: Option<f64>,
    /// Throughput summed over the batch, tok/s.
    pub throughput_tok_s: Option<f64>,
    /// Average GPU power, W.
    pub avg_power_w: Option<f64>,
    /// Independent runs behind the figure.
    pub n: Option<u32>,
    /// Run-to-run CV of the energy, %.
    pub cv_pct: Option<f64>,
    /// Run-to-run SD of each run's own ΔE vs the FP16 arm of the same run, in percentage points
    /// (our campaigns; empty for published rows and FP16 rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_fp16_sd_pct: Option<f64>,
    /// `gross` or `idle-subtracted`.
    pub power_accounting: String,
    /// Software stack that ran the model. Set it with [`Anchor::set_stack`], which keeps
    /// [`Anchor::engines`] in step.
    pub stack: String,
    /// The engines [`Anchor::stack`] names, read once when the row is parsed: what classes,
    /// baselines and sweeps key the row by ([`Anchor::engine`]), so no module re-reads the text.
    pub engines: StackEngines,
    /// The weights the row decoded, read once from its stack text (`aggregate` ends it with
    /// `…, real weights` or `…, synthetic weights`); `None` for rows that do not say (published).
    pub weights: Option<report::WeightsKind>,
    /// Measurement session (one card, one campaign).
    pub session: String,
    /// Where the figure was published.
    pub source: String,
    /// Feeds the default crossover curves (the 29 upstream curve rows).
    pub default_curve: bool,
    /// Physical cards the runs were made on (distinct GPU UUIDs; our campaigns only: a published
    /// row does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cards: Option<u32>,
    /// Mean perplexity of the arm on `data/perplexity/`'s text, where its runs scored it:
    /// comparable between the rows of one model only (same text, same tokenizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perplexity: Option<f64>,
    /// The row checks the method (a real model beside its synthetic twin): shown with the
    /// measurements, never fitted — no curve, launch-floor calibration or optimizer reads it.
    #[serde(default)]
    pub check: bool,
    /// A context run's depth: tokens already in the KV cache when its timed decode started
    /// (`measure --context`). `None`: the protocol's short prompt (16 tokens). Such rows are
    /// [`Dataset::context`]'s, never [`Dataset::anchors`]'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_depth: Option<u32>,
    /// A context run's prefill: energy per prompt token, mJ, measured in its own window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_mj: Option<f64>,
    /// Why the row does or does not feed a default curve.
    pub curve_note: String,
}

impl Anchor {
    /// The precision as the CSV writes it, variant included (`GGUF-Q4_0-mlperf-client-file`).
    pub fn precision_label(&self) -> String {
        match &self.precision_variant {
            Some(v) => format!("{}-{v}", self.precision),
            None => self.precision.to_string(),
        }
    }

    /// Whether this is the FP16 row measured beside `row`: same card, session, model, stack, batch
    /// and context depth (the FP16 arm of the same runs).
    pub fn is_fp16_beside(&self, row: &Anchor) -> bool {
        self.precision == Precision::Fp16
            && self.gpu == row.gpu
            && self.session == row.session
            && self.model == row.model
            && self.stack == row.stack
            && self.batch == row.batch
            && self.context_depth == row.context_depth
    }

    /// ΔE% vs FP16 recomputed from the row's two energies; the published percentage columns are
    /// never trusted (upstream once published one that was off by up to 14 points).
    pub fn delta_pct(&self) -> Option<f64> {
        match (self.energy_mj, self.fp16_energy_mj) {
            (Some(e), Some(f)) if f > 0.0 && e.is_finite() => Some((e - f) / f * 100.0),
            _ => None,
        }
    }

    /// The engine the row was measured with, as classes are keyed (`transformers`, `candle`,
    /// `candle-graph`, `llama.cpp`): the first of [`Anchor::engines`].
    pub fn engine(&self) -> &str {
        self.engines.curve()
    }

    /// Replace the row's stack text, and the engines read from it.
    pub fn set_stack(&mut self, stack: impl Into<String>) {
        self.stack = stack.into();
        self.engines = StackEngines::parse(&self.stack);
        self.weights = crate::engine::weights_of(&self.stack);
    }

    /// Measured by this project's meter (candle), not a published upstream row.
    pub fn is_candle(&self) -> bool {
        is_candle_stack(&self.stack)
    }

    /// Approximate 95 % half-width of [`Anchor::delta_pct`] in percentage points.
    ///
    /// Where the row carries the spread of its runs' own ΔE (each run measures every arm on the
    /// same card, in one process, minutes apart): the paired `t(n−1) · SD_ΔE / √n`, around
    /// [`Anchor::delta_pct`] — the ratio of the mean energies, which differs from the mean of the
    /// runs' own ΔE by at most 0.8 points in our rows (0.07 on the llama-server streams rows), far
    /// inside the half-width. A card or an hour that makes both arms of a run dearer then cancels
    /// in that run's ΔE instead of widening the interval. Otherwise (published rows) from the two rows' own spreads:
    /// `t · (E/F) · √(CV_E²/n_E + CV_F²/n_F)` with t of the smaller sample, which ignores any
    /// pairing and errs wide. `None` unless both rows have n ≥ 2 and a spread.
    pub fn delta_halfwidth_pct(&self, fp16: &Anchor) -> Option<f64> {
        let (e, f) = (self.energy_mj?, fp16.energy_mj?);
        let (ne, nf) = (self.n?, fp16.n?);
        if ne < 2 || nf < 2 || f <= 0.0 {
            return None;
        }
        if let Some(sd) = self.vs_fp16_sd_pct {
            return crate::stats::paired_halfwidth(sd, ne as usize);
        }
        let (ce, cf) = (self.cv_pct?, fp16.cv_pct?);
        let se = (ce * ce / ne as f64 + cf * cf / nf as f64).sqrt();
        Some(crate::stats::t95(ne.min(nf) as usize - 1) * e / f * se)
    }

    /// The 95 % interval of [`Anchor::delta_pct`] against `fp16`, its FP16 row:
    /// `Δ ± ` [`Anchor::delta_halfwidth_pct`].
    pub fn delta_interval(&self, fp16: &Anchor) -> Option<(f64, f64)> {
        let (d, h) = (self.delta_pct()?, self.delta_halfwidth_pct(fp16)?);
        Some((d - h, d + h))
    }

    /// What [`Anchor::delta_halfwidth_pct`] reads for this row, in words for a sentence ("within
    /// the …"): the spread of its runs' own ΔE where it carries one, else the run-to-run spread.
    pub fn interval_source(&self) -> &'static str {
        if self.vs_fp16_sd_pct.is_some() {
            "spread of its runs' own ΔE"
        } else {
            "run-to-run spread"
        }
    }

    /// Replicated in the site's sense (drawn with a filled marker).
    pub fn replicated(&self) -> bool {
        self.n.unwrap_or(1) >= 2
    }
}

/// One card of `data/gpus.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Card name (`H200`).
    pub name: String,
    /// Architecture class.
    pub arch: Arch,
    /// Memory, GB (datasheet, 1e9 bytes).
    pub vram_gb: f64,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    /// Dense FP16 tensor throughput, TFLOPS.
    pub fp16_tflops: f64,
    /// Board power, W.
    pub tdp_w: f64,
    /// Datasheet source.
    pub note: String,
}

/// The embedded dataset: published anchors and the card catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Every row of `anchors.csv` measured under the protocol's short prompt: what curves,
    /// classes, the optimizer and the Tested view read.
    pub anchors: Vec<Anchor>,
    /// The rows of context runs (a depth in `context_depth`): checks of the optimizer's context
    /// model along the context ([`crate::context`]), kept apart so no fit or view that assumes
    /// the short prompt ever reads one.
    pub context: Vec<Anchor>,
    /// Every card of `gpus.csv`.
    pub gpus: Vec<Gpu>,
}

impl Dataset {
    /// The batch-1 FP16 row measured next to `a`: same card, session, model, power accounting and
    /// engine (a session is one engine's today; the engine check keeps it so if one ever is not).
    pub fn fp16_row_of(&self, a: &Anchor) -> Option<&Anchor> {
        self.anchors.iter().find(|o| {
            o.precision == Precision::Fp16
                && o.batch == 1
                && o.gpu == a.gpu
                && o.session == a.session
                && o.model == a.model
                && o.power_accounting == a.power_accounting
                && o.engine() == a.engine()
        })
    }

    /// The dataset compiled into this binary, parsed once.
    pub fn embedded() -> &'static Dataset {
        static DATA: OnceLock<Dataset> = OnceLock::new();
        DATA.get_or_init(|| match Dataset::parse(anchors_csv(), GPUS_CSV) {
            Ok(d) => d,
            // Only a page whose index.html lost its data block gets here (the embedded files are
            // checked by tests): it shows no rows rather than no page.
            Err(_) => Dataset {
                anchors: Vec::new(),
                context: Vec::new(),
                gpus: parse_gpus(GPUS_CSV).unwrap_or_default(),
            },
        })
    }

    /// Parse both CSV texts.
    pub fn parse(anchors_csv: &str, gpus_csv: &str) -> Result<Dataset, DataError> {
        // A plain loop: `partition` or a clone would each add code to the page's wasm.
        let (mut anchors, mut context) = (Vec::new(), Vec::new());
        for a in parse_anchors(anchors_csv)? {
            if a.context_depth.is_some() {
                context.push(a);
            } else {
                anchors.push(a);
            }
        }
        Ok(Dataset {
            anchors,
            context,
            gpus: parse_gpus(gpus_csv)?,
        })
    }

    /// A card by name, as written in gpus.csv or as NVML reports it (`NVIDIA GeForce RTX 4090`).
    pub fn gpu(&self, name: &str) -> Option<&Gpu> {
        let want = normalize_name(name);
        self.gpus
            .iter()
            .find(|g| normalize_name(&g.name) == want)
            .or_else(|| {
                // "NVIDIA H200" or "NVIDIA GeForce RTX 4090" as NVML names them.
                self.gpus
                    .iter()
                    .filter(|g| want.contains(&normalize_name(&g.name)))
                    .max_by_key(|g| g.name.len())
            })
    }
}

fn normalize_name(s: &str) -> String {
    s.to_ascii_lowercase()
        .replace(['-', '_'], " ")
        .split_whitespace()
        .filter(|w| !matches!(*w, "nvidia" | "geforce" | "tesla"))
        .collect::<Vec<_>>()
        .join(" ")
}

struct Row<'a> {
    file: &'static str,
    index: usize,
    headers: &'a csv::StringRecord,
    record: csv::StringRecord,
}

impl Row<'_> {
    fn raw(&self, column: &'static str) -> Result<&str, DataError> {
        let pos = self
            .headers
            .iter()
            .position(|h| h == column)
            .ok_or(DataError::Csv {
                file: self.file,
                message: format!("missing column `{column}`"),
            })?;
        Ok(self.record.get(pos).unwrap_or("").trim())
    }
    fn has(&self, column: &str) -> bool {
        self.headers.iter().any(|h| h == column)
    }
    fn err(&self, column: &'static str, message: String) -> DataError {
        DataError::Field {
            file: self.file,
            row: self.index,
            column,
            message,
        }
    }
    fn text(&self, column: &'static str) -> Result<String, DataError> {
        Ok(self.raw(column)?.to_string())
    }
    fn arch(&self, column: &'static str) -> Result<Arch, DataError> {
        self.raw(column)?
            .parse()
            .map_err(|e: report::ParseArchError| self.err(column, e.to_string()))
    }
    /// A precision, optionally followed by `-variant` (`GGUF-Q4_0-mlperf-client-file`).
    fn precision(&self, column: &'static str) -> Result<(Precision, Option<String>), DataError> {
        let raw = self.raw(column)?;
        if let Ok(p) = raw.parse::<Precision>() {
            return Ok((p, None));
        }
        Precision::ALL
            .into_iter()
            .filter_map(|p| {
                let rest = raw.get(..p.as_str().len())?;
                let variant = raw[p.as_str().len()..].strip_prefix('-')?;
                (rest.eq_ignore_ascii_case(p.as_str()) && !variant.is_empty())
                    .then(|| (p, Some(variant.to_string())))
            })
            .max_by_key(|(p, _)| p.as_str().len())
            .ok_or_else(|| {
                self.err(
                    column,
                    report::ParsePrecisionError(raw.to_string()).to_string(),
                )
            })
    }
    fn opt_f64(&self, column: &'static str) -> Result<Option<f64>, DataError> {
        let raw = self.raw(column)?;
        if raw.is_empty() {
            return Ok(None);
        }
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            Ok(v) => Err(self.err(column, format!("expected a finite number ≥ 0, got {v}"))),
            Err(_) => Err(self.err(column, format!("expected a number, got {raw:?}"))),
        }
    }
    fn f64(&self, column: &'static str) -> Result<f64, DataError> {
        self.opt_f64(column)?
            .ok_or_else(|| self.err(column, "expected a number, got an empty cell".into()))
    }
    fn opt_u32(&self, column: &'static str) -> Result<Option<u32>, DataError> {
        let raw = self.raw(column)?;
        if raw.is_empty() {
            return Ok(None);
        }
        raw.parse::<u32>()
            .map(Some)
            .map_err(|_| self.err(column, format!("expected a whole number, got {raw:?}")))
    }
}

fn rows<'a>(
    file: &'static str,
    text: &str,
    headers: &'a mut csv::StringRecord,
) -> Result<Vec<Row<'a>>, DataError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(text.as_bytes());
    *headers = reader
        .headers()
        .map_err(|e| DataError::Csv {
            file,
            message: e.to_string(),
        })?
        .clone();
    let headers: &'a csv::StringRecord = headers;
    reader
        .records()
        .enumerate()
        .map(|(i, rec)| {
            rec.map(|record| Row {
                file,
                index: i + 2, // 1-based, after the header line
                headers,
                record,
            })
            .map_err(|e| DataError::Csv {
                file,
                message: e.to_string(),
            })
        })
        .collect()
}

/// Parse `anchors.csv` text.
pub fn parse_anchors(text: &str) -> Result<Vec<Anchor>, DataError> {
    let mut headers = csv::StringRecord::new();
    rows("anchors.csv", text, &mut headers)?
        .iter()
        .map(|r| {
            let default_curve = match r.raw("default_curve")? {
                "1" => true,
                "0" | "" => false,
                other => {
                    return Err(r.err("default_curve", format!("expected 0 or 1, got {other:?}")))
                }
            };
            let (precision, precision_variant) = r.precision("precision")?;
            let mut anchor = Anchor {
                gpu: r.text("gpu")?,
                arch: r.arch("gpu_arch")?,
                model: r.text("model")?,
                params_b: r.f64("params_b")?,
                precision,
                precision_variant,
                batch: r.opt_u32("batch_size")?.unwrap_or(1),
                energy_mj: r.opt_f64("energy_per_token_mj")?,
                fp16_energy_mj: r.opt_f64("fp16_energy_per_token_mj")?,
                throughput_tok_s: r.opt_f64("throughput_tok_s")?,
                avg_power_w: r.opt_f64("avg_power_w")?,
                n: r.opt_u32("n")?,
                cv_pct: r.opt_f64("cv_pct")?,
                // Optional column: a file written before it existed has no paired spreads.
                vs_fp16_sd_pct: if r.has("vs_fp16_sd_pct") {
                    r.opt_f64("vs_fp16_sd_pct")?
                } else {
                    None
                },
                power_accounting: r.text("power_accounting")?,
                stack: r.text("stack")?,
                engines: StackEngines::default(),
                weights: None,
                session: r.text("session")?,
                source: r.text("source")?,
                default_curve,
                // Optional columns: a file written before them says nothing of cards or quality.
                cards: if r.has("cards") {
                    r.opt_u32("cards")?
                } else {
                    None
                },
                perplexity: if r.has("perplexity") {
                    r.opt_f64("perplexity")?
                } else {
                    None
                },
                check: match r.has("role").then(|| r.raw("role")).transpose()? {
                    None | Some("") => false,
                    Some("check") => true,
                    Some(other) => {
                        return Err(
                            r.err("role", format!("expected check or nothing, got {other:?}"))
                        )
                    }
                },
                context_depth: if r.has("context_depth") {
                    r.opt_u32("context_depth")?
                } else {
                    None
                },
                prefill_mj: if r.has("prefill_mj_per_prompt_token") {
                    r.opt_f64("prefill_mj_per_prompt_token")?
                } else {
                    None
                },
                curve_note: r.text("curve_note")?,
            };
            // A context row measures one depth of one configuration: never a curve anchor.
            if anchor.context_depth.is_some() && (!anchor.check || anchor.default_curve) {
                return Err(r.err(
                    "context_depth",
                    "a context run's row must have role check and default_curve 0: it checks \
                     the context model, it is never fitted"
                        .into(),
                ));
            }
            // Read after every cell, so a row's first bad cell stays the one reported.
            anchor.engines = StackEngines::parse(&anchor.stack);
            anchor.weights = crate::engine::weights_of(&anchor.stack);
            Ok(anchor)
        })
        .collect()
}

/// Parse `gpus.csv` text.
pub fn parse_gpus(text: &str) -> Result<Vec<Gpu>, DataError> {
    let mut headers = csv::StringRecord::new();
    rows("gpus.csv", text, &mut headers)?
        .iter()
        .map(|r| {
            Ok(Gpu {
                name: r.text("name")?,
                arch: r.arch("architecture")?,
                vram_gb: r.f64("vram_gb")?,
                bandwidth_gbs: r.f64("memory_bandwidth_gbs")?,
                fp16_tflops: r.f64("fp16_dense_tflops")?,
                tdp_w: r.f64("tdp_w")?,
                note: r.text("note")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row's engines are read from its stack text once, when the dataset is built, and follow
    /// the text when it is replaced.
    #[test]
    fn a_rows_engines_are_what_its_stack_text_names() {
        for a in &Dataset::embedded().anchors {
            assert_eq!(a.engines.all(), crate::engine::stack_engines(&a.stack));
            assert_eq!(a.engine(), crate::engine::curve_engine(&a.stack));
        }
        let mut a = Dataset::embedded().anchors[0].clone();
        assert_eq!(a.engine(), "transformers");
        a.set_stack("llama.cpp GGUF (decode-only)");
        assert_eq!(a.engine(), "llama.cpp");
    }

    #[test]
    fn embedded_dataset_has_the_29_default_curve_rows() {
        let d = Dataset::embedded();
        // The 110 published rows; our own measurements (session h200-…) come after them.
        let published: Vec<&Anchor> = d
            .anchors
            .iter()
            .filter(|a| !a.source.starts_with("quantenergy data/measurements"))
            .collect();
        assert_eq!(published.len(), 110);
        assert_eq!(published.iter().filter(|a| a.default_curve).count(), 29);
        // Every default-curve row can be recomputed from its two energies.
        assert!(d
            .anchors
            .iter()
            .filter(|a| a.default_curve)
            .all(|a| a.delta_pct().is_some()));
    }

    /// No two of our rows share a session, card, model, stack, format, batch and depth: a row's
    /// FP16 partner is found by those, so two sittings that reused one session name would pair
    /// one sitting's arm with the other's FP16 (another card).
    #[test]
    fn our_rows_each_have_their_own_key() {
        let d = Dataset::embedded();
        let ours: Vec<&Anchor> = d
            .anchors
            .iter()
            .chain(&d.context)
            .filter(|a| a.source.starts_with("quantenergy data/measurements"))
            .collect();
        assert!(ours.len() > 100, "{}", ours.len());
        for (i, a) in ours.iter().enumerate() {
            let twin = ours[i + 1..].iter().find(|o| {
                (&o.gpu, &o.session, &o.model, &o.stack, &o.power_accounting)
                    == (&a.gpu, &a.session, &a.model, &a.stack, &a.power_accounting)
                    && (o.precision, &o.precision_variant, o.batch, o.context_depth)
                        == (a.precision, &a.precision_variant, a.batch, a.context_depth)
            });
            assert!(twin.is_none(), "two rows of session {}: {a:?}", a.session);
        }
    }

    #[test]
    fn delta_interval_from_run_to_run_spread() {
        let row = |e: f64, n: u32, cv: Option<f64>| Anchor {
            energy_mj: Some(e),
            n: Some(n),
            cv_pct: cv,
            ..Dataset::embedded().anchors[0].clone()
        };
        // E = 800, F = 1000, CV 4 % (n = 4) and 6 % (n = 3): t(2) = 4.303,
        // √(16/4 + 36/3) = 4 → 4.303 · 0.8 · 4 = 13.77 points.
        let hw = row(800.0, 4, Some(4.0))
            .delta_halfwidth_pct(&row(1000.0, 3, Some(6.0)))
            .unwrap();
        assert!((hw - 13.7696).abs() < 1e-3, "{hw}");
        // A single run or a missing CV gives no interval, never a zero one.
        assert!(row(800.0, 1, Some(4.0))
            .delta_halfwidth_pct(&row(1000.0, 3, Some(6.0)))
            .is_none());
        assert!(row(800.0, 4, None)
            .delta_halfwidth_pct(&row(1000.0, 3, Some(6.0)))
            .is_none());
    }

    /// Our campaigns' rows carry the SD of the runs' own ΔE: the interval is the paired one, and
    /// a spread that both arms of a run share (CV 9 % and 7 % here) no longer widens it.
    #[test]
    fn delta_interval_is_paired_where_the_row_has_its_runs_delta_spread() {
        let row = |e: f64, cv: f64, sd: Option<f64>| Anchor {
            energy_mj: Some(e),
            n: Some(3),
            cv_pct: Some(cv),
            vs_fp16_sd_pct: sd,
            ..Dataset::embedded().anchors[0].clone()
        };
        let fp16 = row(211.19, 7.0, None);
        // SD 3.0 points over n = 3 runs: t(2) = 4.303 → 4.303 · 3 / √3 = 7.453 points.
        let paired = row(185.2, 9.47, Some(3.0))
            .delta_halfwidth_pct(&fp16)
            .unwrap();
        assert!(
            (paired - 4.303 * 3.0 / 3f64.sqrt()).abs() < 1e-9,
            "{paired}"
        );
        // Unpaired from the same rows: 4.303 · (185.2/211.19) · √((9.47² + 7²)/3) = 25.66.
        let unpaired = row(185.2, 9.47, None).delta_halfwidth_pct(&fp16).unwrap();
        assert!((unpaired - 25.656).abs() < 0.001, "{unpaired}");
        // The committed 7 B llama-server row at 32 streams: per-run ΔE −12.14, −9.31, −15.68 %
        // (data/measurements/h200/llama/raw, r1–r3) → SD 3.19; its interval excludes zero.
        let d = Dataset::embedded();
        let a = d
            .anchors
            .iter()
            .find(|a| {
                a.model == "Qwen2-7B [llama.cpp]" && a.batch == 32 && a.precision == Precision::Q4K
            })
            .unwrap();
        assert_eq!(a.vs_fp16_sd_pct, Some(3.19));
        let fp16 = d
            .anchors
            .iter()
            .find(|f| f.model == a.model && f.batch == 32 && f.precision == Precision::Fp16)
            .unwrap();
        let h = a.delta_halfwidth_pct(fp16).unwrap();
        assert!(
            a.delta_pct().unwrap() + h < 0.0,
            "{:?} ± {h}",
            a.delta_pct()
        );
        // The interval is Δ ± that half-width: −12.3 % [−20.2, −4.4].
        let (lo, hi) = a.delta_interval(fp16).unwrap();
        assert!((lo - (a.delta_pct().unwrap() - h)).abs() < 1e-12);
        assert!(
            (lo - -20.2).abs() < 0.05 && (hi - -4.4).abs() < 0.05,
            "{lo} {hi}"
        );
    }

    #[test]
    fn delta_is_recomputed_not_copied() {
        let d = Dataset::embedded();
        let a = d
            .anchors
            .iter()
            .find(|a| {
                a.gpu == "RTX 4090" && a.model == "Qwen2.5-3B" && a.precision == Precision::Nf4
            })
            .unwrap();
        // The July CSV said +10.1 %, the energies give +0.8 % (reference README).
        assert!(
            (a.delta_pct().unwrap() - 0.8).abs() < 0.1,
            "{:?}",
            a.delta_pct()
        );
    }

    #[test]
    fn gpu_lookup_accepts_nvml_names() {
        let d = Dataset::embedded();
        assert_eq!(d.gpu("NVIDIA H200").unwrap().name, "H200");
        assert_eq!(d.gpu("NVIDIA GeForce RTX 4090").unwrap().name, "RTX 4090");
        assert_eq!(d.gpu("rtx 4090d").unwrap().name, "RTX 4090D");
        assert!(d.gpu("Voodoo 2").is_none());
        for name in [
            "T4",
            "A100 80GB",
            "A800",
            "RTX 4090",
            "RTX 4090D",
            "RTX 5090",
            "H100",
            "H200",
        ] {
            assert!(d.gpu(name).is_some(), "{name} missing from gpus.csv");
        }
    }

    #[test]
    fn bad_csv_names_row_and_column() {
        let header = ANCHORS_CSV.lines().next().unwrap();
        let bad =
            format!("{header}\nRTX 4090,ada,X,seven,FP16,1,1,1,0,,,1,,,gross,s,s,s,0,,,,,,n\n");
        let err = parse_anchors(&bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "anchors.csv: row 2: column `params_b`: expected a number, got \"seven\""
        );
        let neg = format!("{header}\nRTX 4090,ada,X,7,FP16,1,-5,1,0,,,1,,,gross,s,s,s,0,,,,,,n\n");
        assert!(parse_anchors(&neg)
            .unwrap_err()
            .to_string()
            .contains("energy_per_token_mj"));
        let missing = "gpu,gpu_arch\nA,b\n";
        assert!(parse_anchors(missing)
            .unwrap_err()
            .to_string()
            .contains("missing column"));
    }
}
