//! The `wgpu` backend of FlashANNS's search step ([`crate::accel::flash`]): PQ codes resident in one
//! storage buffer; per session (one per search thread) the tables, candidate lists and visited
//! hashes of its query slots in GPU buffers; one dispatch per step (`gpu/flash.wgsl`, one
//! workgroup per entry) and one readback of the entries' choices.
//!
//! A step is a dispatch: `wgpu` has no way for a running shader to wait on host memory, so the
//! paper's persistent kernel, whose warps poll per-query completion flags, becomes one
//! dispatch per step over the queries whose records have arrived, while the host reaps the
//! other queries' reads (see `search::flash`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::accel::flash::{
    FlashAccel, FlashSession, FlashShape, Groups, StepJob, StepOutput, MAX_FILL,
};
use crate::accel::gpu::{open_device, padded, upload_codes, Opened, Scopes};
use crate::accel::{AccelError, AccelInfo, TABLE_ROW};
use crate::quant::pq::PqCodes;

const FLASH_WGSL: &str = concat!(
    include_str!("gpu/flash.wgsl"),
    "\n",
    include_str!("gpu/rbq.wgsl")
);
/// Words per entry in the job buffer (the WGSL's `EW`).
const EW: usize = 8;
/// Words per entry in the output (the WGSL's `OW`).
const OW: usize = 4 + 2 * MAX_FILL;
/// How long `wait` waits for a readback's mapping once its submission has completed.
const MAP_TIMEOUT: Duration = Duration::from_secs(60);
/// Workgroup bytes the kernel uses besides its lists.
const WG_SLACK: u64 = 64;

/// The FlashANNS step on a GPU.
pub struct GpuFlash {
    device: wgpu::Device,
    queue: wgpu::Queue,
    codes: wgpu::Buffer,
    /// Codes per group (one word when the nodes are single codes).
    counts: wgpu::Buffer,
    /// Group capacity (0: a node is one code).
    cap: usize,
    /// Nodes.
    n: usize,
    m: usize,
    wpc: usize,
    adapter: String,
    limits: wgpu::Limits,
    resident_bytes: u64,
    /// Pipelines by `(L, RW, H)`.
    pipelines: Mutex<HashMap<(usize, usize, usize), wgpu::ComputePipeline>>,
    uncaptured: Arc<Mutex<Vec<String>>>,
}

impl fmt::Debug for GpuFlash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuFlash")
            .field("adapter", &self.adapter)
            .field("n", &self.n)
            .field("resident_bytes", &self.resident_bytes)
            .finish_non_exhaustive()
    }
}

impl GpuFlash {
    /// Opens the GPU and uploads `codes`, one node per code.
    pub fn new(codes: &PqCodes) -> Result<Self, AccelError> {
        Self::grouped(codes, None)
    }

