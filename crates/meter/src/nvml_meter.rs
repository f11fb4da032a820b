//! [`EnergyMeter`] over NVML (feature `nvml`; nvml-wrapper loads `libnvidia-ml.so.1` at run time,
//! so it builds without a GPU; without a driver `NvmlMeter::open` says why and the CLI falls back
//! to estimates).

use crate::meter::{DeviceInfo, EnergyMeter, MeterError, PowerProbe, WindowActivity};
use nvml_wrapper::enum_wrappers::device::{Clock, PerformancePolicy, Sampling, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use std::sync::OnceLock;

/// `NVML_FI_DEV_POWER_INSTANT`: instantaneous board power in mW, updated ~every 100 ms. Plain
/// `power_usage` is a 1 s average on Ampere and newer (it lags load steps), so the trace uses this.
const FI_POWER_INSTANT: u32 = 186;

/// The NVML meter of one device. NVML is initialised once per process and kept for its
/// lifetime (leaked on purpose: a meter lives as long as the process, and nvml-wrapper's
/// `Device` borrows the `Nvml` it came from), so the device handle is looked up once, here, and
/// shared with the power-trace thread instead of being looked up on every read.
pub struct NvmlMeter {
    nvml: &'static Nvml,
    device: Device<'static>,
    /// Whether POWER_INSTANT answers on this device (else the trace uses `power_usage`).
    instant: bool,
    /// The open window's start, for [`EnergyMeter::end_activity`].
    mark: Option<ActivityMark>,
}

/// NVML's cumulative figures at a window's start.
struct ActivityMark {
    /// Timestamp (µs, NVML's CPU clock) of the newest utilisation sample: later ones are the
    /// window's.
    sample_us: Option<u64>,
    /// Cumulative power- and thermal-violation time, ns.
    power_ns: Option<u64>,
    thermal_ns: Option<u64>,
}

fn violation_ns(dev: &Device<'_>, policy: PerformancePolicy) -> Option<u64> {
    dev.violation_status(policy).ok().map(|v| v.violation_time)
}

/// Mean of the GPU-utilisation samples after `since_us` (NVML keeps a ring of them, one per
/// ≈ 1/6 s on recent cards).
fn busy_pct_since(dev: &Device<'_>, since_us: u64) -> Option<f64> {
    let samples = dev.samples(Sampling::GpuUtilization, since_us).ok()?;
    let values: Vec<f64> = samples
        .iter()
        .filter(|s| s.timestamp > since_us)
        .map(|s| match s.value {
            SampleValue::U32(v) => f64::from(v),
            SampleValue::U64(v) => v as f64,
            SampleValue::I64(v) => v as f64,
            SampleValue::F64(v) => v,
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn throttle_pct(start: Option<u64>, end: Option<u64>, seconds: f64) -> Option<f64> {
    let (a, b) = (start?, end?);
    (seconds > 0.0 && b >= a).then(|| (100.0 * (b - a) as f64 / (seconds * 1e9)).min(100.0))
}

fn instant_power_w(dev: &Device<'_>) -> Result<f64, MeterError> {
    let vals = dev.field_values_for(&[FieldId(FI_POWER_INSTANT)])?;
    let sample: &Result<FieldValueSample, NvmlError> = vals
        .first()
        .ok_or_else(|| MeterError::Read("no field value returned".into()))?;
    let sample = sample
        .as_ref()
        .map_err(|e| MeterError::Read(e.to_string()))?;
    let mw = match sample
        .value
        .as_ref()
        .map_err(|e| MeterError::Read(e.to_string()))?
    {
        SampleValue::U32(v) => *v as f64,
        SampleValue::U64(v) => *v as f64,
        SampleValue::I64(v) => *v as f64,
        SampleValue::F64(v) => *v,
    };
    Ok(mw / 1000.0)
}

fn average_power_w(dev: &Device<'_>) -> Result<f64, MeterError> {
    Ok(dev.power_usage()? as f64 / 1000.0)
}

/// The one NVML of this process, initialised on first use.
fn nvml() -> Result<&'static Nvml, MeterError> {
    static NVML: OnceLock<Result<&'static Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        Nvml::init()
            .map(|n| &*Box::leak(Box::new(n)))
            .map_err(|e| format!("NVML could not start: {e}"))
    })
    .clone()
    .map_err(MeterError::Unavailable)
}

impl NvmlMeter {
    /// Open the card behind this process's CUDA device `ordinal`: what `CUDA_VISIBLE_DEVICES`
    /// (a scheduler's binding) leaves visible, resolved to a card by UUID — never NVML's index
    /// `ordinal`, which under a binding is another job's card (see [`crate::scheduler`]).
    pub fn open_visible(ordinal: u32) -> Result<NvmlMeter, MeterError> {
        let nvml = nvml()?;
        let count = nvml
            .device_count()
            .map_err(|e| MeterError::Unavailable(e.to_string()))?;
        let cards: Vec<crate::scheduler::Card> = (0..count)
            .filter_map(|i| {
                let uuid = nvml.device_by_index(i).ok()?.uuid().ok()?;
                Some(crate::scheduler::Card { index: i, uuid })
            })
            .collect();
        let raw = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let order = std::env::var("CUDA_DEVICE_ORDER").ok();
        let card = crate::scheduler::resolve(raw.as_deref(), &cards, order.as_deref(), ordinal)
            .map_err(|e| MeterError::Unavailable(e.to_string()))?;
        let device = nvml
            .device_by_uuid(card.uuid.as_str())
            .map_err(|e| MeterError::Unavailable(format!("{}: {e}", card.uuid)))?;
        let instant = instant_power_w(&device).is_ok();
        Ok(NvmlMeter {
            nvml,
            device,
            instant,
            mark: None,
        })
    }

    /// The card's NVML index (PCI bus order, as `nvidia-smi` lists it).
    pub fn nvml_index(&self) -> u32 {
        self.device.index().unwrap_or(0)
    }

    /// Whether the trace reads POWER_INSTANT (else the 1 s average).
    pub fn uses_instant_power(&self) -> bool {
        self.instant
    }
}

impl EnergyMeter for NvmlMeter {
    fn info(&mut self) -> Result<DeviceInfo, MeterError> {
        let dev = &self.device;
        let name = dev.name()?;
        let arch = dev
            .architecture()
            .ok()
            .and_then(|a| a.to_string().parse::<report::Arch>().ok())
            .or_else(|| report::arch_from_gpu_name(&name));
        let cuda = self
            .nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        Ok(DeviceInfo {
            arch,
            uuid: dev.uuid().ok(),
            driver: self.nvml.sys_driver_version().ok(),
            cuda,
            power_limit_w: dev.enforced_power_limit().ok().map(|mw| mw as f64 / 1000.0),
            sm_clock_mhz: dev.clock_info(Clock::SM).ok(),
            mem_clock_mhz: dev.clock_info(Clock::Memory).ok(),
            memory_total_bytes: dev.memory_info().ok().map(|m| m.total),
            energy_counter: dev.total_energy_consumption().is_ok(),
            name,
            cards: Vec::new(),
        })
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        Ok(self.device.total_energy_consumption()?)
    }
    fn power_w(&mut self) -> Result<f64, MeterError> {
        if self.instant {
            instant_power_w(&self.device)
        } else {
            average_power_w(&self.device)
        }
    }
    fn temperature_c(&mut self) -> Result<f64, MeterError> {
        Ok(self.device.temperature(TemperatureSensor::Gpu)? as f64)
    }
    fn begin_activity(&mut self) {
        let dev = &self.device;
        let sample_us = dev
            .samples(Sampling::GpuUtilization, None)
            .ok()
            .map(|v| v.iter().map(|s| s.timestamp).max().unwrap_or(0));
        self.mark = Some(ActivityMark {
            sample_us,
            power_ns: violation_ns(dev, PerformancePolicy::Power),
            thermal_ns: violation_ns(dev, PerformancePolicy::Thermal),
        });
    }
    fn end_activity(&mut self, seconds: f64) -> WindowActivity {
        let Some(m) = self.mark.take() else {
            return WindowActivity::default();
        };
        let dev = &self.device;
        WindowActivity {
            gpu_busy_pct: m.sample_us.and_then(|t| busy_pct_since(dev, t)),
            power_throttle_pct: throttle_pct(
                m.power_ns,
                violation_ns(dev, PerformancePolicy::Power),
                seconds,
            ),
            thermal_throttle_pct: throttle_pct(
                m.thermal_ns,
                violation_ns(dev, PerformancePolicy::Thermal),
                seconds,
            ),
        }
    }
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError> {
        Ok(self.device.memory_info()?.free)
    }
    fn power_probe(&self) -> PowerProbe {
        // The handle is a plain pointer NVML hands out per device; a copy for the trace thread.
        let device = self.nvml.device_by_index(self.device.index().unwrap_or(0));
        let instant = self.instant;
        Box::new(move || {
            let dev = device
                .as_ref()
                .map_err(|e| MeterError::Read(e.to_string()))?;
            if instant {
                instant_power_w(dev)
            } else {
                average_power_w(dev)
            }
        })
    }
}

/// `quantenergy probe`: what NVML sees, as text lines.
pub fn probe(ordinal: u32) -> Result<Vec<String>, MeterError> {
    let mut m = NvmlMeter::open_visible(ordinal)?;
    let info = m.info()?;
    let mut out = vec![
        format!("name              {}", info.name),
        format!(
            "architecture      {}",
            info.arch.map_or("unknown", |a| a.as_str())
        ),
        format!(
            "uuid              {}",
            info.uuid.clone().unwrap_or_default()
        ),
        format!(
            "binding           CUDA device {ordinal} = NVML index {} (CUDA_VISIBLE_DEVICES={})",
            m.nvml_index(),
            std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "unset".into())
        ),
        format!(
            "driver / CUDA     {} / {}",
            info.driver.clone().unwrap_or_default(),
            info.cuda.clone().unwrap_or_default()
        ),
        format!("power limit       {:?} W", info.power_limit_w),
        format!(
            "clocks SM / mem   {:?} / {:?} MHz",
            info.sm_clock_mhz, info.mem_clock_mhz
        ),
        format!("memory total      {:?} bytes", info.memory_total_bytes),
        format!(
            "energy counter    {}",
            if info.energy_counter {
                "supported"
            } else {
                "NOT supported"
            }
        ),
        format!(
            "power field       {}",
            if m.uses_instant_power() {
                "POWER_INSTANT (field 186)"
            } else {
                "power_usage (1 s average; POWER_INSTANT unavailable)"
            }
        ),
    ];
    // Update periods: poll for ~1.5 s and count distinct values / changes.
    let t0 = std::time::Instant::now();
    let (mut e_changes, mut p_changes, mut reads) = (0u32, 0u32, 0u32);
    let (mut last_e, mut last_p) = (m.energy_mj().ok(), m.power_w().ok());
    let mut e_read_s = 0.0;
    while t0.elapsed().as_secs_f64() < 1.5 {
        let te = std::time::Instant::now();
        let e = m.energy_mj().ok();
        e_read_s += te.elapsed().as_secs_f64();
        let p = m.power_w().ok();
        reads += 1;
        if e != last_e {
            e_changes += 1;
            last_e = e;
        }
        if p != last_p {
            p_changes += 1;
            last_p = p;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let span = t0.elapsed().as_secs_f64();
    out.push(format!(
        "counter updates   {e_changes} in {span:.2} s (≈ every {:.0} ms); one counter read ≈ {:.2} ms",
        if e_changes > 0 { span * 1000.0 / e_changes as f64 } else { f64::NAN },
        e_read_s * 1000.0 / reads.max(1) as f64
    ));
    out.push(format!(
        "power updates     {p_changes} in {span:.2} s (≈ every {:.0} ms) over {reads} reads",
        if p_changes > 0 {
            span * 1000.0 / p_changes as f64
        } else {
            f64::NAN
        }
    ));
    if let (Ok(p), Ok(t), Ok(f)) = (m.power_w(), m.temperature_c(), m.free_memory_bytes()) {
        out.push(format!(
            "now               {p:.1} W, {t:.0} °C, {:.1} GB free",
            f as f64 / 1e9
        ));
    }
    Ok(out)
}
