//! The GPU backend of the filter stage: `wgpu` compute shaders (WGSL) over PQ codes resident in
//! GPU memory, after FusionANNS §3 — the distance table in workgroup memory, deduplication by a
//! hash in workgroup memory, and a per-query top-n selection.
//!
//! ## Resident data
//!
//! [`GpuAccel::new`] uploads all codes once, each vector's `M` bytes packed into
//! `ceil(M / 4)` little-endian `u32` words (zero-padded), in **one** storage buffer. When the
//! packed codes exceed the device's largest storage binding
//! (`max_storage_buffer_binding_size`, also bounded by `max_buffer_size`) the constructor
//! returns [`AccelError::Device`] saying so; the codes are not split across bindings.
//!
//! ## A batch: three kernels
//!
//! [`Accelerator::submit`] validates the job, uploads its tables, candidate ids and per-query
//! layout, records three compute passes and a copy into a readback buffer, and submits; the
//! returned [`FilterPending`] waits for the device and decodes the readback.
//!
//! 1. **dedup** (`gpu/dedup.wgsl`), one workgroup per query: an open-addressing hash of the
//!    query's ids (linear probing, `atomicCompareExchangeWeak`) in workgroup memory, or in the
//!    query's region of a global hash when its candidates exceed half the workgroup's slots.
//!    The first invocation to claim an id appends it to the query's distinct list; the count is
//!    `unique[q]`.
//! 2. **score** (`gpu/score.wgsl`), `ceil(max candidates / CHUNK)` workgroups per query: PQ-ADC
//!    of each distinct candidate with the query's table in workgroup memory when `M × 1 KiB`
//!    fits the device's workgroup storage, else read from the storage buffer, summed in exactly
//!    the order of [`crate::accel::adc_distance`] (plain `f32` adds), and stored as a `u32` key that
//!    orders like `f32::total_cmp` (negative: all bits flipped; else the sign bit set).
//! 3. **select** (`gpu/select.wgsl`), one workgroup per query: a radix select over the
//!    `(key, id)` pairs finds the `top_n`-th, the kept pairs are gathered and bitonic-sorted in
//!    workgroup memory (or the query's region of a global buffer when they do not fit), and the
//!    sorted pairs, padded with `(+∞, u32::MAX)`, are written out.
//!
//! Pairs are unique per query (the ids are), so the order — and the result — is exactly the
//! CPU backend's. A batch whose buffers would exceed the device's binding limit is split into
//! slices of consecutive queries, submitted together; a single query that cannot fit is an
//! [`AccelError::Device`].
//!
//! The device plumbing the flash kernels share (opening an adapter, error scopes, uploading the
//! codes) is in `device`.

mod device;

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wgpu::util::DeviceExt;

use crate::accel::{AccelError, AccelInfo, Accelerator, FilterJob, FilterOutput, FilterPending};
use crate::accel::{Ready, TABLE_ROW};
use crate::quant::pq::PqCodes;

pub(crate) use device::{
    device_error, enumerate_adapters, open_device, padded, upload_codes, Opened, Scopes,
};

/// Invocations per workgroup in every kernel (the WGSL's `WG`).
const WG: u32 = 256;
/// Distinct candidates a score workgroup handles.
const CHUNK: u32 = 4096;
/// Workgroup bytes the kernels use besides the hash / sort arrays.
const WG_SLACK: u32 = 64;
/// Bytes of the select kernel's histogram.
const HIST_BYTES: u32 = 256 * 4;
/// How long `wait` waits for a readback's mapping once its submission has completed.
const MAP_TIMEOUT: Duration = Duration::from_secs(60);
/// Select flag: sort in the global buffer even when the kept pairs fit workgroup memory.
const FLAG_GLOBAL_SORT: u32 = 1;

const COMMON_WGSL: &str = include_str!("gpu/common.wgsl");
const DEDUP_WGSL: &str = include_str!("gpu/dedup.wgsl");
const SCORE_WGSL: &str = include_str!("gpu/score.wgsl");
const SCORE_RBQ_WGSL: &str = concat!(
    include_str!("gpu/score_rbq.wgsl"),
    "\n",
    include_str!("gpu/rbq.wgsl")
);
const SELECT_WGSL: &str = include_str!("gpu/select.wgsl");

