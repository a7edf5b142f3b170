//! The decoupled layout's refinement codes as a component of the index
//! ([`crate::quant::sq::RefineCodes`]): written when the layout is (`trawl layout --decoupled`)
//! and by every merge of a decoupled index, so that opening an index with them reads one
//! file in large O_DIRECT reads instead of scanning every vector file twice, and the memory
//! planner knows what they cost and what they save before loading them.
//!
//! Stored beside the index as `refine.trawl` (magic `TRAWLREF`, version 1, the trawl envelope:
//! length and CRC-32 of the payload and of the header), payload little-endian:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | index tag: payload CRC of the index's `pq-codes.trawl` |
//! | 4 | 8 | `n` of the index, `u64` |
//! | 12 | 4 | `dim`, `u32` |
//! | 16 | 1 | bits per dimension (4 or 8) |
//! | 17 | 3 | zero |
//! | 20 | 4 | sample searches the savings were measured with, `u32` |
//! | 24 | 4 | their `k`, `L` and `W`, `u8`, `u16`, `u8` |
//! | 28 | 4 | pages per sample search without the codes, `f32` |
//! | 32 | 4 | pages per sample search with them, `f32` |
//! | 36 | 28 | zero |
//! | 64 | `n · c` | the codes, `c` = `dim` bytes (8 bits) or `⌈dim/2⌉` (4 bits) |
//! | … | 4·n | squared norm of each reconstruction, `f32` |
//! | … | 4·dim | grid offset per dimension, `f32` |
//! | … | 4·dim | grid step per dimension, `f32` |
//!
//! The first 64 bytes are what the planner reads ([`RefineHeader::read`]); loading
//! ([`load`]) verifies the whole payload, the tag (a file of another version of the index is
//! refused: a merge rewrites it) and every length.

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
use crate::kernels::Metric;
use crate::quant::sq::RefineCodes;

/// File name inside an index directory.
pub const FILE_NAME: &str = "refine.trawl";
/// Magic.
pub const MAGIC: [u8; 8] = *b"TRAWLREF";
/// Format version.
pub const VERSION: u32 = 1;
/// Bits per dimension the component is written with (4-bit codes ordered gen-1M's re-rank
/// no better than PQ: 46.6 pages per query at L 20 against 46.8; 8 bits 39.4;
/// `docs/memory.md`).
pub const STORED_BITS: u8 = 8;
/// Sample searches that measure what the codes save.
pub const SAMPLES: usize = 2000;
/// Bytes ahead of the codes.
const HEAD: usize = 64;

/// What sample searches measured the codes to save.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct RefineSavings {
    /// Sample searches (indexed vectors as queries, no cache).
    pub samples: u32,
    /// Their `k`.
    pub k: u8,
    /// Their list size.
    pub l: u16,
    /// Their beam width.
    pub beam_width: u8,
    /// Pages per sample search without the codes.
    pub pages_without: f32,
    /// Pages per sample search with them.
    pub pages_with: f32,
}

impl RefineSavings {
    /// Reads per search the codes save (0 when they saved none).
    pub fn saved(&self) -> f64 {
        f64::from((self.pages_without - self.pages_with).max(0.0))
    }
}

/// The fixed part of the file: what it codes and what it saves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefineHeader {
    /// The index tag (payload CRC of its PQ codes).
    pub tag: u32,
    /// Vectors coded.
    pub n: u64,
    /// Dimensions.
    pub dim: u32,
    /// Bits per dimension.
    pub bits: u8,
    /// What they were measured to save.
    pub savings: RefineSavings,
}

impl RefineHeader {
    /// Bytes of one vector's code.
    pub fn code_bytes(&self) -> u64 {
        if self.bits == 4 {
            u64::from(self.dim.div_ceil(2))
        } else {
            u64::from(self.dim)
        }
    }

    /// Bytes the loaded codes hold in memory (codes, norms, grids:
    /// [`RefineCodes::heap_bytes`]); saturating, for a header no file could match.
    pub fn heap_bytes(&self) -> u64 {
        self.n
            .saturating_mul(self.code_bytes() + 4)
            .saturating_add(8 * u64::from(self.dim))
    }

