//! The decoupled layout's in-memory refinement codes ([`crate::quant::sq`]): loaded from
//! their component ([`crate::kinds::graph::refine_file`]) when the index has a current one
//! of the bits asked for, built from the vector files otherwise; and written, with what
//! sample searches measured them to save.

use std::time::Instant;

use crate::kinds::graph::IndexLayout;

use crate::kernels::DType;
use crate::kinds::graph::refine_file::{self, RefineHeader, RefineSavings, STORED_BITS};
use crate::kinds::graph::DiskIndex;
use crate::progress::Control;
use crate::quant::sq::{RangeBuilder, RefineCodes, REFINE_BITS};
use crate::search::SearchError;

/// What loading the refinement codes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct RefineReport {
    /// Bits per dimension (0: none loaded).
    pub bits: u8,
    /// Slots coded.
    pub vectors: usize,
    /// Bytes of memory the codes hold (codes, norms, grids).
    pub bytes: u64,
    /// Seconds to load or build them.
    pub secs: f64,
    /// Read from the index's `refine.trawl` (else built by two sequential scans of the
    /// vector files).
    pub from_file: bool,
}

/// `bytes` (`dim` elements of `dtype`) as `f32` into `out`.
fn widen(dtype: DType, bytes: &[u8], out: &mut Vec<f32>) {
    out.clear();
    match dtype {
        DType::F32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ),
        DType::U8 => out.extend(bytes.iter().map(|&b| f32::from(b))),
        DType::I8 => out.extend(bytes.iter().map(|&b| f32::from(b as i8))),
    }
}

impl DiskIndex {
    /// Codes every vector of the decoupled layout at `bits` per dimension (4 or 8; 0 drops
    /// the codes) and keeps the codes in memory, where they order the re-rank in place of the
    /// PQ distances (fewer vector reads for the same recall where PQ is coarse). Read from
    /// the index's `refine.trawl` when it holds codes of these bits for this version of the
    /// index; built from two sequential scans of the vector files otherwise (ranges, then
    /// codes). The memory they take is reported apart
    /// ([`crate::kinds::graph::MemoryReport::refine_bytes`]).
    pub fn load_refine(&mut self, bits: u8, ctl: &Control) -> Result<RefineReport, SearchError> {
        let t0 = Instant::now();
        if bits == 0 {
            if let Some(d) = self.layout.decoupled_mut() {
                d.set_refine(None);
            }
            return Ok(RefineReport::default());
        }
        if !REFINE_BITS.contains(&bits) {
            return Err(SearchError::Unsupported(format!(
                "refinement codes take 4 or 8 bits per dimension, not {bits}"
            )));
        }
        let stored = if bits == STORED_BITS {
            self.stored_refine()?
        } else {
            None
        };
        let from_file = stored.is_some();
        let codes = match stored {
            Some(c) => c,
            None => self.build_refine(bits, ctl)?,
        };
        let report = RefineReport {
            bits,
            vectors: codes.len(),
            bytes: codes.heap_bytes(),
            secs: 0.0,
            from_file,
        };
        if let Some(d) = self.layout.decoupled_mut() {
            d.set_refine(Some(codes));
        }
        Ok(RefineReport {
            secs: t0.elapsed().as_secs_f64(),
            ..report
        })
    }

    /// The codes of the index's `refine.trawl`, when it has one for this version of the
    /// index (a stale one is left to be written again; a damaged one is an error).
    fn stored_refine(&self) -> Result<Option<RefineCodes>, SearchError> {
        let path = self.dir().join(refine_file::FILE_NAME);
        if !path.is_file() {
            return Ok(None);
        }
        let fail = |e: crate::dir::FileError| SearchError::Internal(e.to_string());
        let (n, dim, tag) = (self.n() as u64, self.dim(), self.meta().pq_codes_crc);
        let h = RefineHeader::read(&path).map_err(fail)?;
        if !h.fits(n, dim, tag) || h.bits != STORED_BITS {
            return Ok(None);
        }
        let (codes, _) = refine_file::load(&path, n, dim, tag, self.metric()).map_err(fail)?;
        Ok(Some(codes))
    }

