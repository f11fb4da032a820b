//! Energy measurement hardware behind a trait: NVML on a real GPU ([`crate::nvml_meter`]), a
//! scripted fake for tests. The protocol only ever talks to [`EnergyMeter`].

use std::sync::{Arc, Mutex};

/// Why the meter could not answer. A lost GPU ends the run; a failed read fails the window.
#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// No meter could be opened (no driver, no such device).
    #[error("no GPU meter available: {0}")]
    Unavailable(String),
    /// One read failed (the device is still there).
    #[error("read failed: {0}")]
    Read(String),
    /// The device went away mid-run.
    #[error("the GPU disappeared: {0}")]
    Lost(String),
    /// An NVML call failed; [`MeterError::is_lost`] tells a lost GPU from a failed read.
    #[cfg(feature = "nvml")]
    #[error("NVML: {0}")]
    Nvml(#[from] nvml_wrapper::error::NvmlError),
}

impl MeterError {
    /// The GPU is gone (or NVML with it): nothing more can be measured in this run.
    pub fn is_lost(&self) -> bool {
        match self {
            MeterError::Lost(_) => true,
            #[cfg(feature = "nvml")]
            MeterError::Nvml(e) => matches!(
                e,
                nvml_wrapper::error::NvmlError::GpuLost
                    | nvml_wrapper::error::NvmlError::NotFound
                    | nvml_wrapper::error::NvmlError::Uninitialized
            ),
            _ => false,
        }
    }
}

/// What the meter knows about the device, recorded in the report's `environment` block.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DeviceInfo {
    /// The GPU's marketing name.
    pub name: String,
    /// The GPU architecture, where known.
    pub arch: Option<report::Arch>,
    /// The GPU's UUID.
    pub uuid: Option<String>,
    /// The NVIDIA driver version.
    pub driver: Option<String>,
    /// The CUDA driver version.
    pub cuda: Option<String>,
    /// The enforced power limit, W.
    pub power_limit_w: Option<f64>,
    /// The SM clock at query time, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// The memory clock at query time, MHz.
    pub mem_clock_mhz: Option<u32>,
    /// Total device memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Whether the device has a total-energy counter.
    pub energy_counter: bool,
    /// Every card metered, when a run sums several (`--gpu 0,1`); empty for one.
    pub cards: Vec<CardRef>,
}

/// One card of a multi-GPU meter.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CardRef {
    /// NVML index.
    pub index: u32,
    /// Card name.
    pub name: String,
    /// Card UUID.
    pub uuid: Option<String>,
}

/// A source of instantaneous power readings that can live on the sampling thread.
pub type PowerProbe = Box<dyn FnMut() -> Result<f64, MeterError> + Send>;

/// How the GPU spent a window, beside its energy, for the window's validity
/// ([`report::validity`]); each figure `None` where the meter cannot say.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct WindowActivity {
    /// Mean GPU utilisation over the window (NVML: the share of time a kernel ran), %.
    pub gpu_busy_pct: Option<f64>,
    /// Share of the window a power limit held the clocks down, %.
    pub power_throttle_pct: Option<f64>,
    /// Share of the window a thermal limit held the clocks down, %.
    pub thermal_throttle_pct: Option<f64>,
}

/// A GPU energy/power meter: the hardware behind a trait, so the protocol runs against a fake.
pub trait EnergyMeter {
    /// Static facts about the device.
    fn info(&mut self) -> Result<DeviceInfo, MeterError>;
    /// Cumulative hardware energy counter in mJ (NVML `total_energy_consumption`).
    fn energy_mj(&mut self) -> Result<u64, MeterError>;
    /// Instantaneous board power in W (NVML field `POWER_INSTANT`, not the 1 s average).
    fn power_w(&mut self) -> Result<f64, MeterError>;
    /// GPU temperature, °C.
    fn temperature_c(&mut self) -> Result<f64, MeterError>;
    /// Free device memory, bytes.
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError>;
    /// A probe for the sampling thread (reads power only).
    fn power_probe(&self) -> PowerProbe;
    /// Mark a window's start for [`EnergyMeter::end_activity`].
    fn begin_activity(&mut self) {}
    /// How the GPU spent the `seconds` since [`EnergyMeter::begin_activity`].
    fn end_activity(&mut self, _seconds: f64) -> WindowActivity {
        WindowActivity::default()
    }
}