    fn payload_bytes(&self) -> u64 {
        self.heap_bytes().saturating_add(HEAD as u64)
    }

    fn parse(path: &Path, b: &[u8]) -> Result<Self, FileError> {
        let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
        let short = |e: crate::dir::bytes::ShortPayload| bad(e.to_string());
        let mut r = ByteReader::new(b);
        let tag = r.u32().map_err(short)?;
        let n = r.u64().map_err(short)?;
        let dim = r.u32().map_err(short)?;
        let bits = r.u8().map_err(short)?;
        r.bytes(3).map_err(short)?;
        let samples = r.u32().map_err(short)?;
        let k = r.u8().map_err(short)?;
        let lw = r.bytes(3).map_err(short)?;
        let l = u16::from_le_bytes([lw[0], lw[1]]);
        let beam_width = lw[2];
        let pages_without = r.f32().map_err(short)?;
        let pages_with = r.f32().map_err(short)?;
        if !matches!(bits, 4 | 8) || dim == 0 {
            return Err(bad(format!("{bits} bits over {dim} dimensions")));
        }
        if !(pages_without.is_finite() && pages_with.is_finite())
            || pages_without < 0.0
            || pages_with < 0.0
        {
            return Err(bad("the measured savings are not finite".into()));
        }
        Ok(Self {
            tag,
            n,
            dim,
            bits,
            savings: RefineSavings {
                samples,
                k,
                l,
                beam_width,
                pages_without,
                pages_with,
            },
        })
    }

    /// The header of the file at `path` (its envelope header checked, the payload not: the
    /// planner reads this much of a file it may not load).
    pub fn read(path: &Path) -> Result<Self, FileError> {
        let (_, b, len) = crate::dir::file::read_envelope_prefix(
            path,
            MAGIC,
            "trawl refinement codes",
            VERSION,
            HEAD,
        )?;
        let h = Self::parse(path, &b)?;
        if len != h.payload_bytes() {
            return Err(FileError::new(
                path,
                FileErrorKind::Invalid(format!(
                    "{len} payload bytes for {} codes of {} B",
                    h.n,
                    h.code_bytes()
                )),
            ));
        }
        Ok(h)
    }

    /// Whether the file belongs to the index of `n` vectors of `dim` whose PQ codes have
    /// payload CRC `tag`.
    pub fn fits(&self, n: u64, dim: usize, tag: u32) -> bool {
        self.tag == tag && self.n == n && self.dim as usize == dim
    }
}

/// Writes `codes` (of the index whose PQ codes have payload CRC `tag`) and what they were
/// measured to save to `path`; returns the file's bytes.
pub fn save(
    path: &Path,
    codes: &RefineCodes,
    tag: u32,
    savings: &RefineSavings,
) -> Result<u64, FileError> {
    let (offset, step, bytes, norms) = codes.parts();
    let mut w = ByteWriter::new();
    w.u32(tag);
    w.u64(norms.len() as u64);
    w.u32(offset.len() as u32);
    w.u8(codes.bits());
    w.bytes(&[0; 3]);
    w.u32(savings.samples);
    w.u8(savings.k);
    w.bytes(&savings.l.to_le_bytes());
    w.u8(savings.beam_width);
    w.f32(savings.pages_without);
    w.f32(savings.pages_with);
    w.bytes(&[0; HEAD - 36]);
    let mut env = EnvelopeWriter::create(path, MAGIC, VERSION)?;
    env.write(&w.into_inner())?;
    env.write(bytes)?;
    let mut tail = ByteWriter::new();
    tail.f32s(norms);
    tail.f32s(offset);
    tail.f32s(step);
    env.write(&tail.into_inner())?;
    env.finish()
}

