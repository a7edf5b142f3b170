//! The RaBitQ quantiser file, in a trawl envelope ([`crate::dir::file`]: magic, version,
//! length, CRC-32). All integers little-endian. An index keeps it where a PQ index keeps its
//! quantiser (`pq.trawl`); the magic tells the two apart ([`crate::quant::Quantiser::load`]).
//!
//! Magic `TRAWLRBQ`, version 1, payload:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | metric code ([`Metric::code`]) |
//! | 1 | 1 | bits per dimension `B`, 1…8 |
//! | 2 | 1 | rotation rounds, 1…16 |
//! | 3 | 1 | reserved, zero |
//! | 4 | 4 | `dim`, `u32`, ≥ 1 |
//! | 8 | 4 | padded dimension `D`, `u32`: the next multiple of 64 |
//! | 12 | 4·dim | the centroid, `f32`, finite |
//! | 12+4·dim | 8·rounds·D/64 | the rotation's sign words, `u64`, round-major |
//!
//! The codes are a PQ codes file (`TRAWLPQC`) of `B·D/8 + F`-byte rows (`F` the factors' bytes,
//! [`crate::quant::rabitq::factors`]; module docs of
//! [`crate::quant::rabitq`]); [`RaBitQuantizer::check_codes`] checks a loaded one against the
//! quantiser, factors included.

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
use crate::kernels::Metric;
use crate::quant::pq::PqCodes;
use crate::quant::rabitq::{padded_dim, FhtRotation, RaBitQuantizer, MAX_BITS};

/// Magic of a RaBitQ quantiser file.
pub const RBQ_MAGIC: [u8; 8] = *b"TRAWLRBQ";
/// Current version of the format.
pub const RBQ_VERSION: u32 = 1;
/// Most rotation rounds a file may hold.
const MAX_ROUNDS: usize = 16;

fn invalid(path: &Path, msg: impl Into<String>) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg.into()))
}

impl RaBitQuantizer {
    /// Writes the quantiser to `path` (atomically). Returns the file size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = ByteWriter::new();
        w.u8(self.metric.code());
        w.u8(self.bits);
        w.u8(self.rotation.rounds() as u8);
        w.u8(0);
        w.u32(self.dim() as u32);
        w.u32(self.pad() as u32);
        w.f32s(&self.centroid);
        for &s in self.rotation.signs() {
            w.u64(s);
        }
        let mut out = EnvelopeWriter::create(path, RBQ_MAGIC, RBQ_VERSION)?;
        out.write(&w.into_inner())?;
        out.finish()
    }

    /// Reads a quantiser written by [`RaBitQuantizer::save`], checking every field.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, RBQ_MAGIC, "RaBitQ quantiser", RBQ_VERSION)?;
        Self::parse(path, &payload)
    }

    pub(crate) fn parse(path: &Path, payload: &[u8]) -> Result<Self, FileError> {
        let mut r = ByteReader::new(payload);
        let e = |s: crate::dir::bytes::ShortPayload| invalid(path, s.to_string());
        let metric_code = r.u8().map_err(e)?;
        let metric = Metric::from_code(metric_code)
            .ok_or_else(|| invalid(path, format!("unknown metric code {metric_code}")))?;
        let bits = r.u8().map_err(e)?;
        let rounds = usize::from(r.u8().map_err(e)?);
        let reserved = r.u8().map_err(e)?;
        let dim = r.u32().map_err(e)? as usize;
        let pad = r.u32().map_err(e)? as usize;
        if !(1..=MAX_BITS).contains(&bits)
            || !(1..=MAX_ROUNDS).contains(&rounds)
            || reserved != 0
            || dim == 0
            || pad != padded_dim(dim)
        {
            return Err(invalid(
                path,
                format!("bits {bits}, rounds {rounds}, dim {dim}, padded {pad} out of range"),
            ));
        }
        let words = rounds * pad / 64;
        let expected = dim.checked_mul(4).and_then(|c| c.checked_add(words * 8));
        if expected != Some(r.remaining()) {
            return Err(invalid(
                path,
                format!(
                    "{} bytes after the header, expected {} for dim {dim} and {rounds} rounds",
                    r.remaining(),
                    dim * 4 + words * 8
                ),
            ));
        }
        let centroid = r.f32s(dim).map_err(e)?;
        let signs = (0..words)
            .map(|_| r.u64())
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        let rotation = FhtRotation::from_parts(dim, pad, signs)
            .ok_or_else(|| invalid(path, "inconsistent rotation"))?;
        Self::from_parts(metric, bits, centroid, rotation).ok_or_else(|| {
            invalid(
                path,
                "the centroid holds a value that is not finite or beyond ±1e15",
            )
        })
    }

    /// Checks that `codes` (loaded from `path`) are codes of this quantiser: the row length and
    /// finite factors (a non-finite factor would make every estimate of its vector NaN).
    pub fn check_codes(&self, codes: &PqCodes, path: &Path) -> Result<(), FileError> {
        if codes.m() != self.code_bytes() {
            return Err(invalid(
                path,
                format!(
                    "RaBitQ codes of {} bytes, expected {} for {} bits over {} dimensions",
                    codes.m(),
                    self.code_bytes(),
                    self.bits,
                    self.pad()
                ),
            ));
        }
        let planes = usize::from(self.bits) * self.plane_bytes();
        let layout = self.factors();
        for i in 0..codes.n() {
            let (norm, neg_rc, inv_yo, tan) = layout.stored(&codes.code(i)[planes..]);
            let finite = norm.is_finite() && neg_rc.is_finite() && inv_yo.is_finite();
            if !(finite && tan.is_finite() && norm >= 0.0 && tan >= 0.0) {
                return Err(invalid(
                    path,
                    format!("the factors of code {i} are not finite"),
                ));
            }
        }
        Ok(())
    }
}