    /// Opens the GPU and uploads `codes`, and the `groups` of them that are the nodes when
    /// given ([`Groups`]).
    pub fn grouped(codes: &PqCodes, groups: Option<&Groups>) -> Result<Self, AccelError> {
        if let Some(g) = groups {
            g.check(codes.n())?;
        }
        let Opened {
            device,
            queue,
            name,
            limits,
            uncaptured,
        } = open_device("trawl flash", 8)?;
        let m = codes.m();
        let wpc = m.div_ceil(4);
        let counts: &[u32] = groups.map_or(&[0], |g| g.counts());
        let resident_bytes = codes.n() as u64 * wpc as u64 * 4 + 4 * counts.len() as u64;
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            .min(u64::from(u32::MAX));
        if resident_bytes > max_binding {
            return Err(AccelError::Device(format!(
                "the PQ codes take {resident_bytes} bytes packed, more than one storage binding \
                 of {name} holds ({max_binding} bytes)"
            )));
        }
        let scopes = Scopes::push(&device);
        let codes_buf = upload_codes(&device, codes, wpc);
        let counts_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("flash group counts"),
            size: padded(4 * counts.len().max(1) as u64),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&counts_buf, 0, bytemuck::cast_slice(counts));
        scopes.pop("uploading the codes")?;
        Ok(Self {
            device,
            queue,
            codes: codes_buf,
            counts: counts_buf,
            cap: groups.map_or(0, Groups::capacity),
            n: groups.map_or(codes.n(), Groups::nodes),
            m,
            wpc,
            adapter: name,
            limits,
            resident_bytes,
            pipelines: Mutex::new(HashMap::new()),
            uncaptured,
        })
    }

    /// Largest list size the kernel holds in workgroup memory beside `rw` new candidates.
    fn max_list(&self, rw: usize) -> usize {
        let wg = u64::from(self.limits.max_compute_workgroup_storage_size);
        (wg.saturating_sub(WG_SLACK + rw as u64 * 8) / 12) as usize
    }

    fn pipeline(&self, l: usize, rw: usize, h: usize) -> Result<wgpu::ComputePipeline, AccelError> {
        let mut cache = self
            .pipelines
            .lock()
            .map_err(|_| AccelError::Device("pipeline cache poisoned".into()))?;
        if let Some(p) = cache.get(&(l, rw, h)) {
            return Ok(p.clone());
        }
        let src = format!(
            "const M: u32 = {m}u;\nconst WPC: u32 = {wpc}u;\nconst L: u32 = {l}u;\n\
             const RW: u32 = {rw}u;\nconst H: u32 = {h}u;\nconst FMAX: u32 = {MAX_FILL}u;\n\
             const CAP: u32 = {cap}u;\n\n{FLASH_WGSL}",
            m = self.m,
            wpc = self.wpc,
            cap = self.cap,
        );
        let scopes = Scopes::push(&self.device);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("flash step"),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        let p = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("flash step"),
                layout: None,
                module: &module,
                entry_point: Some("step"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    zero_initialize_workgroup_memory: false,
                    ..Default::default()
                },
                cache: None,
            });
        scopes.pop("compiling the flash step kernel")?;
        cache.insert((l, rw, h), p.clone());
        Ok(p)
    }

    fn buffer(&self, label: &str, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded(bytes),
            usage,
            mapped_at_creation: false,
        })
    }
}

impl FlashAccel for GpuFlash {
    fn info(&self) -> AccelInfo {
        AccelInfo {
            backend: "gpu",
            adapter: self.adapter.clone(),
            resident_bytes: self.resident_bytes,
        }
    }

    fn session(&self, shape: FlashShape) -> Result<Box<dyn FlashSession + '_>, AccelError> {
        use wgpu::BufferUsages as U;
        let rw = shape.max_degree.max(1).next_power_of_two();
        if rw > 1024 {
            return Err(AccelError::Device(format!(
                "graph degree {} is above the GPU step kernel's 1024",
                shape.max_degree
            )));
        }
        let most = self.max_list(rw);
        if shape.l == 0 || shape.l > most {
            return Err(AccelError::Device(format!(
                "list size {} does not fit the workgroup memory of {} (at most {most} with \
                 degree {})",
                shape.l, self.adapter, shape.max_degree
            )));
        }
        let h = (2 * shape.max_visited.max(32)).next_power_of_two();
        let slots = shape.slots.max(1) as u64;
        let max_binding = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
            .min(u64::from(u32::MAX));
        let sizes = [
            ("tables", slots * (self.m * TABLE_ROW * 4) as u64),
            ("lists", slots * shape.l as u64 * 16),
            ("visited hashes", slots * h as u64 * 4),
            (
                "job",
                (slots * EW as u64 + slots * shape.max_degree as u64) * 4,
            ),
        ];
        if let Some((what, b)) = sizes.iter().find(|(_, b)| *b > max_binding) {
            return Err(AccelError::Device(format!(
                "{slots} query slots need {b} bytes of {what}, more than one binding of {} holds \
                 ({max_binding} bytes): use a smaller batch",
                self.adapter
            )));
        }
        let pipeline = self.pipeline(shape.l, rw, h)?;
        let scopes = Scopes::push(&self.device);
        let s = GpuSession {
            acc: self,
            shape,
            pipeline,
            params: self.buffer("flash params", 16, U::UNIFORM | U::COPY_DST),
            job: self.buffer("flash job", sizes[3].1, U::STORAGE | U::COPY_DST),
            tables: self.buffer("flash tables", sizes[0].1, U::STORAGE | U::COPY_DST),
            lists: self.buffer("flash lists", sizes[1].1, U::STORAGE),
            lens: self.buffer("flash lens", slots * 4, U::STORAGE),
            hash: self.buffer("flash visited", sizes[2].1, U::STORAGE),
            out: self.buffer("flash out", slots * OW as u64 * 4, U::STORAGE | U::COPY_SRC),
            readback: self.buffer(
                "flash readback",
                slots * OW as u64 * 4,
                U::MAP_READ | U::COPY_DST,
            ),
            words: Vec::new(),
            inflight: None,
        };
        scopes.pop("allocating a flash session")?;
        Ok(Box::new(s))
    }
}