/// Where each kernel keeps its data (tests force the global-memory paths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GpuOptions {
    /// Score from the table in the storage buffer even when it fits workgroup memory.
    pub global_table: bool,
    /// Deduplicate every query in the global hash.
    pub global_hash: bool,
    /// Sort every query's kept pairs in the global buffer.
    pub global_sort: bool,
    /// Caps the bytes of a batch's buffers below the device's binding limit (0: no cap), so
    /// tests can split batches into slices.
    pub binding_cap: u64,
    /// Caps the workgroups per dispatch dimension below the device's (0: no cap), so tests
    /// can lay grids out over two dimensions.
    pub group_cap: u32,
}

/// Sizes derived from the device's limits and the codes.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Bytes per code.
    m: usize,
    /// `u32` words per packed code.
    wpc: usize,
    /// Slots of the workgroup dedup hash (a power of two).
    hash_wg: u32,
    /// Pairs the workgroup sort holds (a power of two).
    sort_wg: u32,
    /// The score kernel reads the table from workgroup memory.
    table_in_wg: bool,
    /// The largest buffer a kernel may bind (at most 4 GiB: the kernels index with u32s).
    max_binding: u64,
    /// The largest buffer a batch's slice may use (`max_binding` unless tests cap it).
    batch_binding: u64,
    /// The most workgroups in one dispatch dimension.
    max_groups: u32,
    opts: GpuOptions,
}

/// The filter stage on a GPU through `wgpu`: see the module docs.
pub struct GpuAccel {
    device: wgpu::Device,
    queue: wgpu::Queue,
    codes: wgpu::Buffer,
    n: usize,
    layout: Layout,
    adapter: String,
    resident_bytes: u64,
    dedup: wgpu::ComputePipeline,
    score: wgpu::ComputePipeline,
    /// The score kernel of RaBitQ codes.
    score_rbq: wgpu::ComputePipeline,
    select: wgpu::ComputePipeline,
    /// Device errors no error scope caught (reported by the next failing `wait`).
    uncaptured: Arc<Mutex<Vec<String>>>,
}

impl fmt::Debug for GpuAccel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuAccel")
            .field("adapter", &self.adapter)
            .field("n", &self.n)
            .field("layout", &self.layout)
            .field("resident_bytes", &self.resident_bytes)
            .finish_non_exhaustive()
    }
}

/// The WGSL of one kernel: its constants, the shared code, the kernel.
fn shader_source(l: &Layout, kernel: &str) -> String {
    let tab = if l.table_in_wg { l.m * TABLE_ROW } else { 1 };
    format!(
        "const M: u32 = {m}u;\nconst WPC: u32 = {wpc}u;\nconst HASH_WG: u32 = {h}u;\n\
         const SORT_WG: u32 = {s}u;\nconst TAB_WG: u32 = {tab}u;\n\
         const TABLE_IN_WG: bool = {t};\nconst CHUNK: u32 = {CHUNK}u;\n\n{COMMON_WGSL}\n{kernel}",
        m = l.m,
        wpc = l.wpc,
        h = l.hash_wg,
        s = l.sort_wg,
        t = l.table_in_wg,
    )
}

/// The largest power of two `p` with `p × unit ≤ bytes` (0 when none).
fn pow2_fitting(bytes: u32, unit: u32) -> u32 {
    let most = bytes / unit;
    if most == 0 {
        0
    } else {
        1 << (31 - most.leading_zeros())
    }
}

impl GpuAccel {
    /// Opens the first high-performance adapter `wgpu` finds (software ones such as lavapipe
    /// included), uploads `codes` and compiles the kernels. [`AccelError::NoAdapter`] when
    /// there is no adapter or it lacks what the kernels need; [`AccelError::Device`] when the
    /// codes do not fit one storage binding or the device fails.
    pub fn new(codes: &PqCodes) -> Result<Self, AccelError> {
        Self::with_options(codes, GpuOptions::default())
    }

