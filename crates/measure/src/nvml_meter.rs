//! [`EnergyMeter`] over NVML (nvml-wrapper loads `libnvidia-ml.so.1` at run time, so this is in
//! every build; without a driver `NvmlMeter::open` says why and the CLI falls back to estimates).

use crate::meter::{DeviceInfo, EnergyMeter, MeterError, PowerProbe};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;
use std::sync::Arc;

/// `NVML_FI_DEV_POWER_INSTANT`: instantaneous board power in mW, updated ~every 100 ms. Plain
/// `power_usage` is a 1 s average on Ampere and newer (it lags load steps), so the trace uses this.
const FI_POWER_INSTANT: u32 = 186;

pub struct NvmlMeter {
    nvml: Arc<Nvml>,
    index: u32,
    /// Whether POWER_INSTANT answers on this device (else the trace uses `power_usage`).
    instant: bool,
}

fn err(e: NvmlError) -> MeterError {
    match e {
        NvmlError::GpuLost | NvmlError::NotFound | NvmlError::Uninitialized => {
            MeterError::Lost(e.to_string())
        }
        other => MeterError::Read(other.to_string()),
    }
}

fn instant_power_w(nvml: &Nvml, index: u32) -> Result<f64, MeterError> {
    let dev = nvml.device_by_index(index).map_err(err)?;
    let vals = dev
        .field_values_for(&[FieldId(FI_POWER_INSTANT)])
        .map_err(err)?;
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

fn average_power_w(nvml: &Nvml, index: u32) -> Result<f64, MeterError> {
    let dev = nvml.device_by_index(index).map_err(err)?;
    Ok(dev.power_usage().map_err(err)? as f64 / 1000.0)
}

impl NvmlMeter {
    pub fn open(index: u32) -> Result<NvmlMeter, MeterError> {
        let nvml = Nvml::init()
            .map_err(|e| MeterError::Unavailable(format!("NVML could not start: {e}")))?;
        let count = nvml
            .device_count()
            .map_err(|e| MeterError::Unavailable(e.to_string()))?;
        if index >= count {
            return Err(MeterError::Unavailable(format!(
                "GPU {index} requested, NVML sees {count} device(s)"
            )));
        }
        let instant = instant_power_w(&nvml, index).is_ok();
        Ok(NvmlMeter {
            nvml: Arc::new(nvml),
            index,
            instant,
        })
    }

    pub fn uses_instant_power(&self) -> bool {
        self.instant
    }
}

impl EnergyMeter for NvmlMeter {
    fn info(&mut self) -> Result<DeviceInfo, MeterError> {
        let dev = self.nvml.device_by_index(self.index).map_err(err)?;
        let name = dev.name().map_err(err)?;
        let arch = match dev.architecture() {
            Ok(a) => {
                let s = a.to_string().to_ascii_lowercase();
                (s != "unknown").then_some(s)
            }
            Err(_) => None,
        }
        .or_else(|| report::arch_from_gpu_name(&name).map(|a| a.as_str().to_string()));
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
        })
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        let dev = self.nvml.device_by_index(self.index).map_err(err)?;
        dev.total_energy_consumption().map_err(err)
    }
    fn power_w(&mut self) -> Result<f64, MeterError> {
        if self.instant {
            instant_power_w(&self.nvml, self.index)
        } else {
            average_power_w(&self.nvml, self.index)
        }
    }
    fn temperature_c(&mut self) -> Result<f64, MeterError> {
        let dev = self.nvml.device_by_index(self.index).map_err(err)?;
        Ok(dev.temperature(TemperatureSensor::Gpu).map_err(err)? as f64)
    }
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError> {
        let dev = self.nvml.device_by_index(self.index).map_err(err)?;
        Ok(dev.memory_info().map_err(err)?.free)
    }
    fn power_probe(&self) -> PowerProbe {
        let nvml = self.nvml.clone();
        let index = self.index;
        let instant = self.instant;
        Box::new(move || {
            if instant {
                instant_power_w(&nvml, index)
            } else {
                average_power_w(&nvml, index)
            }
        })
    }
}

/// `quantenergy probe`: what NVML sees, as text lines.
pub fn probe(index: u32) -> Result<Vec<String>, MeterError> {
    let mut m = NvmlMeter::open(index)?;
    let info = m.info()?;
    let mut out = vec![
        format!("name              {}", info.name),
        format!(
            "architecture      {}",
            info.arch.clone().unwrap_or_else(|| "unknown".into())
        ),
        format!(
            "uuid              {}",
            info.uuid.clone().unwrap_or_default()
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
