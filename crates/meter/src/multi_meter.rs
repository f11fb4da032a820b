//! Several cards metered as one (`--gpu 0,1,…` for a server spread over GPUs): counters and power
//! summed, the hottest card's temperature, free memory summed, and every card listed with its
//! UUID in the report. Cards of different models are refused: one report names one card class.

use crate::meter::{CardRef, DeviceInfo, EnergyMeter, MeterError, PowerProbe, WindowActivity};

/// The sum of several meters, each with its NVML index.
pub struct SumMeter {
    meters: Vec<(u32, Box<dyn EnergyMeter + Send>)>,
}

impl SumMeter {
    /// Meter `meters` (index, meter) as one; at least one.
    pub fn new(meters: Vec<(u32, Box<dyn EnergyMeter + Send>)>) -> Result<SumMeter, MeterError> {
        if meters.is_empty() {
            return Err(MeterError::Unavailable("no GPU index given".into()));
        }
        Ok(SumMeter { meters })
    }
}

impl EnergyMeter for SumMeter {
    /// The first card's facts, with every card listed in `cards`, the power limits summed and an
    /// energy counter only when every card has one.
    fn info(&mut self) -> Result<DeviceInfo, MeterError> {
        let mut infos = Vec::new();
        for (i, m) in &mut self.meters {
            infos.push((*i, m.info()?));
        }
        let first = infos[0].1.clone();
        if let Some((i, other)) = infos.iter().find(|(_, d)| d.name != first.name) {
            return Err(MeterError::Unavailable(format!(
                "GPU {i} is a {} but GPU {} is a {}: one report is one card class",
                other.name, infos[0].0, first.name
            )));
        }
        let limits: Option<f64> = infos.iter().map(|(_, d)| d.power_limit_w).sum();
        Ok(DeviceInfo {
            power_limit_w: limits,
            energy_counter: infos.iter().all(|(_, d)| d.energy_counter),
            memory_total_bytes: infos.iter().map(|(_, d)| d.memory_total_bytes).sum(),
            cards: if infos.len() > 1 {
                infos
                    .iter()
                    .map(|(i, d)| CardRef {
                        index: *i,
                        name: d.name.clone(),
                        uuid: d.uuid.clone(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            ..first
        })
    }
    fn energy_mj(&mut self) -> Result<u64, MeterError> {
        self.meters.iter_mut().map(|(_, m)| m.energy_mj()).sum()
    }
    fn power_w(&mut self) -> Result<f64, MeterError> {
        self.meters.iter_mut().map(|(_, m)| m.power_w()).sum()
    }
    fn temperature_c(&mut self) -> Result<f64, MeterError> {
        let mut hottest = f64::NEG_INFINITY;
        for (_, m) in &mut self.meters {
            hottest = hottest.max(m.temperature_c()?);
        }
        Ok(hottest)
    }
    fn free_memory_bytes(&mut self) -> Result<u64, MeterError> {
        self.meters
            .iter_mut()
            .map(|(_, m)| m.free_memory_bytes())
            .sum()
    }
    fn power_probe(&self) -> PowerProbe {
        let mut probes: Vec<PowerProbe> =
            self.meters.iter().map(|(_, m)| m.power_probe()).collect();
        Box::new(move || probes.iter_mut().map(|p| p()).sum())
    }
    fn begin_activity(&mut self) {
        for (_, m) in &mut self.meters {
            m.begin_activity();
        }
    }
    /// The cards' mean busy share (unknown if any card's is) and the worst throttling.
    fn end_activity(&mut self, seconds: f64) -> WindowActivity {
        let each: Vec<WindowActivity> = self
            .meters
            .iter_mut()
            .map(|(_, m)| m.end_activity(seconds))
            .collect();
        let busy: Option<Vec<f64>> = each.iter().map(|a| a.gpu_busy_pct).collect();
        let worst = |f: fn(&WindowActivity) -> Option<f64>| -> Option<f64> {
            each.iter()
                .map(f)
                .try_fold(0f64, |m, x| x.map(|x| m.max(x)))
        };
        WindowActivity {
            gpu_busy_pct: busy
                .filter(|b| !b.is_empty())
                .map(|b| b.iter().sum::<f64>() / b.len() as f64),
            power_throttle_pct: worst(|a| a.power_throttle_pct),
            thermal_throttle_pct: worst(|a| a.thermal_throttle_pct),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::FakeMeter;

    #[test]
    fn two_cards_sum_and_are_listed() {
        let a = FakeMeter::new(|_| 100.0);
        let b = FakeMeter::new(|_| 250.0);
        let mut m =
            SumMeter::new(vec![(0, Box::new(a.clone())), (3, Box::new(b.clone()))]).unwrap();
        assert_eq!(m.power_w().unwrap(), 350.0);
        assert_eq!(m.energy_mj().unwrap(), 2_000_000);
        assert_eq!(m.free_memory_bytes().unwrap(), 160 << 30);
        assert_eq!((m.power_probe())().unwrap(), 350.0);
        let info = m.info().unwrap();
        assert_eq!(
            info.cards.iter().map(|c| c.index).collect::<Vec<_>>(),
            vec![0, 3]
        );
        assert_eq!(info.power_limit_w, Some(1400.0));
        assert!(info.energy_counter);
        b.state.lock().unwrap().counter_supported = false;
        assert!(
            !m.info().unwrap().energy_counter,
            "one card without a counter: no sum"
        );
    }

    #[test]
    fn one_card_lists_nothing_and_none_is_refused() {
        let mut one = SumMeter::new(vec![(0, Box::new(FakeMeter::new(|_| 80.0)))]).unwrap();
        assert!(one.info().unwrap().cards.is_empty());
        assert!(SumMeter::new(Vec::new()).is_err());
    }

    #[test]
    fn a_lost_card_fails_the_sum() {
        let a = FakeMeter::new(|_| 100.0);
        let b = FakeMeter::new(|_| 100.0);
        b.state.lock().unwrap().lost_after_s = Some(-1.0);
        let mut m = SumMeter::new(vec![(0, Box::new(a)), (1, Box::new(b))]).unwrap();
        assert!(m.energy_mj().unwrap_err().is_lost());
    }
}
