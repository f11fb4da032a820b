//! Provenance tags: every figure the optimizer returns says where it comes from, so the page can
//! show a measured number differently from a modelled one.

use serde::Serialize;

/// Where a figure comes from, from most to least direct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tag {
    /// Read off a published measurement (an anchor or the batch sweep).
    Measured,
    /// Exact arithmetic on known inputs (shapes, byte counts, datasheet values).
    Computed,
    /// Between measured points (a fitted curve or log-log interpolation inside the data).
    Interpolated,
    /// Outside the measured range, or borrowed from another architecture, model size or format.
    Extrapolated,
    /// From a physical model with calibrated or assumed constants (roofline, batch/context terms).
    Modelled,
}

impl Tag {
    /// `measured`, `computed`, `interpolated`, `extrapolated`, `modelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Measured => "measured",
            Tag::Computed => "computed",
            Tag::Interpolated => "interpolated",
            Tag::Extrapolated => "extrapolated",
            Tag::Modelled => "modelled",
        }
    }

    /// A figure derived from several inputs is only as direct as its least direct input.
    pub fn weakest(self, other: Tag) -> Tag {
        self.max(other)
    }
}

impl From<report::Basis> for Tag {
    fn from(b: report::Basis) -> Tag {
        match b {
            report::Basis::Measured => Tag::Measured,
            report::Basis::Interpolated => Tag::Interpolated,
            // An unavailable estimate never reaches a figure; treat it as the weakest tag.
            report::Basis::Extrapolated => Tag::Extrapolated,
            report::Basis::Unavailable => Tag::Modelled,
        }
    }
}

/// A value with its provenance; serializes as `{"value": …, "tag": "measured"}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tagged<T> {
    /// The figure.
    pub value: T,
    /// Where it comes from.
    pub tag: Tag,
}

impl<T> Tagged<T> {
    /// `value` with `tag`.
    pub fn new(value: T, tag: Tag) -> Self {
        Tagged { value, tag }
    }
    /// A measured figure.
    pub fn measured(value: T) -> Self {
        Tagged::new(value, Tag::Measured)
    }
    /// A computed figure.
    pub fn computed(value: T) -> Self {
        Tagged::new(value, Tag::Computed)
    }
    /// A modelled figure.
    pub fn modelled(value: T) -> Self {
        Tagged::new(value, Tag::Modelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weakest_tag_wins_and_serializes_lowercase() {
        assert_eq!(Tag::Measured.weakest(Tag::Interpolated), Tag::Interpolated);
        assert_eq!(Tag::Modelled.weakest(Tag::Computed), Tag::Modelled);
        let j = serde_json::to_string(&Tagged::modelled(1.5)).unwrap();
        assert_eq!(j, r#"{"value":1.5,"tag":"modelled"}"#);
    }
}