/// Scripted fake meter. Power and temperature are functions of a shared virtual time (seconds)
/// that the fake clock advances, so cooldown and windows are deterministic in tests; the energy
/// counter integrates the scripted power exactly.
#[derive(Clone)]
pub struct FakeMeter {
    /// The shared scripted state (clock, power, temperature, counters).
    pub state: Arc<Mutex<FakeState>>,
}

/// The scripted state behind a [`FakeMeter`].
pub struct FakeState {
    /// Virtual time, s.
    pub now_s: f64,
    /// Power in W at virtual time t.
    pub power: Box<dyn Fn(f64) -> f64 + Send>,
    /// Temperature (°C) as a function of virtual time (s).
    pub temperature: Box<dyn Fn(f64) -> f64 + Send>,
    /// Free device memory the fake reports, bytes.
    pub free_bytes: u64,
    /// Counter value in mJ, integrated as time advances.
    pub counter_mj: f64,
    /// Whether the energy counter stays frozen (to test the stuck-counter refusal).
    pub counter_stuck: bool,
    /// Whether the fake reports an energy counter at all.
    pub counter_supported: bool,
    /// Fail every n-th power read (0 = never).
    pub fail_power_every: u64,
    /// How many power reads were made (for tests).
    pub power_reads: u64,
    /// After this virtual time every read returns `Lost`.
    pub lost_after_s: Option<f64>,
    /// Host CPU accounting for [`FakeClock::host_cpu`]: the stolen share (`None`: unreadable).
    pub steal_share: Option<f64>,
    /// After this virtual time counter reads fail (power reads still succeed).
    pub counter_fails_after_s: Option<f64>,
    /// Right after this many counter reads the counter restarts from 0 (a driver reload).
    pub counter_resets_after_reads: Option<u64>,
    /// Counter reads so far.
    pub counter_reads: u64,
    /// The counter moves only every this many seconds (as the H200's every ≈ 100 ms); `None`:
    /// at every read.
    pub counter_update_s: Option<f64>,
    /// What [`EnergyMeter::end_activity`] reports for every window.
    pub activity: WindowActivity,
}

impl FakeMeter {
    /// A fake meter whose power (W) is `power` of virtual time (s).
    pub fn new(power: impl Fn(f64) -> f64 + Send + 'static) -> FakeMeter {
        FakeMeter {
            state: Arc::new(Mutex::new(FakeState {
                now_s: 0.0,
                power: Box::new(power),
                temperature: Box::new(|_| 40.0),
                free_bytes: 80 << 30,
                counter_mj: 1_000_000.0,
                counter_stuck: false,
                counter_supported: true,
                fail_power_every: 0,
                power_reads: 0,
                lost_after_s: None,
                steal_share: None,
                counter_fails_after_s: None,
                counter_resets_after_reads: None,
                counter_reads: 0,
                counter_update_s: None,
                activity: WindowActivity::default(),
            })),
        }
    }

    /// Adjust the scripted state with `f` (builder style).
    pub fn with<F: FnOnce(&mut FakeState)>(self, f: F) -> Self {
        f(&mut self.state.lock().unwrap());
        self
    }

    /// Advance virtual time, integrating power into the counter (fine steps: exact enough).
    pub fn advance(&self, dt: f64) {
        let mut s = self.state.lock().unwrap();
        let steps = ((dt / 0.001).ceil() as usize).max(1);
        let h = dt / steps as f64;
        for _ in 0..steps {
            let p0 = (s.power)(s.now_s);
            let p1 = (s.power)(s.now_s + h);
            if !s.counter_stuck {
                s.counter_mj += (p0 + p1) / 2.0 * h * 1000.0;
            }
            s.now_s += h;
        }
    }

    /// The current virtual time, s.
    pub fn now(&self) -> f64 {
        self.state.lock().unwrap().now_s
    }
}

fn lost(s: &FakeState) -> Result<(), MeterError> {
    match s.lost_after_s {
        Some(t) if s.now_s >= t => Err(MeterError::Lost("fake GPU removed".into())),
        _ => Ok(()),
    }
}

fn read_power(s: &mut FakeState) -> Result<f64, MeterError> {
    lost(s)?;
    s.power_reads += 1;
    if s.fail_power_every > 0 && s.power_reads.is_multiple_of(s.fail_power_every) {
        return Err(MeterError::Read("scripted power read failure".into()));
    }
    Ok((s.power)(s.now_s))
}

