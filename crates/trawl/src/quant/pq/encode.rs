//! Encoding vectors into PQ codes, in parallel, and the [`PqCodes`] container.

use rayon::prelude::*;

use crate::data::Matrix;
use crate::kernels::kmeans::TransposedCentroids;
use crate::kernels::Element;
use crate::progress::Control;
use crate::quant::pq::{PqError, ProductQuantizer};

/// Rows per parallel encoding task (fixed, so the work split never depends on threads).
const ROWS_PER_TASK: usize = 4096;

/// The PQ codes of `n` vectors: `n × M` bytes, row-major and contiguous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PqCodes {
    pub(super) m: usize,
    pub(super) ks: usize,
    pub(super) codes: Vec<u8>,
}

impl PqCodes {
    /// Wraps `n × m` code bytes whose values are all below `ks`; `None` when inconsistent.
    pub fn from_vec(codes: Vec<u8>, m: usize, ks: usize) -> Option<Self> {
        let ok = m >= 1
            && (1..=crate::quant::pq::MAX_CENTROIDS).contains(&ks)
            && codes.len().is_multiple_of(m)
            && codes.iter().all(|&c| usize::from(c) < ks);
        ok.then_some(Self { m, ks, codes })
    }

    /// Number of encoded vectors.
    pub fn n(&self) -> usize {
        self.codes.len() / self.m
    }

    /// Bytes per code (`M`).
    pub fn m(&self) -> usize {
        self.m
    }

    /// Centroids per subspace of the quantiser that made the codes.
    pub fn centroids_per_subspace(&self) -> usize {
        self.ks
    }

    /// The code of vector `i`. Panics if `i >= n()`.
    #[inline]
    pub fn code(&self, i: usize) -> &[u8] {
        &self.codes[i * self.m..(i + 1) * self.m]
    }

    /// Asks the CPU to start loading the code of vector `i` (no effect when out of range).
    #[inline]
    pub fn prefetch(&self, i: usize) {
        if let Some(c) = self.codes.get(i * self.m..(i + 1) * self.m) {
            crate::mem::prefetch_read(c);
        }
    }

    /// All codes, row-major.
    pub fn as_bytes(&self) -> &[u8] {
        &self.codes
    }
}

/// Per-subspace transposed codebooks for fast nearest-centroid search.
pub(super) struct Encoder<'a> {
    pq: &'a ProductQuantizer,
    books: Vec<TransposedCentroids>,
}

impl<'a> Encoder<'a> {
    pub(super) fn new(pq: &'a ProductQuantizer) -> Self {
        let books = (0..pq.m())
            .map(|s| {
                let w = pq.bounds[s + 1] - pq.bounds[s];
                TransposedCentroids::from_rows(pq.codebook(s), w, pq.ks)
            })
            .collect();
        Self { pq, books }
    }

    /// Encodes a prepared (`f32`, normalised for cosine, rotated with OPQ) vector.
    #[inline]
    pub(super) fn encode_prepared(&self, x: &[f32], out: &mut [u8]) {
        for ((o, book), b) in out
            .iter_mut()
            .zip(&self.books)
            .zip(self.pq.bounds.windows(2))
        {
            *o = book.nearest(&x[b[0]..b[1]]).0 as u8;
        }
    }
}

impl ProductQuantizer {
    /// Encodes every row of `data` in parallel into `n × M` contiguous bytes.
    pub fn encode<T: Element>(&self, data: &Matrix<T>, ctl: &Control) -> Result<PqCodes, PqError> {
        self.check_len("vector", self.dim, data.dim())?;
        let m = self.m();
        let enc = Encoder::new(self);
        let mut codes = vec![0u8; data.n() * m];
        let bar = ctl.bar("PQ encode", data.n() as u64);
        codes
            .par_chunks_mut(ROWS_PER_TASK * m)
            .enumerate()
            .try_for_each(|(t, out)| {
                ctl.check()?;
                let mut buf = vec![0f32; self.dim];
                let mut tmp = vec![0f32; self.dim];
                for (i, o) in out.chunks_exact_mut(m).enumerate() {
                    let row = t * ROWS_PER_TASK + i;
                    if !self.prepare_rotated(data.row(row), &mut tmp, &mut buf) {
                        return Err(PqError::NonFinite { row });
                    }
                    enc.encode_prepared(&buf, o);
                }
                let rows = out.len() / m;
                // A mapped source does not stay resident behind the encoder.
                data.release_rows(t * ROWS_PER_TASK, t * ROWS_PER_TASK + rows);
                bar.inc(rows as u64);
                Ok(())
            })?;
        bar.finish_and_clear();
        Ok(PqCodes {
            m,
            ks: self.ks,
            codes,
        })
    }

    /// Encodes one vector into `out` (`M` bytes).
    pub fn encode_one<T: Element>(&self, x: &[T], out: &mut [u8]) -> Result<(), PqError> {
        self.check_len("vector", self.dim, x.len())?;
        self.check_len("code", self.m(), out.len())?;
        let mut buf = vec![0f32; self.dim];
        let mut tmp = vec![0f32; self.dim];
        if !self.prepare_rotated(x, &mut tmp, &mut buf) {
            return Err(PqError::NonFinite { row: 0 });
        }
        Encoder::new(self).encode_prepared(&buf, out);
        Ok(())
    }
}
