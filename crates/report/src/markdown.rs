//! A Markdown block for a submission issue. Every string from the report is hostile text.

use crate::semantic::semantic_checks;
use crate::types::Report;

/// Longest user string shown in the table, in characters.
const MAX_CELL_CHARS: usize = 200;
/// Longest composed cell (stack, weights, protocol) or finding, in characters.
const MAX_LONG_CHARS: usize = 1000;

/// Escape user text for one table cell: Markdown punctuation that could change the table or
/// render links / code / HTML is escaped, line breaks become spaces, control characters go.
fn esc(s: &str) -> String {
    esc_cap(s, MAX_CELL_CHARS)
}

/// [`esc`] with another length cap.
fn esc_cap(s: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(s.len());
    for (count, c) in s.chars().enumerate() {
        if count == max_chars {
            out.push('…');
            break;
        }
        match c {
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '~' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '@' => out.push_str("&#64;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn esc_long(s: &str) -> String {
    esc_cap(s, MAX_LONG_CHARS)
}

/// A number rounded to 2 decimals, without trailing zeros; `—` when absent or not finite.
fn num(x: Option<f64>) -> String {
    match x.filter(|x| x.is_finite()) {
        Some(x) => {
            let r = (x * 100.0).round() / 100.0;
            format!("{}", if r == 0.0 { 0.0 } else { r })
        }
        None => "—".to_string(),
    }
}

fn with_unit(x: Option<f64>, unit: &str) -> String {
    match x.filter(|x| x.is_finite()) {
        Some(_) => format!("{} {unit}", num(x)),
        None => "—".to_string(),
    }
}

/// Longest run of backticks in `s` (to choose a code fence that `s` cannot close).
fn longest_backtick_run(s: &str) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == '`' {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

fn join_present(parts: &[Option<String>], sep: &str) -> String {
    let v: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
    if v.is_empty() {
        "—".to_string()
    } else {
        v.join(sep)
    }
}

/// `s` as one plain line: every control character (a line break, a tab, the ESC of a terminal
/// escape sequence …) becomes a space. The one-line texts below are made of report text and are
/// shown as plain text by the page and printed by the CLI (the `markdown` fuzz target asserts it).
fn plain_line(s: String) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    } else {
        s
    }
}

/// The quality block in one line of plain text (escape it for Markdown): the metric and its Δ vs
/// FP16 with the corpus that makes it comparable, or why there is none.
pub fn quality_line(q: &crate::Quality) -> String {
    let corpus = q.corpus.as_ref().map(|c| {
        join_present(
            &[
                c.name.clone(),
                c.sha256
                    .as_deref()
                    .map(|h| format!("sha256 {}…", h.chars().take(12).collect::<String>())),
            ],
            ", ",
        )
    });
    let figure = match (
        q.value.filter(|v| v.is_finite()),
        q.delta_vs_fp16_pct.filter(|d| d.is_finite()),
    ) {
        (Some(v), Some(d)) => Some(format!(
            "{} {} vs FP16 {} ({d:+.2} %)",
            q.metric,
            num(Some(v)),
            num(q.fp16_value)
        )),
        (Some(v), None) => Some(format!(
            "{} {} ({})",
            q.metric,
            num(Some(v)),
            q.extra
                .get("delta_note")
                .and_then(|n| n.as_str())
                .unwrap_or("no Δ vs FP16")
        )),
        _ => None,
    };
    plain_line(join_present(
        &[
            Some(q.basis.clone()),
            figure,
            q.error.clone(),
            q.tokens_evaluated.map(|t| format!("{t} tokens")),
            corpus.map(|c| format!("corpus {c}")),
        ],
        " · ",
    ))
}

/// Markdown for a submission issue: a summary table (GPU, architecture, model, size, precision,
/// batch, energies, Δ recomputed from the energies, throughput, power, basis, source, stack,
/// weights, protocol), the semantic findings, and the full JSON in a collapsed block.
pub fn to_markdown(r: &Report) -> String {
    let (sut, w) = (&r.system_under_test, &r.workload);
    let mut out = String::new();
    out.push_str(&format!(
        "### Energy report: {} · {} on {}\n\n",
        esc(&w.model_name),
        esc(&w.precision),
        esc(&sut.gpu)
    ));
    out.push_str("| Field | Value |\n|---|---|\n");
    for (k, v) in summary_rows(r) {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    out.push_str(&checks_section(r));
    out.push_str(&json_block(r));
    out
}

/// The summary table's rows, in order: card and model, energies and Δ, where the figures come
/// from, stack, weights, protocol, quality, schema.
fn summary_rows(r: &Report) -> Vec<(&'static str, String)> {
    let (sut, w, res) = (&r.system_under_test, &r.workload, &r.results);
    let mut rows: Vec<(&'static str, String)> = Vec::new();
    rows.push(("GPU", esc(&sut.gpu)));
    let arch = match (sut.gpu_arch.parse::<crate::Arch>(), r.effective_arch()) {
        (Ok(a), _) => a.as_str().to_string(),
        (Err(_), Some(a)) => format!(
            "{} (stated “{}”, derived from the GPU name)",
            a.as_str(),
            esc(&sut.gpu_arch)
        ),
        (Err(_), None) => format!("“{}” (unknown)", esc(&sut.gpu_arch)),
    };
    rows.push(("Architecture", arch));
    rows.push(("Model", esc(&w.model_name)));
    let params = match (
        w.params_b.filter(|p| p.is_finite() && *p > 0.0),
        r.effective_params_b(),
    ) {
        (Some(p), _) => format!("{} B", num(Some(p))),
        (None, Some(g)) => format!("{} B (guessed from the model name)", num(Some(g))),
        (None, None) => "unknown".to_string(),
    };
    rows.push(("Parameters", params));
    rows.push(("Precision", esc(&w.precision)));
    rows.push(("Batch size", w.batch_size.to_string()));
    rows.extend(workload_row(r));
    rows.push(("Energy per token", with_unit(res.energy_per_token_mj, "mJ")));
    rows.push((
        "FP16 energy per token",
        with_unit(res.fp16_energy_per_token_mj, "mJ"),
    ));
    let delta = match (r.recomputed_delta_pct(), res.vs_fp16_energy_pct) {
        (Some(d), Some(s)) => format!("{d:+.2} % (stated {:+} %)", s),
        (Some(d), None) => format!("{d:+.2} %"),
        (None, Some(s)) if s.is_finite() => format!("stated {s:+} % (cannot be recomputed)"),
        _ => "—".to_string(),
    };
    rows.push(("Δ vs FP16 (recomputed)", delta));
    rows.push((
        "Throughput",
        with_unit(res.throughput_tokens_per_s, "tok/s"),
    ));
    rows.push(("Average power", with_unit(res.avg_power_watts, "W")));
    rows.extend(roofline_cell(r).map(|c| ("Memory roofline", c)));
    rows.push(("Basis", res.basis.as_str().to_string()));
    rows.push((
        "Source",
        r.measurement_source
            .as_deref()
            .map(esc)
            .unwrap_or_else(|| esc(&r.measurement.method)),
    ));
    rows.extend(r.stack.as_ref().map(|s| ("Stack", stack_line(s))));
    rows.extend(r.weights.as_ref().map(|wt| ("Weights", weights_line(wt))));
    rows.push((
        "Protocol",
        esc_long(&join_present(&protocol_parts(r), " · ")),
    ));
    if let Some(q) = &r.quality {
        rows.push(("Quality", esc_long(&quality_line(q))));
    }
    rows.push(("Schema", esc(&r.schema_version)));
    rows
}

fn workload_row(r: &Report) -> Option<(&'static str, String)> {
    workload_summary(r).map(|t| ("Workload", esc_long(&t)))
}

/// What the figures are of, where it is not a whole generation after a short prompt: a context
/// run's decode at its depth, or a prompt set's requests end to end; with the prefill's figures
/// and, for a prompt set, the requests' counts. Plain text, one line.
pub fn workload_summary(r: &Report) -> Option<String> {
    let (w, res) = (&r.workload, &r.results);
    let prefill = res.prefill.as_ref().map(|p| {
        format!(
            "; prefill {} mJ per prompt token, time to first token {} ms (median)",
            num(Some(p.energy_per_prompt_token_mj)),
            num(Some(p.time_to_first_token_ms))
        )
    });
    let text = match (&w.prompt_set, w.context_depth) {
        (Some(s), _) => {
            let q = res.requests.as_ref().map(|q| {
                format!(
                    "; {} J per request, decode's share {} (derived), time to first token {} ms (p90)",
                    num(Some(q.energy_per_request_joules)),
                    with_unit(q.decode_energy_per_token_mj, "mJ per output token"),
                    num(Some(q.time_to_first_token_p90_ms))
                )
            });
            format!(
                "prompt set {} ({} requests, {} prompt and {} output tokens a pass): energy per \
                 token is the requests' end to end, each prompt's prefill included{}{}",
                plain_line(s.name.clone()),
                s.prompts,
                s.prompt_tokens,
                s.output_tokens,
                prefill.unwrap_or_default(),
                q.unwrap_or_default()
            )
        }
        (None, Some(d)) => format!(
            "context run: the decode at depth {d} (the prefill in a window of its own){}",
            prefill.unwrap_or_default()
        ),
        (None, None) => return None,
    };
    Some(text)
}

/// The report's own arm's weight bytes per token and HBM roofline fraction, or
/// `None` when that arm states neither.
fn roofline_cell(r: &Report) -> Option<String> {
    let arm = r
        .protocol
        .as_ref()
        .and_then(|p| p.arms.as_ref())
        .and_then(|arms| arms.iter().find(|a| a.precision == r.workload.precision))?;
    let bytes = arm
        .weight_bytes_per_token
        .map(|b| format!("{} MB of weights read per token", num(Some(b as f64 / 1e6))));
    let fraction = arm
        .hbm_roofline_fraction
        .filter(|f| f.is_finite())
        .map(|f| format!("{} % of the card's memory bandwidth", num(Some(f * 100.0))));
    (bytes.is_some() || fraction.is_some()).then(|| join_present(&[bytes, fraction], " · "))
}

/// Engine and version, how a server was driven, kernel, CUDA, driver.
fn stack_line(s: &crate::Stack) -> String {
    esc_long(&join_present(
        &[
            engine_and_version(s),
            s.serving.as_ref().map(serving_words),
            s.kernel.clone(),
            s.cuda.as_ref().map(|c| format!("CUDA {c}")),
            s.driver.as_ref().map(|d| format!("driver {d}")),
        ],
        " · ",
    ))
}

fn engine_and_version(s: &crate::Stack) -> Option<String> {
    match (&s.engine, &s.engine_version) {
        (Some(e), Some(v)) => Some(format!("{e} {v}")),
        (Some(e), None) => Some(e.clone()),
        (None, Some(v)) => Some(v.clone()),
        (None, None) => None,
    }
}

/// "server started by the meter, /v1/completions, 8 streams".
fn serving_words(v: &crate::Serving) -> String {
    join_present(
        &[
            Some(v.mode.words().to_string()),
            v.api.clone(),
            v.concurrency
                .map(|c| format!("{c} stream{}", if c == 1 { "" } else { "s" })),
        ],
        ", ",
    )
}

/// The report's stack in one plain line — engine and version, how a server was driven, and the
/// streamed latency of the report's own arm — or `None` when the report names no stack (upstream
/// reports). The page shows it beside an overlaid point; `compare` prints it.
pub fn stack_summary(r: &Report) -> Option<String> {
    let s = r.stack.as_ref()?;
    let latency = r
        .protocol
        .as_ref()
        .and_then(|p| p.arms.as_ref())
        .and_then(|arms| arms.iter().find(|a| a.precision == r.workload.precision))
        .and_then(|a| a.latency.as_ref())
        .map(|l| {
            format!(
                "TTFT p50 {:.1} ms · inter-token p50 {:.2} ms · tokens from {}",
                l.ttft_ms_p50,
                l.itl_ms_p50,
                match l.counted_from {
                    crate::TokenCount::Usage => "the server's usage",
                    crate::TokenCount::Stream => "the stream",
                }
            )
        });
    let line = join_present(
        &[
            engine_and_version(s),
            s.serving.as_ref().map(serving_words),
            latency,
        ],
        " · ",
    );
    (!line.is_empty()).then(|| plain_line(line))
}

/// Kind, architecture, where from, seed, files and their hashes.
fn weights_line(wt: &crate::Weights) -> String {
    let files = wt.files.as_deref().unwrap_or(&[]);
    let hashes: Vec<String> = files
        .iter()
        .filter_map(|f| f.sha256.as_deref())
        .map(|h| format!("sha256 {}…", h.chars().take(12).collect::<String>()))
        .collect();
    esc_long(&join_present(
        &[
            Some(wt.kind.as_str().to_string()),
            wt.architecture.clone(),
            wt.hub_id.clone().or_else(|| wt.path.clone()),
            wt.seed.map(|s| format!("seed {s}")),
            (!files.is_empty()).then(|| format!("{} file(s)", files.len())),
            (!hashes.is_empty()).then(|| hashes.join(", ")),
        ],
        " · ",
    ))
}

/// Warmups, iterations, tokens, sampling, arm order, cooldown, failed arms, energy cross-check.
fn protocol_parts(r: &Report) -> Vec<Option<String>> {
    let m = &r.measurement;
    let mut protocol = vec![
        m.warmup
            .or(r.protocol.as_ref().and_then(|p| p.warmup.map(u64::from)))
            .map(|x| format!("{x} warmup(s)")),
        m.iterations
            .or(r
                .protocol
                .as_ref()
                .and_then(|p| p.iterations.map(u64::from)))
            .map(|x| format!("{x} iteration(s)")),
        m.tokens_per_run.map(|x| format!("{x} tokens per run")),
        Some(format!("{} Hz requested", m.sample_rate_hz)),
    ];
    if let Some(p) = &r.protocol {
        if let Some(order) = &p.arm_order {
            protocol.push(Some(format!("arm order {}", order.join(" → "))));
        }
        if let Some(c) = &p.cooldown {
            protocol.push(Some(match (c.converged, c.seconds) {
                (Some(true), Some(s)) => format!("cooldown converged in {} s", num(Some(s))),
                (Some(true), None) => "cooldown converged".to_string(),
                (Some(false), _) => "cooldown did NOT converge".to_string(),
                (None, _) => "cooldown".to_string(),
            }));
        }
        if let Some(arms) = &p.arms {
            let failed: Vec<&str> = arms
                .iter()
                .filter(|a| a.status == crate::ArmStatus::Failed)
                .map(|a| a.precision.as_str())
                .collect();
            if !failed.is_empty() {
                protocol.push(Some(format!("failed arm(s): {}", failed.join(", "))));
            }
        }
    }
    if let Some(e) = &r.energy {
        protocol.push(
            e.achieved_sample_rate_hz
                .map(|h| format!("{} Hz achieved", num(Some(h)))),
        );
        if let (Some(c), Some(t)) = (e.counter_joules, e.trace_joules) {
            protocol.push(Some(format!(
                "counter {} J vs trace {} J",
                num(Some(c)),
                num(Some(t))
            )));
        }
        protocol.push(
            e.idle_power_watts
                .map(|i| format!("idle {} W (not subtracted)", num(Some(i)))),
        );
    }
    protocol
}

/// The semantic findings as a list, or nothing when there are none.
fn checks_section(r: &Report) -> String {
    let mut out = String::new();
    let (errors, warnings) = semantic_checks(r);
    if !errors.is_empty() || !warnings.is_empty() {
        out.push_str("\n**Checks**\n\n");
        for i in &errors {
            out.push_str(&format!(
                "- error `{}`: {}\n",
                i.path.replace('`', "'"),
                esc_long(&i.message)
            ));
        }
        for i in &warnings {
            out.push_str(&format!(
                "- warning `{}`: {}\n",
                i.path.replace('`', "'"),
                esc_long(&i.message)
            ));
        }
    }

    out
}

/// The full JSON in a collapsed block, fenced so no backtick run inside can close it.
fn json_block(r: &Report) -> String {
    // `<`, `>`, `&`, `@` only occur inside JSON strings: write them as \u escapes (the same
    // JSON) so no HTML or mention survives even outside the code block.
    let json = r
        .to_json_pretty()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('@', "\\u0040");
    let fence = "`".repeat(longest_backtick_run(&json).max(2) + 1);
    format!(
        "\n<details><summary>energy.json</summary>\n\n{fence}json\n{json}\n{fence}\n\n</details>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn illustrative() -> Report {
        serde_json::from_str(include_str!(
            "../../../data/examples/upstream-measured-illustrative.json"
        ))
        .unwrap()
    }

    #[test]
    fn table_has_the_fields() {
        let md = to_markdown(&illustrative());
        for needle in [
            "| GPU | RTX 5090 |",
            "| Architecture | blackwell |",
            "| Parameters | 3 B |",
            "| Precision | NF4 |",
            "| Batch size | 1 |",
            "| Energy per token | 3765 mJ |",
            "| FP16 energy per token | 3382.6 mJ |",
            "| Δ vs FP16 (recomputed) | +11.30 % (stated +11.3 %) |",
            "| Throughput | 111.8 tok/s |",
            "| Average power | 421 W |",
            "| Basis | measured |",
            "2 warmup(s)",
            "- warning `$.measurement_source`",
            "```json\n{",
        ] {
            assert!(md.contains(needle), "{needle} missing in\n{md}");
        }
    }

    #[test]
    fn quality_row_shows_the_delta_and_the_corpus_or_why_not() {
        let mut r = illustrative();
        r.quality = Some(crate::Quality::sample());
        let md = to_markdown(&r);
        assert!(
            md.contains("| Quality | measured · perplexity 10.5 vs FP16 10 (+5.00 %) · 511 tokens · corpus data/perplexity/us-founding-texts.txt, sha256 bce67aa074bf… |"),
            "{md}"
        );
        // No Δ: the reason is shown, not just its absence.
        let q = r.quality.as_mut().unwrap();
        q.delta_vs_fp16_pct = None;
        q.extra.insert(
            "delta_note".into(),
            serde_json::json!("no Δ vs FP16: the FP16 arm failed"),
        );
        let md = to_markdown(&r);
        assert!(
            md.contains("perplexity 10.5 (no Δ vs FP16: the FP16 arm failed)"),
            "{md}"
        );
        let q = r.quality.as_mut().unwrap();
        q.basis = "unavailable".into();
        q.value = None;
        q.delta_vs_fp16_pct = None;
        q.error = Some("no tokenizer at /m/tokenizer.json".into());
        let md = to_markdown(&r);
        assert!(
            md.contains("| Quality | unavailable · no tokenizer at /m/tokenizer.json · 511 tokens"),
            "{md}"
        );
    }

    #[test]
    fn roofline_row_shows_the_own_arms_figures() {
        let mut r = illustrative();
        assert!(!to_markdown(&r).contains("Memory roofline"));
        r.protocol = Some(crate::Protocol {
            arms: Some(vec![
                crate::Arm {
                    weight_bytes_per_token: Some(1),
                    hbm_roofline_fraction: Some(0.9),
                    ..crate::Arm::ok("FP16")
                },
                crate::Arm {
                    weight_bytes_per_token: Some(1_234_560_000),
                    hbm_roofline_fraction: Some(0.4567),
                    ..crate::Arm::ok("NF4")
                },
            ]),
            ..Default::default()
        });
        let md = to_markdown(&r);
        assert!(
            md.contains("| Memory roofline | 1234.56 MB of weights read per token · 45.67 % of the card's memory bandwidth |"),
            "{md}"
        );
    }

    #[test]
    fn json_block_is_the_same_report() {
        let mut r = illustrative();
        r.workload.model_name = "a<b>&c@d ```".into();
        let md = to_markdown(&r);
        let start = md.find("json\n").unwrap() + 5;
        let end = md[start..].find("\n```").unwrap() + start;
        let back: Report = serde_json::from_str(&md[start..end]).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn hostile_text_is_escaped() {
        let mut r = illustrative();
        r.workload.model_name =
            "evil | <script>alert(1)</script> `code` [x](http://t) ![i](http://p)\n| a | b |"
                .into();
        r.system_under_test.gpu = "@everyone ```".into();
        r.measurement_source = Some("````\n</details><img src=x>".into());
        let md = to_markdown(&r);
        let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        // Every table row still has exactly two cells: no unescaped pipe got in.
        for row in &table {
            let unescaped = row
                .char_indices()
                .filter(|&(i, c)| c == '|' && (i == 0 || !row[..i].ends_with('\\')))
                .count();
            assert_eq!(unescaped, 3, "{row}");
        }
        assert!(!md.contains("<script>"));
        assert!(!md.contains("<img"));
        assert!(md.contains("&lt;script&gt;"));
        assert!(md.contains("\\`code\\`"));
        assert!(md.contains("\\[x\\]"));
        assert!(!md.contains("@everyone"));
        // The JSON block's fence is longer than any backtick run inside it.
        assert!(md.contains("\n`````json\n"), "{md}");
    }
}

#[cfg(test)]
mod stack_summary_tests {
    use super::*;

    /// A committed H200 llama-server report: engine, how it was driven and its own arm's latency.
    #[test]
    fn a_server_report_names_its_stack_and_latency() {
        let text = include_str!(
            "../../../data/measurements/h200/server/llama-server/qwen2-7b-c1/qwen2-7b-llama-server-c1_Q4_K.json"
        );
        let r: Report = serde_json::from_str(text).unwrap();
        let line = stack_summary(&r).unwrap();
        assert!(line.starts_with("llama.cpp b0-unknown · server started by the meter, /v1/completions, 1 stream · TTFT p50 9.8 ms"), "{line}");
        assert!(line.ends_with("tokens from the server's usage"), "{line}");
        assert!(to_markdown(&r).contains("server started by the meter"));
        let mut upstream = r.clone();
        upstream.stack = None;
        assert_eq!(stack_summary(&upstream), None);
    }

    /// The JSON block reads back as the very report, to the last bit of every number —
    /// serde_json's default float parser puts 2.5555555555555554e20 one ULP off (a fuzz finding;
    /// report's manifest turns on `float_roundtrip`).
    #[test]
    fn json_block_reads_back_as_the_same_report() {
        let text = include_str!("../../../data/examples/measured.json");
        let mut r: Report = serde_json::from_str(text).unwrap();
        r.results.energy_per_token_mj = Some(2.5555555555555554e20);
        r.results.avg_power_watts = Some(0.1 + 0.2);
        let md = to_markdown(&r);
        let block = md.split("```json\n").nth(1).unwrap();
        let json = block.split("\n```").next().unwrap();
        let back: Report = serde_json::from_str(json).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            serde_json::from_str::<f64>("2.5555555555555554e20").unwrap(),
            2.5555555555555554e20
        );
    }

    /// Report text with a line break or a terminal escape sequence in the stack or the quality
    /// block cannot make the one-line summaries span lines or colour a terminal (a fuzz finding).
    #[test]
    fn one_line_summaries_stay_one_plain_line() {
        let text = include_str!("../../../data/examples/measured.json");
        let mut r: Report = serde_json::from_str(text).unwrap();
        let stack = r.stack.get_or_insert_with(Default::default);
        stack.engine = Some("candle\n\u{1b}[31mred".into());
        stack.engine_version = Some("0.11\t1\r".into());
        let line = stack_summary(&r).unwrap();
        assert_eq!(line, "candle  [31mred 0.11 1 ");
        let q: crate::Quality = serde_json::from_value(serde_json::json!({
            "metric": "perplexity\n",
            "basis": "measured\u{1b}[2J",
            "value": 9.5,
            "error": "line\nbreak"
        }))
        .unwrap();
        let line = quality_line(&q);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.starts_with("measured [2J · perplexity  9.5"), "{line}");
    }
}
