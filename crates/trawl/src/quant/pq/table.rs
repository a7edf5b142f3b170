//! Per-query ADC tables: `M × 256` partial distances, summed by table lookups.
//!
//! | metric | entry `(s, c)` | distance |
//! |---|---|---|
//! | L2 | `‖q_s − c‖²` | `Σ_s entry` = squared L2 to the reconstruction |
//! | inner product | `−⟨q_s, c⟩` | `Σ_s entry` = `−⟨q, x̃⟩` |
//! | cosine | `½‖q̂_s − c‖²`, `q̂ = q / ‖q‖` | `Σ_s entry` = `½‖q̂ − x̃‖²` |
//!
//! For cosine the table holds half the squared L2 distance between the normalised query and
//! the reconstruction `x̃` of the normalised vector: for unit vectors it equals `1 − cos`, and
//! it ranks better than `1 − ⟨q̂, x̃⟩` because it also charges the reconstruction's own error
//! (measured on GloVe-400K, disk beam search at equal L: recall@10 0.835 against 0.826 at L = 10).
//! With OPQ the query is rotated first (`q ↦ R q`, after the normalisation for cosine); the
//! rotation preserves distances, so the entries keep their meaning.
//! Entries for centroids a quantiser does not have (`c ≥ ks`) are `+∞`.
//! This is the hot path of disk search: [`QueryTable::distance`] sums four subspaces per step
//! into four independent accumulators, with no bounds checks (a `u8` always indexes a
//! 256-entry row).

use crate::kernels::{Element, Metric};
use crate::quant::pq::{PqCodes, PqError, ProductQuantizer, MAX_CENTROIDS};
use crate::quant::DistanceTable;

/// The ADC table of one query.
#[derive(Debug, Clone)]
pub struct QueryTable {
    rows: Vec<[f32; MAX_CENTROIDS]>,
    bias: f32,
    /// Every entry is `≥ 0` and the bias 0 (L2, cosine): partial sums only grow, so a sum
    /// past a limit may stop early ([`QueryTable::min_within`]).
    monotone: bool,
}

impl QueryTable {
    /// An empty table for codes of `m` bytes, to be filled by [`ProductQuantizer::fill_table`].
    pub fn new(m: usize) -> Self {
        Self {
            rows: vec![[0.0; MAX_CENTROIDS]; m],
            bias: 0.0,
            monotone: false,
        }
    }

    /// Bytes per code.
    pub fn m(&self) -> usize {
        self.rows.len()
    }

    /// The whole table, `m × 256` entries, subspace-major (what an accelerator uploads).
    pub fn flat(&self) -> &[f32] {
        self.rows.as_flattened()
    }

    /// Entry `(s, c)`: the partial distance of subspace `s` for centroid `c`.
    pub fn entry(&self, s: usize, c: u8) -> f32 {
        self.rows[s][usize::from(c)]
    }

    /// The constant added to every distance (0 for every metric today; kept for formats with an
    /// offset).
    pub fn bias(&self) -> f32 {
        self.bias
    }

    /// Approximate distance to the vector with `code` (`m()` bytes; extra bytes are ignored
    /// and missing ones count as zero).
    #[inline]
    pub fn distance(&self, code: &[u8]) -> f32 {
        let mut acc = [0f32; 4];
        let mut rows = self.rows.chunks_exact(4);
        let mut codes = code.chunks_exact(4);
        for (r, c) in (&mut rows).zip(&mut codes) {
            acc[0] += r[0][usize::from(c[0])];
            acc[1] += r[1][usize::from(c[1])];
            acc[2] += r[2][usize::from(c[2])];
            acc[3] += r[3][usize::from(c[3])];
        }
        for (r, &c) in rows.remainder().iter().zip(codes.remainder()) {
            acc[0] += r[usize::from(c)];
        }
        self.bias + ((acc[0] + acc[1]) + (acc[2] + acc[3]))
    }

