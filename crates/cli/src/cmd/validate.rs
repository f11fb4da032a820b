//! `quantenergy validate`: schema + semantic checks of reports, with exit codes a script can use.

use anyhow::Result;
use std::process::ExitCode;

/// Validate each file (or `-`, standard input). Exit 0 when all are valid, 1 when any is invalid,
/// 2 when any is unreadable or not JSON.
pub fn validate(files: &[String]) -> Result<ExitCode> {
    let mut any_invalid = false;
    let mut any_unreadable = false;
    for path in files {
        let text = match super::read_input(path) {
            Ok(t) => t,
            Err(e) => {
                println!("{path}: unreadable: {e:#}");
                any_unreadable = true;
                continue;
            }
        };
        let v = report::validate_str(&text);
        let not_json = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err();
        if v.errors.is_empty() {
            println!(
                "{path}: ok{}",
                if v.warnings.is_empty() {
                    ""
                } else {
                    " (with warnings)"
                }
            );
        } else {
            println!("{path}: INVALID");
        }
        for e in &v.errors {
            println!("  error   {}: {}", e.path, e.message);
        }
        for w in &v.warnings {
            println!("  warning {}: {}", w.path, w.message);
        }
        if not_json {
            any_unreadable = true;
        } else if !v.errors.is_empty() {
            any_invalid = true;
        }
    }
    Ok(if any_unreadable {
        ExitCode::from(2)
    } else if any_invalid {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
