//! PQ files: the quantiser (codebooks) and the codes, each in a trawl envelope
//! ([`crate::layout::header`]: magic, version, length, CRC-32). All integers little-endian.
//!
//! **Quantiser** — magic `TRAWLPQ\0`, version 1, payload:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 1 | metric code ([`Metric::code`]: 0 L2, 1 inner product, 2 cosine) |
//! | 1 | 3 | reserved, zero |
//! | 4 | 4 | `dim`, `u32` |
//! | 8 | 4 | `M` (subspaces = bytes per code), `u32`, `1 ≤ M ≤ dim` |
//! | 12 | 4 | `ks` (centroids per subspace), `u32`, `1 ≤ ks ≤ 256` |
//! | 16 | 4·(M+1) | subspace boundaries, `u32`, strictly increasing from 0 to `dim` |
//! | 20+4M | 4·ks·dim | codebooks, `f32`: subspace `s` is `ks × width(s)` row-major, subspaces in order |
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

use super::{PqCodes, ProductQuantizer, MAX_CENTROIDS};
use crate::kernels::Metric;
use crate::layout::bytes::{ByteReader, ByteWriter, ShortPayload};
use crate::layout::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};

/// Magic of a PQ quantiser file.
pub const PQ_MAGIC: [u8; 8] = *b"TRAWLPQ\0";
/// Current version of the PQ quantiser format.
pub const PQ_VERSION: u32 = 1;
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
        w.bytes(&[0; 3]);
        w.u32(to_u32(path, "dim", self.dim)?);
        w.u32(to_u32(path, "M", self.m())?);
        w.u32(to_u32(path, "ks", self.ks)?);
        for &b in &self.bounds {
            w.u32(to_u32(path, "bound", b)?);
        }
        w.f32s(&self.centroids);
        let mut env = EnvelopeWriter::create(path, PQ_MAGIC, PQ_VERSION)?;
        env.write(&w.into_inner())?;
        env.finish()
    }

    /// Reads a quantiser written by [`ProductQuantizer::save`], verifying it fully.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let (_, payload) = read_envelope(path, PQ_MAGIC, "PQ quantiser", PQ_VERSION)?;
        let mut r = ByteReader::new(&payload);
        let e = short(path);
        let metric_code = r.u8().map_err(&e)?;
        let metric = Metric::from_code(metric_code)
            .ok_or_else(|| invalid(path, format!("unknown metric code {metric_code}")))?;
        if r.bytes(3).map_err(&e)? != [0, 0, 0] {
            return Err(invalid(path, "reserved bytes are not zero"));
        }
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
        let expected = ks * dim * 4;
        if r.remaining() != expected {
            return Err(invalid(
                path,
                format!(
                    "codebooks take {} bytes, expected {expected} for ks {ks} × dim {dim}",
                    r.remaining()
                ),
            ));
        }
        let centroids = r.f32s(ks * dim).map_err(&e)?;
        ProductQuantizer::from_parts(metric, dim, bounds, ks, centroids).ok_or_else(|| {
            invalid(
                path,
                "subspace boundaries not increasing from 0 to dim, or a centroid not finite",
            )
        })
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
