//! PQ files: the quantiser (codebooks) and the codes, each in a trawl envelope
//! ([`crate::dir::file`]: magic, version, length, CRC-32). All integers little-endian.
//!
//! **Quantiser** — magic `TRAWLPQ\0`, version 1 (plain PQ) or 2 (with an OPQ rotation; a
//! plain quantiser is still written as version 1, byte for byte as before), payload:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | metric code ([`Metric::code`]: 0 L2, 1 inner product, 2 cosine) |
//! | 1 | 1 | flags: bit 0 = a rotation follows the codebooks (version 2 only); other bits zero |
//! | 2 | 2 | reserved, zero |
//! | 4 | 4 | `dim`, `u32` |
//! | 8 | 4 | `M` (subspaces = bytes per code), `u32`, `1 ≤ M ≤ dim` |
//! | 12 | 4 | `ks` (centroids per subspace), `u32`, `1 ≤ ks ≤ 256` |
//! | 16 | 4·(M+1) | subspace boundaries, `u32`, strictly increasing from 0 to `dim` |
//! | 20+4M | 4·ks·dim | codebooks, `f32`: subspace `s` is `ks × width(s)` row-major, subspaces in order |
//! | 20+4M+4·ks·dim | 4·dim² | flag bit 0 only: the rotation `R`, `f32`, row-major (`x ↦ R x`); must be orthogonal to 1e-3 |
//!
//! **Codes** — magic `TRAWLPQC`, version 1, payload:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | `n` (vectors), `u64` |
//! | 8 | 4 | `M` (bytes per code), `u32`, ≥ 1 |
//! | 12 | 4 | `ks` (centroids per subspace), `u32`, `1 ≤ ks ≤ 256`; every code byte is below it |
//! | 16 | n·M | codes, row-major, one byte per subspace |
//!
//! Beyond the envelope's checks, loading verifies that every field is in range, that the lengths
//! agree exactly with the payload size, and that all centroids are finite and all code bytes
//! below `ks`; any failure is [`FileErrorKind::Invalid`].

use std::path::Path;

use crate::dir::bytes::{ByteReader, ByteWriter, ShortPayload};
use crate::dir::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
use crate::kernels::Metric;
use crate::quant::pq::{PqCodes, ProductQuantizer, Rotation, MAX_CENTROIDS};

/// Magic of a PQ quantiser file.
pub const PQ_MAGIC: [u8; 8] = *b"TRAWLPQ\0";
/// Current version of the PQ quantiser format (2 adds the OPQ rotation; version 1 files, which
/// have none, still load, and a quantiser without a rotation is still written as version 1).
pub const PQ_VERSION: u32 = 2;
/// Flag bit: the OPQ rotation follows the codebooks.
const FLAG_ROTATION: u8 = 1;
/// Magic of a PQ codes file.
pub const PQ_CODES_MAGIC: [u8; 8] = *b"TRAWLPQC";
/// Current version of the PQ codes format.
pub const PQ_CODES_VERSION: u32 = 1;

/// Codes written per envelope write call.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

fn invalid(path: &Path, msg: impl Into<String>) -> FileError {
    FileError::new(path, FileErrorKind::Invalid(msg.into()))
}

fn short(path: &Path) -> impl Fn(ShortPayload) -> FileError + '_ {
    move |e| invalid(path, e.to_string())
}

fn to_u32(path: &Path, what: &str, v: usize) -> Result<u32, FileError> {
    u32::try_from(v).map_err(|_| invalid(path, format!("{what} {v} does not fit in 32 bits")))
}

