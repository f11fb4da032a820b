//! `quantenergy share`: the overlay link of a report, or what a link holds.

use anyhow::{anyhow, bail, Result};

/// Where the page lives.
pub const DEFAULT_PAGE_URL: &str = "https://quantenergy.github.io/quantenergy/";

/// Print the overlay link for `file`, or decode `decode`.
pub fn run(file: Option<&str>, decode: Option<&str>, base_url: &str) -> Result<()> {
    if let Some(arg) = decode {
        // A link of a few hundred kilobytes does not fit on a command line: `-` reads it from
        // stdin and `@FILE` from a file, through the same bounded reader as reports.
        let read;
        let link = if arg == "-" || arg.starts_with('@') {
            read = super::read_input(arg.strip_prefix('@').unwrap_or(arg))?;
            read.trim()
        } else {
            arg
        };
        let payload = report::share::payload_from_link(link);
        let p = report::share::decode(&payload)
            .map_err(|e| anyhow!("cannot decode overlay link: {e}"))?;
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": p.model, "params_b": p.params_b, "gpu_arch": p.arch, "precision": p.precision,
                "vs_fp16_energy_pct": p.vs_fp16_pct, "basis": p.basis, "gpu": p.gpu, "source": p.source,
            }))?
        );
        return Ok(());
    }
    let Some(file) = file else {
        bail!("pass a report FILE, or --decode LINK")
    };
    let text = super::read_input(file)?;
    let v = report::validate_str(&text);
    let Some(rep) = v.report.filter(|_| v.errors.is_empty()) else {
        let msgs: Vec<String> = v
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect();
        bail!("{file} is not a valid report:\n  {}", msgs.join("\n  "));
    };
    for w in &v.warnings {
        eprintln!("warning {}: {}", w.path, w.message);
    }
    println!(
        "{}",
        report::share::link(base_url, &report::share::from_report(&rep))
    );
    Ok(())
}
