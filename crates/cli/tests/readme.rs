//! Every `quantenergy` example of the README, run as written on a machine without a GPU: those
//! that need none succeed, those that need a GPU say so, those that need files the reader brings
//! name the missing file. A new example must be added to [`EXPECTED`], so none goes untried.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What an example does here.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Exits 0.
    Runs,
    /// Exits non-zero and says that it needs a GPU.
    NeedsGpu,
    /// Exits non-zero and names this (the reader's own file, model or server).
    NeedsTheReaders(&'static str),
    /// Not run, for this reason.
    Skip(&'static str),
}

/// Each README example by its command's start, and what it must do here.
const EXPECTED: &[(&str, Expect)] = &[
    ("validate data/examples/", Expect::Runs),
    ("estimate --gpu \"RTX 4090\"", Expect::Runs),
    ("estimate --arch ada", Expect::Runs),
    ("crossover --arch ada", Expect::Runs),
    ("compare data/measurements/h200/raw/", Expect::Runs),
    ("share data/examples/upstream-no-gpu.json", Expect::Runs),
    ("probe", Expect::NeedsGpu),
    (
        "measure --synthetic qwen2-0.5b --precision Q8_0",
        Expect::Runs,
    ),
    (
        "measure --model ./Qwen2-1.5B",
        Expect::NeedsTheReaders("Qwen2-1.5B"),
    ),
    (
        "measure --model-file m-F16.gguf",
        Expect::NeedsTheReaders("m-F16.gguf"),
    ),
    (
        "measure --synthetic qwen2-1.5b --precision Q4_0 --context",
        Expect::Runs,
    ),
    (
        "measure --synthetic qwen2-1.5b --precision Q4_0 --prompts",
        Expect::Runs,
    ),
    (
        "sweep data/measurements/h200/plan.toml",
        Expect::Skip("the H200 campaign: it would write into the repository's plan folder"),
    ),
    ("aggregate data/measurements/h200/raw", Expect::Runs),
    (
        "sweep data/measurements/h200/llama/plan.toml",
        Expect::Skip(
            "the H200 llama-server campaign: it would write into the repository's plan folder",
        ),
    ),
    ("stacks data/measurements/h200/graph/raw", Expect::Runs),
    ("sweeps --gpu H200", Expect::Runs),
    ("overhead --synthetic", Expect::NeedsGpu),
    (
        "measure --synthetic qwen2-0.5b --precision Q4_K --engine eager",
        Expect::Runs,
    ),
    ("engine-check --synthetic qwen2-0.5b", Expect::NeedsGpu),
    ("engine-check --synthetic qwen2-7b", Expect::NeedsGpu),
    ("optimize --gpu", Expect::Runs),
    (
        "measure --server-cmd \"llama-server -m {model} --port {port} -ngl 999\"",
        Expect::NeedsTheReaders("qwen2-7b-f16.gguf"),
    ),
    (
        "measure --server-cmd \"llama-server -m {model} --port {port} -ngl 999 -np 8",
        Expect::NeedsTheReaders("qwen2-7b-f16.gguf"),
    ),
    (
        "measure --server-cmd \"llama-server -m {model} --port {port}\" --model-file",
        Expect::NeedsTheReaders("qwen2-7b-q4_0.gguf"),
    ),
    (
        "measure --server-cmd \"llama-server -m {model} --port {port} -ngl 999 -c 16640",
        Expect::NeedsTheReaders("qwen2-7b-f16.gguf"),
    ),
    (
        "measure --server-cmd \"vllm serve",
        Expect::NeedsTheReaders("Qwen2-7B-Instruct"),
    ),
    (
        "measure --server http://127.0.0.1:11434",
        Expect::NeedsTheReaders("127.0.0.1:11434"),
    ),
    ("compare out/", Expect::NeedsTheReaders("out/")),
    ("compare --any-stack out/", Expect::NeedsTheReaders("out/")),
    (
        "sweep plan.toml --emit slurm",
        Expect::NeedsTheReaders("plan.toml"),
    ),
    ("aggregate results/", Expect::NeedsTheReaders("results")),
];

const CARGO_RUN: &str = "cargo run --release -p cli -- ";

/// The README's shell examples that run our binary, continuation lines joined.
fn examples(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = !in_sh && line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let joined = format!("{pending}{}", line.trim());
        if let Some(head) = joined.strip_suffix('\\') {
            pending = format!("{} ", head.trim_end());
            continue;
        }
        pending.clear();
        if joined.starts_with("quantenergy ") || joined.starts_with(CARGO_RUN) {
            out.push(joined);
        }
    }
    out
}