impl ProductQuantizer {
    /// Writes the quantiser to `path` (atomically: a temporary file renamed into place).
    /// Returns the file size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = ByteWriter::new();
        w.u8(self.metric.code());
        w.u8(if self.rotation.is_some() {
            FLAG_ROTATION
        } else {
            0
        });
        w.bytes(&[0; 2]);
        w.u32(to_u32(path, "dim", self.dim)?);
        w.u32(to_u32(path, "M", self.m())?);
        w.u32(to_u32(path, "ks", self.ks)?);
        for &b in &self.bounds {
            w.u32(to_u32(path, "bound", b)?);
        }
        w.f32s(&self.centroids);
        if let Some(r) = &self.rotation {
            w.f32s(r.rows());
        }
        let version = if self.rotation.is_some() { 2 } else { 1 };
        let mut env = EnvelopeWriter::create(path, PQ_MAGIC, version)?;
        env.write(&w.into_inner())?;
        env.finish()
    }

    /// Reads a quantiser written by [`ProductQuantizer::save`], verifying it fully.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (version, payload) = read_envelope(path, PQ_MAGIC, "PQ quantiser", PQ_VERSION)?;
        let mut r = ByteReader::new(&payload);
        let e = short(path);
        let metric_code = r.u8().map_err(&e)?;
        let metric = Metric::from_code(metric_code)
            .ok_or_else(|| invalid(path, format!("unknown metric code {metric_code}")))?;
        let flags = r.u8().map_err(&e)?;
        let allowed = if version >= 2 { FLAG_ROTATION } else { 0 };
        if flags & !allowed != 0 {
            return Err(invalid(
                path,
                format!("unknown flags {flags:#04x} for format version {version}"),
            ));
        }
        if r.bytes(2).map_err(&e)? != [0, 0] {
            return Err(invalid(path, "reserved bytes are not zero"));
        }
        let rotated = flags & FLAG_ROTATION != 0;
        let dim = r.u32().map_err(&e)? as usize;
        let m = r.u32().map_err(&e)? as usize;
        let ks = r.u32().map_err(&e)? as usize;
        if dim == 0 || m == 0 || m > dim || ks == 0 || ks > MAX_CENTROIDS {
            return Err(invalid(
                path,
                format!("dim {dim}, M {m}, ks {ks} out of range"),
            ));
        }
        let bounds: Vec<usize> = r
            .u32s(m + 1)
            .map_err(&e)?
            .into_iter()
            .map(|b| b as usize)
            .collect();
        let rotation_bytes = if rotated { dim * dim * 4 } else { 0 };
        let expected = ks * dim * 4 + rotation_bytes;
        if r.remaining() != expected {
            return Err(invalid(
                path,
                format!(
                    "codebooks{} take {} bytes, expected {expected} for ks {ks} × dim {dim}",
                    if rotated { " and rotation" } else { "" },
                    r.remaining()
                ),
            ));
        }
        let centroids = r.f32s(ks * dim).map_err(&e)?;
        let rotation =
            if rotated {
                let rows = r.f32s(dim * dim).map_err(&e)?;
                Some(Rotation::from_rows(dim, rows).ok_or_else(|| {
                    invalid(path, "the OPQ rotation is not finite and orthogonal")
                })?)
            } else {
                None
            };
        ProductQuantizer::from_parts(metric, dim, bounds, ks, centroids, rotation).ok_or_else(
            || {
                invalid(
                    path,
                    "subspace boundaries not increasing from 0 to dim, or a centroid not finite",
                )
            },
        )
    }
}

impl PqCodes {
    /// Writes the codes to `path` (atomically). Returns the file size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        let mut w = ByteWriter::new();
        w.u64(self.n() as u64);
        w.u32(to_u32(path, "M", self.m)?);
        w.u32(to_u32(path, "ks", self.ks)?);
        let mut env = EnvelopeWriter::create(path, PQ_CODES_MAGIC, PQ_CODES_VERSION)?;
        env.write(&w.into_inner())?;
        for chunk in self.codes.chunks(WRITE_CHUNK_BYTES) {
            env.write(chunk)?;
        }
        env.finish()
    }

    /// Reads codes written by [`PqCodes::save`], verifying them fully.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        const HEAD: usize = 16;
        let (_, mut payload) = read_envelope(path, PQ_CODES_MAGIC, "PQ codes", PQ_CODES_VERSION)?;
        let mut r = ByteReader::new(&payload);
        let e = short(path);
        let n = r.u64().map_err(&e)?;
        let m = r.u32().map_err(&e)? as usize;
        let ks = r.u32().map_err(&e)? as usize;
        if m == 0 || ks == 0 || ks > MAX_CENTROIDS {
            return Err(invalid(path, format!("M {m}, ks {ks} out of range")));
        }
        let expected = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(m))
            .ok_or_else(|| invalid(path, format!("{n} codes of {m} bytes overflow")))?;
        if r.remaining() != expected {
            return Err(invalid(
                path,
                format!(
                    "{} code bytes, expected {expected} for {n} codes of {m} bytes",
                    r.remaining()
                ),
            ));
        }
        // The payload is on huge pages (`read_envelope`): every query reads codes at random.
        payload.drain(..HEAD);
        if let Some(pos) = payload.iter().position(|&c| usize::from(c) >= ks) {
            return Err(invalid(
                path,
                format!("code byte {pos} is {}, not below ks {ks}", payload[pos]),
            ));
        }
        Ok(PqCodes {
            m,
            ks,
            codes: payload,
        })
    }
}
