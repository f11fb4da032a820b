//! Where a run runs: the Slurm job around it, and which physical GPUs a scheduler bound to it.
//!
//! A scheduler hands a job its GPUs through `CUDA_VISIBLE_DEVICES`; CUDA renumbers them from 0,
//! NVML does not (it always sees every card of the node). Metering "device 0" by NVML index would
//! meter someone else's card, so the meter resolves each visible device to a card **by UUID**:
//! UUID entries directly, integer entries through the PCI bus order that both NVML and CUDA use
//! once `CUDA_DEVICE_ORDER=PCI_BUS_ID` (the CLI sets it when unset). Everything here is pure (the
//! environment comes in through a lookup function, the cards as a list — except
//! [`slurm_from_env`] and [`stamp`], the thin readers of this process's environment).

use report::Slurm;

/// The Slurm job around this process, from its `SLURM_*` variables; `None` outside Slurm.
pub fn slurm_from(var: impl Fn(&str) -> Option<String>) -> Option<Slurm> {
    let get = |k: &str| {
        var(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let job_id = get("SLURM_JOB_ID")?;
    Some(Slurm {
        job_id,
        array_job_id: get("SLURM_ARRAY_JOB_ID"),
        array_task_id: get("SLURM_ARRAY_TASK_ID").and_then(|t| t.parse().ok()),
        node: get("SLURMD_NODENAME").or_else(|| get("SLURM_NODENAME")),
        partition: get("SLURM_JOB_PARTITION"),
        cluster: get("SLURM_CLUSTER_NAME"),
        gpus: get("SLURM_JOB_GPUS").or_else(|| get("SLURM_STEP_GPUS")),
        extra: Default::default(),
    })
}

/// [`slurm_from`] over this process's environment.
pub fn slurm_from_env() -> Option<Slurm> {
    slurm_from(|k| std::env::var(k).ok())
}

/// Record where the report was made: the Slurm job (if any) and the GPU binding, in its
/// `environment` block.
pub fn stamp(rep: &mut report::Report) {
    let slurm = slurm_from_env();
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    if slurm.is_some() || visible.is_some() {
        let env = rep.environment.get_or_insert_with(Default::default);
        env.slurm = slurm;
        env.visible_devices = visible;
    }
}

/// One entry of `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq)]
pub enum VisibleEntry {
    /// A device number (PCI bus order under `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    Index(u32),
    /// A card UUID or a unique prefix of one (`GPU-8932f937`).
    Uuid(String),
    /// A MIG slice: it has no energy counter of its own.
    Mig(String),
}

/// What `CUDA_VISIBLE_DEVICES` leaves visible.
#[derive(Debug, Clone, PartialEq)]
pub enum Visible {
    /// Unset: every card, in PCI bus order.
    All,
    /// These, in this order (CUDA's device 0 is the first).
    List(Vec<VisibleEntry>),
}

/// Parse `CUDA_VISIBLE_DEVICES` as CUDA does: entries up to the first invalid one; an empty
/// value (or Slurm's `NoDevFiles`) hides every card.
pub fn parse_visible(value: Option<&str>) -> Visible {
    let Some(v) = value else {
        return Visible::All;
    };
    let mut out = Vec::new();
    for raw in v.split(',') {
        let e = raw.trim();
        let entry = if let Ok(i) = e.parse::<u32>() {
            VisibleEntry::Index(i)
        } else if e.starts_with("GPU-") && e.len() > 4 {
            VisibleEntry::Uuid(e.to_string())
        } else if e.starts_with("MIG-") {
            VisibleEntry::Mig(e.to_string())
        } else {
            break; // CUDA ignores this entry and every one after it
        };
        out.push(entry);
    }
    Visible::List(out)
}

/// One card as NVML lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    /// NVML index (PCI bus order).
    pub index: u32,
    /// The card's UUID.
    pub uuid: String,
}

/// Why a visible device cannot be metered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BindError {
    /// Fewer visible devices than the ordinal asked for.
    #[error(
        "GPU {ordinal} requested, but {visible} GPU(s) are visible to this process \
         (CUDA_VISIBLE_DEVICES={value:?})"
    )]
    NotVisible {
        /// The ordinal asked for.
        ordinal: u32,
        /// How many are visible.
        visible: usize,
        /// The variable's value (`unset` when unset).
        value: String,
    },
    /// An index beyond NVML's cards.
    #[error("CUDA_VISIBLE_DEVICES names device {index}, but NVML sees {count} card(s)")]
    NoSuchIndex {
        /// The index.
        index: u32,
        /// NVML's card count.
        count: usize,
    },
    /// No card, or more than one, has this UUID (prefix).
    #[error("CUDA_VISIBLE_DEVICES names {uuid}, which matches {matches} of NVML's cards")]
    Uuid {
        /// The UUID or prefix.
        uuid: String,
        /// How many cards it matches.
        matches: usize,
    },
    /// A MIG slice.
    #[error(
        "CUDA_VISIBLE_DEVICES names the MIG slice {0}: a slice has no energy counter of its own, \
         so its energy cannot be measured apart from the other slices of its card"
    )]
    Mig(String),
    /// Integer entries under a device order NVML does not share.
    #[error(
        "CUDA_VISIBLE_DEVICES lists device numbers under CUDA_DEVICE_ORDER={0}, whose numbering \
         NVML does not share on a node of several cards: list the cards by UUID, or use \
         CUDA_DEVICE_ORDER=PCI_BUS_ID"
    )]
    Order(String),
}