    /// The smallest distance to the consecutive codes in `codes` (`m()` bytes each) when it
    /// is at most `limit`, equal bit for bit to [`QueryTable::distance`]'s; otherwise some
    /// value above `limit` (`+∞` with no code). On a monotone table (L2, cosine) a code whose
    /// partial sum passes the smaller of `limit` and the best so far is abandoned, checked
    /// every 8 subspaces.
    pub fn min_within(&self, codes: &[u8], limit: f32) -> f32 {
        let m = self.m().max(1);
        let mut best = f32::INFINITY;
        if !self.monotone {
            for c in codes.chunks_exact(m) {
                best = best.min(self.distance(c));
            }
            return best;
        }
        // Two codes at a time (eight independent sums), then the odd one.
        let mut pairs = codes.chunks_exact(2 * m);
        for pair in &mut pairs {
            let (x, y) = pair.split_at(m);
            for d in self.distance2_within(x, y, best.min(limit)) {
                if d < best {
                    best = d;
                }
            }
        }
        if let Some(code) = pairs.remainder().get(..m) {
            let d = self.distance2_within(code, code, best.min(limit))[0];
            if d < best {
                best = d;
            }
        }
        best
    }

    /// The distances to codes `x` and `y` (`m()` bytes each, monotone table), each equal to
    /// [`QueryTable::distance`]'s bit for bit, or `+∞` for both once both partial sums
    /// (checked every 8 subspaces) have passed `bound`.
    #[inline]
    fn distance2_within(&self, x: &[u8], y: &[u8], bound: f32) -> [f32; 2] {
        let (mut a, mut b) = ([0f32; 4], [0f32; 4]);
        let mut rows = self.rows.chunks_exact(4);
        let mut xs = x.chunks_exact(4);
        let mut ys = y.chunks_exact(4);
        let mut step = 0;
        for ((r, c), d) in (&mut rows).zip(&mut xs).zip(&mut ys) {
            a[0] += r[0][usize::from(c[0])];
            b[0] += r[0][usize::from(d[0])];
            a[1] += r[1][usize::from(c[1])];
            b[1] += r[1][usize::from(d[1])];
            a[2] += r[2][usize::from(c[2])];
            b[2] += r[2][usize::from(d[2])];
            a[3] += r[3][usize::from(c[3])];
            b[3] += r[3][usize::from(d[3])];
            step += 1;
            if step % 2 == 0
                && (a[0] + a[1]) + (a[2] + a[3]) > bound
                && (b[0] + b[1]) + (b[2] + b[3]) > bound
            {
                return [f32::INFINITY; 2];
            }
        }
        let rest = rows.remainder();
        for ((r, &c), &d) in rest.iter().zip(xs.remainder()).zip(ys.remainder()) {
            a[0] += r[usize::from(c)];
            b[0] += r[usize::from(d)];
        }
        [
            self.bias + ((a[0] + a[1]) + (a[2] + a[3])),
            self.bias + ((b[0] + b[1]) + (b[2] + b[3])),
        ]
    }

    /// Distances to consecutive codes: `out[i]` for `codes[i·m..(i+1)·m]`. Stops at the
    /// shorter of the two; each result equals [`QueryTable::distance`] bit for bit.
    pub fn distances(&self, codes: &[u8], out: &mut [f32]) {
        let m = self.m().max(1);
        for (o, c) in out.iter_mut().zip(codes.chunks_exact(m)) {
            *o = self.distance(c);
        }
    }

    /// Distances to the codes of vectors `ids` in `codes`; `+∞` for an id out of range.
    pub fn distances_of(&self, codes: &PqCodes, ids: &[u32], out: &mut [f32]) {
        let n = codes.n();
        for (o, &id) in out.iter_mut().zip(ids) {
            *o = if (id as usize) < n {
                self.distance(codes.code(id as usize))
            } else {
                f32::INFINITY
            };
        }
    }
}

