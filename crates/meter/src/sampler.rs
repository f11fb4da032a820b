//! Power trace: a thread that polls instantaneous power at a requested rate while a measurement
//! window is open, and integrates it (trapezoid). The hardware counter is the primary figure; the
//! trace is the cross-check and the record of what happened inside the window.

use crate::meter::{Clock, PowerProbe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A power trace: timed power samples over a window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Trace {
    /// (seconds since the window opened, watts)
    pub samples: Vec<(f64, f64)>,
    /// Power reads that failed.
    pub failed_reads: u64,
    /// The sample rate asked for, Hz.
    pub requested_hz: f64,
    /// The sample rate achieved, Hz.
    pub achieved_hz: f64,
    /// The trace's length, s.
    pub duration_s: f64,
}

impl Trace {
    /// Trapezoid integral of the samples, J. `None` with fewer than two samples: a trace that
    /// cannot be integrated is reported as missing, never as zero.
    pub fn energy_j(&self) -> Option<f64> {
        if self.samples.len() < 2 {
            return None;
        }
        Some(
            self.samples
                .windows(2)
                .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
                .sum(),
        )
    }

    /// Mean of the samples, W (None if there are none).
    pub fn mean_power_w(&self) -> Option<f64> {
        let e = self.energy_j()?;
        let span = self.samples.last()?.0 - self.samples.first()?.0;
        (span > 0.0).then(|| e / span)
    }
}

/// The power-trace thread, running until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Trace>,
}

impl Sampler {
    /// Start sampling `probe` at `rate_hz` Hz on `clock`.
    pub fn start(mut probe: PowerProbe, clock: Arc<dyn Clock>, rate_hz: f64) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let period = std::time::Duration::from_secs_f64(1.0 / rate_hz.max(0.1));
        let handle = std::thread::spawn(move || {
            let t0 = clock.now_s();
            let wall0 = std::time::Instant::now();
            let mut samples = Vec::with_capacity(4096);
            let mut failed = 0u64;
            let mut next = std::time::Instant::now();
            loop {
                let stopping = flag.load(Ordering::Acquire);
                match probe() {
                    Ok(w) if w.is_finite() && w >= 0.0 => samples.push((clock.now_s() - t0, w)),
                    _ => failed += 1,
                }
                if stopping {
                    break;
                }
                next += period;
                let now = std::time::Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now; // fell behind: do not burst to catch up
                }
            }
            let duration_s = clock.now_s() - t0;
            let wall = wall0.elapsed().as_secs_f64();
            Trace {
                achieved_hz: if wall > 0.0 {
                    (samples.len() as u64 + failed) as f64 / wall
                } else {
                    0.0
                },
                requested_hz: rate_hz,
                samples,
                failed_reads: failed,
                duration_s,
            }
        });
        Sampler { stop, handle }
    }

    /// Stop after one last read (so the window's end is sampled) and return the trace.
    pub fn finish(self) -> Trace {
        self.stop.store(true, Ordering::Release);
        self.handle.join().expect("sampler thread panicked")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::{EnergyMeter, FakeClock, FakeMeter};

    #[test]
    fn integral_of_constant_power_is_power_times_time() {
        let t = Trace {
            samples: vec![(0.0, 100.0), (0.5, 100.0), (2.0, 100.0)],
            failed_reads: 0,
            requested_hz: 2.0,
            achieved_hz: 2.0,
            duration_s: 2.0,
        };
        assert_eq!(t.energy_j(), Some(200.0));
        assert_eq!(t.mean_power_w(), Some(100.0));
        let one = Trace {
            samples: vec![(0.0, 5.0)],
            ..t
        };
        assert_eq!(one.energy_j(), None);
    }

    #[test]
    fn sampler_counts_failed_reads_and_reaches_its_rate() {
        let meter = FakeMeter::new(|_| 250.0).with(|s| s.fail_power_every = 4);
        let clock = Arc::new(FakeClock(meter.clone()));
        let s = Sampler::start(meter.power_probe(), clock, 200.0);
        for _ in 0..50 {
            meter.advance(0.01);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let trace = s.finish();
        assert!(trace.failed_reads > 0, "{trace:?}");
        assert!(trace.samples.len() > 5);
        assert!(trace.samples.iter().all(|(_, w)| *w == 250.0));
        assert!(trace.achieved_hz > 20.0, "{}", trace.achieved_hz);
    }
}