/// The command after `quantenergy ` / `cargo run … -- `.
fn command_of(example: &str) -> &str {
    example
        .strip_prefix(CARGO_RUN)
        .or_else(|| example.strip_prefix("quantenergy "))
        .unwrap()
}

fn expectation(example: &str) -> Expect {
    let cmd = command_of(example);
    let hits: Vec<_> = EXPECTED
        .iter()
        .filter(|(p, _)| cmd.starts_with(p))
        .collect();
    // The longest prefix decides, so two examples of one command can differ.
    hits.iter()
        .max_by_key(|(p, _)| p.len())
        .map(|(_, e)| *e)
        .unwrap_or_else(|| {
            panic!("a README example this test does not know: {example}\nadd it to EXPECTED")
        })
}

/// A folder where the examples' relative paths reach the repository's data and their outputs
/// land in a scratch place.
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("qe-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(repo().join("data").canonicalize().unwrap(), d.join("data"))
        .unwrap();
    d
}

fn run(example: &str, dir: &Path) -> (Option<i32>, String) {
    // This build's binary, or `QE_BIN` (scripts/hostile-classes.sh: an older build).
    let bin = std::env::var("QE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_quantenergy").into());
    let line = example
        .replace(CARGO_RUN, &format!("{bin} "))
        .replace("| quantenergy ", &format!("| {bin} "));
    let line = match line.strip_prefix("quantenergy ") {
        Some(rest) => format!("{bin} {rest}"),
        None => line,
    };
    let mut child = Command::new("sh")
        .args(["-c", &line])
        .current_dir(dir)
        .env("RUST_LOG", "error")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("sh");
    // Drained as it runs, so a long output never blocks the example.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    // No example here may take long: one that does is stopped and fails.
    let t0 = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            // SAFETY: signals the example's own process group, started above.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return (None, "still running after 60 s: stopped".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = child.wait().expect("wait");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.join().unwrap()),
        String::from_utf8_lossy(&err.join().unwrap())
    );
    (status.code(), text)
}

#[test]
fn every_readme_example_runs_as_written_or_says_what_it_needs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let all = examples(&readme);
    assert!(all.len() >= 25, "too few examples found: {all:?}");
    let dir = scratch();
    let mut failures = Vec::new();
    for ex in &all {
        let expect = expectation(ex);
        if let Expect::Skip(why) = expect {
            eprintln!("not run: {ex}: {why}");
            continue;
        }
        let (code, text) = run(ex, &dir);
        let ok = match expect {
            Expect::Runs => code == Some(0),
            Expect::NeedsGpu => code != Some(0) && text.contains("GPU"),
            Expect::NeedsTheReaders(what) => code != Some(0) && text.contains(what),
            Expect::Skip(_) => unreachable!(),
        };
        let panicked = text.contains("panicked at");
        if !ok || panicked {
            failures.push(format!(
                "{ex}\n  expected {expect:?}, got exit {code:?}:\n{text}"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // No stale entry: each one still matches an example.
    for (prefix, _) in EXPECTED {
        assert!(
            all.iter().any(|e| command_of(e).starts_with(prefix)),
            "EXPECTED lists {prefix:?}, which no README example starts with"
        );
    }
}