/// A query's ADC table with `u16` entries, for scans over many codes: `M × 256 × 2` bytes
/// (24 KiB at 48-byte codes, inside a core's L1 where the `f32` table's 48 KiB is not).
/// Entry `(s, c)` is `round((e(s, c) − min_s) / step)`, `min_s` the row's smallest finite
/// entry and `step` the widest row's span over 65535; `+∞` entries (centroids a quantiser
/// does not have, which no code names) become 65535. A distance is the `u32` sum, which
/// orders codes as the `f32` table does up to `M · step / 2`
/// ([`QuantTable::to_f32`] maps it back).
#[derive(Debug, Clone)]
pub struct QuantTable {
    rows: Vec<[u16; MAX_CENTROIDS]>,
    step: f32,
    offset: f32,
}

impl QueryTable {
    /// This table with `u16` entries ([`QuantTable`]).
    pub fn quantized(&self) -> QuantTable {
        let finite = |r: &[f32; MAX_CENTROIDS]| {
            r.iter()
                .copied()
                .filter(|x| x.is_finite())
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                })
        };
        let spans: Vec<(f32, f32)> = self.rows.iter().map(finite).collect();
        let widest = spans
            .iter()
            .filter(|(lo, hi)| lo <= hi)
            .map(|(lo, hi)| hi - lo)
            .fold(0f32, f32::max);
        let step = if widest > 0.0 { widest / 65535.0 } else { 1.0 };
        let mut offset = self.bias;
        let rows = self
            .rows
            .iter()
            .zip(&spans)
            .map(|(r, &(lo, hi))| {
                let lo = if lo <= hi { lo } else { 0.0 };
                offset += lo;
                let mut q = [u16::MAX; MAX_CENTROIDS];
                for (o, &x) in q.iter_mut().zip(r) {
                    if x.is_finite() {
                        *o = ((x - lo) / step).round().clamp(0.0, 65535.0) as u16;
                    }
                }
                q
            })
            .collect();
        QuantTable { rows, step, offset }
    }
}

impl QuantTable {
    /// Bytes per code.
    pub fn m(&self) -> usize {
        self.rows.len()
    }

