//! Vector quantisers: compact codes of vectors and fast approximate distances to them.
//!
//! This folder owns training quantisers, encoding vectors into codes, and the per-query
//! tables that turn a code into an approximate distance. It does not own where codes live on
//! disk next to the graph (that is `kinds::graph::layout`) nor the search that uses them.
//!
//! [`Quantiser`] guides the searches: [`pq::ProductQuantizer`] (product quantisation with 8-bit
//! codes and asymmetric distance computation, optionally OPQ) or [`rabitq::RaBitQuantizer`]
//! (Extended RaBitQ, 1–8 bits per dimension, an unbiased estimate with an error bound);
//! [`sq::RefineCodes`] (4- or 8-bit scalar codes) sharpen
//! the decoupled layout's re-rank order.

pub mod pq;
pub mod rabitq;
pub mod sq;

use std::path::Path;

use crate::data::Matrix;
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::{Element, Metric};
use crate::progress::Control;
use crate::quant::pq::{PqCodes, PqError, PqParams, ProductQuantizer, QueryTable};
use crate::quant::rabitq::{RaBitQuantizer, RbqError, RbqParams, RbqQuery};

/// A trainable vector quantiser with asymmetric (query-table) distances.
///
/// Kept small on purpose: train on a matrix, encode a matrix, build a table for one query.
pub trait Quantizer: Sized {
    /// User-facing training parameters.
    type Params;
    /// The codes of many vectors.
    type Codes;
    /// A per-query distance table.
    type Table: DistanceTable;
    /// The error of every operation.
    type Error: std::error::Error;

    /// Learns the quantiser from `data` for distances of `metric`.
    fn train<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        params: &Self::Params,
        ctl: &Control,
    ) -> Result<Self, Self::Error>;

    /// Encodes every row of `data`.
    fn encode<T: Element>(
        &self,
        data: &Matrix<T>,
        ctl: &Control,
    ) -> Result<Self::Codes, Self::Error>;

    /// The distance table of one query.
    fn query_table<T: Element>(&self, query: &[T]) -> Result<Self::Table, Self::Error>;
}

/// Approximate distances from one query to encoded vectors.
pub trait DistanceTable {
    /// Bytes of one code.
    fn code_bytes(&self) -> usize;
    /// The approximate distance to the vector with code `code` (`code_bytes()` long).
    fn distance(&self, code: &[u8]) -> f32;
}

/// Which quantiser an index navigates with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "quant", rename_all = "lowercase")]
pub enum QuantKind {
    /// Product quantisation (optionally OPQ): `pq_bytes` bytes per vector.
    #[default]
    Pq,
    /// Extended RaBitQ with `bits` bits per dimension (1…8).
    #[serde(rename = "rabitq")]
    RaBitQ {
        /// Bits per dimension.
        bits: u8,
    },
}

impl QuantKind {
    /// `"pq"` or `"rabitq"`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Pq => "pq",
            Self::RaBitQ { .. } => "rabitq",
        }
    }
}

/// Why training, encoding or querying a quantiser failed.
#[derive(Debug, thiserror::Error)]
pub enum QuantError {
    /// Product quantisation.
    #[error("product quantisation: {0}")]
    Pq(#[from] PqError),
    /// RaBitQ.
    #[error("RaBitQ: {0}")]
    RaBitQ(#[from] RbqError),
}

impl QuantError {
    /// What kind of failure this is.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Pq(e) => e.kind(),
            Self::RaBitQ(e) => e.kind(),
        }
    }
}

/// The quantiser of an index: PQ (with OPQ) or RaBitQ. Both make fixed-size codes kept as
/// [`PqCodes`] (a flat `n × code_bytes` matrix) and score them through a per-query
/// [`QuantQuery`]; everything that stores, moves or merges codes is the same for both.
#[derive(Debug, Clone)]
pub enum Quantiser {
    /// Product quantisation.
    Pq(ProductQuantizer),
    /// RaBitQ.
    RaBitQ(RaBitQuantizer),
}

/// A query prepared for one [`Quantiser`]'s codes.
#[derive(Debug, Clone)]
pub enum QuantQuery {
    /// PQ's distance table.
    Pq(QueryTable),
    /// RaBitQ's prepared query.
    RaBitQ(RbqQuery),
}

