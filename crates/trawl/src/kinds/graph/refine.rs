//! Loading the decoupled layout's in-memory refinement codes ([`crate::quant::sq`]).

use std::time::Instant;

use crate::kernels::DType;
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
    /// Seconds to build them (two sequential scans of the vector files).
    pub secs: f64,
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
    /// PQ distances (fewer vector reads for the same recall where PQ is coarse). Built from
    /// two sequential scans of the vector files (ranges, then codes); the memory they take is
    /// reported apart ([`crate::kinds::graph::MemoryReport::refine_bytes`]).
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
        drop(by_segment);
        let report = RefineReport {
            bits,
            vectors: n,
            bytes: codes.heap_bytes(),
            secs: 0.0,
        };
        if let Some(d) = self.layout.decoupled_mut() {
            d.set_refine(Some(codes));
        }
        Ok(RefineReport {
            secs: t0.elapsed().as_secs_f64(),
            ..report
        })
    }
}
