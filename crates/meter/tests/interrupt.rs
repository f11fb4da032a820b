//! A meter told to stop (SIGTERM, as from `kill`, Ctrl-C's SIGINT or `scancel`) during a metered
//! window, during a cooldown, or while a report is being written: it dies of the signal, leaves no
//! report and no temporary file. The test re-runs itself as the "meter" child, which
//! runs the real protocol on the wall clock with a slow fake engine, and marks when it reaches
//! the stage the parent interrupts.

use meter::decoder::{DecodeError, Decoder, DecoderFactory};
use meter::meter::{DeviceInfo, EnergyMeter, MeterError, PowerProbe, RealClock};
use meter::protocol::{CooldownConfig, ProtocolConfig};
use report::Precision;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD: &str = "QE_INTERRUPT_CHILD";

fn dir(stage: &str) -> PathBuf {
    let parent =
        std::env::var("QE_INTERRUPT_PARENT").unwrap_or_else(|_| std::process::id().to_string());
    std::env::temp_dir().join(format!("qe-interrupt-{stage}-{parent}"))
}

/// 100 W for the idle reference, 300 W after it (so the cooldown waits); marks the stages.
struct StageMeter {
    t0: Instant,
    reads: u32,
    dir: PathBuf,
}

impl StageMeter {
    fn mark(&self, stage: &str) {
        let _ = std::fs::write(self.dir.join(stage), "");
    }
}

impl EnergyMeter for StageMeter {
    fn info(&mut self) -> Result<DeviceInfo, MeterError> {
        Ok(meter::testing::simulated_h200())
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        self.mark("window");
        Ok((self.t0.elapsed().as_secs_f64() * 300_000.0) as u64 + 1)
    }
    fn power_w(&mut self) -> Result<f64, MeterError> {
        self.reads += 1;
        if self.reads > 3 {
            self.mark("cooldown");
            return Ok(300.0);
        }
        Ok(100.0)
    }
    fn temperature_c(&mut self) -> Result<f64, MeterError> {
        Ok(40.0)
    }
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError> {
        Ok(80 << 30)
    }
    fn power_probe(&self) -> PowerProbe {
        Box::new(|| Ok(300.0))
    }
}

/// 20 ms per generation, whatever is asked.
struct Slow;
impl Decoder for Slow {
    fn generate(&mut self, batch: usize, _: usize, n: usize) -> Result<usize, DecodeError> {
        std::thread::sleep(Duration::from_millis(20));
        Ok(batch * n)
    }
    fn synchronize(&mut self) -> Result<(), DecodeError> {
        Ok(())
    }
    fn kernel(&self) -> String {
        "slow fake".into()
    }
    fn nll(&mut self, _: &[u32]) -> Result<f64, DecodeError> {
        Ok(0.0)
    }
}
struct SlowFactory;
impl DecoderFactory for SlowFactory {
    fn load(&mut self, _: Precision) -> Result<Box<dyn Decoder>, DecodeError> {
        Ok(Box::new(Slow))
    }
    fn required_bytes(&self, _: Precision, _: usize, _: usize) -> u64 {
        1 << 20
    }
    fn tokenize(&self, _: &str) -> Result<(Vec<u32>, String), DecodeError> {
        Ok((vec![1, 2, 3], "bytes".into()))
    }
}

/// The "meter": the protocol, then the report written as `measure` writes it.
fn child(stage: &str) {
    let d = dir(stage);
    meter::interrupt::install();
    if stage == "write" {
        // Stand in for a slow disk: the temp file exists, registered, while the parent signals.
        let tmp = d.join(".report.json.tmp-child");
        let _guard = meter::interrupt::TempFile::register(&tmp);
        std::fs::write(&tmp, "{\"half\":").unwrap();
        std::fs::write(d.join("write"), "").unwrap();
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let cfg = ProtocolConfig {
        precisions: vec![Precision::Q4K],
        baseline: Some(Precision::Fp16),
        tokens: 4,
        iterations: if stage == "window" { 3000 } else { 2 },
        warmup: 0,
        idle_reads: 3,
        cooldown: CooldownConfig {
            max_s: if stage == "cooldown" { 60.0 } else { 0.0 },
            poll_s: 0.05,
            ..CooldownConfig::default()
        },
        ..ProtocolConfig::default()
    };
    let mut m = StageMeter {
        t0: Instant::now(),
        reads: 0,
        dir: d.clone(),
    };
    let out = meter::protocol::run(
        &cfg,
        &mut m,
        &mut SlowFactory,
        Arc::new(RealClock::default()),
    );
    // Reached only if the signal did not stop the run: a report, which the parent would find.
    let _ = std::fs::write(d.join("finished.json"), format!("{:?}", out.is_ok()));
}

fn interrupt_at(stage: &str) {
    let d = dir(stage);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("sigterm_during_a_{stage}_leaves_nothing"),
        ])
        .env(CHILD, stage)
        .env("QE_INTERRUPT_PARENT", std::process::id().to_string())
        .spawn()
        .unwrap();
    let marker = d.join(stage);
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the child never reached the {stage}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
    let status = c.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    let left: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") || n.contains(".tmp"))
        .collect();
    assert!(
        left.is_empty(),
        "left behind after SIGTERM during the {stage}: {left:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

fn is_child(stage: &str) -> bool {
    match std::env::var(CHILD) {
        Ok(s) if s == stage => {
            child(stage);
            true
        }
        _ => false,
    }
}

#[test]
fn sigterm_during_a_window_leaves_nothing() {
    if !is_child("window") {
        interrupt_at("window");
    }
}

#[test]
fn sigterm_during_a_cooldown_leaves_nothing() {
    if !is_child("cooldown") {
        interrupt_at("cooldown");
    }
}

#[test]
fn sigterm_during_a_write_leaves_nothing() {
    if !is_child("write") {
        interrupt_at("write");
    }
}
