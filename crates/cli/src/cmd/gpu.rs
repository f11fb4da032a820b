//! `--gpu`: which cards a run meters, or which card a no-GPU estimate is for.

/// `--gpu`: NVML indices to meter (`0,1`), or a card name to estimate for (`"RTX 4090"`).
#[derive(Debug, Clone, PartialEq)]
pub enum GpuSel {
    /// GPU indices.
    Indices(Vec<u32>),
    /// A card name (no-GPU estimates).
    Card(String),
}

impl GpuSel {
    /// The card name, if this names one.
    pub fn card(&self) -> Option<String> {
        match self {
            GpuSel::Card(c) => Some(c.clone()),
            GpuSel::Indices(_) => None,
        }
    }
    /// One GPU index for the candle path (which decodes on one card).
    pub fn single_index(&self) -> Result<Option<u32>, String> {
        match self {
            GpuSel::Indices(v) if v.len() == 1 => Ok(Some(v[0])),
            GpuSel::Indices(v) => Err(format!(
                "--gpu {v:?}: the candle engine decodes on one GPU; several GPUs are for --server-cmd / --server"
            )),
            GpuSel::Card(_) => Ok(None),
        }
    }
}

/// `0,1,…` (all integers) → indices; anything else → a card name.
pub fn parse_gpu(s: &str) -> Result<GpuSel, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        let idx: Vec<u32> = parts
            .iter()
            .map(|p| p.parse::<u32>().map_err(|e| format!("GPU index {p}: {e}")))
            .collect::<Result<_, _>>()?;
        let mut uniq = idx.clone();
        uniq.sort_unstable();
        uniq.dedup();
        if uniq.len() != idx.len() {
            return Err(format!("GPU index listed twice in {s:?}"));
        }
        return Ok(GpuSel::Indices(idx));
    }
    if s.trim().is_empty() {
        return Err("empty --gpu".into());
    }
    Ok(GpuSel::Card(s.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_is_indices_or_a_card() {
        assert_eq!(parse_gpu("0,1").unwrap(), GpuSel::Indices(vec![0, 1]));
        assert_eq!(parse_gpu("3").unwrap(), GpuSel::Indices(vec![3]));
        assert_eq!(
            parse_gpu("RTX 4090").unwrap(),
            GpuSel::Card("RTX 4090".into())
        );
        assert!(parse_gpu("0,0").unwrap_err().contains("twice"));
        assert!(parse_gpu(" ").is_err());
        assert!(GpuSel::Indices(vec![0, 1])
            .single_index()
            .unwrap_err()
            .contains("one GPU"));
        assert_eq!(GpuSel::Indices(vec![2]).single_index(), Ok(Some(2)));
    }
}