/// The card behind the process's CUDA device `ordinal`, given `CUDA_VISIBLE_DEVICES`, NVML's
/// cards, and `CUDA_DEVICE_ORDER` (`None`: unset, which the CLI turns into PCI_BUS_ID).
pub fn resolve(
    visible_devices: Option<&str>,
    cards: &[Card],
    order: Option<&str>,
    ordinal: u32,
) -> Result<Card, BindError> {
    let visible = parse_visible(visible_devices);
    let not_visible = |n: usize| BindError::NotVisible {
        ordinal,
        visible: n,
        value: visible_devices.unwrap_or("unset").to_string(),
    };
    let pci_order = order.is_none_or(|o| o == "PCI_BUS_ID");
    let by_index = |index: u32| -> Result<Card, BindError> {
        if !pci_order && cards.len() > 1 {
            return Err(BindError::Order(order.unwrap_or_default().to_string()));
        }
        cards
            .iter()
            .find(|c| c.index == index)
            .cloned()
            .ok_or(BindError::NoSuchIndex {
                index,
                count: cards.len(),
            })
    };
    match &visible {
        Visible::All => {
            if ordinal as usize >= cards.len() {
                return Err(not_visible(cards.len()));
            }
            by_index(ordinal)
        }
        Visible::List(list) => match list.get(ordinal as usize) {
            None => Err(not_visible(list.len())),
            Some(VisibleEntry::Index(i)) => by_index(*i),
            Some(VisibleEntry::Mig(m)) => Err(BindError::Mig(m.clone())),
            Some(VisibleEntry::Uuid(u)) => {
                let found: Vec<&Card> = cards.iter().filter(|c| c.uuid.starts_with(u)).collect();
                match found.as_slice() {
                    [one] => Ok((*one).clone()),
                    _ => Err(BindError::Uuid {
                        uuid: u.clone(),
                        matches: found.len(),
                    }),
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cards() -> Vec<Card> {
        (0..4)
            .map(|i| Card {
                index: i,
                uuid: format!("GPU-{i}aaa{i}-0000"),
            })
            .collect()
    }

    #[test]
    fn slurm_fields_come_from_the_job_environment() {
        let env = [
            ("SLURM_JOB_ID", "1207"),
            ("SLURM_ARRAY_JOB_ID", "1200"),
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURMD_NODENAME", "gpu-node-3"),
            ("SLURM_JOB_PARTITION", "h200"),
            ("SLURM_JOB_GPUS", "2"),
        ];
        let s = slurm_from(|k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        assert_eq!(s.job_id, "1207");
        assert_eq!(s.array_job_id.as_deref(), Some("1200"));
        assert_eq!(s.array_task_id, Some(7));
        assert_eq!(s.node.as_deref(), Some("gpu-node-3"));
        assert_eq!(s.partition.as_deref(), Some("h200"));
        assert_eq!(s.gpus.as_deref(), Some("2"));
        assert_eq!(s.cluster, None);
        // Outside Slurm (or an empty job id): nothing.
        assert_eq!(slurm_from(|_| None), None);
        assert_eq!(slurm_from(|_| Some(" ".into())), None);
    }

    #[test]
    fn visible_devices_parse_as_cuda_reads_them() {
        use VisibleEntry::*;
        assert_eq!(parse_visible(None), Visible::All);
        assert_eq!(parse_visible(Some("")), Visible::List(vec![]));
        assert_eq!(parse_visible(Some("NoDevFiles")), Visible::List(vec![]));
        assert_eq!(
            parse_visible(Some("2, 0")),
            Visible::List(vec![Index(2), Index(0)])
        );
        // CUDA stops at the first invalid entry.
        assert_eq!(parse_visible(Some("1,-1,3")), Visible::List(vec![Index(1)]));
        assert_eq!(
            parse_visible(Some("GPU-3aaa,MIG-x")),
            Visible::List(vec![Uuid("GPU-3aaa".into()), Mig("MIG-x".into())])
        );
    }

    #[test]
    fn a_bound_gpu_is_metered_on_its_own_card_not_on_nvml_index_0() {
        let c = cards();
        // Slurm gave this job physical card 2: CUDA calls it device 0, NVML index 2.
        assert_eq!(resolve(Some("2"), &c, None, 0).unwrap().index, 2);
        assert_eq!(
            resolve(Some("3,1"), &c, Some("PCI_BUS_ID"), 1)
                .unwrap()
                .index,
            1
        );
        // By UUID or a unique prefix of one.
        assert_eq!(
            resolve(Some("GPU-1aaa"), &c, None, 0).unwrap().uuid,
            "GPU-1aaa1-0000"
        );
        // Unset: device N is card N.
        assert_eq!(resolve(None, &c, None, 3).unwrap().index, 3);
    }

    #[test]
    fn a_binding_that_cannot_be_metered_says_why() {
        let c = cards();
        let e = resolve(Some(""), &c, None, 0).unwrap_err();
        assert!(matches!(e, BindError::NotVisible { visible: 0, .. }), "{e}");
        assert!(e.to_string().contains("0 GPU(s) are visible"), "{e}");
        let e = resolve(Some("7"), &c, None, 0).unwrap_err();
        assert_eq!(e, BindError::NoSuchIndex { index: 7, count: 4 });
        let e = resolve(Some("GPU-"), &c, None, 0).unwrap_err();
        assert!(matches!(e, BindError::NotVisible { .. }), "{e}");
        let e = resolve(Some("GPU-9"), &c, None, 0).unwrap_err();
        assert!(matches!(e, BindError::Uuid { matches: 0, .. }), "{e}");
        let e = resolve(Some("MIG-abc"), &c, None, 0).unwrap_err();
        assert!(e.to_string().contains("no energy counter"), "{e}");
        let e = resolve(Some("1"), &c, Some("FASTEST_FIRST"), 0).unwrap_err();
        assert!(e.to_string().contains("by UUID"), "{e}");
        // One card: the order cannot matter.
        let one = &c[..1];
        assert!(resolve(Some("0"), one, Some("FASTEST_FIRST"), 0).is_ok());
        assert!(resolve(None, &c, None, 4).is_err());
    }
}