    pub(crate) fn with_options(codes: &PqCodes, opts: GpuOptions) -> Result<Self, AccelError> {
        let Opened {
            device,
            queue,
            name,
            limits,
            uncaptured,
        } = open_device("trawl filter", 5)?;
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(AccelError::NoAdapter(format!("{name}: {what}")))
            }
        };
        let wg_bytes = limits.max_compute_workgroup_storage_size;
        let hash_wg = pow2_fitting(wg_bytes.saturating_sub(WG_SLACK), 4);
        let sort_wg = pow2_fitting(wg_bytes.saturating_sub(HIST_BYTES + WG_SLACK), 8);
        need(
            hash_wg >= 512 && sort_wg >= 256,
            "less than 4 KiB of workgroup storage",
        )?;

        let m = codes.m();
        let wpc = m.div_ceil(4);
        // The kernels index their buffers with u32s: 4 GiB at most.
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            .min(u64::from(u32::MAX));
        let layout = Layout {
            m,
            wpc,
            hash_wg,
            sort_wg,
            table_in_wg: !opts.global_table && (m * TABLE_ROW * 4) as u64 <= u64::from(wg_bytes),
            max_binding,
            batch_binding: match opts.binding_cap {
                0 => max_binding,
                cap => cap.min(max_binding),
            },
            max_groups: match opts.group_cap {
                0 => limits.max_compute_workgroups_per_dimension,
                cap => cap.min(limits.max_compute_workgroups_per_dimension),
            }
            .max(1),
            opts,
        };

        let n = codes.n();
        let words = n as u64 * wpc as u64;
        let resident_bytes = words * 4;
        if resident_bytes > layout.max_binding {
            return Err(AccelError::Device(format!(
                "the PQ codes take {resident_bytes} bytes packed, more than one storage binding \
                 of {name} holds ({} bytes); the GPU backend keeps them in one binding",
                layout.max_binding
            )));
        }

        let scopes = Scopes::push(&device);
        let codes_buf = upload_codes(&device, codes, wpc);
        // `zero_init`: whether the kernel relies on zeroed workgroup memory (only dedup's hash
        // does; the others write theirs before reading it).
        let pipeline = |kernel: &str, entry: &str, zero_init: bool| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(entry),
                source: wgpu::ShaderSource::Wgsl(shader_source(&layout, kernel).into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    zero_initialize_workgroup_memory: zero_init,
                    ..Default::default()
                },
                cache: None,
            })
        };
        let dedup = pipeline(DEDUP_WGSL, "dedup", true);
        let score = pipeline(SCORE_WGSL, "score", false);
        let score_rbq = pipeline(SCORE_RBQ_WGSL, "score_rbq", false);
        let select = pipeline(SELECT_WGSL, "select_top", false);
        scopes.pop("uploading the codes and compiling the kernels")?;

        Ok(Self {
            device,
            queue,
            codes: codes_buf,
            n,
            layout,
            adapter: name,
            resident_bytes,
            dedup,
            score,
            score_rbq,
            select,
            uncaptured,
        })
    }

    /// Whether the score kernel keeps the query's table in workgroup memory.
    pub fn table_in_workgroup_memory(&self) -> bool {
        self.layout.table_in_wg
    }

    /// Splits the job's queries into slices whose buffers each fit one binding.
    fn plan(&self, job: &FilterJob) -> Result<Vec<Range<usize>>, AccelError> {
        let l = &self.layout;
        let limit = l.batch_binding;
        let nq = job.queries();
        let top_n = job.top_n as u64;
        let table_bytes = match job.rbq.first() {
            Some(q) => (q.gpu_len() * 4) as u64,
            None => (l.m * TABLE_ROW * 4) as u64,
        };
        // Bytes a query adds to each buffer of a slice.
        let sizes = |q: usize| -> [u64; 7] {
            let c = u64::from(job.offsets[q + 1] - job.offsets[q]);
            let (h, s) = self.regions(c, job.top_n);
            [
                c * 4,         // ids
                c * 8,         // cand
                h * 4,         // hash
                s * 8,         // sort
                top_n * 8 + 4, // out (+ its count in the readback)
                table_bytes,   // table
                32,            // qinfo
            ]
        };
        // Score workgroups of a slice: its queries × the chunks of its longest list, in one
        // dispatch grid.
        let max_groups = (u64::from(l.max_groups) * u64::from(l.max_groups)).min(1 << 31);
        let chunks = |q: usize| {
            u64::from(job.offsets[q + 1] - job.offsets[q])
                .div_ceil(u64::from(CHUNK))
                .max(1)
        };
        let mut slices = Vec::new();
        let mut start = 0;
        let mut acc = [0u64; 7];
        let mut most_chunks = 0;
        for q in 0..nq {
            let s = sizes(q);
            if let Some(i) = s.iter().position(|&b| b + 16 > limit) {
                let what = [
                    "ids",
                    "candidates",
                    "hash",
                    "sort",
                    "output",
                    "table",
                    "layout",
                ][i];
                return Err(AccelError::Device(format!(
                    "query {q} needs {} bytes of {what} buffer, more than one binding of {} \
                     holds ({limit} bytes)",
                    s[i], self.adapter
                )));
            }
            let grid = (q - start + 1) as u64 * most_chunks.max(chunks(q));
            if q > start
                && (grid > max_groups || acc.iter().zip(&s).any(|(a, b)| a + b + 16 > limit))
            {
                slices.push(start..q);
                start = q;
                acc = [0; 7];
                most_chunks = 0;
            }
            most_chunks = most_chunks.max(chunks(q));
            for (a, b) in acc.iter_mut().zip(s) {
                *a += b;
            }
        }
        if nq > start {
            slices.push(start..nq);
        }
        Ok(slices)
    }

    /// Slots of a query's global hash region and pairs of its global sort region, for `c`
    /// candidates (0: it uses workgroup memory).
    fn regions(&self, c: u64, top_n: usize) -> (u64, u64) {
        let l = &self.layout;
        let hash = if c > 0 && (l.opts.global_hash || c > u64::from(l.hash_wg / 2)) {
            (2 * c).next_power_of_two()
        } else {
            0
        };
        let keep = c.min(top_n as u64);
        let sort = if keep > 0 && (l.opts.global_sort || keep > u64::from(l.sort_wg)) {
            keep.next_power_of_two()
        } else {
            0
        };
        (hash, sort)
    }

    /// `x × y` workgroups covering `total` (laid out in x, then y).
    fn grid(&self, total: u32) -> (u32, u32) {
        let x = total.clamp(1, self.layout.max_groups);
        (x, total.div_ceil(x).max(1))
    }

    /// Uploads `bytes` (zero-padded to [`padded`]) into a new buffer.
    fn upload(&self, label: &str, bytes: &[u8], usage: wgpu::BufferUsages) -> wgpu::Buffer {
        if bytes.len() as u64 == padded(bytes.len() as u64) {
            return self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents: bytes,
                    usage,
                });
        }
        let mut v = bytes.to_vec();
        v.resize(padded(bytes.len() as u64) as usize, 0);
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: &v,
                usage,
            })
    }

    /// A zeroed buffer of `bytes` (padded).
    fn scratch(&self, label: &str, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded(bytes),
            usage,
            mapped_at_creation: false,
        })
    }

    /// Where each query of slice `qs` lies in the batch's buffers.
    fn slice_layout(&self, job: &FilterJob, qs: Range<usize>) -> SliceLayout {
        let base = job.offsets[qs.start];
        let mut out = SliceLayout {
            qinfo: Vec::with_capacity(qs.len() * 8),
            ..SliceLayout::default()
        };
        for q in qs {
            // RaBitQ: the query's words, its offset in qinfo.
            let tab_off = out.rbq_words.len() as u32;
            if let Some(rq) = job.rbq.get(q) {
                rq.gpu_words(&mut out.rbq_words);
            }
            let c = job.offsets[q + 1] - job.offsets[q];
            let (h, s) = self.regions(u64::from(c), job.top_n);
            out.qinfo.extend_from_slice(&[
                job.offsets[q] - base,
                c,
                out.hash_total as u32,
                h as u32,
                out.sort_total as u32,
                s as u32,
                tab_off,
                0,
            ]);
            out.hash_total += h;
            out.sort_total += s;
            out.most = out.most.max(c);
        }
        out
    }

    /// Records one slice of queries; returns its readback buffer and the bytes of its output.
    fn record(&self, enc: &mut wgpu::CommandEncoder, job: &FilterJob, qs: Range<usize>) -> Slice {
        use wgpu::BufferUsages as U;
        let l = &self.layout;
        let nq = qs.len();
        let base = job.offsets[qs.start];
        let SliceLayout {
            qinfo,
            rbq_words,
            hash_total,
            sort_total,
            most,
        } = self.slice_layout(job, qs.clone());
        let top_n = job.top_n as u32;
        let chunks = most.div_ceil(CHUNK).max(1);
        let flags = if l.opts.global_sort {
            FLAG_GLOBAL_SORT
        } else {
            0
        };
        let params = [nq as u32, top_n, chunks, flags];
        let out_bytes = nq as u64 * u64::from(top_n) * 8;
        let count_bytes = nq as u64 * 4;

        let params = self.upload("params", bytemuck::cast_slice(&params), U::UNIFORM);
        let qinfo = self.upload("qinfo", bytemuck::cast_slice(&qinfo), U::STORAGE);
        let ids = &job.ids[base as usize..job.offsets[qs.end] as usize];
        let cand_bytes = ids.len() as u64 * 8;
        let ids = self.upload("ids", bytemuck::cast_slice(ids), U::STORAGE);
        let tables = if job.rbq.is_empty() {
            let t = l.m * TABLE_ROW;
            let tables = &job.tables[qs.start * t..qs.end * t];
            self.upload("tables", bytemuck::cast_slice(tables), U::STORAGE)
        } else {
            self.upload("tables", bytemuck::cast_slice(&rbq_words), U::STORAGE)
        };
        let score = if job.rbq.is_empty() {
            &self.score
        } else {
            &self.score_rbq
        };
        let hash = self.scratch("hash", hash_total * 4, U::STORAGE);
        let cand = self.scratch("cand", cand_bytes, U::STORAGE);
        let counts = self.scratch("counts", count_bytes, U::STORAGE | U::COPY_SRC);
        let sort = self.scratch("sort", sort_total * 8, U::STORAGE);
        let out = self.scratch("out", out_bytes, U::STORAGE | U::COPY_SRC);
        let readback = self.scratch(
            "readback",
            out_bytes + count_bytes,
            U::MAP_READ | U::COPY_DST,
        );

        let group = |p: &wgpu::ComputePipeline, bufs: [&wgpu::Buffer; 6]| {
            let entries: Vec<_> = bufs
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: b.as_entire_binding(),
                })
                .collect();
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &p.get_bind_group_layout(0),
                entries: &entries,
            })
        };
        let passes = [
            (
                &self.dedup,
                group(&self.dedup, [&params, &qinfo, &ids, &hash, &cand, &counts]),
                nq as u32,
            ),
            (
                score,
                group(
                    score,
                    [&params, &qinfo, &self.codes, &tables, &cand, &counts],
                ),
                nq as u32 * chunks,
            ),
            (
                &self.select,
                group(&self.select, [&params, &qinfo, &cand, &counts, &sort, &out]),
                nq as u32,
            ),
        ];
        for (pipeline, bind, total) in &passes {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind, &[]);
            let (x, y) = self.grid(*total);
            pass.dispatch_workgroups(x, y, 1);
        }
        if out_bytes > 0 {
            enc.copy_buffer_to_buffer(&out, 0, &readback, 0, out_bytes);
        }
        enc.copy_buffer_to_buffer(&counts, 0, &readback, out_bytes, count_bytes);
        Slice {
            nq,
            out_bytes,
            readback,
            mapped: Arc::new(Mutex::new(None)),
        }
    }
}