impl EnergyMeter for FakeMeter {
    fn info(&mut self) -> Result<DeviceInfo, MeterError> {
        let s = self.state.lock().unwrap();
        lost(&s)?;
        Ok(DeviceInfo {
            name: "Fake GPU".into(),
            arch: Some(report::Arch::Hopper),
            uuid: Some("GPU-fake-0000".into()),
            driver: Some("0.0".into()),
            cuda: Some("0.0".into()),
            power_limit_w: Some(700.0),
            sm_clock_mhz: Some(1980),
            mem_clock_mhz: Some(3201),
            memory_total_bytes: Some(80 << 30),
            energy_counter: s.counter_supported,
            cards: Vec::new(),
        })
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        let mut s = self.state.lock().unwrap();
        lost(&s)?;
        if !s.counter_supported {
            return Err(MeterError::Read("energy counter not supported".into()));
        }
        if s.counter_fails_after_s.is_some_and(|t| s.now_s >= t) {
            return Err(MeterError::Read(
                "scripted energy counter read failure".into(),
            ));
        }
        let value = match s.counter_update_s {
            // The energy up to the last update: the integral at a whole multiple of the period,
            // backed out from the counter's mean power since then.
            Some(p) if p > 0.0 && s.now_s > 0.0 => {
                let since = s.now_s % p;
                (s.counter_mj - (s.power)(s.now_s) * since * 1000.0).max(0.0) as u64
            }
            _ => s.counter_mj as u64,
        };
        s.counter_reads += 1;
        if s.counter_resets_after_reads == Some(s.counter_reads) {
            s.counter_mj = 0.0;
        }
        Ok(value)
    }
    fn power_w(&mut self) -> Result<f64, MeterError> {
        read_power(&mut self.state.lock().unwrap())
    }
    fn temperature_c(&mut self) -> Result<f64, MeterError> {
        let s = self.state.lock().unwrap();
        lost(&s)?;
        Ok((s.temperature)(s.now_s))
    }
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError> {
        let s = self.state.lock().unwrap();
        lost(&s)?;
        Ok(s.free_bytes)
    }
    fn power_probe(&self) -> PowerProbe {
        let state = self.state.clone();
        Box::new(move || read_power(&mut state.lock().unwrap()))
    }
    fn end_activity(&mut self, _seconds: f64) -> WindowActivity {
        self.state.lock().unwrap().activity
    }
}

/// Time, behind a trait so cooldown waits are instant in tests.
pub trait Clock: Send + Sync {
    /// Seconds since the clock's origin.
    fn now_s(&self) -> f64;
    /// Sleep for `s` seconds.
    fn sleep_s(&self, s: f64);
    /// The host's CPU accounting now (Linux `/proc`), `None` where it cannot be read. Batch-1 decode
    /// is launch-bound, so a window's speed may follow the host CPU: the report keeps how much CPU
    /// time the hypervisor stole and how busy this process was during each window.
    fn host_cpu(&self) -> Option<HostCpu> {
        None
    }
}

/// Cumulative host CPU counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostCpu {
    /// All CPUs, USER_HZ ticks: time stolen by the hypervisor, and every state together.
    pub steal_ticks: u64,
    /// Total CPU ticks (all states) since boot.
    pub total_ticks: u64,
    /// CPU seconds (user + system) of this process.
    pub process_cpu_s: f64,
}

/// What the host CPU did during one window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HostWindow {
    /// Share of all CPU time stolen by the hypervisor, %.
    pub steal_pct: f64,
    /// CPU seconds this process used per second of window (1.0 = one core busy).
    pub process_cpu_cores: f64,
}

impl HostWindow {
    /// The host CPU usage between readings `a` and `b` over `window_s` seconds; None if not comparable.
    pub fn between(a: HostCpu, b: HostCpu, window_s: f64) -> Option<HostWindow> {
        let total = b.total_ticks.checked_sub(a.total_ticks)?;
        let steal = b.steal_ticks.checked_sub(a.steal_ticks)?;
        (total > 0 && window_s > 0.0).then(|| HostWindow {
            steal_pct: steal as f64 / total as f64 * 100.0,
            process_cpu_cores: (b.process_cpu_s - a.process_cpu_s).max(0.0) / window_s,
        })
    }
}