    /// The quantised distance to the vector with `code` (as [`QueryTable::distance`]).
    #[inline]
    pub fn distance(&self, code: &[u8]) -> u32 {
        let mut acc = [0u32; 4];
        let mut rows = self.rows.chunks_exact(4);
        let mut codes = code.chunks_exact(4);
        for (r, c) in (&mut rows).zip(&mut codes) {
            acc[0] += u32::from(r[0][usize::from(c[0])]);
            acc[1] += u32::from(r[1][usize::from(c[1])]);
            acc[2] += u32::from(r[2][usize::from(c[2])]);
            acc[3] += u32::from(r[3][usize::from(c[3])]);
        }
        for (r, &c) in rows.remainder().iter().zip(codes.remainder()) {
            acc[0] += u32::from(r[usize::from(c)]);
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    /// Quantised distances to the codes of vectors `ids` in `codes`; `u32::MAX` for an id
    /// out of range. The codes of the ids 16 on (`PREFETCH_AHEAD`) are fetched ahead (a scan's
    /// ids are scattered over the codes: each code is a cache miss otherwise).
    pub fn distances_of(&self, codes: &PqCodes, ids: &[u32], out: &mut [u32]) {
        let n = codes.n();
        for (i, (o, &id)) in out.iter_mut().zip(ids).enumerate() {
            if let Some(&ahead) = ids.get(i + PREFETCH_AHEAD) {
                if (ahead as usize) < n {
                    prefetch(codes.code(ahead as usize));
                }
            }
            *o = if (id as usize) < n {
                self.distance(codes.code(id as usize))
            } else {
                u32::MAX
            };
        }
    }

    /// The `f32` distance a quantised one stands for (within `M · step / 2`).
    pub fn to_f32(&self, d: u32) -> f32 {
        self.offset + d as f32 * self.step
    }

    /// The quantisation step.
    pub fn step(&self) -> f32 {
        self.step
    }
}

/// How many ids ahead [`QuantTable::distances_of`] fetches codes.
pub const PREFETCH_AHEAD: usize = 16;

/// Hints the CPU to load the cache lines of `bytes` (a no-op off x86-64).
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let base = bytes.as_ptr().cast::<i8>();
        // Every line from the first byte's to the last byte's.
        let first = base as usize & !63;
        let end = base as usize + bytes.len();
        for line in (first..end).step_by(64) {
            // SAFETY: prefetch never faults; the address is in a line `bytes` touches.
            unsafe {
                _mm_prefetch(
                    base.wrapping_add(line.saturating_sub(base as usize)),
                    _MM_HINT_T0,
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

impl DistanceTable for QueryTable {
    fn code_bytes(&self) -> usize {
        self.m()
    }
    fn distance(&self, code: &[u8]) -> f32 {
        QueryTable::distance(self, code)
    }
}

impl ProductQuantizer {
    /// The ADC table of `query`.
    pub fn query_table<T: Element>(&self, query: &[T]) -> Result<QueryTable, PqError> {
        let mut t = QueryTable::new(self.m());
        self.fill_table(query, &mut t)?;
        Ok(t)
    }

    /// Refills `table` for `query`, reusing its memory (resized if its `m` differs).
    pub fn fill_table<T: Element>(
        &self,
        query: &[T],
        table: &mut QueryTable,
    ) -> Result<(), PqError> {
        table.rows.resize(self.m(), [0.0; MAX_CENTROIDS]);
        table.bias = 0.0;
        table.monotone = false;
        self.fill_rows(query, &mut table.rows)?;
        // Sums of squares: never negative (`+∞` for missing centroids).
        table.monotone = matches!(self.metric, Metric::L2 | Metric::Cosine);
        Ok(())
    }

    /// Fills the rows of `query`'s table into `rows` (`M` rows; the layout of
    /// [`QueryTable::flat`]), for a caller that keeps tables elsewhere (an accelerator batch).
    pub fn fill_rows<T: Element>(
        &self,
        query: &[T],
        rows: &mut [[f32; MAX_CENTROIDS]],
    ) -> Result<(), PqError> {
        self.check_len("query", self.dim, query.len())?;
        self.check_len("table rows", self.m(), rows.len())?;
        let mut q = vec![0f32; self.dim];
        let mut tmp = if self.rotation.is_some() {
            vec![0f32; self.dim]
        } else {
            Vec::new()
        };
        if !self.prepare_rotated(query, &mut tmp, &mut q) {
            return Err(PqError::NonFinite { row: 0 });
        }
        let ks = self.ks;
        for (s, row) in rows.iter_mut().enumerate() {
            let (lo, hi) = (self.bounds[s], self.bounds[s + 1]);
            let qs = &q[lo..hi];
            // Dimension by dimension over all centroids at once (contiguous, so the loop runs
            // in vector lanes); each entry still sums its dimensions in increasing order from
            // −0 (where `Iterator::sum` starts), as a per-centroid sum would, so the values are
            // the same bit for bit.
            let book = &self.by_dim[ks * lo..ks * hi];
            let (acc, rest) = row.split_at_mut(ks);
            rest.fill(f32::INFINITY);
            acc.fill(-0.0);
            for (&qd, col) in qs.iter().zip(book.chunks_exact(ks)) {
                match self.metric {
                    Metric::L2 | Metric::Cosine => {
                        for (a, &c) in acc.iter_mut().zip(col) {
                            *a += (qd - c) * (qd - c);
                        }
                    }
                    Metric::InnerProduct => {
                        for (a, &c) in acc.iter_mut().zip(col) {
                            *a += qd * c;
                        }
                    }
                }
            }
            match self.metric {
                Metric::L2 => {}
                Metric::Cosine => acc.iter_mut().for_each(|a| *a *= 0.5),
                Metric::InnerProduct => acc.iter_mut().for_each(|a| *a = -*a),
            }
        }
        Ok(())
    }
}