/// A slice's per-query layout ([`GpuAccel::slice_layout`]).
#[derive(Default)]
struct SliceLayout {
    /// 8 words per query (the WGSL's `QInfo`).
    qinfo: Vec<u32>,
    /// RaBitQ: the queries' words.
    rbq_words: Vec<u32>,
    /// Slots of the global hash and pairs of the global sort the slice uses.
    hash_total: u64,
    sort_total: u64,
    /// The most candidates of one query.
    most: u32,
}

/// One submitted slice of a batch's queries.
struct Slice {
    nq: usize,
    /// Bytes of `(key, id)` pairs at the start of `readback`; the counts follow.
    out_bytes: u64,
    readback: wgpu::Buffer,
    /// The mapping's outcome, once the device has run the slice.
    mapped: Arc<Mutex<Option<Result<(), wgpu::BufferAsyncError>>>>,
}

/// A batch on the GPU.
struct GpuPending {
    device: wgpu::Device,
    submission: wgpu::SubmissionIndex,
    slices: Vec<Slice>,
    top_n: usize,
    uncaptured: Arc<Mutex<Vec<String>>>,
}

/// The f32 whose key (`key_of` in `gpu/common.wgsl`) is `k`.
fn dist_of_key(k: u32) -> f32 {
    f32::from_bits(if k & 0x8000_0000 != 0 {
        k ^ 0x8000_0000
    } else {
        !k
    })
}

