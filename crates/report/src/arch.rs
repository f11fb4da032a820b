//! GPU architecture classes and the GPU-name → architecture rule of DESIGN §2, written as
//! hand-made token matching (the `regex` crate costs the page ~700 KB of wasm).
//!
//! The name is lower-cased, runs of `-`/`_` become spaces and the words `nvidia`, `geforce`,
//! `tesla` are dropped. The remaining text is cut into ASCII alphanumeric words (what `\b` sees),
//! `rtx5090` is read as `rtx 5090` and `6000ada` as `6000 ada` (the regexes' `\s*`). Then, first
//! match wins, in the order blackwell, hopper, ada, ampere, turing, volta:
//!
//! | class | words |
//! |---|---|
//! | blackwell | `b100` `b200` `gb` + 3 digits; `rtx 50x0` |
//! | hopper | `h100` `h200` `h800` `gh200` |
//! | ada | `l4` `l40` `l40s` `ada`; `rtx 40x0`; `rtx 2000/4000/5000/6000 ada` |
//! | ampere | `a100` `a800` `a10` `a10g` `a16` `a2` `a30` `a40`; `rtx a` + 4 digits; `rtx 30x0` |
//! | turing | `t4` `t400` `t600` `t1000`; `quadro rtx`, `titan rtx`; `rtx 20x0` |
//! | volta | `v100`; `titan v` |
//!
//! Deliberate departures from the regexes, all additive: a `d` suffix on an RTX model number is
//! accepted (`RTX 4090D` and `RTX 5090D` are the China variants of the same chips; the regex's
//! `\b` rejects them although the upstream dataset files the 4090D under ada), `b300` is
//! blackwell, and a word that *is* an architecture name (`blackwell`, `hopper`, `ampere`,
//! `turing`, `volta`, as `ada` already is) selects it, which covers names such as
//! `NVIDIA RTX PRO 6000 Blackwell Server Edition`.

use std::fmt;
use std::str::FromStr;

/// Architecture class on which the page draws one crossover curve per precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// T4, RTX 20x0, Quadro RTX (2018).
    Turing,
    /// A100, A800, A10, RTX 30x0 (2020).
    Ampere,
    /// RTX 40x0, L4, L40 (2022).
    Ada,
    /// H100, H200 (2022).
    Hopper,
    /// B200, RTX 50x0 (2024).
    Blackwell,
    /// V100 (2017).
    Volta,
}

impl Arch {
    /// Every class, in the order of [`Arch::as_str`]'s error message.
    pub const ALL: [Arch; 6] = [
        Arch::Turing,
        Arch::Ampere,
        Arch::Ada,
        Arch::Hopper,
        Arch::Blackwell,
        Arch::Volta,
    ];

    /// Lower-case name as written in `system_under_test.gpu_arch`.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Turing => "turing",
            Arch::Ampere => "ampere",
            Arch::Ada => "ada",
            Arch::Hopper => "hopper",
            Arch::Blackwell => "blackwell",
            Arch::Volta => "volta",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl serde::Serialize for Arch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Arch {
    /// Any spelling [`Arch::from_str`] accepts.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `"kepler".parse::<Arch>()` fails with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown GPU architecture {0:?}: expected one of turing, ampere, ada, hopper, blackwell, volta"
)]
pub struct ParseArchError(pub String);

impl FromStr for Arch {
    type Err = ParseArchError;
    /// Case-insensitive, surrounding white space ignored; `ada lovelace` is read as `ada`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        let t = if t == "ada lovelace" || t == "ada-lovelace" || t == "lovelace" {
            "ada".to_string()
        } else {
            t
        };
        Arch::ALL
            .into_iter()
            .find(|a| a.as_str() == t)
            .ok_or_else(|| ParseArchError(s.to_string()))
    }
}

