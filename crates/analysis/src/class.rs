//! What names a crossover class — an architecture and a precision ([`ClassId`]) — and which
//! architectures lend their classes to one that has none ([`borrow_order`]). The vocabulary the
//! curves, the estimate, the comparison and the optimizer share.

use report::{Arch, Precision};
use serde::{Serialize, Serializer};

/// Which architectures' curves stand in when a class has no data of its own, in order.
/// Hopper has no published data upstream; its nearest datacenter sibling is Ampere.
pub fn borrow_order(arch: Arch) -> &'static [Arch] {
    match arch {
        Arch::Hopper => &[Arch::Ampere, Arch::Ada],
        Arch::Blackwell => &[Arch::Ada, Arch::Ampere],
        Arch::Ada => &[Arch::Blackwell, Arch::Ampere],
        Arch::Ampere => &[Arch::Ada, Arch::Hopper],
        Arch::Turing | Arch::Volta => &[Arch::Turing, Arch::Ampere, Arch::Ada],
    }
}

/// One crossover class: an architecture and a precision. Displays (and serializes) as its
/// label, `ada NF4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClassId {
    /// The architecture class.
    pub arch: Arch,
    /// The precision.
    pub precision: Precision,
}

impl std::fmt::Display for ClassId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&format!("{} {}", self.arch, self.precision))
    }
}

impl Serialize for ClassId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
