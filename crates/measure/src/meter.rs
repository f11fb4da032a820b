//! Energy measurement hardware behind a trait: NVML on a real GPU ([`crate::nvml_meter`]), a
//! scripted fake for tests. The protocol only ever talks to [`EnergyMeter`].

use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum MeterError {
    #[error("no GPU meter available: {0}")]
    Unavailable(String),
    #[error("read failed: {0}")]
    Read(String),
    #[error("the GPU disappeared: {0}")]
    Lost(String),
}

/// What the meter knows about the device, recorded in the report's `environment` block.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub arch: Option<String>,
    pub uuid: Option<String>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub memory_total_bytes: Option<u64>,
    pub energy_counter: bool,
}

/// A source of instantaneous power readings that can live on the sampling thread.
pub type PowerProbe = Box<dyn FnMut() -> Result<f64, MeterError> + Send>;

pub trait EnergyMeter {
    fn info(&mut self) -> Result<DeviceInfo, MeterError>;
    /// Cumulative hardware energy counter in mJ (NVML `total_energy_consumption`).
    fn energy_mj(&mut self) -> Result<u64, MeterError>;
    /// Instantaneous board power in W (NVML field `POWER_INSTANT`, not the 1 s average).
    fn power_w(&mut self) -> Result<f64, MeterError>;
    fn temperature_c(&mut self) -> Result<f64, MeterError>;
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError>;
    /// A probe for the sampling thread (reads power only).
    fn power_probe(&self) -> PowerProbe;
}

/// Scripted fake meter. Power and temperature are functions of a shared virtual time (seconds)
/// that the fake clock advances, so cooldown and windows are deterministic in tests; the energy
/// counter integrates the scripted power exactly.
#[derive(Clone)]
pub struct FakeMeter {
    pub state: Arc<Mutex<FakeState>>,
}

pub struct FakeState {
    pub now_s: f64,
    /// Power in W at virtual time t.
    pub power: Box<dyn Fn(f64) -> f64 + Send>,
    pub temperature: Box<dyn Fn(f64) -> f64 + Send>,
    pub free_bytes: u64,
    /// Counter value in mJ, integrated as time advances.
    pub counter_mj: f64,
    pub counter_stuck: bool,
    pub counter_supported: bool,
    /// Fail every n-th power read (0 = never).
    pub fail_power_every: u64,
    pub power_reads: u64,
    /// After this virtual time every read returns `Lost`.
    pub lost_after_s: Option<f64>,
}

impl FakeMeter {
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
            })),
        }
    }

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
            arch: Some("hopper".into()),
            uuid: Some("GPU-fake-0000".into()),
            driver: Some("0.0".into()),
            cuda: Some("0.0".into()),
            power_limit_w: Some(700.0),
            sm_clock_mhz: Some(1980),
            mem_clock_mhz: Some(3201),
            memory_total_bytes: Some(80 << 30),
            energy_counter: s.counter_supported,
        })
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        let s = self.state.lock().unwrap();
        lost(&s)?;
        if !s.counter_supported {
            return Err(MeterError::Read("energy counter not supported".into()));
        }
        Ok(s.counter_mj as u64)
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
}

/// Time, behind a trait so cooldown waits are instant in tests.
pub trait Clock: Send + Sync {
    fn now_s(&self) -> f64;
    fn sleep_s(&self, s: f64);
}

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
}