impl Quantiser {
    /// Trains the quantiser `kind` on `data` (PQ from `pq`; RaBitQ with `pq.seed`).
    pub fn train<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        kind: QuantKind,
        pq: &PqParams,
        ctl: &Control,
    ) -> Result<Self, QuantError> {
        Ok(match kind {
            QuantKind::Pq => Self::Pq(ProductQuantizer::train(data, metric, pq, ctl)?),
            QuantKind::RaBitQ { bits } => {
                let p = RbqParams {
                    bits,
                    seed: pq.seed,
                    ..RbqParams::default()
                };
                Self::RaBitQ(RaBitQuantizer::train(data, metric, &p, ctl)?)
            }
        })
    }

    /// Which quantiser this is.
    pub fn kind(&self) -> QuantKind {
        match self {
            Self::Pq(_) => QuantKind::Pq,
            Self::RaBitQ(r) => QuantKind::RaBitQ { bits: r.bits() },
        }
    }

    /// The PQ quantiser, when this is one.
    pub fn as_pq(&self) -> Option<&ProductQuantizer> {
        match self {
            Self::Pq(p) => Some(p),
            Self::RaBitQ(_) => None,
        }
    }

    /// The RaBitQ quantiser, when this is one.
    pub fn as_rabitq(&self) -> Option<&RaBitQuantizer> {
        match self {
            Self::Pq(_) => None,
            Self::RaBitQ(r) => Some(r),
        }
    }

    /// What it is, for a person: `PQ 32 B`, `OPQ 32 B`, `RaBitQ 4 bits (200 B)`.
    pub fn describe(&self) -> String {
        match self {
            Self::Pq(p) if p.rotation().is_some() => format!("OPQ {} B", p.m()),
            Self::Pq(p) => format!("PQ {} B", p.m()),
            Self::RaBitQ(r) => format!("RaBitQ {} bits ({} B)", r.bits(), r.code_bytes()),
        }
    }

    /// The metric.
    pub fn metric(&self) -> Metric {
        match self {
            Self::Pq(p) => p.metric(),
            Self::RaBitQ(r) => r.metric(),
        }
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        match self {
            Self::Pq(p) => p.dim(),
            Self::RaBitQ(r) => r.dim(),
        }
    }

    /// Bytes of one code.
    pub fn m(&self) -> usize {
        match self {
            Self::Pq(p) => p.m(),
            Self::RaBitQ(r) => r.code_bytes(),
        }
    }

    /// Heap bytes of the quantiser itself (codebooks, centroid, rotation).
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Self::Pq(p) => p.heap_bytes(),
            Self::RaBitQ(r) => r.heap_bytes(),
        }
    }

    /// Encodes every row of `data`.
    pub fn encode<T: Element>(
        &self,
        data: &Matrix<T>,
        ctl: &Control,
    ) -> Result<PqCodes, QuantError> {
        Ok(match self {
            Self::Pq(p) => p.encode(data, ctl)?,
            Self::RaBitQ(r) => r.encode(data, ctl)?,
        })
    }

    /// Encodes one vector into `out` (`m()` bytes).
    pub fn encode_one<T: Element>(&self, x: &[T], out: &mut [u8]) -> Result<(), QuantError> {
        match self {
            Self::Pq(p) => p.encode_one(x, out)?,
            Self::RaBitQ(r) => r.encode_one(x, out)?,
        }
        Ok(())
    }

    /// The vector `code` approximates, into `out` (`dim` values).
    pub fn decode(&self, code: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
        match self {
            Self::Pq(p) => p.decode(code, out)?,
            Self::RaBitQ(r) => r.decode(code, out)?,
        }
        Ok(())
    }

    /// An empty query of this quantiser, to be filled by [`Quantiser::fill_query`].
    pub fn new_query(&self) -> QuantQuery {
        match self {
            Self::Pq(p) => QuantQuery::Pq(QueryTable::new(p.m())),
            Self::RaBitQ(_) => QuantQuery::RaBitQ(RbqQuery::default()),
        }
    }

    /// Prepares `query` into `out` (made by [`Quantiser::new_query`] of this quantiser).
    pub fn fill_query<T: Element>(
        &self,
        query: &[T],
        out: &mut QuantQuery,
    ) -> Result<(), QuantError> {
        match (self, &mut *out) {
            (Self::Pq(p), QuantQuery::Pq(t)) => p.fill_table(query, t)?,
            (Self::RaBitQ(r), QuantQuery::RaBitQ(q)) => r.fill_query(query, q)?,
            _ => {
                *out = self.query(query)?;
            }
        }
        Ok(())
    }

    /// The prepared query of `query`.
    pub fn query<T: Element>(&self, query: &[T]) -> Result<QuantQuery, QuantError> {
        Ok(match self {
            Self::Pq(p) => QuantQuery::Pq(p.query_table(query)?),
            Self::RaBitQ(r) => QuantQuery::RaBitQ(r.query(query)?),
        })
    }

    /// Writes the quantiser to `path` (atomically). Returns the file size.
    pub fn save(&self, path: &Path) -> Result<u64, FileError> {
        match self {
            Self::Pq(p) => p.save(path),
            Self::RaBitQ(r) => r.save(path),
        }
    }

    /// Reads a quantiser file of either kind (told apart by its magic).
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let mut magic = [0u8; 8];
        {
            use std::io::Read;
            let mut f = std::fs::File::open(path).map_err(|e| FileError::new(path, e.into()))?;
            // A file shorter than a magic is reported by the PQ reader's own checks.
            let _ = f
                .read(&mut magic)
                .map_err(|e| FileError::new(path, e.into()))?;
        }
        if magic == rabitq::file::RBQ_MAGIC {
            Ok(Self::RaBitQ(RaBitQuantizer::load(path)?))
        } else {
            Ok(Self::Pq(ProductQuantizer::load(path)?))
        }
    }

    /// Checks that `codes` (read from `path`) are codes of this quantiser.
    pub fn check_codes(&self, codes: &PqCodes, path: &Path) -> Result<(), FileError> {
        match self {
            Self::Pq(p) if codes.m() != p.m() => Err(FileError::new(
                path,
                FileErrorKind::Invalid(format!(
                    "codes of {} bytes, expected {} for this PQ quantiser",
                    codes.m(),
                    p.m()
                )),
            )),
            Self::Pq(_) => Ok(()),
            Self::RaBitQ(r) => r.check_codes(codes, path),
        }
    }
}