impl GpuPending {
    fn device_error(&self, what: String) -> AccelError {
        device_error(&self.uncaptured, what)
    }
}

impl FilterPending for GpuPending {
    fn wait(self: Box<Self>) -> Result<FilterOutput, AccelError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(self.submission.clone()),
                timeout: None,
            })
            .map_err(|e| self.device_error(format!("waiting for the batch: {e}")))?;
        let nq: usize = self.slices.iter().map(|s| s.nq).sum();
        let top_n = self.top_n;
        let mut out = FilterOutput {
            top_n,
            ids: Vec::with_capacity(nq * top_n),
            dists: Vec::with_capacity(nq * top_n),
            unique: Vec::with_capacity(nq),
        };
        for s in &self.slices {
            // The submission is done; another thread's poll may still be running this
            // mapping's callback: wait for it (bounded, should the device misbehave).
            let since = Instant::now();
            let outcome = loop {
                let done = s.mapped.lock().map(|mut g| g.take()).unwrap_or(None);
                if let Some(r) = done {
                    break r;
                }
                if since.elapsed() > MAP_TIMEOUT {
                    return Err(self.device_error("the readback never completed".into()));
                }
                self.device
                    .poll(wgpu::PollType::Poll)
                    .map_err(|e| self.device_error(format!("waiting for the batch: {e}")))?;
                std::thread::yield_now();
            };
            outcome.map_err(|e| self.device_error(format!("reading the results back: {e}")))?;
            let view = s
                .readback
                .get_mapped_range(..)
                .map_err(|e| self.device_error(format!("reading the results back: {e}")))?;
            let word = |i: usize| {
                let b = &view[i * 4..i * 4 + 4];
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            };
            for i in 0..s.nq * top_n {
                out.dists.push(dist_of_key(word(2 * i)));
                out.ids.push(word(2 * i + 1));
            }
            let c0 = (s.out_bytes / 4) as usize;
            out.unique.extend((0..s.nq).map(|q| word(c0 + q)));
        }
        Ok(out)
    }
}

