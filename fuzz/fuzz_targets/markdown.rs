//! `report::to_markdown` and `report::stack_summary` on every report that parses from the fuzzed
//! JSON (typed parse alone, so reports that fail validation are rendered too: the CLI renders
//! what it read).
//!
//! Asserts besides "no panic", on the Markdown: the heading is one line; every row of the summary
//! table is one line with exactly three unescaped `|` (no report text can add a cell, a row or
//! break out of the table); each finding is one list line; no `<`, `>` or `@` appears outside
//! the `<details>` wrapper; the JSON block's fence is longer than any backtick run inside it and
//! its content parses back to the report's JSON. On `stack_summary` and `workload_summary`: one
//! line, no control characters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use report::{stack_summary, to_markdown, workload_summary, Report};

/// `|` not preceded by an odd number of backslashes.
fn unescaped_pipes(line: &str) -> usize {
    let mut n = 0;
    let mut backslashes = 0;
    for c in line.chars() {
        match c {
            '\\' => backslashes += 1,
            '|' if backslashes % 2 == 0 => {
                n += 1;
                backslashes = 0;
            }
            _ => backslashes = 0,
        }
    }
    n
}

fn check_markdown(r: &Report, md: &str) {
    let lines: Vec<&str> = md.split('\n').collect();
    assert!(lines[0].starts_with("### Energy report: "), "{md}");
    assert_eq!(lines[1], "", "heading spans lines:\n{md}");
    assert_eq!(lines[2], "| Field | Value |");
    assert_eq!(lines[3], "|---|---|");
    let mut i = 4;
    while !lines[i].is_empty() {
        let row = lines[i];
        assert!(
            row.starts_with("| ") && row.ends_with(" |"),
            "row {i}: {row:?}"
        );
        assert_eq!(unescaped_pipes(row), 3, "row {i} has extra cells: {row:?}");
        i += 1;
    }
    let (body, json_part) = md
        .split_once("\n<details><summary>energy.json</summary>\n\n")
        .expect("the JSON block");
    if let Some(checks) = body.split_once("\n**Checks**\n\n").map(|x| x.1) {
        for line in checks.lines() {
            assert!(
                line.starts_with("- error `") || line.starts_with("- warning `"),
                "finding spans lines: {line:?}"
            );
        }
    }
    assert!(
        !body.contains(['<', '>', '@']),
        "HTML or a mention outside the JSON block:\n{body}"
    );
    let fence_len = json_part.chars().take_while(|&c| c == '`').count();
    assert!(fence_len >= 3);
    let fence = "`".repeat(fence_len);
    let rest = json_part[fence_len..]
        .strip_prefix("json\n")
        .expect("json fence");
    let (json, tail) = rest
        .rsplit_once(&format!("\n{fence}\n"))
        .expect("closing fence");
    assert_eq!(tail, "\n</details>\n");
    assert!(
        !json.contains(['<', '>', '@']),
        "HTML or a mention in the JSON block"
    );
    let longest = json.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    assert!(longest < fence_len, "a backtick run can close the fence");
    let shown: serde_json::Value = serde_json::from_str(json).expect("the block is JSON");
    assert_eq!(shown, serde_json::to_value(r).expect("serializes"));
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The same guards the validator applies before parsing (depth, size).
    if text.len() > report::MAX_INPUT_BYTES {
        return;
    }
    let Ok(r) = serde_json::from_str::<Report>(&text) else {
        return;
    };
    let md = to_markdown(&r);
    check_markdown(&r, &md);
    if let Some(line) = stack_summary(&r) {
        assert!(
            !line.chars().any(char::is_control),
            "stack summary is not one plain line: {line:?}"
        );
    }
    if let Some(line) = workload_summary(&r) {
        assert!(
            !line.chars().any(char::is_control),
            "workload summary is not one plain line: {line:?}"
        );
    }
});
