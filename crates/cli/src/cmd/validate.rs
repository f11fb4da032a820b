//! `quantenergy validate`: schema + semantic checks of reports, with exit codes a script can use.
//! [`check_file`] and [`print_check`] are also how `quantenergy compare` reads its reports.

use anyhow::Result;

/// One file read and validated.
pub enum FileCheck {
    /// The file could not be read as UTF-8 text (the message says why).
    Unreadable(String),
    /// The text was validated.
    Checked {
        /// What `report::validate_str` found.
        validation: Box<report::Validation>,
        /// The text is not JSON at all.
        not_json: bool,
    },
}

impl FileCheck {
    /// The typed report of a valid file.
    pub fn report(&self) -> Option<&report::Report> {
        match self {
            FileCheck::Checked { validation, .. } if validation.is_valid() => {
                validation.report.as_ref()
            }
            _ => None,
        }
    }

    /// Unreadable, or not JSON: exit 2 in both commands.
    pub fn unreadable(&self) -> bool {
        matches!(
            self,
            FileCheck::Unreadable(_) | FileCheck::Checked { not_json: true, .. }
        )
    }

    /// Every error as (JSON path, message); an unreadable file's reason at `$`.
    pub fn errors(&self) -> Vec<(String, String)> {
        match self {
            FileCheck::Unreadable(why) => vec![("$".into(), why.clone())],
            FileCheck::Checked { validation, .. } => validation
                .errors
                .iter()
                .map(|i| (i.path.clone(), i.message.clone()))
                .collect(),
        }
    }
}

/// Read `path` (`-`: standard input) and validate it.
pub fn check_file(path: &str) -> FileCheck {
    match super::read_input(path) {
        Ok(text) => FileCheck::Checked {
            validation: Box::new(report::validate_str(&text)),
            // A full parse: skipping values (IgnoredAny) accepts numbers out of range and lone
            // surrogates, which are not JSON any reader can use.
            not_json: serde_json::from_str::<serde_json::Value>(&text).is_err(),
        },
        Err(e) => FileCheck::Unreadable(format!("{e:#}")),
    }
}

/// Print what `validate` prints for one file: `path: ok` / `INVALID` / `unreadable`, then each
/// error and (with `warnings`) each warning with its JSON path.
pub fn print_check(path: &str, check: &FileCheck, warnings: bool) {
    match check {
        FileCheck::Unreadable(why) => println!("{path}: unreadable: {why}"),
        FileCheck::Checked { validation: v, .. } => {
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
            if warnings {
                for w in &v.warnings {
                    println!("  warning {}: {}", w.path, w.message);
                }
            }
        }
    }
}

/// The validity lines `validate` prints under a valid report: what its fields give, and whether
/// the file states it.
fn print_validity(r: &report::Report) {
    let v = report::validity::assess(r);
    let stated = if r.validity.is_some() {
        "stated and derived"
    } else {
        "derived from its fields; not stated in the file"
    };
    println!("  validity {} ({stated})", v.headline());
    for line in v.lines() {
        println!("    {line}");
    }
}

/// Validate each file (or `-`, standard input). Exit 0 when all are valid, 1 when any is invalid,
/// 2 when any is unreadable or not JSON. With `write_validity`, each file whose only fault is a
/// missing or stale `validity` block gets the block its fields give.
pub fn validate(files: &[String], write_validity: bool) -> Result<u8> {
    let mut any_invalid = false;
    let mut any_unreadable = false;
    for path in files {
        if write_validity && path != "-" {
            if let Err(e) = rewrite_validity(path) {
                println!("{path}: validity not written: {e:#}");
                any_invalid = true;
            }
        }
        let check = check_file(path);
        print_check(path, &check, true);
        if let Some(r) = check.report() {
            print_validity(r);
        }
        if check.unreadable() {
            any_unreadable = true;
        } else if check.report().is_none() {
            any_invalid = true;
        }
    }
    Ok(if any_unreadable {
        2
    } else if any_invalid {
        1
    } else {
        0
    })
}

/// Replace the file's `validity` block with the one its fields give, when the report is valid
/// without it; the file is rewritten whole (pretty JSON, key order kept) or not at all.
fn rewrite_validity(path: &str) -> Result<()> {
    let text = super::read_input(path)?;
    let mut value: serde_json::Value = serde_json::from_str(&text)?;
    let obj = value
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("not a JSON object"))?;
    obj.remove("validity");
    let bare = serde_json::to_string(&value)?;
    let v = report::validate_str(&bare);
    let Some(r) = v.report.as_ref().filter(|_| v.errors.is_empty()) else {
        anyhow::bail!("the report has errors besides its validity block (see below)");
    };
    let validity = serde_json::to_value(report::validity::assess(r))?;
    value
        .as_object_mut()
        .expect("checked above")
        .insert("validity".into(), validity);
    let mut out = serde_json::to_string_pretty(&value)?;
    if text.ends_with('\n') {
        out.push('\n');
    }
    if out != text {
        meter::files::write_atomic(std::path::Path::new(path), out.as_bytes())?;
    }
    Ok(())
}