    /// The codes of every vector at `bits` per dimension, from two sequential scans of the
    /// decoupled layout's vector files.
    fn build_refine(&self, bits: u8, ctl: &Control) -> Result<RefineCodes, SearchError> {
        let Some(d) = self.layout.decoupled() else {
            return Err(SearchError::Unsupported(
                "refinement codes order the decoupled layout's re-rank; the page-packed \
                 layouts read every expanded node's vector with its record"
                    .into(),
            ));
        };
        let (dtype, metric, n) = (self.dtype(), self.metric(), self.n());
        let io = |e: crate::dir::FileError| SearchError::Internal(e.to_string());
        let total: u64 = d.segments().iter().map(|s| s.geometry().n).sum();
        let bar = ctl.bar("refinement codes", 2 * total);
        let mut ranges = RangeBuilder::new(self.dim());
        let mut row = Vec::with_capacity(self.dim());
        for seg in d.segments() {
            seg.scan(|_, bytes| {
                widen(dtype, bytes, &mut row);
                ranges.observe(&row);
                bar.inc(1);
            })
            .map_err(io)?;
        }
        let mut by_segment = Vec::with_capacity(d.segments().len());
        for seg in d.segments() {
            let mut codes = RefineCodes::new(&ranges, bits, metric, seg.geometry().n as usize)
                .map_err(SearchError::Unsupported)?;
            seg.scan(|l, bytes| {
                widen(dtype, bytes, &mut row);
                codes.set(l as usize, &row);
                bar.inc(1);
            })
            .map_err(io)?;
            by_segment.push(codes);
        }
        bar.finish_and_clear();
        let keys = d.graph().keys().map_err(io)?;
        let mut codes =
            RefineCodes::new(&ranges, bits, metric, n).map_err(SearchError::Unsupported)?;
        for id in 0..n {
            let key = keys
                .as_ref()
                .map_or(id as u32, |k| k.get(id).copied().unwrap_or(u32::MAX));
            let (s, l) = d.loc(id as u32, key);
            if let Some(seg) = by_segment.get(s) {
                codes.copy_from(id, seg, l as usize);
            }
        }
        Ok(codes)
    }

    /// Builds the [`STORED_BITS`] refinement codes of this decoupled index, measures what
    /// they save on sample searches of `queries` (raw vectors of the index's element type,
    /// searched for their 10 nearest at L 15, W 4, no cache, with and without the codes), and
    /// writes both to `path` (`refine.trawl` of a staging directory); returns its bytes.
    pub(crate) fn save_refine(
        &mut self,
        path: &std::path::Path,
        queries: &[u8],
        threads: usize,
        ctl: &Control,
    ) -> Result<u64, crate::kinds::graph::IndexBuildError> {
        const K: usize = 10;
        let (l, w) = (15usize, 4usize);
        let codes = self.build_refine(STORED_BITS, ctl)?;
        let nq = queries.len() / (self.dim() * self.dtype().size_bytes()).max(1);
        let measure = |ix: &Self| ix.sample_pages(queries, K, l, w, threads, ctl);
        let without = self.without_caches(measure)?;
        let old = self
            .layout
            .decoupled_mut()
            .and_then(|d| d.set_refine(Some(codes)));
        let with = self.without_caches(measure);
        let codes = self
            .layout
            .decoupled_mut()
            .and_then(|d| d.set_refine(old))
            .ok_or_else(|| SearchError::Internal("the decoupled layout went away".into()))?;
        let with = with?;
        let per = |p: u64| (p as f64 / nq.max(1) as f64) as f32;
        let savings = RefineSavings {
            samples: nq as u32,
            k: K as u8,
            l: l as u16,
            beam_width: w as u8,
            pages_without: per(without),
            pages_with: per(with),
        };
        Ok(refine_file::save(
            path,
            &codes,
            self.meta().pq_codes_crc,
            &savings,
        )?)
    }

    /// Writes the refinement codes of the decoupled layout just committed
    /// ([`crate::kinds::graph::refine_file`]), in a transaction of their own (an index left
    /// without them by a crash between the two opens without them: they are then built at
    /// open when asked for, and not planned). The sample queries are indexed vectors read
    /// from this (packed) index's records. Returns the file's bytes, the savings measured and
    /// the seconds taken.
    pub(super) fn write_refine(
        &self,
        ctl: &Control,
    ) -> Result<(u64, RefineSavings, f64), crate::kinds::graph::IndexBuildError> {
        let t0 = Instant::now();
        let n = self.n();
        let picks = super::cache_load::sampled_ids(n, refine_file::SAMPLES.min(n));
        let (queries, _) = self.record_vectors(&picks)?;
        // Through the page cache, as the hot-node order is ranked: just written.
        let opts = crate::kinds::graph::OpenOptions {
            direct: false,
            layout: IndexLayout::Decoupled,
            list_cache_bytes: 0,
            ..*self.options()
        };
        let mut fresh = DiskIndex::open(self.dir(), opts)?;
        let txn = self.begin_txn()?;
        let path = txn.path(refine_file::FILE_NAME);
        let bytes = fresh.save_refine(&path, &queries, rayon::current_num_threads(), ctl)?;
        drop(fresh);
        let savings = RefineHeader::read(&path)?.savings;
        let manifest = crate::kinds::graph::files::with_additions(self.dir(), txn.staging())?;
        txn.commit(&manifest)?;
        Ok((bytes, savings, t0.elapsed().as_secs_f64()))
    }
}
