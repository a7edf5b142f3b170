//! Accelerators for the IVF index's filter stage (FusionANNS §3, steps 5–7): for a *batch of
//! queries*, deduplicate each query's gathered candidate ids, score every unique candidate by
//! PQ-ADC against the query's distance table, and keep the query's `top_n` by PQ distance.
//!
//! One trait, [`Accelerator`], two backends chosen at open time ([`AccelKind`]):
//!
//! - [`CpuAccel`]: the default and the reference — per-query stamp-array dedup, the table
//!   lookups of [`crate::quant::pq::QueryTable::distance`], a partial select for the top-n.
//! - `GpuAccel` (feature `gpu`): `wgpu` compute shaders (WGSL) with the PQ codes resident in
//!   GPU memory. It runs on any Vulkan driver, Mesa's software lavapipe included, so the same
//!   kernels execute in CI and on a real GPU.
//!
//! ## The contract both backends meet
//!
//! - A candidate's RaBitQ distance (a job with [`FilterJob::rbq`]) is
//!   [`RbqQuery::distance`](crate::quant::rabitq::RbqQuery::distance): exact integers from the
//!   bit planes, then a fixed sequence of `f32` operations the GPU kernel repeats with every
//!   product rounded on its own (no fused multiply-add).
//! - A candidate's PQ distance is the sum of its table entries in the order of
//!   [`adc_distance`]: four accumulators (subspace `s` goes to accumulator `s mod 4`, each
//!   summed in increasing `s`), then `(a0 + a1) + (a2 + a3)`. Both backends add the same `f32`s
//!   in the same order, so their distances are equal bit for bit.
//! - A query's result is its unique candidates ordered by `(distance, id)`, cut to `top_n`,
//!   padded with `u32::MAX` / `+∞` when it has fewer.
//! - `unique[q]` is the number of distinct ids query `q` gathered (the PQ distances computed).
//!
//! Work is submitted and collected separately ([`Accelerator::submit`] → [`FilterPending`]) so
//! a caller can re-rank one batch on the CPU while the accelerator scores the next (FusionANNS
//! Figure 6). The CPU backend computes at submission.

mod cpu;
pub mod flash;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "gpu")]
pub mod gpu_flash;

pub use cpu::CpuAccel;

use std::sync::Arc;

use crate::quant::pq::{PqCodes, MAX_CENTROIDS};

/// Entries of one subspace's row in a distance table.
pub const TABLE_ROW: usize = MAX_CENTROIDS;

/// Which accelerator to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccelKind {
    /// SIMD and threads on the host: the reference.
    #[default]
    Cpu,
    /// Compute shaders through `wgpu`; an error when no adapter is found.
    Gpu,
    /// The GPU when an adapter is found, else the CPU.
    Auto,
}

impl AccelKind {
    /// `cpu`, `gpu` or `auto`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
            Self::Auto => "auto",
        }
    }
}

impl std::str::FromStr for AccelKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            "auto" => Ok(Self::Auto),
            other => Err(format!("unknown accelerator {other:?} (cpu, gpu, auto)")),
        }
    }
}

/// What an opened accelerator is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AccelInfo {
    /// `cpu` or `gpu`.
    pub backend: &'static str,
    /// The device: the CPU, or the GPU adapter's name, driver and type.
    pub adapter: String,
    /// Bytes of PQ codes resident on the device.
    pub resident_bytes: u64,
}

