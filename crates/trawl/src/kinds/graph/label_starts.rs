//! The start nodes of a label-aware graph (FilteredVamana, [`crate::vamana::labels`]): one
//! per tracked label, where an inline filtered search for that label starts (beside the
//! medoid or the entry index's seeds).
//!
//! Stored beside the index as `label-starts.trawl` (magic `TRAWLLST`, version 1, the trawl
//! envelope: length and CRC-32 of the payload and of the header), payload little-endian:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | index tag: payload CRC of the index's `pq-codes.trawl` |
//! | 4 | 4 | attributes tag: payload CRC of the index's `attrs.trawl` |
//! | 8 | 8 | `n` of the index, `u64` |
//! | 16 | 4 | labels (as many as `attrs.trawl` holds), `u32` |
//! | 20 | 4 | labels with a start node, `u32` |
//! | 24 | 4·labels | start node of each label in `attrs.trawl`'s order (`u32::MAX`: none) |
//!
//! Loading checks the tags (a file of another build is refused), the counts and that every
//! start node is a node of the index carrying its label.

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
use crate::filter::{Attributes, Predicate};
use crate::vamana::labels::NO_START;

/// File name inside an index directory.
pub const FILE_NAME: &str = "label-starts.trawl";
/// Magic.
pub const MAGIC: [u8; 8] = *b"TRAWLLST";
/// Format version.
pub const VERSION: u32 = 1;

/// Whether a graph build is label-aware.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelAware {
    /// Label-aware when the attributes hold a label on at most
    /// [`LABEL_MAX_SHARE`](crate::vamana::defaults::LABEL_MAX_SHARE) of the vectors (and at
    /// least 2), unless a memory budget is given (the largest sets, where the build's time
    /// and memory matter most: the label searches add up to
    /// [`LABEL_SEARCHES`](crate::vamana::defaults::LABEL_SEARCHES) searches per point).
    #[default]
    Auto,
    /// Label-aware whenever the attributes hold such a label, whatever their number (a build
    /// split into parts by a memory budget is still not: its report says so).
    On,
    /// The plain Vamana build.
    Off,
}

impl LabelAware {
    /// `auto`, `on` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        }
    }
}

impl std::str::FromStr for LabelAware {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" | "true" | "yes" => Ok(Self::On),
            "off" | "false" | "no" => Ok(Self::Off),
            other => Err(format!("{other:?} is not auto, on or off")),
        }
    }
}

impl std::fmt::Display for LabelAware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Each label's start node, in the attributes' label order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelStarts {
    starts: Vec<u32>,
}

impl LabelStarts {
    /// The start nodes of a label-aware build (one per label of the attributes,
    /// [`NO_START`] where none).
    pub fn new(starts: Vec<u32>) -> Self {
        Self { starts }
    }

    /// Bytes held in memory.
    pub fn heap_bytes(&self) -> u64 {
        (self.starts.capacity() * 4) as u64
    }

    /// Labels with a start node.
    pub fn tracked(&self) -> usize {
        self.starts.iter().filter(|&&s| s != NO_START).count()
    }

    /// The start node of label `l`, if it has one.
    pub fn of(&self, l: u32) -> Option<u32> {
        self.starts
            .get(l as usize)
            .copied()
            .filter(|&s| s != NO_START)
    }

    /// Appends to `out` the start nodes of the labels `pred` requires
    /// ([`Predicate::label_cover`]), when every one of them has one (else none: a search
    /// started at some of them only could miss the others' matches).
    pub fn seeds_for(&self, pred: &Predicate<'_>, out: &mut Vec<u32>) {
        let Some(cover) = pred.label_cover() else {
            return;
        };
        let at = out.len();
        for l in cover {
            match self.of(l) {
                Some(s) => {
                    if !out[at..].contains(&s) {
                        out.push(s);
                    }
                }
                None => {
                    out.truncate(at);
                    return;
                }
            }
        }
    }

    /// Writes the file for an index of `n` nodes whose PQ codes and attribute files have
    /// payload CRCs `index_tag` and `attrs_tag`; returns the payload CRC.
    pub fn save(
        &self,
        path: &Path,
        n: u64,
        index_tag: u32,
        attrs_tag: u32,
    ) -> Result<u64, FileError> {
        let mut w = ByteWriter::new();
        w.u32(index_tag);
        w.u32(attrs_tag);
        w.u64(n);
        w.u32(self.starts.len() as u32);
        w.u32(self.tracked() as u32);
        w.u32s(&self.starts);
        let mut env = EnvelopeWriter::create(path, MAGIC, VERSION)?;
        env.write(&w.into_inner())?;
        env.finish()
    }