/// Words of a GPU name after DESIGN §2's normalisation (see the module docs).
fn words(name: &str) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let mut out: Vec<String> = Vec::new();
    for raw in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        if raw.is_empty() || matches!(raw, "nvidia" | "geforce" | "tesla") {
            continue;
        }
        // `rtx\s*5090` also matches `rtx5090`; `6000\s*ada` also matches `6000ada`.
        if let Some(rest) = raw.strip_prefix("rtx").filter(|r| !r.is_empty()) {
            out.push("rtx".into());
            out.push(rest.into());
        } else if let Some(num) = raw
            .strip_suffix("ada")
            .filter(|n| n.len() == 4 && n.bytes().all(|b| b.is_ascii_digit()))
        {
            out.push(num.into());
            out.push("ada".into());
        } else if raw == "titanrtx" || raw == "quadrortx" {
            out.push(raw[..raw.len() - 3].into());
            out.push("rtx".into());
        } else if raw == "titanv" {
            out.push("titan".into());
            out.push("v".into());
        } else {
            out.push(raw.into());
        }
    }
    out
}

/// `w` is `<p0><p1><digit>0`, optionally followed by `d` (RTX model numbers such as 4090, 4090D).
fn rtx_number(w: &str, series: &str) -> bool {
    let w = w.strip_suffix('d').unwrap_or(w);
    let b = w.as_bytes();
    b.len() == 4 && w.starts_with(series) && b[2].is_ascii_digit() && b[3] == b'0'
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn after_rtx(w: &[String], i: usize) -> Option<&str> {
    (w[i] == "rtx")
        .then(|| w.get(i + 1).map(String::as_str))
        .flatten()
}

fn is_blackwell(w: &[String]) -> bool {
    (0..w.len()).any(|i| {
        let t = w[i].as_str();
        matches!(t, "b100" | "b200" | "b300" | "blackwell")
            || (t.len() == 5 && t.starts_with("gb") && all_digits(&t[2..]))
            || after_rtx(w, i).is_some_and(|n| rtx_number(n, "50"))
    })
}

fn is_hopper(w: &[String]) -> bool {
    w.iter()
        .any(|t| matches!(t.as_str(), "h100" | "h200" | "h800" | "gh200" | "hopper"))
}

fn is_ada(w: &[String]) -> bool {
    (0..w.len()).any(|i| {
        matches!(w[i].as_str(), "l4" | "l40" | "l40s" | "ada" | "lovelace")
            || after_rtx(w, i).is_some_and(|n| {
                rtx_number(n, "40")
                    || (matches!(n, "2000" | "4000" | "5000" | "6000")
                        && w.get(i + 2).is_some_and(|x| x == "ada"))
            })
    })
}

fn is_ampere(w: &[String]) -> bool {
    (0..w.len()).any(|i| {
        matches!(
            w[i].as_str(),
            "a100" | "a800" | "a10" | "a10g" | "a16" | "a2" | "a30" | "a40" | "ampere"
        ) || after_rtx(w, i).is_some_and(|n| {
            (n.len() == 5 && n.starts_with('a') && all_digits(&n[1..])) || rtx_number(n, "30")
        })
    })
}

fn is_turing(w: &[String]) -> bool {
    (0..w.len()).any(|i| {
        let t = w[i].as_str();
        matches!(t, "t4" | "t400" | "t600" | "t1000" | "turing")
            || (matches!(t, "quadro" | "titan") && w.get(i + 1).is_some_and(|x| x == "rtx"))
            || after_rtx(w, i).is_some_and(|n| rtx_number(n, "20"))
    })
}

fn is_volta(w: &[String]) -> bool {
    (0..w.len()).any(|i| {
        matches!(w[i].as_str(), "v100" | "volta")
            || (w[i] == "titan" && w.get(i + 1).is_some_and(|x| x == "v"))
    })
}

type Rule = fn(&[String]) -> bool;

/// Architecture class from a GPU name as NVML or a user writes it (`NVIDIA GeForce RTX 4090`,
/// `Tesla V100-SXM2-16GB`, `H200`). `None` when no rule matches: never guess.
pub fn arch_from_gpu_name(name: &str) -> Option<Arch> {
    if name.len() > 1024 {
        return None;
    }
    let w = words(name);
    let rules: [(Arch, Rule); 6] = [
        (Arch::Blackwell, is_blackwell),
        (Arch::Hopper, is_hopper),
        (Arch::Ada, is_ada),
        (Arch::Ampere, is_ampere),
        (Arch::Turing, is_turing),
        (Arch::Volta, is_volta),
    ];
    rules.into_iter().find(|(_, f)| f(&w)).map(|(a, _)| a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_brief() {
        let cases = [
            ("T4", Some(Arch::Turing)),
            ("Tesla T4", Some(Arch::Turing)),
            ("NVIDIA H200", Some(Arch::Hopper)),
            ("NVIDIA GeForce RTX 4090", Some(Arch::Ada)),
            ("RTX 4090D", Some(Arch::Ada)),
            ("NVIDIA GeForce RTX 4090 D", Some(Arch::Ada)),
            ("NVIDIA A100-SXM4-80GB", Some(Arch::Ampere)),
            ("A800", Some(Arch::Ampere)),
            ("NVIDIA A800 80GB PCIe", Some(Arch::Ampere)),
            ("RTX 5090", Some(Arch::Blackwell)),
            ("NVIDIA GeForce RTX 5090D", Some(Arch::Blackwell)),
            ("NVIDIA L40S", Some(Arch::Ada)),
            ("NVIDIA L4", Some(Arch::Ada)),
            ("Tesla V100-SXM2", Some(Arch::Volta)),
            ("Tesla V100-SXM2-16GB", Some(Arch::Volta)),
            ("Quadro RTX 6000", Some(Arch::Turing)),
            ("RTX 6000 Ada Generation", Some(Arch::Ada)),
            ("NVIDIA RTX 6000 Ada Generation", Some(Arch::Ada)),
            ("GH200", Some(Arch::Hopper)),
            ("NVIDIA GH200 480GB", Some(Arch::Hopper)),
        ];
        for (name, want) in cases {
            assert_eq!(arch_from_gpu_name(name), want, "{name}");
        }
    }

    #[test]
    fn more_names() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", Some(Arch::Hopper)),
            ("NVIDIA H100 PCIe", Some(Arch::Hopper)),
            ("NVIDIA H800", Some(Arch::Hopper)),
            ("NVIDIA B200", Some(Arch::Blackwell)),
            ("NVIDIA GB200", Some(Arch::Blackwell)),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                Some(Arch::Blackwell),
            ),
            ("NVIDIA GeForce RTX 3090", Some(Arch::Ampere)),
            ("NVIDIA GeForce RTX 3080 Ti", Some(Arch::Ampere)),
            ("NVIDIA RTX A6000", Some(Arch::Ampere)),
            ("NVIDIA A10G", Some(Arch::Ampere)),
            ("NVIDIA A10", Some(Arch::Ampere)),
            ("NVIDIA A2", Some(Arch::Ampere)),
            ("NVIDIA GeForce RTX 2080 Ti", Some(Arch::Turing)),
            ("NVIDIA TITAN RTX", Some(Arch::Turing)),
            ("TITAN V", Some(Arch::Volta)),
            ("NVIDIA GeForce RTX 4060 Laptop GPU", Some(Arch::Ada)),
            ("rtx_4090", Some(Arch::Ada)),
            ("RTX4090", Some(Arch::Ada)),
            ("RTX 6000Ada", Some(Arch::Ada)),
            ("NVIDIA GeForce GTX 1080", None),
            ("Tesla P100-PCIE-16GB", None),
            ("Tesla K80", None),
            ("Apple M2", None),
            ("", None),
            ("h1000", None),
            ("a1000", None),
            ("RTX 40900", None),
            ("RTX 4095", None),
        ];
        for (name, want) in cases {
            assert_eq!(arch_from_gpu_name(name), want, "{name}");
        }
    }

    #[test]
    fn first_match_wins_in_rule_order() {
        // Both a hopper and an ampere word: hopper comes first.
        assert_eq!(arch_from_gpu_name("A100 vs H100"), Some(Arch::Hopper));
        // `quadro rtx 6000 ada`: ada before turing.
        assert_eq!(arch_from_gpu_name("Quadro RTX 6000 Ada"), Some(Arch::Ada));
    }

    #[test]
    fn arch_strings() {
        for a in Arch::ALL {
            assert_eq!(a.as_str().parse::<Arch>(), Ok(a));
            assert_eq!(a.to_string(), a.as_str());
        }
        assert_eq!(" Hopper ".parse::<Arch>(), Ok(Arch::Hopper));
        assert_eq!("Ada Lovelace".parse::<Arch>(), Ok(Arch::Ada));
        let e = "kepler".parse::<Arch>().unwrap_err();
        assert!(e.to_string().contains("expected one of"));
    }
}