/// A submitted step.
struct InFlight {
    entries: usize,
    submission: wgpu::SubmissionIndex,
    mapped: Arc<Mutex<Option<Result<(), wgpu::BufferAsyncError>>>>,
}

/// One search thread's query slots on the GPU.
struct GpuSession<'a> {
    acc: &'a GpuFlash,
    shape: FlashShape,
    pipeline: wgpu::ComputePipeline,
    params: wgpu::Buffer,
    job: wgpu::Buffer,
    tables: wgpu::Buffer,
    lists: wgpu::Buffer,
    lens: wgpu::Buffer,
    hash: wgpu::Buffer,
    out: wgpu::Buffer,
    readback: wgpu::Buffer,
    words: Vec<u32>,
    inflight: Option<InFlight>,
}

impl GpuSession<'_> {
    fn device_error(&self, what: String) -> AccelError {
        crate::accel::gpu::device_error(&self.acc.uncaptured, what)
    }
}

impl FlashSession for GpuSession<'_> {
    fn submit(&mut self, job: &StepJob) -> Result<(), AccelError> {
        if self.inflight.is_some() {
            return Err(AccelError::BadBatch(
                "a step is already in flight: wait for it first".into(),
            ));
        }
        let acc = self.acc;
        job.validate(&self.shape, acc.n, acc.m)?;
        let q = &acc.queue;
        crate::accel::check_rbq_gpu(&job.rbq)?;
        let t = acc.m * TABLE_ROW;
        let mut resets = job.tables.chunks_exact(t);
        let mut rbq = job.rbq.iter();
        let mut qwords: Vec<u32> = Vec::new();
        self.words.clear();
        for e in &job.entries {
            if e.entry != crate::accel::flash::NONE {
                let at = (e.slot as usize * t * 4) as u64;
                if job.rabitq {
                    // A query's words fit its slot's region: 16 + (B + 4)·D/32 words against
                    // a table's (B·D/8 + factors)·256.
                    qwords.clear();
                    if let Some(r) = rbq.next() {
                        r.gpu_words(&mut qwords);
                    }
                    q.write_buffer(&self.tables, at, bytemuck::cast_slice(&qwords));
                } else {
                    let table = resets.next().unwrap_or(&[]);
                    q.write_buffer(&self.tables, at, bytemuck::cast_slice(table));
                }
            }
            self.words.extend_from_slice(&[
                e.slot, e.entry, e.node, e.node_key, e.nbr_off, e.nbr_len, e.fill, 0,
            ]);
        }
        let nbr_base = self.words.len() as u32;
        self.words.extend_from_slice(&job.nbrs);
        let n = job.entries.len();
        if n > 0 {
            q.write_buffer(&self.job, 0, bytemuck::cast_slice(&self.words));
            q.write_buffer(
                &self.params,
                0,
                bytemuck::cast_slice(&[n as u32, nbr_base, u32::from(job.rabitq), 0]),
            );
        }
        let scopes = Scopes::push(&acc.device);
        let mut enc = acc
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("flash step"),
            });
        let out_bytes = (n * OW * 4) as u64;
        if n > 0 {
            let entries: Vec<wgpu::BindGroupEntry<'_>> = [
                &self.params,
                &self.job,
                &acc.codes,
                &self.tables,
                &self.lists,
                &self.lens,
                &self.hash,
                &self.out,
                &acc.counts,
            ]
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
            let bind = acc.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &self.pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                });
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &bind, &[]);
                let max = acc.limits.max_compute_workgroups_per_dimension.max(1);
                let x = (n as u32).clamp(1, max);
                pass.dispatch_workgroups(x, (n as u32).div_ceil(x), 1);
            }
            enc.copy_buffer_to_buffer(&self.out, 0, &self.readback, 0, out_bytes);
        }
        let submission = q.submit([enc.finish()]);
        let mapped = Arc::new(Mutex::new(None));
        if n > 0 {
            let slot = mapped.clone();
            self.readback
                .map_async(wgpu::MapMode::Read, ..out_bytes, move |r| {
                    if let Ok(mut g) = slot.lock() {
                        *g = Some(r);
                    }
                });
        }
        scopes.pop("submitting a flash step")?;
        self.inflight = Some(InFlight {
            entries: n,
            submission,
            mapped,
        });
        Ok(())
    }

    fn wait(&mut self, out: &mut StepOutput) -> Result<(), AccelError> {
        let Some(f) = self.inflight.take() else {
            return Err(AccelError::BadBatch("wait without a submitted step".into()));
        };
        out.reset(f.entries);
        if f.entries == 0 {
            return Ok(());
        }
        let device = &self.acc.device;
        device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(f.submission.clone()),
                timeout: None,
            })
            .map_err(|e| self.device_error(format!("waiting for a flash step: {e}")))?;
        let since = Instant::now();
        let outcome = loop {
            let done = f.mapped.lock().map(|mut g| g.take()).unwrap_or(None);
            if let Some(r) = done {
                break r;
            }
            if since.elapsed() > MAP_TIMEOUT {
                return Err(self.device_error("the readback never completed".into()));
            }
            device
                .poll(wgpu::PollType::Poll)
                .map_err(|e| self.device_error(format!("waiting for a flash step: {e}")))?;
            std::thread::yield_now();
        };
        outcome.map_err(|e| self.device_error(format!("reading a flash step back: {e}")))?;
        let mut overflow = false;
        {
            let view = self
                .readback
                .get_mapped_range(..(f.entries * OW * 4) as u64)
                .map_err(|e| self.device_error(format!("reading a flash step back: {e}")))?;
            let words: Vec<u32> = view
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            for i in 0..f.entries {
                let w = &words[i * OW..(i + 1) * OW];
                let n = (w[0] as usize).min(MAX_FILL);
                out.n_chosen[i] = n as u32;
                out.stale[i] = w[1] != 0;
                out.scored[i] = w[2];
                overflow |= w[3] != 0;
                out.chosen[i * MAX_FILL..i * MAX_FILL + n].copy_from_slice(&w[4..4 + n]);
                out.keys[i * MAX_FILL..i * MAX_FILL + n]
                    .copy_from_slice(&w[4 + MAX_FILL..4 + MAX_FILL + n]);
            }
        }
        self.readback.unmap();
        if overflow {
            return Err(AccelError::Device(
                "a query's visited hash filled up (a bug in sizing it: please report it)".into(),
            ));
        }
        Ok(())
    }
}