impl QuantQuery {
    /// Bytes of the codes this query scores.
    pub fn m(&self) -> usize {
        match self {
            Self::Pq(t) => t.m(),
            Self::RaBitQ(q) => q.code_bytes(),
        }
    }

    /// The smallest distance to the consecutive codes in `codes` when it is at most `limit`
    /// (equal to [`QuantQuery::distance`]'s); otherwise some value above `limit`. PQ tables of
    /// L2 and cosine stop summing a code early once it is past the limit.
    #[inline]
    pub fn min_within(&self, codes: &[u8], m: usize, limit: f32) -> f32 {
        match self {
            Self::Pq(t) => t.min_within(codes, limit),
            Self::RaBitQ(q) => codes
                .chunks_exact(m.max(1))
                .map(|c| q.distance(c))
                .fold(f32::INFINITY, f32::min),
        }
    }

    /// The estimated distance to the vector with `code`.
    #[inline]
    pub fn distance(&self, code: &[u8]) -> f32 {
        match self {
            Self::Pq(t) => t.distance(code),
            Self::RaBitQ(q) => q.distance(code),
        }
    }

    /// The estimated distance and a lower bound of the true one at confidence parameter
    /// `eps` (RaBitQ's error bound); PQ's estimate has no bound, and its lower bound is `−∞`.
    #[inline]
    pub fn bounded(&self, code: &[u8], eps: f32) -> (f32, f32) {
        match self {
            Self::Pq(t) => (t.distance(code), f32::NEG_INFINITY),
            Self::RaBitQ(q) => {
                let (d, s) = q.estimate(code);
                (d, d - eps * s)
            }
        }
    }

    /// Distances to the codes of vectors `ids` in `codes`; `+∞` for an id out of range.
    pub fn distances_of(&self, codes: &PqCodes, ids: &[u32], out: &mut [f32]) {
        match self {
            Self::Pq(t) => t.distances_of(codes, ids, out),
            Self::RaBitQ(q) => {
                let n = codes.n();
                for (o, &id) in out.iter_mut().zip(ids) {
                    *o = if (id as usize) < n {
                        q.distance(codes.code(id as usize))
                    } else {
                        f32::INFINITY
                    };
                }
            }
        }
    }

    /// Whether its estimates come with an error bound (RaBitQ).
    pub fn has_bound(&self) -> bool {
        matches!(self, Self::RaBitQ(_))
    }

    /// The PQ table, when this is one.
    pub fn as_pq(&self) -> Option<&QueryTable> {
        match self {
            Self::Pq(t) => Some(t),
            Self::RaBitQ(_) => None,
        }
    }
}