/// `(steal, total)` ticks from the aggregate `cpu` line of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice — already inside user/nice]
    let steal = *v.get(7)?;
    Some((steal, v.iter().take(8).sum()))
}

/// CPU seconds (utime + stime) from `/proc/self/stat`, at `ticks_per_s` (USER_HZ, 100 on Linux).
pub fn parse_process_cpu_s(text: &str, ticks_per_s: f64) -> Option<f64> {
    // The command name is in parentheses and may contain spaces: count fields after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of the whole line, utime 14, stime 15 → indices 11 and 12 here.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_s)
}

/// The wall clock: seconds since an `Instant`.
pub struct RealClock(std::time::Instant);

impl Default for RealClock {
    fn default() -> Self {
        RealClock(std::time::Instant::now())
    }
}

impl Clock for RealClock {
    fn now_s(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
    fn sleep_s(&self, s: f64) {
        std::thread::sleep(std::time::Duration::from_secs_f64(s.max(0.0)));
    }
    fn host_cpu(&self) -> Option<HostCpu> {
        let (steal_ticks, total_ticks) =
            parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let process_cpu_s =
            parse_process_cpu_s(&std::fs::read_to_string("/proc/self/stat").ok()?, 100.0)?;
        Some(HostCpu {
            steal_ticks,
            total_ticks,
            process_cpu_s,
        })
    }
}

/// Virtual clock driving a [`FakeMeter`].
pub struct FakeClock(pub FakeMeter);

impl Clock for FakeClock {
    fn now_s(&self) -> f64 {
        self.0.now()
    }
    fn sleep_s(&self, s: f64) {
        self.0.advance(s);
    }
    /// Scripted: 8 CPUs at 100 ticks/s, `steal_share` of them stolen, this process one core busy.
    fn host_cpu(&self) -> Option<HostCpu> {
        let s = self.0.state.lock().unwrap();
        let share = s.steal_share?;
        let total = s.now_s * 800.0;
        Some(HostCpu {
            steal_ticks: (total * share).round() as u64,
            total_ticks: total.round() as u64,
            process_cpu_s: s.now_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_steal_and_total() {
        let text = "cpu  100 5 50 800 10 1 4 30 7 0\ncpu0 50 2 25 400 5 0 2 15 0 0\nintr 1 2\n";
        // user..steal = 100+5+50+800+10+1+4+30; guest (7) is already counted inside user.
        assert_eq!(parse_proc_stat(text), Some((30, 1000)));
        assert_eq!(parse_proc_stat("intr 1 2\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 x\n"), None);
    }

    #[test]
    fn process_cpu_from_self_stat_with_a_hostile_command_name() {
        // utime = 250, stime = 50 ticks; the name contains ") (" and spaces.
        let text =
            "4242 (quantenergy ) (x y) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 17 0";
        assert_eq!(parse_process_cpu_s(text, 100.0), Some(3.0));
        assert_eq!(parse_process_cpu_s("4242 (q) S 1", 100.0), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_host_can_be_read() {
        let c = RealClock::default();
        let a = c.host_cpu().expect("/proc/stat and /proc/self/stat");
        // Burn a little CPU so the process counter can move (USER_HZ ticks of 10 ms).
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 60 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let b = c.host_cpu().unwrap();
        assert!(b.total_ticks > a.total_ticks && b.process_cpu_s >= a.process_cpu_s);
        let w = HostWindow::between(a, b, 0.06).unwrap();
        assert!((0.0..=100.0).contains(&w.steal_pct), "{w:?}");
    }

    #[test]
    fn host_window_between_two_readings() {
        let a = HostCpu {
            steal_ticks: 100,
            total_ticks: 10_000,
            process_cpu_s: 5.0,
        };
        let b = HostCpu {
            steal_ticks: 300,
            total_ticks: 18_000,
            process_cpu_s: 7.5,
        };
        let w = HostWindow::between(a, b, 2.5).unwrap();
        assert!((w.steal_pct - 2.5).abs() < 1e-12);
        assert!((w.process_cpu_cores - 1.0).abs() < 1e-12);
        // Counters that went backwards (a reboot, a different host) give nothing, not a negative.
        assert!(HostWindow::between(b, a, 2.5).is_none());
    }
}