/// One adapter `wgpu` enumerates (what `trawl info --accel` lists, whichever is opened).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AdapterSummary {
    /// The adapter's name (`NVIDIA H100 80GB HBM3`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The graphics API it is reached through (`Vulkan`).
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu` or `Other`.
    pub device_type: String,
    /// The driver's name and version string.
    pub driver: String,
    /// PCI vendor id.
    pub vendor: u32,
    /// PCI device id.
    pub device: u32,
}

/// Every adapter `wgpu` finds on this machine, of every backend this build has (empty without
/// the `gpu` feature). [`open`] takes the first high-performance one among them.
pub fn adapters() -> Vec<AdapterSummary> {
    #[cfg(feature = "gpu")]
    {
        gpu::enumerate_adapters()
    }
    #[cfg(not(feature = "gpu"))]
    {
        Vec::new()
    }
}

/// Why an accelerator failed.
#[derive(Debug, thiserror::Error)]
pub enum AccelError {
    /// No usable GPU adapter (no Vulkan driver, or none with what the kernels need).
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    /// This build of trawl has no GPU backend.
    #[error("this build of trawl has no GPU backend (built without the `gpu` feature)")]
    NotBuilt,
    /// The batch is malformed (offsets not increasing, an id out of range, a table of the
    /// wrong size).
    #[error("bad filter batch: {0}")]
    BadBatch(String),
    /// The device failed (out of memory, lost device, a mapping error).
    #[error("accelerator failed: {0}")]
    Device(String),
}

impl AccelError {
    /// What kind of failure this is.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            Self::NoAdapter(_) | Self::NotBuilt => K::InvalidInput,
            Self::BadBatch(_) => K::Internal,
            Self::Device(_) => K::Storage,
        }
    }
}

/// One batch of queries for the filter stage, owned so it can be in flight while the caller
/// works on something else.
#[derive(Debug, Clone, Default)]
pub struct FilterJob {
    /// Bytes per code (`M`).
    pub m: usize,
    /// PQ distance tables: `nq × m × 256` entries, query-major, then subspace, then centroid
    /// (empty when the codes are RaBitQ's).
    pub tables: Vec<f32>,
    /// RaBitQ's prepared queries, one per query (empty when the codes are PQ's).
    pub rbq: Vec<crate::quant::rabitq::RbqQuery>,
    /// RaBitQ on a CPU backend with FastScan lists ([`CpuAccel::with_lists`]): the lists each
    /// query probes, `lists[list_offsets[q]..list_offsets[q + 1]]`, scored in place of gathered
    /// ids (then `ids` is empty). Empty `list_offsets`: the candidates are `ids`.
    pub lists: Vec<u32>,
    /// `nq + 1` offsets into `lists`, or empty.
    pub list_offsets: Vec<u32>,
    /// `nq + 1` non-decreasing offsets into `ids`: query `q`'s candidates are
    /// `ids[offsets[q]..offsets[q + 1]]`.
    pub offsets: Vec<u32>,
    /// Gathered candidate ids (duplicates allowed: a vector replicated into several probed
    /// lists appears once per list).
    pub ids: Vec<u32>,
    /// Candidates kept per query.
    pub top_n: usize,
}

impl FilterJob {
    /// Queries in the batch.
    pub fn queries(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Query `q`'s gathered ids.
    pub fn candidates(&self, q: usize) -> &[u32] {
        &self.ids[self.offsets[q] as usize..self.offsets[q + 1] as usize]
    }

    /// Query `q`'s table (`m × 256` entries).
    pub fn table(&self, q: usize) -> &[f32] {
        let t = self.m * TABLE_ROW;
        &self.tables[q * t..(q + 1) * t]
    }

    /// Checks the batch against codes of `m` bytes for `n` vectors.
    pub fn validate(&self, n: usize, m: usize) -> Result<(), AccelError> {
        let bad = |s: String| Err(AccelError::BadBatch(s));
        if self.m != m {
            return bad(format!("codes have {m} bytes, the batch says {}", self.m));
        }
        if self.offsets.is_empty() {
            return bad("no offsets (a batch of q queries has q + 1)".into());
        }
        let nq = self.queries();
        if !self.rbq.is_empty() {
            check_rbq(&self.rbq, self.tables.len(), nq, m)?;
        } else if self.tables.len() != nq * m * TABLE_ROW {
            return bad(format!(
                "{} table entries for {nq} queries of {m} subspaces",
                self.tables.len()
            ));
        }
        if self.offsets[0] != 0
            || self.offsets.windows(2).any(|w| w[0] > w[1])
            || *self.offsets.last().unwrap_or(&0) as usize != self.ids.len()
        {
            return bad("offsets must start at 0, not decrease, and end at ids.len()".into());
        }
        if let Some(&id) = self.ids.iter().find(|&&id| id as usize >= n) {
            return bad(format!("candidate id {id} out of range (n = {n})"));
        }
        if self.top_n == 0 {
            return bad("top_n must be at least 1".into());
        }
        if !self.list_offsets.is_empty()
            && (self.list_offsets.len() != nq + 1
                || self.list_offsets[0] != 0
                || self.list_offsets.windows(2).any(|w| w[0] > w[1])
                || *self.list_offsets.last().unwrap_or(&0) as usize != self.lists.len()
                || self.rbq.is_empty()
                || !self.ids.is_empty())
        {
            return bad(
                "list offsets must be q + 1, start at 0, not decrease and end at lists.len(), \
                 with RaBitQ queries and no gathered ids"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Checks a job's RaBitQ queries: one for each of `queries`, no PQ table entries beside them
/// (`tables`), each scoring codes of `m` bytes.
pub(crate) fn check_rbq(
    rbq: &[crate::quant::rabitq::RbqQuery],
    tables: usize,
    queries: usize,
    m: usize,
) -> Result<(), AccelError> {
    if rbq.len() != queries || tables != 0 {
        return Err(AccelError::BadBatch(format!(
            "{} RaBitQ queries and {tables} table entries for {queries} queries",
            rbq.len()
        )));
    }
    match rbq.iter().find(|q| q.code_bytes() != m) {
        Some(q) => Err(AccelError::BadBatch(format!(
            "a RaBitQ query scores {}-byte codes, the codes have {m}",
            q.code_bytes()
        ))),
        None => Ok(()),
    }
}

/// Refuses RaBitQ queries the GPU kernels could not score exactly
/// ([`RbqQuery::gpu_exact`](crate::quant::rabitq::RbqQuery::gpu_exact)).
#[cfg(feature = "gpu")]
pub(crate) fn check_rbq_gpu(rbq: &[crate::quant::rabitq::RbqQuery]) -> Result<(), AccelError> {
    match rbq.iter().find(|q| !q.gpu_exact()) {
        Some(q) => Err(AccelError::Device(format!(
            "RaBitQ codes of {} bits per dimension are scored exactly by the CPU backend only \
             at this dimension (the GPU kernel's integers would round)",
            q.bits()
        ))),
        None => Ok(()),
    }
}

/// The filter stage's result for a batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilterOutput {
    /// Candidates kept per query (the job's `top_n`).
    pub top_n: usize,
    /// `nq × top_n` ids ordered by `(distance, id)` per query, `u32::MAX` past the end.
    pub ids: Vec<u32>,
    /// Their PQ distances, `+∞` past the end.
    pub dists: Vec<f32>,
    /// Distinct candidates per query (PQ distances computed).
    pub unique: Vec<u32>,
}

impl FilterOutput {
    /// Query `q`'s kept ids and distances (without the padding).
    pub fn query(&self, q: usize) -> (&[u32], &[f32]) {
        let r = q * self.top_n..(q + 1) * self.top_n;
        let ids = &self.ids[r.clone()];
        let len = ids.iter().position(|&i| i == u32::MAX).unwrap_or(ids.len());
        (&ids[..len], &self.dists[r.start..r.start + len])
    }
}

/// A submitted batch.
pub trait FilterPending: Send {
    /// Blocks until the batch is scored.
    fn wait(self: Box<Self>) -> Result<FilterOutput, AccelError>;
}

/// A batch already scored (the CPU backend's submissions).
#[derive(Debug)]
pub struct Ready(pub Result<FilterOutput, AccelError>);

impl FilterPending for Ready {
    fn wait(self: Box<Self>) -> Result<FilterOutput, AccelError> {
        self.0
    }
}

/// The filter stage's executor, with the PQ codes resident on its device.
pub trait Accelerator: Send + Sync + std::fmt::Debug {
    /// What it is.
    fn info(&self) -> AccelInfo;
    /// Starts scoring `job`. The job is only read during the call (a backend copies what it
    /// needs), so the caller may reuse its buffers for the next batch at once.
    fn submit(&self, job: &FilterJob) -> Result<Box<dyn FilterPending>, AccelError>;
    /// Scores `job` and waits for it.
    fn filter(&self, job: FilterJob) -> Result<FilterOutput, AccelError> {
        self.submit(&job)?.wait()
    }
}

/// The PQ distance both backends compute: see the module docs for the order of the sums.
#[inline]
pub fn adc_distance(table: &[f32], code: &[u8]) -> f32 {
    // Four subspaces per step, one to each accumulator: accumulator j still receives the
    // subspaces s ≡ j (mod 4) in increasing order, so the sums are those of the contract,
    // bit for bit. A step's table rows are one fixed-size array, so the lookups (a u8 plus a
    // row offset) need no bounds checks; the accumulators are four locals, not an array, so
    // they stay in registers.
    let (mut a0, mut a1, mut a2, mut a3) = (0f32, 0f32, 0f32, 0f32);
    let full = code.len() / 4;
    for (rows, c) in table
        .chunks_exact(ADC_STEP)
        .zip(code.chunks_exact(4))
        .take(full)
    {
        let rows = step_rows(rows);
        a0 += rows[usize::from(c[0])];
        a1 += rows[TABLE_ROW + usize::from(c[1])];
        a2 += rows[2 * TABLE_ROW + usize::from(c[2])];
        a3 += rows[3 * TABLE_ROW + usize::from(c[3])];
    }
    let mut acc = [a0, a1, a2, a3];
    for (s, &c) in code.iter().enumerate().skip(full * 4) {
        acc[s & 3] += table[s * TABLE_ROW + usize::from(c)];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// [`adc_distance`] of two codes at once, each bit for bit equal to it: the two codes' eight
/// accumulator chains are independent, so the CPU overlaps their additions. Not inlined: in
/// a caller's loop the accumulators were spilled to the stack.
#[inline(never)]
pub fn adc_distance2(table: &[f32], x: &[u8], y: &[u8]) -> (f32, f32) {
    if x.len() != y.len() {
        return (adc_distance(table, x), adc_distance(table, y));
    }
    let (mut a0, mut a1, mut a2, mut a3) = (0f32, 0f32, 0f32, 0f32);
    let (mut b0, mut b1, mut b2, mut b3) = (0f32, 0f32, 0f32, 0f32);
    let full = x.len() / 4;
    for ((rows, c), d) in table
        .chunks_exact(ADC_STEP)
        .zip(x.chunks_exact(4))
        .zip(y.chunks_exact(4))
        .take(full)
    {
        let rows = step_rows(rows);
        a0 += rows[usize::from(c[0])];
        b0 += rows[usize::from(d[0])];
        a1 += rows[TABLE_ROW + usize::from(c[1])];
        b1 += rows[TABLE_ROW + usize::from(d[1])];
        a2 += rows[2 * TABLE_ROW + usize::from(c[2])];
        b2 += rows[2 * TABLE_ROW + usize::from(d[2])];
        a3 += rows[3 * TABLE_ROW + usize::from(c[3])];
        b3 += rows[3 * TABLE_ROW + usize::from(d[3])];
    }
    let (mut a, mut b) = ([a0, a1, a2, a3], [b0, b1, b2, b3]);
    for s in full * 4..x.len() {
        a[s & 3] += table[s * TABLE_ROW + usize::from(x[s])];
        b[s & 3] += table[s * TABLE_ROW + usize::from(y[s])];
    }
    ((a[0] + a[1]) + (a[2] + a[3]), (b[0] + b[1]) + (b[2] + b[3]))
}

/// Table entries of one step of [`adc_distance`]: four subspaces' rows.
/// [`adc_distance`] when the sum stays at most `bound`, bit for bit; `+∞` once a partial
/// sum (checked every eight subspaces) passes it. Only for tables without negative entries,
/// whose partial sums never decrease: a code cut off is farther than `bound`.
#[inline]
pub fn adc_distance_within(table: &[f32], code: &[u8], bound: f32) -> f32 {
    let (mut a0, mut a1, mut a2, mut a3) = (0f32, 0f32, 0f32, 0f32);
    let full = code.len() / 4;
    for (step, (rows, c)) in table
        .chunks_exact(ADC_STEP)
        .zip(code.chunks_exact(4))
        .take(full)
        .enumerate()
    {
        let rows = step_rows(rows);
        a0 += rows[usize::from(c[0])];
        a1 += rows[TABLE_ROW + usize::from(c[1])];
        a2 += rows[2 * TABLE_ROW + usize::from(c[2])];
        a3 += rows[3 * TABLE_ROW + usize::from(c[3])];
        if step % 2 == 1 && (a0 + a1) + (a2 + a3) > bound {
            return f32::INFINITY;
        }
    }
    let mut acc = [a0, a1, a2, a3];
    for (s, &c) in code.iter().enumerate().skip(full * 4) {
        acc[s & 3] += table[s * TABLE_ROW + usize::from(c)];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// [`adc_distance_within`] of two codes of the same length at once (eight independent
/// sums): each result is its code's [`adc_distance`] bit for bit, or `+∞` once both partial
/// sums have passed `bound` (each is then farther than `bound`).
#[inline]
pub fn adc_distance2_within(table: &[f32], x: &[u8], y: &[u8], bound: f32) -> (f32, f32) {
    if x.len() != y.len() {
        return (
            adc_distance_within(table, x, bound),
            adc_distance_within(table, y, bound),
        );
    }
    let (mut a0, mut a1, mut a2, mut a3) = (0f32, 0f32, 0f32, 0f32);
    let (mut b0, mut b1, mut b2, mut b3) = (0f32, 0f32, 0f32, 0f32);
    let full = x.len() / 4;
    for (step, ((rows, c), d)) in table
        .chunks_exact(ADC_STEP)
        .zip(x.chunks_exact(4))
        .zip(y.chunks_exact(4))
        .take(full)
        .enumerate()
    {
        let rows = step_rows(rows);
        a0 += rows[usize::from(c[0])];
        b0 += rows[usize::from(d[0])];
        a1 += rows[TABLE_ROW + usize::from(c[1])];
        b1 += rows[TABLE_ROW + usize::from(d[1])];
        a2 += rows[2 * TABLE_ROW + usize::from(c[2])];
        b2 += rows[2 * TABLE_ROW + usize::from(d[2])];
        a3 += rows[3 * TABLE_ROW + usize::from(c[3])];
        b3 += rows[3 * TABLE_ROW + usize::from(d[3])];
        if step % 2 == 1 && (a0 + a1) + (a2 + a3) > bound && (b0 + b1) + (b2 + b3) > bound {
            return (f32::INFINITY, f32::INFINITY);
        }
    }
    let (mut a, mut b) = ([a0, a1, a2, a3], [b0, b1, b2, b3]);
    for s in full * 4..x.len() {
        a[s & 3] += table[s * TABLE_ROW + usize::from(x[s])];
        b[s & 3] += table[s * TABLE_ROW + usize::from(y[s])];
    }
    ((a[0] + a[1]) + (a[2] + a[3]), (b[0] + b[1]) + (b[2] + b[3]))
}

const ADC_STEP: usize = 4 * TABLE_ROW;

#[inline(always)]
fn step_rows(rows: &[f32]) -> &[f32; ADC_STEP] {
    let Ok(rows) = <&[f32; ADC_STEP]>::try_from(rows) else {
        unreachable!("chunks_exact yields chunks of ADC_STEP")
    };
    rows
}

/// Opens the accelerator `kind` over `codes`. `Auto` falls back to the CPU when no GPU
/// adapter is found (or the build has no GPU backend); `Gpu` is then an error.
pub fn open(kind: AccelKind, codes: Arc<PqCodes>) -> Result<Arc<dyn Accelerator>, AccelError> {
    match kind {
        AccelKind::Cpu => Ok(Arc::new(CpuAccel::new(codes))),
        AccelKind::Gpu => open_gpu(&codes),
        AccelKind::Auto => match open_gpu(&codes) {
            Ok(a) => Ok(a),
            Err(AccelError::NoAdapter(_) | AccelError::NotBuilt) => {
                Ok(Arc::new(CpuAccel::new(codes)))
            }
            Err(e) => Err(e),
        },
    }
}

#[cfg(feature = "gpu")]
fn open_gpu(codes: &PqCodes) -> Result<Arc<dyn Accelerator>, AccelError> {
    Ok(Arc::new(gpu::GpuAccel::new(codes)?))
}

#[cfg(not(feature = "gpu"))]
fn open_gpu(_codes: &PqCodes) -> Result<Arc<dyn Accelerator>, AccelError> {
    Err(AccelError::NotBuilt)
}

/// Opens the GPU backend of FlashANNS's search step over `codes`, whose nodes are `groups`
/// of them when given ([`AccelError::NotBuilt`] without the `gpu` feature,
/// [`AccelError::NoAdapter`] without a GPU).
pub fn open_flash_gpu(
    codes: &PqCodes,
    groups: Option<&flash::Groups>,
) -> Result<Arc<dyn flash::FlashAccel>, AccelError> {
    #[cfg(feature = "gpu")]
    {
        Ok(Arc::new(gpu_flash::GpuFlash::grouped(codes, groups)?))
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (codes, groups);
        Err(AccelError::NotBuilt)
    }
}

#[cfg(test)]
mod flash_tests;
#[cfg(all(test, feature = "gpu"))]
mod gpu_tests;
#[cfg(test)]
mod tests;