    /// Reads the file at `path` and checks it belongs to the index of `n` nodes whose PQ codes
    /// and attributes files have payload CRCs `index_tag` and `attrs_tag`, and `attrs` (every
    /// start node carries its label).
    pub fn load(
        path: &Path,
        n: u64,
        index_tag: u32,
        attrs_tag: u32,
        attrs: &Attributes,
    ) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, MAGIC, "trawl label start nodes", VERSION)?;
        let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let short = |e: crate::dir::bytes::ShortPayload| bad(e.to_string());
        let mut r = ByteReader::new(&payload);
        let (tag, atag) = (r.u32().map_err(short)?, r.u32().map_err(short)?);
        let file_n = r.u64().map_err(short)?;
        if tag != index_tag || atag != attrs_tag || file_n != n {
            return Err(bad(
                "the label start nodes belong to another build of the index (rebuild it)".into(),
            ));
        }
        let labels = r.u32().map_err(short)? as usize;
        let tracked = r.u32().map_err(short)? as usize;
        let count = attrs.labels().count();
        if labels != count {
            return Err(bad(format!(
                "start nodes of {labels} labels for attributes of {count}"
            )));
        }
        let starts = r.u32s(labels).map_err(short)?;
        if r.remaining() != 0 {
            return Err(bad(format!(
                "{} bytes after the start nodes",
                r.remaining()
            )));
        }
        let me = Self { starts };
        if me.tracked() != tracked {
            return Err(bad(format!(
                "{} labels have a start node, the header says {tracked}",
                me.tracked()
            )));
        }
        for (l, &s) in me.starts.iter().enumerate() {
            if s != NO_START && (u64::from(s) >= n || !attrs.bitmap(l as u32).contains(s)) {
                return Err(bad(format!(
                    "start node {s} of label {l} is not a node carrying it"
                )));
            }
        }
        Ok(me)
    }

    /// What a check of the file found, in words.
    pub fn describe(&self) -> String {
        format!(
            "checksum matches; start nodes of {} of {} labels",
            self.tracked(),
            self.starts.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::AttrsBuilder;

    fn attrs() -> Attributes {
        let mut b = AttrsBuilder::new(100).unwrap();
        for r in 0..100u32 {
            b.add_label(r, if r % 2 == 0 { "even" } else { "odd" })
                .unwrap();
            if r % 25 == 3 {
                b.add_label(r, "rare").unwrap();
            }
        }
        b.finish().unwrap()
    }

    fn starts(a: &Attributes) -> LabelStarts {
        let mut s = vec![NO_START; a.labels().count()];
        s[a.label_id("rare").unwrap() as usize] = 28;
        s[a.label_id("odd").unwrap() as usize] = 51;
        LabelStarts::new(s)
    }

    #[test]
    fn round_trips_and_refuses_damage_and_other_builds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let a = attrs();
        let s = starts(&a);
        s.save(&path, 100, 7, 9).unwrap();
        let back = LabelStarts::load(&path, 100, 7, 9, &a).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.tracked(), 2);
        assert_eq!(back.of(a.label_id("rare").unwrap()), Some(28));
        assert_eq!(back.of(a.label_id("even").unwrap()), None);
        assert!(back.describe().contains("2 of 3 labels"));
        // Another build, another attributes file, another size: refused.
        for (n, t, at) in [(100, 8, 9), (100, 7, 8), (99, 7, 9)] {
            let e = LabelStarts::load(&path, n, t, at, &a).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Corrupt, "{e}");
        }
        // Every byte flipped, and every truncation, is an error.
        let bytes = std::fs::read(&path).unwrap();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            std::fs::write(&path, &b).unwrap();
            assert!(LabelStarts::load(&path, 100, 7, 9, &a).is_err(), "byte {i}");
            std::fs::write(&path, &bytes[..i]).unwrap();
            let e = LabelStarts::load(&path, 100, 7, 9, &a).unwrap_err();
            assert!(!e.to_string().is_empty());
        }
        // A start node without its label is refused (written whole, checksums right).
        let mut bad = vec![NO_START; 3];
        bad[a.label_id("rare").unwrap() as usize] = 4;
        LabelStarts::new(bad).save(&path, 100, 7, 9).unwrap();
        let e = LabelStarts::load(&path, 100, 7, 9, &a).unwrap_err();
        assert!(e.to_string().contains("not a node carrying it"), "{e}");
    }

    #[test]
    fn seeds_are_the_starts_of_the_labels_a_filter_requires() {
        let a = attrs();
        let s = starts(&a);
        let seeds = |f: &str| {
            let e = crate::filter::parse(f).unwrap();
            let p = Predicate::compile(&e, &a).unwrap();
            let mut out = Vec::new();
            s.seeds_for(&p, &mut out);
            out.sort_unstable();
            out
        };
        assert_eq!(seeds(r#"label = "rare""#), vec![28]);
        assert_eq!(seeds(r#"label = "rare" AND label = "odd""#), vec![28]);
        assert_eq!(seeds(r#"label = "rare" OR label = "odd""#), vec![28, 51]);
        // A label without a start, a negation: none (the medoid's search alone).
        assert_eq!(
            seeds(r#"label = "rare" OR label = "even""#),
            Vec::<u32>::new()
        );
        assert_eq!(seeds(r#"NOT label = "rare""#), Vec::<u32>::new());
        assert_eq!(seeds(r#"label = "even" AND label = "rare""#), vec![28]);
        assert_eq!("on".parse::<LabelAware>(), Ok(LabelAware::On));
        assert!("maybe".parse::<LabelAware>().is_err());
    }
}
