//! The first pass of writing a vector file: the chunks' base vectors and the segments' code
//! lengths.

use super::CompressedGeometry;
use crate::kinds::graph::layout::decoupled::huffman;

/// What the first pass over the vectors decided: each chunk's base vector (or none) and each
/// segment's code lengths.
#[derive(Debug, Clone)]
pub struct VectorPlan {
    pub(super) geo: CompressedGeometry,
    /// Per chunk: the base vector when the chunk is XOR-coded.
    pub(super) bases: Vec<Option<Vec<u8>>>,
    /// Per segment, per lane: code lengths.
    pub(super) lengths: Vec<Vec<[u8; 256]>>,
}

impl VectorPlan {
    /// Chunks that XOR with a base.
    pub fn xor_chunks(&self) -> usize {
        self.bases.iter().filter(|b| b.is_some()).count()
    }
}

/// First pass: counts bytes per position in each chunk, picks the base vectors, and at the end
/// of each segment runs the entropy test and builds the segment's code lengths.
#[derive(Debug)]
pub struct VectorPlanner {
    geo: CompressedGeometry,
    pos_counts: Vec<u32>,
    in_chunk: u64,
    next: u64,
    /// The segment's chunks so far: base vector and per-lane byte counts without and with
    /// the XOR.
    pending: Vec<PendingChunk>,
    plan: VectorPlan,
}

type LaneCounts = Vec<[u64; 256]>;

#[derive(Debug)]
struct PendingChunk {
    base: Vec<u8>,
    raw: LaneCounts,
    xor: LaneCounts,
}

impl VectorPlanner {
    /// A planner for `geo`.
    pub fn new(geo: CompressedGeometry) -> Result<Self, String> {
        geo.check()?;
        let v = geo.vector_bytes();
        Ok(Self {
            geo,
            pos_counts: vec![0; v * 256],
            in_chunk: 0,
            next: 0,
            pending: Vec::new(),
            plan: VectorPlan {
                geo,
                bases: Vec::new(),
                lengths: Vec::new(),
            },
        })
    }

    /// Counts the next vector (ids in order).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() != self.geo.vector_bytes() || self.next >= self.geo.n {
            return Err(format!(
                "vector {} of {} bytes (expected {} bytes, {} vectors)",
                self.next,
                bytes.len(),
                self.geo.vector_bytes(),
                self.geo.n
            ));
        }
        for (p, &b) in bytes.iter().enumerate() {
            self.pos_counts[p * 256 + b as usize] += 1;
        }
        self.in_chunk += 1;
        self.next += 1;
        if self.in_chunk == self.geo.chunk_vectors || self.next == self.geo.n {
            self.close_chunk();
        }
        if self.next.is_multiple_of(self.geo.segment_vectors) || self.next == self.geo.n {
            self.close_segment();
        }
        Ok(())
    }

    /// Chooses each chunk of the segment raw or XOR-coded so that the segment's code tables,
    /// built over all its chunks, are as small as can be: start from the better of all-raw and
    /// all-XOR, then flip single chunks while that lowers the segment's per-lane entropy. (A
    /// per-chunk choice alone can mix raw and XOR-ed bytes under one table, whose entropy is
    /// then above either's.)
    fn close_segment(&mut self) {
        let lanes = self.geo.lanes();
        let chunks = std::mem::take(&mut self.pending);
        let total = |modes: &[bool]| -> LaneCounts {
            let mut t = vec![[0u64; 256]; lanes];
            for (c, &x) in chunks.iter().zip(modes) {
                let src = if x { &c.xor } else { &c.raw };
                for (tl, sl) in t.iter_mut().zip(src) {
                    for s in 0..256 {
                        tl[s] += sl[s];
                    }
                }
            }
            t
        };
        let h = |t: &LaneCounts| t.iter().map(huffman::entropy_bits).sum::<f64>();
        let all_raw = vec![false; chunks.len()];
        let all_xor = vec![true; chunks.len()];
        let (mut modes, mut best) = {
            let (hr, hx) = (h(&total(&all_raw)), h(&total(&all_xor)));
            if hx < hr {
                (all_xor, hx)
            } else {
                (all_raw, hr)
            }
        };
        for _ in 0..2 {
            let mut changed = false;
            for i in 0..modes.len() {
                modes[i] = !modes[i];
                let e = h(&total(&modes));
                if e < best {
                    best = e;
                    changed = true;
                } else {
                    modes[i] = !modes[i];
                }
            }
            if !changed {
                break;
            }
        }
        let counts = total(&modes);
        self.plan
            .lengths
            .push(counts.iter().map(huffman::lane_lengths).collect());
        for (c, x) in chunks.into_iter().zip(modes) {
            self.plan.bases.push(x.then_some(c.base));
        }
    }

    fn close_chunk(&mut self) {
        let v = self.geo.vector_bytes();
        let lanes = self.geo.lanes();
        let mut base = vec![0u8; v];
        let mut raw = vec![[0u64; 256]; lanes];
        let mut xor = vec![[0u64; 256]; lanes];
        for (p, b) in base.iter_mut().enumerate() {
            let counts = &self.pos_counts[p * 256..(p + 1) * 256];
            let mut best = 0usize;
            for s in 1..256 {
                if counts[s] > counts[best] {
                    best = s;
                }
            }
            *b = best as u8;
            for s in 0..256 {
                let c = u64::from(counts[s]);
                raw[p % lanes][s] += c;
                xor[p % lanes][s ^ best] += c;
            }
        }
        self.pending.push(PendingChunk { base, raw, xor });
        self.pos_counts.fill(0);
        self.in_chunk = 0;
    }

    /// The plan, once every vector is counted.
    pub fn finish(self) -> Result<VectorPlan, String> {
        if self.next != self.geo.n {
            return Err(format!("{} of {} vectors counted", self.next, self.geo.n));
        }
        Ok(self.plan)
    }
}