impl Accelerator for GpuAccel {
    fn info(&self) -> AccelInfo {
        AccelInfo {
            backend: "gpu",
            adapter: self.adapter.clone(),
            resident_bytes: self.resident_bytes,
        }
    }

    fn submit(&self, job: &FilterJob) -> Result<Box<dyn FilterPending>, AccelError> {
        job.validate(self.n, self.layout.m)?;
        let nq = job.queries();
        if nq == 0 {
            return Ok(Box::new(Ready(Ok(FilterOutput {
                top_n: job.top_n,
                ..Default::default()
            }))));
        }
        if u32::try_from(job.top_n).is_err() {
            return Err(AccelError::Device(format!(
                "top_n {} is too large for the GPU backend",
                job.top_n
            )));
        }
        crate::accel::check_rbq_gpu(&job.rbq)?;
        let plan = self.plan(job)?;
        let scopes = Scopes::push(&self.device);
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("trawl filter batch"),
            });
        let slices: Vec<Slice> = plan
            .into_iter()
            .map(|qs| self.record(&mut enc, job, qs))
            .collect();
        let submission = self.queue.submit([enc.finish()]);
        for s in &slices {
            let slot = s.mapped.clone();
            s.readback.map_async(wgpu::MapMode::Read, .., move |r| {
                if let Ok(mut g) = slot.lock() {
                    *g = Some(r);
                }
            });
        }
        scopes.pop("submitting the batch")?;
        Ok(Box::new(GpuPending {
            device: self.device.clone(),
            submission,
            slices,
            top_n: job.top_n,
            uncaptured: self.uncaptured.clone(),
        }))
    }
}