/// Reads and verifies the file at `path` for the index of `n` vectors of `dim` dimensions
/// whose PQ codes have payload CRC `tag`; the codes compute `metric`'s distances.
pub fn load(
    path: &Path,
    n: u64,
    dim: usize,
    tag: u32,
    metric: Metric,
) -> Result<(RefineCodes, RefineHeader), FileError> {
    let (_, mut payload) = read_envelope(path, MAGIC, "trawl refinement codes", VERSION)?;
    let bad = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
    let h = RefineHeader::parse(path, payload.get(..HEAD).unwrap_or(&[]))?;
    if !h.fits(n, dim, tag) {
        return Err(bad(
            "the refinement codes belong to another version of the index (a merge or \
             `trawl layout --decoupled` writes them again)"
                .into(),
        ));
    }
    if payload.len() as u64 != h.payload_bytes() {
        return Err(bad(format!(
            "{} payload bytes for {n} codes of {} B",
            payload.len(),
            h.code_bytes()
        )));
    }
    let codes_len = (n * h.code_bytes()) as usize;
    let tail_at = HEAD + codes_len;
    let mut r = ByteReader::new(&payload[tail_at..]);
    let short = |e: crate::dir::bytes::ShortPayload| bad(e.to_string());
    let norms = r.f32s(n as usize).map_err(short)?;
    let offset = r.f32s(dim).map_err(short)?;
    let step = r.f32s(dim).map_err(short)?;
    // The codes stay in the payload's buffer (read in large O_DIRECT reads): the header is
    // shifted out and the tail cut off, no second copy.
    payload.truncate(tail_at);
    payload.drain(..HEAD);
    payload.shrink_to_fit();
    let codes =
        RefineCodes::from_parts(h.bits, metric, offset, step, payload, norms).map_err(bad)?;
    Ok((codes, h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::sq::RangeBuilder;

    fn codes(n: usize, dim: usize, bits: u8) -> (RefineCodes, Vec<Vec<f32>>) {
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                (0..dim)
                    .map(|d| ((i * 7 + d * 3) % 11) as f32 - 5.0)
                    .collect()
            })
            .collect();
        let mut ranges = RangeBuilder::new(dim);
        rows.iter().for_each(|r| ranges.observe(r));
        let mut c = RefineCodes::new(&ranges, bits, Metric::L2, n).unwrap();
        for (i, r) in rows.iter().enumerate() {
            c.set(i, r);
        }
        (c, rows)
    }

    #[test]
    fn round_trip_stale_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE_NAME);
        for bits in [4u8, 8] {
            let (c, rows) = codes(37, 9, bits);
            let s = RefineSavings {
                samples: 20,
                k: 10,
                l: 15,
                beam_width: 4,
                pages_without: 30.5,
                pages_with: 25.0,
            };
            let bytes = save(&p, &c, 99, &s).unwrap();
            assert_eq!(bytes, std::fs::metadata(&p).unwrap().len());
            let h = RefineHeader::read(&p).unwrap();
            assert_eq!((h.n, h.dim, h.bits, h.savings), (37, 9, bits, s));
            assert_eq!(h.heap_bytes(), c.heap_bytes());
            assert_eq!(h.savings.saved(), 5.5);
            let (back, _) = load(&p, 37, 9, 99, Metric::L2).unwrap();
            assert_eq!(back.parts(), c.parts());
            let (mut a, mut b) = Default::default();
            c.prepare(&rows[3], &mut a);
            back.prepare(&rows[3], &mut b);
            for i in 0..37 {
                assert_eq!(c.distance(&a, i), back.distance(&b, i));
            }
            assert!(load(&p, 37, 9, 98, Metric::L2).is_err(), "another version");
            assert!(load(&p, 38, 9, 99, Metric::L2).is_err(), "another size");
        }
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert!(load(&p, 37, 9, 99, Metric::L2).is_err(), "flipped bit");
        std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
        assert!(load(&p, 37, 9, 99, Metric::L2).is_err(), "truncated");
        assert!(
            RefineHeader::read(&p).is_err(),
            "truncated: the header read sees it"
        );
    }
}
